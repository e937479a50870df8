//! Arbor's block executors: Block-STM (optimistic parallel execution over a multi-version
//! memory, Gelashvili et al., PPoPP'23), a partitioned executor for cheap transactions, and
//! the sequential reference both must agree with.
//!
//! A block is a slice of [`Transaction`]s over the main trie of a read-only
//! [`StateReader`] (the state seam: import it from the `state` crate; the executors link
//! nothing else of ours). Every executor returns the same [`BlockOutput`]: every
//! transaction's output and the block's final write set, exactly as running the
//! transactions one after another would give; or the first storage error
//! ([`ExecError::Storage`]), never a result built on a failed read.
//!
//! - [`execute_sequential`]: the reference.
//! - [`execute_parallel`]: Block-STM with `workers` threads (see `mvmemory.rs` and
//!   `scheduler.rs`); blocks smaller than [`PARALLEL_MIN_TXS`] or one worker fall back to
//!   the sequential executor, and a block whose re-executions pass a threshold finishes
//!   sequentially on top of its validated prefix (`parallel.rs`).
//! - [`execute_partitioned`]: one contiguous chunk per worker against the block's starting
//!   state, chunks kept in order while none read what an earlier one wrote, the rest run
//!   sequentially from the first that did (`partitioned.rs`);
//!   [`execute_partitioned_waves`] cuts the block into waves of such chunks, each wave over
//!   the earlier ones' writes.
//! - [`AdaptiveExecutor`]: what a node keeps across blocks. Its cost model (`adaptive.rs`),
//!   fed by the measured time per transaction of the three executors, picks the executor
//!   per block, and a Block-STM block that falls behind the sequential executor's pace
//!   switches to sequential execution mid-block. [`BlockOutput::run`] says what ran and
//!   why.
//!
//! Transactions read and write through a [`View`] (the seam's [`StateView`] plus scans;
//! every executor builds it from `view.rs`, their own writes over what lies below them).
//! A read that meets an ESTIMATE (a write of a lower transaction that is being
//! re-executed) returns [`Stop::Blocked`], which the transaction propagates with `?`; the
//! executor then suspends it until the blocking transaction has run again.

#![forbid(unsafe_code)]

mod adaptive;
mod journal;
mod mvmemory;
mod parallel;
mod partitioned;
mod scan;
mod scheduler;
mod sequential;
mod view;

use std::collections::BTreeMap;
use std::fmt::Debug;

use state::{StateReader, StateView, TrieId};

pub use adaptive::{AdaptiveExecutor, Estimates};
pub use parallel::{execute_parallel, execute_parallel_with, ParallelOptions};
pub use partitioned::{execute_partitioned, execute_partitioned_waves};
pub use sequential::execute_sequential;

/// A state key.
pub type Key = Vec<u8>;
/// A state value.
pub type Value = Vec<u8>;

/// Why a run produced no block output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError<E: std::error::Error + 'static> {
    /// Reading the state the block starts from failed: the block has no result.
    #[error("state read failed during execution: {0}")]
    Storage(#[source] E),
    /// The run's cancel flag was set ([`ParallelOptions::cancel`]).
    #[error("block execution cancelled")]
    Cancelled,
}

/// Why a transaction's read could not be answered; the transaction propagates it with
/// `?` and the executor takes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    /// The read met the estimate of transaction `.0`'s write: the executor suspends the
    /// transaction until that one has run again.
    #[error("read blocked on transaction {0}")]
    Blocked(usize),
    /// Storage failed: the executor stops the block and returns the storage's error.
    #[error("a storage read failed")]
    ReadFailed,
}

/// What a transaction sees: its own writes, then the writes of lower transactions, then
/// storage, through the seam's [`StateView`] (get, set, remove, deltas, nested
/// transactions) plus ordered scans.
///
/// [`StateView::add_delta`] records a delta without reading the key: it creates no read
/// dependency, so transactions that only bump the same counter (a fee pot, a block-level
/// count) do not conflict; a later plain read of the key resolves it in block order.
pub trait View: StateView<Error = Stop> {
    /// Up to `limit` live entries in key order: keys at or after `from` ascending, or with
    /// `reverse` keys at or before `from` descending. Parallel execution validates a scan by
    /// replaying the range it covered (up to where it stopped) and comparing the entries.
    fn scan(&mut self, from: &[u8], reverse: bool, limit: usize)
        -> Result<Vec<(Key, Value)>, Stop>;

    /// Drop every write this execution made so far (a transaction that fails as a whole
    /// and must change nothing), open nested transactions included. Its reads stay
    /// recorded.
    fn discard_writes(&mut self);
}

