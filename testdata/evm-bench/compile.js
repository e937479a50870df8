// Compiles the contracts of `arbor bench evm` with solcjs (the `solc` npm package, whose
// version is pinned below and checked) and writes, per contract, `NAME.json`: the
// compiler, its version and settings, the creation and runtime bytecode with their
// SHA-256, the ABI and the storage layout. Run from this folder:
//   npm install solc@0.8.30 && node compile.js
// The output is deterministic: the same sources and compiler give the same files.
'use strict';
const fs = require('fs');
const crypto = require('crypto');
const solc = require('solc');

const VERSION = '0.8.30+commit.73712a01';
const SOURCES = { BenchToken: 'BenchToken.sol', SlotChurn: 'SlotChurn.sol' };
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  outputSelection: {
    '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object', 'storageLayout'] },
  },
};

if (!solc.version().startsWith(VERSION)) {
  throw new Error(`solc ${solc.version()} is not the pinned ${VERSION}`);
}
const input = { language: 'Solidity', sources: {}, settings: SETTINGS };
for (const file of Object.values(SOURCES)) {
  input.sources[file] = { content: fs.readFileSync(file, 'utf8') };
}
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === 'error');
if (errors.length > 0) {
  throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
}
const sha256 = (hex) => crypto.createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex');
for (const [name, file] of Object.entries(SOURCES)) {
  const c = output.contracts[file][name];
  const creation = c.evm.bytecode.object;
  const runtime = c.evm.deployedBytecode.object;
  const record = {
    contract: name,
    source: file,
    source_sha256: crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex'),
    compiler: 'solcjs (npm package solc)',
    compiler_version: solc.version(),
    settings: { optimizer: SETTINGS.optimizer, evmVersion: SETTINGS.evmVersion },
    creation_bytecode: creation,
    creation_bytecode_sha256: sha256(creation),
    runtime_bytecode: runtime,
    runtime_bytecode_sha256: sha256(runtime),
    abi: c.abi,
    storage_layout: c.storageLayout.storage.map((s) => ({ label: s.label, slot: s.slot, offset: s.offset })),
  };
  fs.writeFileSync(`${name}.json`, JSON.stringify(record, null, 2) + '\n');
  console.log(`${name}: runtime ${runtime.length / 2} bytes, sha256 ${record.runtime_bytecode_sha256}`);
}
