//! The three engines of `arbor bench evm`, each given the same blocks in its own worker
//! process (see [`crate::evm_bench`]):
//!
//! - **arbor**: revm over the store ([`evm::StoreWorld`] on the committer's handle), the block's changes
//!   committed in one `StateDb::commit_nested` (accounts and storage tries, one root);
//! - **memory**: revm's in-memory database (`CacheDB<EmptyDB>`) holding the whole state,
//!   each transaction's state committed into it: execution with no commitment and no disk,
//!   what authentication and persistence cost is measured against;
//! - **plain+undo**: revm over plain RocksDB ([`PlainWorld`]: the account model flattened
//!   to keys, no trie), the block's changes written with a history record of the old values
//!   (`PlainDb::write_block_with_undo`, the `bench store` baseline).
//!
//! Per block, each times three parts: recovering the senders, executing (revm, and for
//! the two that commit, collecting the block's changes), committing. At the end each
//! computes its state root from scratch, independently of Arbor's tries: the memory and
//! plain engines from their whole state through `eth::genesis_state_root`, Arbor by
//! `StateDb::verify` (every root rebuilt from `flat`) beside its head root.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use alloy_primitives::{Address as RevmAddress, U256};
use anyhow::{ensure, Context, Result};
use eth::{AccountChange, AccountModel, EthChanges, Genesis, GenesisAccount};
use evm::{NoBlockHashes, StoreWorld};
use revm::bytecode::Bytecode;
use revm::database::{AccountState, CacheDB, EmptyDB};
use revm::primitives::KECCAK_EMPTY;
use revm::state::AccountInfo;
use serde::{Deserialize, Serialize};
use state::H256;
use store::{StateDb, StoreConfig};
use trie::{keccak256, EMPTY_CODE_HASH};

use crate::common::plain_db::PlainDb;
use crate::evm_bench::execute::{execute, recover, Executed};
use crate::evm_bench::plain::{
    plain_account, plain_account_key, plain_account_value, plain_code_key, plain_slot,
    plain_slot_key, plain_storage_prefix, PlainWorld,
};

/// The engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EngineKind {
    /// revm over Arbor, committed by `commit_nested`.
    Arbor,
    /// revm's in-memory database, no commitment.
    Memory,
    /// revm over plain RocksDB with undo records.
    PlainUndo,
}

impl EngineKind {
    /// Every engine, in the order of the first round.
    pub(crate) const ALL: [EngineKind; 3] =
        [EngineKind::Arbor, EngineKind::Memory, EngineKind::PlainUndo];

    /// Its name in reports.
    pub(crate) fn label(self) -> &'static str {
        match self {
            EngineKind::Arbor => "arbor",
            EngineKind::Memory => "memory",
            EngineKind::PlainUndo => "plain+undo",
        }
    }
}

/// One block's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct BlockRecord {
    pub(crate) gas: u64,
    pub(crate) txs: u64,
    /// Decoding the transactions and recovering their senders.
    pub(crate) recover_s: f64,
    /// revm, and collecting the changes.
    pub(crate) execute_s: f64,
    /// The commit (0 for the memory engine, whose transactions commit as they run).
    pub(crate) commit_s: f64,
}

/// An engine's state at the end, for the cross-check (roots as `0x` hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FinalState {
    /// The state root, computed from scratch (see the module docs).
    pub(crate) root: String,
    /// Arbor only: its head root, what its commits computed.
    pub(crate) head_root: Option<String>,
    /// Arbor only: `verify` found every stored root equal to the one rebuilt from `flat`.
    pub(crate) verified: Option<bool>,
}

impl FinalState {
    fn of(root: H256) -> FinalState {
        FinalState { root: root.to_string(), head_root: None, verified: None }
    }
}

