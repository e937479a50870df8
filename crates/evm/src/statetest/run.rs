//! Running a parsed state test: for every fork revm supports and every post entry, a state
//! holding the pre-state (a fresh [`MemoryWorld`] in memory), the entry's transaction
//! through revm (over [`WorldDb`]), revm's state turned into [`eth::EthChanges`] and
//! committed to that state, then the state root against the entry's `hash` and the logs' hash against its
//! `logs`. A transaction the fixture expects to fail must be rejected by validation (or
//! be one the wire format cannot carry) and leave the pre-state's root, but for the
//! zero-value touch of the coinbase that geth's state-test runner (which filled the
//! fixtures) applies after every transaction, executed or not ([`coinbase_touch`]).
//!
//! States come from a [`TestBackend`]: in memory ([`InMemory`]) by default, or in a RocksDB
//! store ([`super::InStore`]). Block hashes are the state tests' convention: keccak256 of the block number written in
//! decimal. Entries of forks revm does not support are counted per fork name, never run.
//! Cost per entry: building the pre-state's tries, one transaction, one commit.

use std::collections::BTreeMap;

use alloy_primitives::{Address as RevmAddress, B256, U256};
use eth::{Account, AccountWrite, Address, EthChanges, Genesis, MemoryWorld, WorldError};
use revm::context::{BlockEnv, CfgEnv};
use revm::context_interface::block::BlobExcessGasAndPrice;
use revm::context_interface::result::{EVMError, ExecutionResult};
use revm::primitives::hardfork::SpecId;
use revm::{ExecuteEvm, MainBuilder};
use state::H256;
use trie::{keccak256, EMPTY_CODE_HASH};

use super::fixture::{Env, Indexes, PostEntry, StateTest, StateTestFile};
use super::fork::{max_blobs_per_tx, spec_of};
use super::logs::logs_hash;
use super::tx::{build_tx, TxBuildError};
use crate::access::{PovNeeds, RecordingReader};
use crate::changes::evm_changes;
use crate::journal::world_context;
use crate::reader::WorldReader;

/// Why a post entry did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The state root differs.
    StateRoot {
        /// Arbor's root.
        got: H256,
        /// The fixture's.
        want: H256,
    },
    /// The logs' hash differs.
    LogsHash {
        /// Arbor's hash of revm's logs.
        got: H256,
        /// The fixture's.
        want: H256,
    },
    /// The fixture expects the transaction to be rejected; revm executed it.
    NotRejected {
        /// The exception the fixture names.
        expected: String,
    },
    /// The transaction was rejected; the fixture expects it to be valid.
    Rejected {
        /// Why it was rejected.
        reason: String,
    },
    /// Execution stopped on an error that is not the transaction's (a missing code or
    /// block hash, a header revm refuses, a commit that failed).
    Error {
        /// What happened.
        reason: String,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::StateRoot { got, want } => write!(f, "state root {got}, expected {want}"),
            Failure::LogsHash { got, want } => write!(f, "logs hash {got}, expected {want}"),
            Failure::NotRejected { expected } => {
                write!(f, "transaction executed, expected it rejected with {expected}")
            }
            Failure::Rejected { reason } => write!(f, "transaction rejected: {reason}"),
            Failure::Error { reason } => write!(f, "error: {reason}"),
        }
    }
}

/// The result of one post entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryReport {
    /// The test's name.
    pub test: String,
    /// The fork name as the fixture writes it.
    pub fork: String,
    /// The entry's transaction parts.
    pub indexes: Indexes,
    /// `None` when it passed.
    pub failure: Option<Failure>,
    /// What the transaction read and wrote (`None` when no transaction ran): the input a
    /// per-transaction proof (`PovSession`) needs.
    pub pov: Option<PovNeeds>,
}

/// The results of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileReport {
    /// Every entry run, in file order.
    pub entries: Vec<EntryReport>,
    /// Entries not run, per fork name revm does not support.
    pub skipped: BTreeMap<String, usize>,
}

impl FileReport {
    /// Entries that passed.
    pub fn passed(&self) -> usize {
        self.entries.iter().filter(|e| e.failure.is_none()).count()
    }

    /// Entries that failed.
    pub fn failed(&self) -> usize {
        self.entries.len() - self.passed()
    }

    /// Entries skipped.
    pub fn skipped_entries(&self) -> usize {
        self.skipped.values().sum()
    }
}

