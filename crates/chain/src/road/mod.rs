//! The block import road: blocks → stateless checks (number, parent link) → execution by a
//! [`BlockExecutor`] → the store's commit (the header's post-state root checked before
//! anything is published) → the store's background persistence. One road for every
//! executor: the transfer runtime (`crate::import()`) and the EVM (`evm`'s block executor)
//! run on it with the same pipelining, checks, resumability and stop handling.
//!
//! Pipelined, block N+1 executes on its own thread while block N commits: it reads the
//! store's published state through a [`ReadHandle`] under the change sets of the blocks
//! executed but not yet committed ([`Pending`]), so whichever of them the store has
//! published, every read sees the state after block N. One bounded queue (`queue_blocks`)
//! lies between execution and commit; a full queue blocks the executor (its wait is
//! reported as stalled time). A failed block — invalid, a root mismatch, a store error —
//! is reported after every block before it has committed, so the head and the error are
//! the same pipelined or not; the speculative results of later blocks are dropped
//! unpublished.
//!
//! Parts: `sequence` (which blocks follow, which were imported already), `pending` (the
//! state a block executes on), `pipeline` (the two loops and the commit).

mod pending;
mod pipeline;
mod sequence;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use state::{ChangeSet, ChildRoots, NestedChanges, TransactionError, H256};
use store::{CommitError, ReadHandle, StateDb, StoreError};

use crate::block::CodecError;
use crate::chainfile::ChainFileError;
use crate::runtime::{CorruptState, InvalidTransaction};

pub use pending::Pending;

/// What a block's id is: how consecutive blocks link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdKind {
    /// The post-state root (the transfer runtime's blocks name their parent's root).
    StateRoot,
    /// The block's hash (Ethereum's blocks name their parent's hash).
    BlockHash,
}

impl std::fmt::Display for IdKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdKind::StateRoot => "root",
            IdKind::BlockHash => "hash",
        })
    }
}

/// How a block links into its chain, as the road checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Its number.
    pub number: u64,
    /// Its parent's id.
    pub parent: H256,
    /// Its own id.
    pub id: H256,
    /// The post-state root its header claims (checked by the commit).
    pub state_root: H256,
}

/// A block's changes, as its commit takes them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BlockChanges {
    /// One flat change set, with every changed key's value before the block (the commit
    /// checks the claims and reads nothing but nodes).
    Flat {
        /// The changes.
        changes: ChangeSet,
        /// The changed keys' values before the block.
        prior: ChangeSet,
    },
    /// Nested tries (the account model), committed with the executor's
    /// [`BlockExecutor::model`].
    Nested(NestedChanges),
}

/// An executed block, on its way to the committer.
#[derive(Debug, Clone)]
pub struct Executed {
    /// Its transactions.
    pub transactions: usize,
    /// Gas it used (0 where gas is not counted).
    pub gas_used: u64,
    /// What it changes.
    pub changes: BlockChanges,
}

/// An executor's reason for rejecting a block, typed by the executor (downcast with
/// [`Rejection::source_ref`]); equal when their messages are.
#[derive(Debug, Clone)]
pub struct Rejection(Arc<dyn std::error::Error + Send + Sync>);

impl Rejection {
    /// Wrap an executor's reason.
    pub fn new(reason: impl std::error::Error + Send + Sync + 'static) -> Self {
        Rejection(Arc::new(reason))
    }