/// An engine once its genesis is loaded.
pub(crate) trait EvmEngine {
    /// Execute and commit block `number` (its transactions as signed bytes).
    fn block(&mut self, number: u64, gas_limit: u64, txs: &[Vec<u8>]) -> Result<BlockRecord>;
    /// Make every committed block durable.
    fn flush(&mut self) -> Result<()>;
    /// The final state's root, computed from scratch.
    fn final_state(self: Box<Self>) -> Result<FinalState>;
}

/// Recover, then execute over `db` (collecting changes when asked): the record without its
/// commit time.
fn run_block<DB>(
    db: DB,
    number: u64,
    gas_limit: u64,
    txs: &[Vec<u8>],
    changes: Option<&mut EthChanges>,
) -> Result<BlockRecord>
where
    DB: revm::Database + revm::DatabaseCommit,
    DB::Error: std::error::Error + Send + Sync + 'static,
{
    let start = Instant::now();
    let envs = recover(txs)?;
    let recover_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let Executed { gas, txs } = execute(db, number, gas_limit, envs, changes)?;
    Ok(BlockRecord { gas, txs, recover_s, execute_s: start.elapsed().as_secs_f64(), commit_s: 0.0 })
}

/// Arbor: the store (revm reads it through the committer's own handle, between commits).
pub(crate) struct ArborEngine {
    db: StateDb,
}

impl ArborEngine {
    /// A new store at `dir` holding `genesis`, bulk-loaded: the accounts and storage tries,
    /// and the contracts' code beside them. `tick` hears the entries loaded so far.
    pub(crate) fn load(
        dir: &Path,
        config: &StoreConfig,
        genesis: &Genesis,
        tick: &dyn Fn(u64),
    ) -> Result<ArborEngine> {
        let mut db = StateDb::open(dir, config.clone()).context("cannot open the Arbor store")?;
        let entries = eth::genesis_entries(genesis);
        let mut load = db.begin_bulk_load("bench evm genesis").context("bulk load refused")?;
        for (i, (trie, key, value)) in entries.entries.iter().enumerate() {
            if i % 65_536 == 0 {
                tick(i as u64);
            }
            load.put(trie, key, value).context("Arbor bulk load failed")?;
        }
        for account in genesis.alloc.values().filter(|a| !a.code.is_empty()) {
            load.put_code(&keccak256(&account.code), &account.code)
                .context("Arbor bulk load failed")?;
        }
        let summary = load.finish().context("Arbor bulk load failed")?;
        ensure!(summary.root == entries.state_root, "the bulk load's root is not the genesis root");
        // revm reads every account and slot before it writes them: the commit takes their
        // old values from those reads.
        db.keep_reads(true);
        Ok(ArborEngine { db })
    }
}

impl EvmEngine for ArborEngine {
    fn block(&mut self, number: u64, gas_limit: u64, txs: &[Vec<u8>]) -> Result<BlockRecord> {
        let mut changes = EthChanges::new();
        let world = StoreWorld::new(&self.db, NoBlockHashes);
        let db = CacheDB::new(evm::WorldDb::new(world));
        let mut record = run_block(db, number, gas_limit, txs, Some(&mut changes))?;
        let start = Instant::now();
        self.db
            .commit_nested(&changes.to_nested(), &AccountModel)
            .with_context(|| format!("Arbor commit of block {number} failed"))?;
        record.commit_s = start.elapsed().as_secs_f64();
        Ok(record)
    }

