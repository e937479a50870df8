//! [`ChainGenerator`]: a chain of real Ethereum blocks under Shanghai's rules (the last
//! fork whose SELFDESTRUCT deletes an account with its storage, EIP-6780 came with Cancun),
//! deterministic from a seed, with a geth genesis file ([`ChainGenerator::genesis_json`]).
//!
//! Each block is built as a block builder does: its transactions signed
//! ([`super::plan`] chooses them), its header filled but for the results (parent hash,
//! number, timestamp 12 s after the parent's, the genesis's gas limit, the base fee
//! EIP-1559 derives from the parent, the transactions and withdrawals roots), then
//! executed by the block executor (`crate::block`) over the state so far (an
//! `eth::MemoryWorld`), and sealed with what execution gave: the state root, receipts
//! root, logs bloom and gas used. A transaction that fails, or a sealed header that the
//! executor's own header checks refuse, is an error ([`GenError`]): the generator never
//! writes a block the importer would refuse. Cost per block: one signature per
//! transaction (in parallel), its execution, one in-memory commit.
//!
//! The gas limit is the larger of 30,000,000 and what the recorder's call and
//! `txs_per_block` transactions of the largest gas limit need, so the blocks never fill
//! half of it and the base fee only falls (the transactions' gas price stays above it).

use alloy_consensus::{Block, BlockBody, Header, EMPTY_OMMER_ROOT_HASH};
use alloy_eips::eip1559::BaseFeeParams;
use alloy_eips::eip4895::Withdrawals;
use alloy_primitives::{Address as RevmAddress, B256, B64};
use eth::{Genesis, GenesisAccount, MemoryWorld};
use k256::ecdsa::SigningKey;
use rayon::prelude::*;
use serde_json::{json, Map, Value};
use state::H256;

use super::contracts::{Compiled, ContractError, FACTORY_RUNTIME, RECORDER_RUNTIME};
use super::plan::{Planner, RECORDER_GAS, TX_GAS_MAX};
use super::sign::{sign_tx, SignError};
use super::world::{
    add_contract, coinbase, derived_address, sender_keys, AllocError, World, CHAIN_ID,
};
use crate::block::{block_bloom, receipts_root, transactions_root, withdrawals_root};
use crate::block::{
    execute_unchecked, genesis_header, header_hash, validate_header, ChainConfig, ConfigError,
    EthBlock, GenesisHeaderError, InvalidBlock, SignedTx,
};
use crate::BlockHashes;

/// The genesis's timestamp; blocks follow 12 seconds apart.
pub const GENESIS_TIMESTAMP: u64 = 1_700_000_000;
/// The smallest gas limit of a generated chain.
const GAS_LIMIT_MIN: u64 = 30_000_000;
/// The genesis's base fee, wei per gas (1 gwei).
const GENESIS_BASE_FEE: u64 = 1_000_000_000;

/// What chain to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainSpec {
    /// The seed of every key, address and choice.
    pub seed: u64,
    /// Funded genesis accounts (the first 65,536 of them send).
    pub accounts: u64,
    /// Transactions per block after the recorder's call.
    pub txs_per_block: u64,
}

/// Why a chain could not be generated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    /// The genesis could not be built.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// The token's record is unusable.
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// The genesis's configuration was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The genesis header could not be made.
    #[error(transparent)]
    GenesisHeader(#[from] GenesisHeaderError),
    /// The in-memory state refused a commit.
    #[error(transparent)]
    State(#[from] eth::WorldError),
    /// A transaction could not be signed.
    #[error(transparent)]
    Sign(#[from] SignError),
    /// Fewer than one sender (no accounts).
    #[error("a chain needs at least one account")]
    NoAccounts,
    /// The block executor refused a generated block or failed on it.
    #[error("block {number}: {reason}")]
    Execute {
        /// The block.
        number: u64,
        /// The executor's reason.
        reason: String,
    },
    /// A generated transaction failed: the planner's model of the state is wrong.
    #[error("block {number}, transaction {index} failed when executed")]
    Failed {
        /// The block.
        number: u64,
        /// The transaction's index.
        index: usize,
    },
    /// The sealed header fails the executor's header checks.
    #[error("block {number}'s sealed header: {reason}")]
    Header {
        /// The block.
        number: u64,
        /// The check that failed.
        reason: InvalidBlock,
    },
}

/// One generated block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedBlock {
    /// Its number.
    pub number: u64,
    /// Its hash (keccak256 of its header's RLP).
    pub hash: H256,
    /// Its post-state root.
    pub state_root: H256,
    /// Gas its transactions used.
    pub gas_used: u64,
    /// Its transactions (the recorder's call included).
    pub transactions: u64,
    /// The block's RLP, as `geth export` writes it.
    pub rlp: Vec<u8>,
}

/// Hashes of the blocks generated so far, by number (the genesis first).
struct Hashes(Vec<H256>);

impl BlockHashes for Hashes {
    fn block_hash(&self, number: u64) -> Option<H256> {
        usize::try_from(number).ok().and_then(|n| self.0.get(n)).copied()
    }
}

/// The generator (see the module docs).
pub struct ChainGenerator {
    chain: ChainConfig,
    genesis_json: Value,
    state: MemoryWorld,
    parent: Header,
    hashes: Hashes,
    planner: Planner,
    keys: Vec<SigningKey>,
    txs_per_block: u64,
}

impl std::fmt::Debug for ChainGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainGenerator").field("head", &self.parent.number).finish_non_exhaustive()
    }
}