    /// The executor's reason.
    pub fn source_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for Rejection {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Rejection {}

/// What executes the blocks of one kind of chain on the road.
pub trait BlockExecutor: Send {
    /// The blocks it executes.
    type Block: Send;

    /// What its blocks' ids are.
    const ID_KIND: IdKind;

    /// How `block` links into the chain.
    fn link(&self, block: &Self::Block) -> Link;

    /// The id of block `number` as the store records it, or `None` when the store no longer
    /// (or never) holds it.
    fn recorded_id(&self, store: &ReadHandle, number: u64) -> Result<Option<H256>, StoreError>;

    /// Execute `block` on `state` (the store under the blocks in flight): its changes, or
    /// why it is invalid ([`ImportError::Invalid`] naming `block`'s number).
    fn execute(
        &mut self,
        block: &Self::Block,
        state: &mut Pending,
    ) -> Result<Executed, ImportError>;

    /// The model nested changes are committed with (`None`: the executor's changes are
    /// flat).
    fn model(&self) -> Option<&'static dyn ChildRoots>;
}

/// How the road ([`import_with`], [`crate::import()`]) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportConfig {
    /// Execute block N+1 while block N commits.
    pub pipelined: bool,
    /// Execution threads per block (1: the sequential executor); with more, one
    /// `exec::AdaptiveExecutor` kept across the import picks Block-STM or the sequential
    /// executor per block.
    pub exec_workers: usize,
    /// Executed blocks that may wait in the queue for their commit (pipelined; at least
    /// 1). Blocks in flight are at most this plus two: the one committing and one
    /// executed and waiting for room.
    pub queue_blocks: usize,
}

impl Default for ImportConfig {
    /// Pipelined, one block queued, execution on every core but the committer's.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        ImportConfig {
            pipelined: true,
            exec_workers: cores.saturating_sub(1).max(1),
            queue_blocks: 1,
        }
    }
}

/// Why a block is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBlock {
    /// Its bytes do not decode.
    #[error("undecodable: {0}")]
    Undecodable(#[source] CodecError),
    /// Its number does not follow the previous block's (the error names the expected
    /// one: the position that failed).
    #[error("number {got}, expected {expected}")]
    Number {
        /// The next number.
        expected: u64,
        /// The block's.
        got: u64,
    },
    /// Its parent root is not the previous block's post-state root.
    #[error("parent root {got}, the previous state root is {expected}")]
    ParentRoot {
        /// The previous block's post-state root.
        expected: H256,
        /// The block's.
        got: H256,
    },
    /// Its parent hash is not the previous block's hash (chains whose blocks link by hash).
    #[error("parent hash {got}, the previous block's hash is {expected}")]
    ParentHash {
        /// The previous block's hash.
        expected: H256,
        /// The block's.
        got: H256,
    },
    /// A transaction is not valid.
    #[error("transaction {index}: {reason}")]
    Transaction {
        /// Its position in the block.
        index: usize,
        /// Why.
        reason: InvalidTransaction,
    },
    /// A transaction met state that does not decode.
    #[error("transaction {index}: {source}")]
    Corrupt {
        /// Its position in the block (the block-end hook counts as one past the last).
        index: usize,
        /// What did not decode.
        source: CorruptState,
    },
    /// The runtime's nested transactions did not balance.
    #[error("runtime: {0}")]
    Runtime(TransactionError),
    /// A block already imported (at or below the head) whose post-state root is not the
    /// one the store recorded for its number.
    #[error("post-state root {got} in the header, the database recorded {recorded} for this block (a damaged block, or another chain's)")]
    Recorded {
        /// The store's.
        recorded: H256,
        /// The header's.
        got: H256,
    },
    /// A block already imported (at or below the head) whose hash is not the one of the
    /// block the store recorded for its number.
    #[error("block hash {got}, the database recorded block {recorded} at this height (a damaged block, or another chain's)")]
    RecordedHash {
        /// The store's.
        recorded: H256,
        /// The block's.
        got: H256,
    },
    /// The executor rejected the block (an Ethereum block's header, transactions,
    /// receipts, gas), with its own typed reason.
    #[error("{0}")]
    Rejected(Rejection),
    /// Its post-state root is not the one its execution gives.
    #[error("post-state root {expected} in the header, execution gives {computed}")]
    PostRoot {
        /// The header's.
        expected: H256,
        /// Computed.
        computed: H256,
    },
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// Block `number` is invalid; the head is the block before it (or, for a block at or
    /// below the head, where it was).
    #[error("invalid block {number}: {reason}")]
    Invalid {
        /// The number expected at the failing position: the previous block's successor
        /// (the record's own number may be anything when it is invalid).
        number: u64,
        /// Why.
        reason: InvalidBlock,
    },
    /// The database's head is not the chain's block at that height: it holds another
    /// chain (nothing was imported past it).
    #[error("the database's block {number} has {kind} {database}, the chain's block {number} has {chain}: the database holds another chain")]
    OtherChain {
        /// The head's number.
        number: u64,
        /// What the two ids are (post-state roots, or block hashes).
        kind: IdKind,
        /// The database's id of the block.
        database: H256,
        /// The chain's id of that block.
        chain: H256,
    },
    /// Every block of the chain lies below the database's head, so nothing shows that the
    /// database holds this chain (the head's block is the one a rerun checks).
    #[error("the database's head is block {head} but the chain ends {}: nothing shows that the database holds this chain", match .last { Some(n) => format!("at block {n}"), None => "at its genesis".to_string() })]
    HeadPastChain {
        /// The database's head.
        head: u64,
        /// The chain's last block (`None`: it has none).
        last: Option<u64>,
    },
    /// The database has no record of its head block, so no block can be linked to it (a
    /// database created for another kind of chain, or without its genesis record).
    #[error("the database holds no record of its head block {head}: it was not created for this kind of chain")]
    NoHeadRecord {
        /// The head's number.
        head: u64,
    },
    /// The block source failed (a truncated or unreadable chain file).
    #[error(transparent)]
    Source(ChainFileError),
    /// The store failed while executing or committing.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A commit failed for another reason than the block.
    #[error("commit: {0}")]
    Commit(CommitError),
    /// The executor failed for a reason that is not the block's (its state could not be
    /// read as its model needs, its engine broke an invariant): the block's validity is
    /// unknown, and the head is the block before it.
    #[error("executing block {number} failed: {reason}")]
    Executor {
        /// The block being executed.
        number: u64,
        /// The executor's typed reason.
        reason: Rejection,
    },
}