    fn flush(&mut self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    fn final_state(self: Box<Self>) -> Result<FinalState> {
        let report = self.db.verify().context("Arbor verify failed")?;
        let head = self.db.head_root();
        self.db.close()?;
        Ok(FinalState {
            root: report.computed_root.to_string(),
            head_root: Some(head.to_string()),
            verified: Some(report.ok()),
        })
    }
}

/// revm's in-memory database holding the whole state.
pub(crate) struct MemoryEngine {
    db: CacheDB<EmptyDB>,
}

impl MemoryEngine {
    /// The in-memory database holding `genesis`.
    pub(crate) fn load(genesis: &Genesis, tick: &dyn Fn(u64)) -> Result<MemoryEngine> {
        let mut db = CacheDB::new(EmptyDB::default());
        let mut loaded = 0u64;
        for (i, (address, account)) in genesis.alloc.iter().enumerate() {
            if i % 16_384 == 0 {
                tick(loaded);
            }
            loaded += 1 + account.storage.len() as u64;
            let address = RevmAddress::from(*address);
            let code =
                (!account.code.is_empty()).then(|| Bytecode::new_raw(account.code.clone().into()));
            let code_hash = code.as_ref().map_or(KECCAK_EMPTY, Bytecode::hash_slow);
            let info = AccountInfo {
                balance: account.balance,
                nonce: account.nonce,
                code_hash,
                code,
                ..AccountInfo::default()
            };
            db.insert_account_info(address, info);
            for (slot, value) in &account.storage {
                db.insert_account_storage(address, U256::from_be_bytes(slot.0), *value)?;
            }
        }
        Ok(MemoryEngine { db })
    }

    /// The whole state as an allocation: the accounts that exist and are not empty, their
    /// nonzero slots and code.
    pub(crate) fn state(&self) -> Result<Genesis> {
        let mut genesis = Genesis::default();
        for (address, account) in &self.db.cache.accounts {
            let info = &account.info;
            // Absent, or empty (EIP-161 removes a touched empty account from the trie).
            if account.account_state == AccountState::NotExisting || info.is_empty() {
                continue;
            }
            let code = match info.code_hash {
                KECCAK_EMPTY => Vec::new(),
                hash => self
                    .db
                    .cache
                    .contracts
                    .get(&hash)
                    .context("missing code")?
                    .original_bytes()
                    .to_vec(),
            };
            let storage = account
                .storage
                .iter()
                .filter(|(_, v)| !v.is_zero())
                .map(|(k, v)| (H256(k.to_be_bytes()), *v))
                .collect();
            let g = GenesisAccount { nonce: info.nonce, balance: info.balance, code, storage };
            genesis.alloc.insert(address.into_array(), g);
        }
        Ok(genesis)
    }
}

impl EvmEngine for MemoryEngine {
    fn block(&mut self, number: u64, gas_limit: u64, txs: &[Vec<u8>]) -> Result<BlockRecord> {
        run_block(&mut self.db, number, gas_limit, txs, None)
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn final_state(self: Box<Self>) -> Result<FinalState> {
        Ok(FinalState::of(eth::genesis_state_root(&self.state()?)))
    }
}

/// Plain RocksDB with undo records.
pub(crate) struct PlainEngine {
    db: PlainDb,
}

impl PlainEngine {
    /// A new plain database at `dir` holding `genesis`, flattened (see [`crate::evm_bench::plain`]).
    pub(crate) fn load(
        dir: &Path,
        config: &StoreConfig,
        genesis: &Genesis,
        tick: &dyn Fn(u64),
    ) -> Result<PlainEngine> {
        let db = PlainDb::open(dir, config)?;
        let changes = EthChanges::from_genesis(genesis);
        let mut flat = Vec::new();
        for (i, (address, account)) in genesis.alloc.iter().enumerate() {
            if i % 16_384 == 0 {
                tick(flat.len() as u64);
            }
            let code_hash =
                if account.code.is_empty() { EMPTY_CODE_HASH } else { keccak256(&account.code) };
            let value = plain_account_value(account.nonce, &account.balance, &code_hash);
            flat.push((plain_account_key(address), value));
            for (slot, v) in account.storage.iter().filter(|(_, v)| !v.is_zero()) {
                flat.push((plain_slot_key(address, slot), v.to_be_bytes::<32>().to_vec()));
            }
        }
        for (hash, code) in changes.code() {
            flat.push((plain_code_key(hash), code.clone()));
        }
        db.bulk_load(flat)?;
        Ok(PlainEngine { db })
    }

    /// The whole plain state as an allocation (see [`plain_genesis`]).
    pub(crate) fn state(&self) -> Result<Genesis> {
        plain_genesis(&self.db)
    }