/// The factory's address.
pub fn factory_address() -> eth::Address {
    derived_address("arbor gen-chain factory", 0, 0)
}

/// The recorder's address.
pub fn recorder_address() -> eth::Address {
    derived_address("arbor gen-chain recorder", 0, 0)
}

/// The gas limit of every block of a chain of `txs_per_block` transactions per block.
pub fn gas_limit(txs_per_block: u64) -> u64 {
    let need = txs_per_block.saturating_mul(TX_GAS_MAX).saturating_add(RECORDER_GAS);
    need.saturating_mul(2).max(GAS_LIMIT_MIN)
}

impl ChainGenerator {
    /// A generator at the genesis of `spec`'s chain.
    pub fn new(spec: &ChainSpec) -> Result<ChainGenerator, GenError> {
        if spec.accounts == 0 {
            return Err(GenError::NoAccounts);
        }
        let keys = sender_keys(spec.seed, spec.accounts);
        let world = World::new(spec.seed, spec.accounts, &keys);
        let mut genesis = world.genesis(&Compiled::token()?.runtime)?;
        for (address, code) in
            [(factory_address(), &FACTORY_RUNTIME[..]), (recorder_address(), &RECORDER_RUNTIME[..])]
        {
            let account = GenesisAccount { code: code.to_vec(), ..Default::default() };
            add_contract(&mut genesis, address, account)?;
        }
        let genesis_json = geth_genesis(&genesis, gas_limit(spec.txs_per_block));
        let chain = ChainConfig::from_geth_config(&genesis_json["config"])?;
        let parent = genesis_header(&genesis_json, &chain)?;
        let state = MemoryWorld::from_genesis(&genesis)?;
        let planner = Planner::new(world, factory_address(), recorder_address());
        Ok(ChainGenerator {
            chain,
            genesis_json,
            state,
            hashes: Hashes(vec![header_hash(&parent)]),
            parent,
            planner,
            keys,
            txs_per_block: spec.txs_per_block,
        })
    }

    /// The geth genesis file of the chain (`config`, header fields, `alloc`).
    pub fn genesis_json(&self) -> &Value {
        &self.genesis_json
    }

    /// The chain's fork schedule.
    pub fn chain(&self) -> &ChainConfig {
        &self.chain
    }

    /// The last block's header (the genesis's before the first block).
    pub fn head(&self) -> &Header {
        &self.parent
    }

    /// The state after the last block.
    pub fn state(&self) -> &MemoryWorld {
        &self.state
    }

    /// The next block's transactions, signed, with their senders.
    fn transactions(&mut self, number: u64) -> Result<Vec<SignedTx>, GenError> {
        let mut plans = vec![self.planner.recorder_tx(number)];
        plans.extend((0..self.txs_per_block).map(|_| self.planner.next_tx()));
        let (keys, senders) = (&self.keys, &self.planner.world().senders);
        plans
            .par_iter()
            .map(|(sender, tx)| {
                let tx = sign_tx(tx, &keys[*sender], CHAIN_ID)?;
                Ok(SignedTx { tx, sender: senders[*sender] })
            })
            .collect()
    }