/// A transaction's pending write to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write {
    /// A value (`None` = delete).
    Value(Option<Value>),
    /// A sum to add to whatever the key holds before this transaction.
    Delta(i64),
}

/// A set or a remove.
impl From<Option<Value>> for Write {
    fn from(value: Option<Value>) -> Self {
        Write::Value(value)
    }
}

/// One transaction of a block. `execute` must be deterministic in what it reads: the
/// executors may run it several times (only the last run counts).
pub trait Transaction: Sync {
    /// What the transaction returns (its receipt); failures are outputs too.
    type Output: Clone + Debug + PartialEq + Send;
    /// Run against `view`, propagating [`Stop`] from reads.
    fn execute(&self, view: &mut dyn View) -> Result<Self::Output, Stop>;
}

/// The executors' reads of the state a block starts from: the main trie of a
/// [`StateReader`]. The first storage error is kept (the run then fails with it) and the
/// read answers `None` meanwhile, which no result ever depends on: the reading transaction
/// stops with [`Stop::ReadFailed`] and the run is abandoned.
pub(crate) struct Base<'a, S: StateReader> {
    reader: &'a S,
    failed: std::sync::atomic::AtomicBool,
    failure: parking_lot::Mutex<Option<S::Error>>,
}

impl<'a, S: StateReader> Base<'a, S> {
    pub(crate) fn new(reader: &'a S) -> Self {
        Base { reader, failed: Default::default(), failure: parking_lot::Mutex::new(None) }
    }

    fn fail(&self, e: S::Error) {
        self.failure.lock().get_or_insert(e);
        self.failed.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether a read has failed.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The value of `key` before the block.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Value> {
        self.reader.get(&TrieId::Main, key).unwrap_or_else(|e| {
            self.fail(e);
            None
        })
    }

    /// The entries at or after `from`, ascending; `None` when opening the range failed.
    pub(crate) fn entries_from(&self, from: &[u8]) -> Option<S::Range<'a>> {
        self.reader.range(&TrieId::Main, from, None).map_err(|e| self.fail(e)).ok()
    }

    /// The next entry of a range from [`Base::entries_from`].
    pub(crate) fn next_entry(&self, range: &mut S::Range<'a>) -> Option<(Key, Value)> {
        range.next()?.map_err(|e| self.fail(e)).ok()
    }

    /// The entry with the greatest key strictly below `before`.
    pub(crate) fn entry_before(&self, before: &[u8]) -> Option<(Key, Value)> {
        self.reader.last_before(&TrieId::Main, before).unwrap_or_else(|e| {
            self.fail(e);
            None
        })
    }

    /// The run's result: `out`, or the first storage error.
    pub(crate) fn finish<T>(self, out: T) -> Result<T, ExecError<S::Error>> {
        match self.failure.into_inner() {
            Some(e) => Err(ExecError::Storage(e)),
            None => Ok(out),
        }
    }
}

/// Bounds of a key range, for `BTreeMap::range`.
pub(crate) type KeyRange<'k> = (std::ops::Bound<&'k [u8]>, std::ops::Bound<&'k [u8]>);

/// The part of a scan still to go: from `from` (inclusive) in scan order, past `last`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScanBounds<'a> {
    /// Where the scan starts (inclusive).
    pub(crate) from: &'a [u8],
    /// The last key already visited, if any (exclusive).
    pub(crate) last: Option<&'a [u8]>,
    /// Descending order.
    pub(crate) reverse: bool,
}

impl<'a> ScanBounds<'a> {
    /// The key range still to visit.
    pub(crate) fn range(&self) -> KeyRange<'a> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let edge = self.last.map_or(Included(self.from), Excluded);
        if self.reverse {
            (Unbounded, edge)
        } else {
            (edge, Unbounded)
        }
    }

    /// The same scan, past `key`.
    pub(crate) fn after<'k>(&self, key: &'k [u8]) -> ScanBounds<'k>
    where
        'a: 'k,
    {
        ScanBounds { from: self.from, last: Some(key), reverse: self.reverse }
    }

    /// The first item of an ordered iterator in scan order.
    pub(crate) fn first_of<T>(&self, mut it: impl DoubleEndedIterator<Item = T>) -> Option<T> {
        if self.reverse {
            it.next_back()
        } else {
            it.next()
        }
    }

    /// The first entry of `map` within these bounds, in scan order.
    pub(crate) fn first_in<'m, V>(&self, map: &'m BTreeMap<Key, V>) -> Option<(&'m Key, &'m V)> {
        self.first_of(map.range::<[u8], _>(self.range()))
    }

    /// The entries of `map` within these bounds, in scan order.
    pub(crate) fn entries_in<'m, V>(&self, map: &'m BTreeMap<Key, V>) -> InScanOrder<'m, V> {
        InScanOrder { range: map.range::<[u8], _>(self.range()), reverse: self.reverse }
    }

    /// The keys a scan from `from` that stopped at `stop` (inclusive; `None`: the end of
    /// the key space) covered, as range bounds; `None` if `stop` lies before `from`.
    pub(crate) fn covered<'k>(
        from: &'k [u8],
        stop: Option<&'k [u8]>,
        reverse: bool,
    ) -> Option<KeyRange<'k>> {
        use std::ops::Bound::{Included, Unbounded};
        let far = stop.map_or(Unbounded, Included);
        match stop {
            Some(s) if (s < from) != reverse && s != from => None,
            _ if reverse => Some((far, Included(from))),
            _ => Some((Included(from), far)),
        }
    }
}