/// Run every entry of every test of `file` on `backend`, then end the file on it
/// ([`TestBackend::end_file`]: a failure there fails every entry that passed, with its
/// reason).
pub fn run_file<B: TestBackend>(file: &StateTestFile, backend: &mut B) -> FileReport {
    let mut report = FileReport::default();
    for (name, test) in &file.tests {
        for (fork, entries) in &test.post {
            let Some(spec) = spec_of(fork) else {
                *report.skipped.entry(fork.clone()).or_default() += entries.len();
                continue;
            };
            for entry in entries {
                let (failure, pov) = match run_entry(test, spec, entry, backend) {
                    Ok(pov) => (None, pov),
                    Err(failure) => (Some(failure), None),
                };
                report.entries.push(EntryReport {
                    test: name.clone(),
                    fork: fork.clone(),
                    indexes: entry.indexes,
                    failure,
                    pov,
                });
            }
        }
    }
    if let Err(e) = backend.end_file() {
        let reason = format!("the back-end's check at the end of the file failed: {e}");
        for entry in report.entries.iter_mut().filter(|e| e.failure.is_none()) {
            entry.failure = Some(Failure::Error { reason: reason.clone() });
        }
    }
    report
}

/// Where a state test's states live: a state per post entry holding the test's `pre`, read
/// through [`WorldReader`] while revm runs, then committed; told when the entry is done
/// with it and when the file is. The in-memory [`InMemory`] is the default; the RocksDB
/// store ([`super::InStore`], `arbor statetest --db`) commits through the store's
/// account-model commit and reverts to the pre-state after each entry.
pub trait TestBackend {
    /// One entry's state.
    type State: WorldReader;
    /// Why loading, committing or a back-end's own check failed.
    type Error: std::error::Error + 'static;

    /// A state holding `pre` (and nothing else).
    fn load(&mut self, pre: &Genesis) -> Result<Self::State, Self::Error>;

    /// Commit `changes` to `state`; the new state root.
    fn commit(
        &mut self,
        state: &mut Self::State,
        changes: &EthChanges,
    ) -> Result<H256, Self::Error>;

    /// The state root of `state`.
    fn root(&self, state: &Self::State) -> Result<H256, Self::Error>;

    /// The entry is done with `state` (called after every successful [`load`], whatever
    /// the entry's outcome); an error fails the entry.
    ///
    /// [`load`]: TestBackend::load
    fn end_entry(&mut self, state: Self::State) -> Result<(), Self::Error>;

    /// The file's entries have all run ([`run_file`] calls it last); an error fails every
    /// entry of the file that passed.
    fn end_file(&mut self) -> Result<(), Self::Error>;
}

/// States in memory: a [`MemoryWorld`] per entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct InMemory;

impl TestBackend for InMemory {
    type State = MemoryWorld;
    type Error = WorldError;

    fn load(&mut self, pre: &Genesis) -> Result<MemoryWorld, WorldError> {
        MemoryWorld::from_genesis(pre)
    }

    fn commit(
        &mut self,
        state: &mut MemoryWorld,
        changes: &EthChanges,
    ) -> Result<H256, WorldError> {
        state.apply(changes)
    }

    fn root(&self, state: &MemoryWorld) -> Result<H256, WorldError> {
        Ok(state.root())
    }

    fn end_entry(&mut self, _state: MemoryWorld) -> Result<(), WorldError> {
        Ok(())
    }

    fn end_file(&mut self) -> Result<(), WorldError> {
        Ok(())
    }
}

/// What one transaction did to the world.
struct Executed {
    root: H256,
    logs: H256,
    pov: Option<PovNeeds>,
    /// The rejection, when the transaction was not executed.
    rejected: Option<String>,
}

/// Run one post entry at `spec`: `Ok` with the transaction's needs when it passes.
pub fn run_entry<B: TestBackend>(
    test: &StateTest,
    spec: SpecId,
    entry: &PostEntry,
    backend: &mut B,
) -> Result<Option<PovNeeds>, Failure> {
    let executed = execute(test, spec, entry.indexes, backend)?;
    match (&entry.expect_exception, &executed.rejected) {
        (Some(expected), None) => return Err(Failure::NotRejected { expected: expected.clone() }),
        (None, Some(reason)) => return Err(Failure::Rejected { reason: reason.clone() }),
        _ => {}
    }
    if executed.logs != entry.logs {
        return Err(Failure::LogsHash { got: executed.logs, want: entry.logs });
    }
    if executed.root != entry.hash {
        return Err(Failure::StateRoot { got: executed.root, want: entry.hash });
    }
    Ok(executed.pov)
}

fn error(reason: impl std::fmt::Display) -> Failure {
    Failure::Error { reason: reason.to_string() }
}

/// The pre-state, the transaction through revm, the commit; then the entry's end on the
/// back-end.
fn execute<B: TestBackend>(
    test: &StateTest,
    spec: SpecId,
    indexes: Indexes,
    backend: &mut B,
) -> Result<Executed, Failure> {
    let mut world = backend.load(&test.pre).map_err(error)?;
    let executed = execute_on(test, spec, indexes, backend, &mut world);
    let ended = backend.end_entry(world).map_err(error);
    let executed = executed?;
    ended?;
    Ok(executed)
}

