//! Arbor's block executors: Block-STM (optimistic parallel execution over a multi-version
//! memory, Gelashvili et al., PPoPP'23) and the sequential reference it must agree with.
//!
//! A block is a slice of [`Transaction`]s over a read-only [`Storage`]. Both executors
//! return the same [`BlockOutput`]: every transaction's output and the block's final write
//! set, exactly as running the transactions one after another would give.
//!
//! - [`execute_sequential`]: the reference.
//! - [`execute_parallel`]: Block-STM with `workers` threads (see `mvmemory.rs` and
//!   `scheduler.rs`); blocks smaller than [`PARALLEL_MIN_TXS`] or one worker fall back to
//!   the sequential executor.
//!
//! Transactions read and write through a [`View`]. A read that meets an ESTIMATE (a write
//! of a lower transaction that is being re-executed) returns [`Blocked`], which the
//! transaction propagates with `?`; the executor then suspends it until the blocking
//! transaction has run again.

#![forbid(unsafe_code)]

mod mvmemory;
mod parallel;
mod scheduler;
mod sequential;

use std::collections::BTreeMap;
use std::fmt::Debug;

pub use parallel::{execute_parallel, execute_parallel_with, ParallelOptions};
pub use sequential::execute_sequential;

/// A state key.
pub type Key = Vec<u8>;
/// A state value.
pub type Value = Vec<u8>;

/// A parallel run stopped by its cancel flag ([`ParallelOptions::cancel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("block execution cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// A read met the estimate of transaction `.0`'s write: stop and retry after it re-ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked(pub usize);

/// What a transaction sees: its own writes, then the writes of lower transactions, then
/// storage.
pub trait View {
    /// The value of `key`, or `None`.
    fn get(&mut self, key: &[u8]) -> Result<Option<Value>, Blocked>;
    /// Write `value` under `key`.
    fn set(&mut self, key: &[u8], value: Value);
    /// Delete `key`.
    fn delete(&mut self, key: &[u8]);
    /// Up to `limit` live entries in key order: keys at or after `from` ascending, or with
    /// `reverse` keys at or before `from` descending. Parallel execution validates a scan by
    /// replaying the range it covered (up to where it stopped) and comparing the entries.
    fn scan(
        &mut self,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Blocked>;
    /// Add `amount` to the counter under `key` (see [`apply_delta`]) without reading it:
    /// a delta creates no read dependency, so transactions that only bump the same counter
    /// (a fee collector, a block-level count) do not conflict. A later plain read of the
    /// key resolves it in block order.
    fn add_delta(&mut self, key: &[u8], amount: i64);
}

/// A counter value after adding `amount`: counters are `u64` big-endian; an absent value
/// (or one that is not 8 bytes) counts as 0, and the sum wraps.
pub fn apply_delta(base: Option<&[u8]>, amount: i64) -> Value {
    let n = base.and_then(|b| <[u8; 8]>::try_from(b).ok()).map_or(0, u64::from_be_bytes);
    n.wrapping_add_signed(amount).to_be_bytes().to_vec()
}

/// A transaction's pending write to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write {
    /// A value (`None` = delete).
    Value(Option<Value>),
    /// A sum to add to whatever the key holds before this transaction.
    Delta(i64),
}

/// One transaction of a block. `execute` must be deterministic in what it reads: the
/// executors may run it several times (only the last run counts).
pub trait Transaction: Sync {
    /// What the transaction returns (its receipt); failures are outputs too.
    type Output: Clone + Debug + PartialEq + Send;
    /// Run against `view`, propagating [`Blocked`] from reads.
    fn execute(&self, view: &mut dyn View) -> Result<Self::Output, Blocked>;
}

/// The state a block starts from.
pub trait Storage: Sync {
    /// The value of `key` before the block.
    fn get(&self, key: &[u8]) -> Option<Value>;
    /// The next key of a scan: the first key within `bounds` in scan order (ascending, or
    /// descending with `reverse`).
    fn next_key(&self, bounds: &ScanBounds<'_>) -> Option<Key>;
}

impl Storage for BTreeMap<Key, Value> {
    fn get(&self, key: &[u8]) -> Option<Value> {
        BTreeMap::get(self, key).cloned()
    }

    fn next_key(&self, bounds: &ScanBounds<'_>) -> Option<Key> {
        bounds.first_key_in(self)
    }
}

/// The part of a scan still to go: from `from` (inclusive) in scan order, past `last`.
#[derive(Debug, Clone, Copy)]
pub struct ScanBounds<'a> {
    /// Where the scan starts (inclusive).
    pub from: &'a [u8],
    /// The last key already visited, if any (exclusive).
    pub last: Option<&'a [u8]>,
    /// Descending order.
    pub reverse: bool,
}

impl<'a> ScanBounds<'a> {
    /// The key range still to visit.
    pub fn range(&self) -> (std::ops::Bound<&'a [u8]>, std::ops::Bound<&'a [u8]>) {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let edge = self.last.map_or(Included(self.from), Excluded);
        if self.reverse {
            (Unbounded, edge)
        } else {
            (edge, Unbounded)
        }
    }

    /// The first item of an ordered iterator in scan order.
    pub fn first_of<T>(&self, mut it: impl DoubleEndedIterator<Item = T>) -> Option<T> {
        if self.reverse {
            it.next_back()
        } else {
            it.next()
        }
    }

    /// The first key of `map` within these bounds, in scan order.
    pub fn first_key_in<V>(&self, map: &BTreeMap<Key, V>) -> Option<Key> {
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