/// One committed block, for progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Its number.
    pub number: u64,
    /// Its transactions.
    pub transactions: usize,
    /// Gas it used (0 where gas is not counted).
    pub gas_used: u64,
    /// Time its commit took (trie update and publish).
    pub commit: Duration,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportStats {
    /// Blocks committed.
    pub blocks: u64,
    /// Their transactions.
    pub transactions: u64,
    /// Gas they used (0 where gas is not counted).
    pub gas_used: u64,
    /// Blocks skipped as already imported (at or below the head).
    pub skipped: u64,
    /// Time spent executing.
    pub exec: Duration,
    /// Time spent committing (trie update, publish; persistence runs behind).
    pub commit: Duration,
    /// Time the executor waited on a full queue.
    pub stalled: Duration,
    /// Time of the final flush (persistence catching up).
    pub flush: Duration,
    /// Most executed-but-uncommitted blocks held at once.
    pub max_pending_blocks: usize,
    /// Most bytes (keys and values) of their change sets held at once.
    pub max_pending_bytes: u64,
    /// Whether the stop flag ended the import before the source did.
    pub stopped: bool,
}

/// Import `blocks` into `db` with `executor`: blocks at or below the head are checked
/// against the blocks around them and the ids the store recorded, then skipped; the rest
/// must follow it. Stops at the first failure (the head stays at the block before it, or
/// where it was for a block at or below it), at the end of `blocks`, or at a block
/// boundary once `stop` is set. The store is flushed (durable) before returning, whatever
/// the outcome.
pub fn import_with<E, I>(
    db: &mut StateDb,
    blocks: I,
    executor: E,
    config: &ImportConfig,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(Imported),
) -> (ImportStats, Result<(), ImportError>)
where
    E: BlockExecutor,
    I: Iterator<Item = Result<E::Block, ImportError>> + Send,
{
    let mut stats = ImportStats::default();
    let result = if config.pipelined {
        pipeline::pipelined(db, blocks, executor, config, stop, on_block, &mut stats)
    } else {
        pipeline::unpipelined(db, blocks, executor, stop, on_block, &mut stats)
    };
    let start = std::time::Instant::now();
    let flushed = db.flush();
    stats.flush = start.elapsed();
    let result = result.and_then(|()| flushed.map_err(ImportError::from));
    (stats, result)
}