    /// Generate the next block.
    pub fn next_block(&mut self) -> Result<GeneratedBlock, GenError> {
        let number = self.parent.number + 1;
        let transactions = self.transactions(number)?;
        let withdrawals = self.planner.withdrawals();
        let header = Header {
            parent_hash: B256::from(header_hash(&self.parent).0),
            ommers_hash: EMPTY_OMMER_ROOT_HASH,
            beneficiary: RevmAddress::from(coinbase()),
            transactions_root: B256::from(transactions_root(&transactions).0),
            number,
            gas_limit: self.parent.gas_limit,
            timestamp: self.parent.timestamp + 12,
            mix_hash: B256::from(self.planner.random_word()),
            nonce: B64::ZERO,
            base_fee_per_gas: self.parent.next_block_base_fee(BaseFeeParams::ethereum()),
            withdrawals_root: Some(B256::from(withdrawals_root(&withdrawals).0)),
            ..Header::default()
        };
        let mut block = EthBlock {
            header,
            hash: H256::default(),
            transactions,
            ommers: Vec::new(),
            withdrawals: Some(withdrawals),
        };
        let outcome = execute_unchecked(&block, &self.state, &self.hashes, &self.chain)
            .map_err(|e| GenError::Execute { number, reason: e.to_string() })?;
        if let Some(index) = outcome.receipts.iter().position(|r| !r.success) {
            return Err(GenError::Failed { number, index });
        }
        let root = self.state.apply(&outcome.changes)?;
        let header = &mut block.header;
        header.state_root = B256::from(root.0);
        header.receipts_root = B256::from(receipts_root(&outcome.receipts).0);
        header.logs_bloom = block_bloom(&outcome.receipts);
        header.gas_used = outcome.gas_used;
        validate_header(header, &self.parent, &self.chain)
            .map_err(|reason| GenError::Header { number, reason })?;
        let hash = header_hash(header);
        let rlp = encode(block.header.clone(), &block);
        self.hashes.0.push(hash);
        let transactions = block.transactions.len() as u64;
        self.parent = block.header;
        Ok(GeneratedBlock {
            number,
            hash,
            state_root: root,
            gas_used: outcome.gas_used,
            transactions,
            rlp,
        })
    }
}

/// The RLP of `block` with `header`.
fn encode(header: Header, block: &EthBlock) -> Vec<u8> {
    let body = BlockBody {
        transactions: block.transactions.iter().map(|t| t.tx.clone()).collect(),
        ommers: Vec::new(),
        withdrawals: block.withdrawals.clone().map(Withdrawals::new),
    };
    alloy_rlp::encode(Block { header, body })
}

/// The geth genesis file of `genesis` with blocks of `gas_limit` under Shanghai from
/// genesis (every earlier fork at block 0, the merge done at genesis).
fn geth_genesis(genesis: &Genesis, gas_limit: u64) -> Value {
    let mut config = Map::new();
    config.insert("chainId".into(), json!(CHAIN_ID));
    for fork in [
        "homesteadBlock",
        "eip150Block",
        "eip155Block",
        "eip158Block",
        "byzantiumBlock",
        "constantinopleBlock",
        "petersburgBlock",
        "istanbulBlock",
        "berlinBlock",
        "londonBlock",
    ] {
        config.insert(fork.into(), json!(0));
    }
    config.insert("terminalTotalDifficulty".into(), json!(0));
    config.insert("terminalTotalDifficultyPassed".into(), json!(true));
    config.insert("shanghaiTime".into(), json!(0));
    let mut alloc = Map::new();
    for (address, account) in &genesis.alloc {
        let mut a = Map::new();
        a.insert("balance".into(), json!(format!("{:#x}", account.balance)));
        if account.nonce != 0 {
            a.insert("nonce".into(), json!(format!("{:#x}", account.nonce)));
        }
        if !account.code.is_empty() {
            a.insert("code".into(), json!(format!("0x{}", hex::encode(&account.code))));
        }
        if !account.storage.is_empty() {
            let storage: Map<String, Value> = account
                .storage
                .iter()
                .map(|(k, v)| (k.to_string(), json!(format!("{v:#x}"))))
                .collect();
            a.insert("storage".into(), Value::Object(storage));
        }
        alloc.insert(format!("0x{}", hex::encode(address)), Value::Object(a));
    }
    json!({
        "config": Value::Object(config),
        "nonce": "0x0",
        "timestamp": format!("{GENESIS_TIMESTAMP:#x}"),
        "extraData": "0x",
        "gasLimit": format!("{gas_limit:#x}"),
        "difficulty": "0x0",
        "mixHash": format!("0x{}", "00".repeat(32)),
        "coinbase": format!("0x{}", "00".repeat(20)),
        "baseFeePerGas": format!("{GENESIS_BASE_FEE:#x}"),
        "alloc": Value::Object(alloc),
    })
}