/// A map's entries within a scan's bounds, in the scan's order.
pub(crate) struct InScanOrder<'m, V> {
    range: std::collections::btree_map::Range<'m, Key, V>,
    reverse: bool,
}

impl<'m, V> Iterator for InScanOrder<'m, V> {
    type Item = (&'m Key, &'m V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.reverse {
            self.range.next_back()
        } else {
            self.range.next()
        }
    }
}

/// Counters of one parallel run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Executions started (first incarnations and re-executions).
    pub executions: u64,
    /// Executions beyond each transaction's first.
    pub reexecutions: u64,
    /// Read-set validations.
    pub validations: u64,
    /// Validations that aborted their transaction.
    pub aborts: u64,
    /// Executions suspended on an estimate.
    pub suspensions: u64,
}

/// A block's result.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockOutput<O> {
    /// Per transaction, in block order.
    pub outputs: Vec<O>,
    /// The final value of every key the block wrote (`None` = deleted).
    pub writes: BTreeMap<Key, Option<Value>>,
    /// Work counters (zero but `executions` for the sequential executor).
    pub counters: Counters,
    /// Which executor ran the block, why, and where it switched.
    pub run: Run,
}

/// The executor a block started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// The sequential executor.
    Sequential,
    /// Block-STM.
    Parallel,
    /// The partitioned executor: one contiguous chunk per worker against the block's
    /// starting state, chunks kept in order while none read what an earlier one wrote.
    Partitioned,
}

/// Why a block started with its executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The caller chose it ([`execute_sequential`], [`ParallelOptions::always_parallel`]).
    Requested,
    /// One worker: nothing runs beside it.
    OneWorker,
    /// Fewer than [`PARALLEL_MIN_TXS`] transactions: starting threads costs more.
    SmallBlock,
    /// Block-STM without a cost model ([`execute_parallel`]): only the in-block switch
    /// on re-executions guards it.
    NoModel,
    /// The cost model has not measured this executor yet.
    Unmeasured,
    /// The cost model expects this executor to be the faster one.
    Faster,
    /// The cost model expects the other executor to be faster and measures this one
    /// again (its estimate may be stale).
    Probe,
}

/// Why a parallel run (Block-STM or partitioned) stopped and finished its block
/// sequentially.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SwitchReason {
    /// A worker's re-executions passed its first executions.
    Reexecutions,
    /// The run's pace fell behind the sequential executor's measured time per
    /// transaction (only with a cost model).
    Slower,
    /// [`ParallelOptions::switch_after`] (tests).
    Requested,
    /// The partitioned executor: a chunk read a key an earlier chunk wrote (or scanned a
    /// range one wrote into); the block went on sequentially from that chunk's start.
    Conflict,
}

/// A switch from a parallel executor to the sequential executor within a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Switch {
    /// The first transaction the sequential executor ran: the parallel run's validated
    /// prefix (Block-STM's, or the partitioned executor's kept chunks) ends here and is
    /// kept.
    pub at: usize,
    /// What triggered it.
    pub reason: SwitchReason,
}

/// How a block ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Run {
    /// The executor the block started with.
    pub mode: Mode,
    /// Why that one.
    pub reason: Reason,
    /// Where and why a parallel run went on sequentially, if it did.
    pub switch: Option<Switch>,
    /// The waves of chunks the partitioned executor cut the block into (1 for the other
    /// executors).
    pub waves: usize,
}

impl Run {
    /// A block run by the sequential executor from the start.
    pub(crate) fn sequential(reason: Reason) -> Self {
        Run { mode: Mode::Sequential, reason, switch: None, waves: 1 }
    }
}

/// Blocks with fewer transactions run sequentially: thread start-up costs more than they
/// can gain.
pub const PARALLEL_MIN_TXS: usize = 16;
