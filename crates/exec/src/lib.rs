//! Arbor's block executors: Block-STM (optimistic parallel execution over a multi-version
//! memory, Gelashvili et al., PPoPP'23) and the sequential reference it must agree with.
//!
//! A block is a slice of [`Transaction`]s over the main trie of a read-only
//! [`StateReader`] (the state seam, defined in the `state` crate: the executors link
//! nothing else of ours). Both executors return the same [`BlockOutput`]: every
//! transaction's output and the block's final write set, exactly as running the
//! transactions one after another would give; or the first storage error
//! ([`ExecError::Storage`]), never a result built on a failed read.
//!
//! - [`execute_sequential`]: the reference.
//! - [`execute_parallel`]: Block-STM with `workers` threads (see `mvmemory.rs` and
//!   `scheduler.rs`); blocks smaller than [`PARALLEL_MIN_TXS`] or one worker fall back to
//!   the sequential executor.
//!
//! Transactions read and write through a [`View`] (the seam's [`StateView`] plus scans;
//! both executors build it from `view.rs`, their own writes over what lies below them).
//! A read that meets an ESTIMATE (a write of a lower transaction that is being
//! re-executed) returns [`Stop::Blocked`], which the transaction propagates with `?`; the
//! executor then suspends it until the blocking transaction has run again.

#![forbid(unsafe_code)]

mod journal;
mod mvmemory;
mod parallel;
mod scheduler;
mod sequential;
mod view;

use std::collections::BTreeMap;
use std::fmt::Debug;

pub use parallel::{execute_parallel, execute_parallel_with, ParallelOptions};
pub use sequential::execute_sequential;
pub use state::{apply_delta, StateReader, StateView, TransactionError, TrieId};

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

    /// The first key within `bounds` in scan order.
    pub(crate) fn next_key(&self, bounds: &ScanBounds<'_>) -> Option<Key> {
        let found = if bounds.reverse {
            // Strictly below `last`, or at or below `from` (below its successor).
            let before = match bounds.last {
                Some(last) => last.to_vec(),
                None => [bounds.from, &[0]].concat(),
            };
            self.reader.last_before(&TrieId::Main, &before).map(|e| e.map(|(k, _)| k))
        } else {
            let start = match bounds.last {
                Some(last) => [last, &[0]].concat(),
                None => bounds.from.to_vec(),
            };
            match self.reader.range(&TrieId::Main, &start, None) {
                Ok(mut it) => it.next().transpose().map(|e| e.map(|(k, _)| k)),
                Err(e) => Err(e),
            }
        };
        found.unwrap_or_else(|e| {
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
    pub(crate) fn range(&self) -> (std::ops::Bound<&'a [u8]>, std::ops::Bound<&'a [u8]>) {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let edge = self.last.map_or(Included(self.from), Excluded);
        if self.reverse {
            (Unbounded, edge)
        } else {
            (edge, Unbounded)
        }
    }

    /// The first item of an ordered iterator in scan order.
    pub(crate) fn first_of<T>(&self, mut it: impl DoubleEndedIterator<Item = T>) -> Option<T> {
        if self.reverse {
            it.next_back()
        } else {
            it.next()
        }
    }

    /// The first key of `map` within these bounds, in scan order.
    pub(crate) fn first_key_in<V>(&self, map: &BTreeMap<Key, V>) -> Option<Key> {
        self.first_of(map.range::<[u8], _>(self.range()).map(|(k, _)| k)).cloned()
    }

    /// The earlier of two candidate keys in scan order.
    pub(crate) fn earlier(&self, a: Option<Key>, b: Option<Key>) -> Option<Key> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if (a < b) != self.reverse { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    /// Whether `key` lies within the covered part of a scan that stopped at `stop`.
    pub(crate) fn covers(&self, key: &[u8], stop: Option<&[u8]>) -> bool {
        match stop {
            None => true,
            Some(s) => (key <= s) != self.reverse || key == s,
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
}

/// Blocks with fewer transactions run sequentially: thread start-up costs more than they
/// can gain.
pub const PARALLEL_MIN_TXS: usize = 16;