    /// A block's changes as plain key writes: cleared and removed accounts lose every slot
    /// they hold (one prefix scan each), zero slots are deleted.
    fn flatten(&self, changes: &EthChanges) -> Result<BTreeMap<Vec<u8>, Option<Vec<u8>>>> {
        let mut out = BTreeMap::new();
        for (address, change) in &changes.accounts {
            let (cleared, write) = match change {
                AccountChange::Removed => (true, None),
                AccountChange::Write(w) => (w.storage_cleared, Some(w)),
                other => {
                    anyhow::bail!("an account change the plain engine does not know: {other:?}")
                }
            };
            if cleared {
                for key in self.db.keys_with_prefix(&plain_storage_prefix(address))? {
                    out.insert(key, None);
                }
            }
            let Some(w) = write else {
                out.insert(plain_account_key(address), None);
                continue;
            };
            let value = plain_account_value(w.nonce, &w.balance, &w.code_hash);
            out.insert(plain_account_key(address), Some(value));
            for (slot, v) in &w.storage {
                let value = (!v.is_zero()).then(|| v.to_be_bytes::<32>().to_vec());
                out.insert(plain_slot_key(address, slot), value);
            }
        }
        for (hash, code) in changes.code() {
            out.insert(plain_code_key(hash), Some(code.clone()));
        }
        Ok(out)
    }
}

impl EvmEngine for PlainEngine {
    fn block(&mut self, number: u64, gas_limit: u64, txs: &[Vec<u8>]) -> Result<BlockRecord> {
        let mut changes = EthChanges::new();
        let db = CacheDB::new(evm::WorldDb::new(PlainWorld(&self.db)));
        let mut record = run_block(db, number, gas_limit, txs, Some(&mut changes))?;
        let start = Instant::now();
        let flat = self.flatten(&changes)?;
        self.db.write_block_with_undo(number, &flat)?;
        record.commit_s = start.elapsed().as_secs_f64();
        Ok(record)
    }

    fn flush(&mut self) -> Result<()> {
        self.db.flush()
    }

    fn final_state(self: Box<Self>) -> Result<FinalState> {
        Ok(FinalState::of(eth::genesis_state_root(&self.state()?)))
    }
}

/// The whole plain state as an allocation (one scan; keys sort accounts, then code, then
/// slots).
fn plain_genesis(db: &PlainDb) -> Result<Genesis> {
    let mut accounts = BTreeMap::new();
    let mut code: BTreeMap<H256, Vec<u8>> = BTreeMap::new();
    let mut slots: BTreeMap<eth::Address, BTreeMap<H256, U256>> = BTreeMap::new();
    db.scan(&[], &mut |key, value| {
        match (key.first(), key.len()) {
            (Some(b'a'), 21) => {
                accounts.insert(<[u8; 20]>::try_from(&key[1..])?, plain_account(value)?);
            }
            (Some(b's'), 53) => {
                let slot = H256(key[21..].try_into()?);
                let address = <[u8; 20]>::try_from(&key[1..21])?;
                slots.entry(address).or_default().insert(slot, plain_slot(value)?);
            }
            (Some(b'c'), 33) => {
                code.insert(H256(key[1..].try_into()?), value.to_vec());
            }
            _ => anyhow::bail!("a plain key of {} bytes that the engine never writes", key.len()),
        }
        Ok(())
    })?;
    let mut genesis = Genesis::default();
    for (address, a) in accounts {
        let code = match a.code_hash {
            EMPTY_CODE_HASH => Vec::new(),
            hash => code.get(&hash).context("an account's code is missing")?.clone(),
        };
        let storage = slots.remove(&address).unwrap_or_default();
        let account = GenesisAccount { nonce: a.nonce, balance: a.balance, code, storage };
        genesis.alloc.insert(address, account);
    }
    ensure!(slots.is_empty(), "slots of {} absent accounts", slots.len());
    Ok(genesis)
}