/// [`execute`] on a loaded state.
fn execute_on<B: TestBackend>(
    test: &StateTest,
    spec: SpecId,
    indexes: Indexes,
    backend: &mut B,
    world: &mut B::State,
) -> Result<Executed, Failure> {
    let tx = match build_tx(&test.transaction, indexes, test.env.chain_id) {
        Ok(tx) => tx,
        Err(e @ TxBuildError::Index { .. }) => return Err(error(e)),
        Err(e) => return rejected(backend, world, test.env.coinbase, spec, e.to_string()),
    };
    let recorder = RecordingReader::new(TestChain(&*world));
    let mut cfg = CfgEnv::new_with_spec(spec);
    cfg.chain_id = test.env.chain_id;
    cfg.max_blobs_per_tx = Some(max_blobs_per_tx(spec));
    let block = block_env(&test.env, &cfg, spec);
    let mut evm = world_context(&recorder, cfg, block).build_mainnet();
    let result = evm.transact(tx);
    drop(evm);
    let out = match result {
        Ok(out) => out,
        Err(EVMError::Transaction(e)) => {
            drop(recorder);
            return rejected(backend, world, test.env.coinbase, spec, e.to_string());
        }
        Err(e) => return Err(error(e)),
    };
    let changes = evm_changes(&out.state).map_err(error)?;
    let pov = PovNeeds::new(&recorder.take_reads(), &changes);
    drop(recorder);
    let logs = logs_hash(logs_of(&out.result));
    let root = backend.commit(world, &changes).map_err(error)?;
    Ok(Executed { root, logs, pov: Some(pov), rejected: None })
}

/// A rejected transaction's outcome: nothing but the state-test runners' zero-value touch
/// of the coinbase ([`coinbase_touch`]) is committed.
fn rejected<B: TestBackend>(
    backend: &mut B,
    world: &mut B::State,
    coinbase: Address,
    spec: SpecId,
    reason: String,
) -> Result<Executed, Failure> {
    let changes = coinbase_touch(&*world, coinbase, spec).map_err(error)?;
    let root = if changes.is_empty() {
        backend.root(world).map_err(error)?
    } else {
        backend.commit(world, &changes).map_err(error)?
    };
    Ok(Executed { root, logs: logs_hash(&[]), pov: None, rejected: Some(reason) })
}

/// The fixtures' roots are those of geth's state-test runner, which credits the coinbase
/// with zero after the transaction, executed or not (a touch): before Spurious Dragon that
/// creates an absent coinbase as an empty account, from it (EIP-161) it removes an empty
/// one. An executed transaction's fee payment already touches the coinbase in revm, so
/// only a rejected one needs this.
fn coinbase_touch<R: WorldReader>(
    world: &R,
    coinbase: Address,
    spec: SpecId,
) -> Result<EthChanges, R::Error> {
    let mut changes = EthChanges::new();
    let state_clear = spec.is_enabled_in(SpecId::SPURIOUS_DRAGON);
    match world.account(&coinbase)? {
        None if !state_clear => {
            let empty = Account::default();
            let write = AccountWrite {
                nonce: empty.nonce,
                balance: empty.balance,
                code_hash: empty.code_hash,
                storage_cleared: false,
                storage: BTreeMap::new(),
            };
            changes.write_account(coinbase, write);
        }
        Some(a)
            if state_clear
                && a.nonce == 0
                && a.balance.is_zero()
                && a.code_hash == EMPTY_CODE_HASH =>
        {
            changes.remove_account(coinbase);
        }
        _ => {}
    }
    Ok(changes)
}

fn logs_of<H>(result: &ExecutionResult<H>) -> &[alloy_primitives::Log] {
    result.logs()
}

/// revm's block for a test's `env` at `spec`.
fn block_env(env: &Env, cfg: &CfgEnv, spec: SpecId) -> BlockEnv {
    let prevrandao = match env.random {
        Some(r) => Some(B256::from(r.0)),
        // From Paris the block must have one; the tests that leave it out mean zero.
        None if spec.is_enabled_in(SpecId::MERGE) => Some(B256::ZERO),
        None => None,
    };
    BlockEnv {
        number: env.number,
        beneficiary: RevmAddress::from(env.coinbase),
        timestamp: env.timestamp,
        gas_limit: env.gas_limit,
        basefee: env.base_fee.unwrap_or(0),
        difficulty: env.difficulty,
        prevrandao,
        blob_excess_gas_and_price: env
            .excess_blob_gas
            .map(|excess| BlobExcessGasAndPrice::new(excess, cfg.blob_base_fee_update_fraction())),
        ..BlockEnv::default()
    }
}

/// A state with the state tests' block hashes: keccak256 of the decimal block number.
struct TestChain<R>(R);

impl<R: WorldReader> WorldReader for TestChain<R> {
    type Error = R::Error;

    fn account(&self, address: &Address) -> Result<Option<Account>, Self::Error> {
        self.0.account(address)
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, Self::Error> {
        self.0.storage(address, slot)
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, Self::Error> {
        self.0.code(code_hash)
    }

    fn block_hash(&self, number: u64) -> Result<Option<H256>, Self::Error> {
        Ok(Some(keccak256(number.to_string().as_bytes())))
    }
}
