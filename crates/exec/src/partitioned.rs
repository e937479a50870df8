//! The partitioned executor: each worker runs one contiguous chunk of the block with the
//! sequential executor's logic against the state the block starts from, recording what it
//! read from that state; then the calling thread checks the chunks in block order against
//! the writes of the chunks before them and keeps every chunk whose reads those writes do
//! not touch. At the first chunk that read a key an earlier chunk wrote (or scanned a range
//! one wrote into), the run switches: the rest of the block, from that chunk's first
//! transaction, runs sequentially on top of the kept chunks' writes.
//!
//! Why beside Block-STM: on blocks of cheap transactions (a few µs each) Block-STM's
//! shared structures (the scheduler's indices, the multi-version memory's shards, each
//! transaction's status) cost a cache-line round trip between the cores for nearly every
//! step, and its bookkeeping costs more than the transactions (`bench blockstm --no-sig`:
//! 0.4–0.7× the sequential executor with two workers). Here the workers share nothing while
//! they run: each chunk's writes are its own map, its reads 8-byte hashes in its own
//! vector, and a chunk costs what the sequential executor costs plus those hashes. The
//! price is the switch: a block whose chunks conflict pays its later chunks twice (about
//! the sequential executor's time plus the first chunk's), so the cost model
//! ([`crate::AdaptiveExecutor`]) measures it like the other two executors and picks it only
//! where it is faster. Tried and dropped (design.md): waves of chunks that read the earlier
//! waves' writes, with a conflicting chunk rolled back to its first conflicting
//! transaction; the merges and undo logs cost more than they saved.
//!
//! Correctness, by the argument of a sequential run: chunk 0 is one. A chunk whose
//! transactions read from the block's starting state only keys no earlier chunk wrote saw,
//! for each such key, the value a sequential run would show it (the earlier chunks leave
//! the key as it was); its reads of keys written within the chunk came from its own earlier
//! transactions, which are themselves right by induction. Deltas ([`crate::View`]'s
//! `add_delta`) read nothing: a chunk keeps them as sums, folded in block order with the kept
//! chunks' values when the block's final values are resolved (or when the sequential part
//! after a switch reads the key). A read hash that collides only makes a chunk look
//! conflicting: the run then switches, never keeps a wrong chunk.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use rustc_hash::{FxBuildHasher, FxHashSet};
use state::key_prefix64;

use crate::journal::Journaled;
use crate::mvmemory::IndexKey;
use crate::scan::{earliest, StorageCursor, SCAN_CAPACITY};
use crate::sequential::{run_over, Under};
use crate::view::{DeltaBelow, TxView};
use crate::{
    apply_delta, Base, BlockOutput, Counters, ExecError, Key, Mode, Reason, Run, ScanBounds,
    StateReader, Stop, Switch, SwitchReason, Transaction, Value, Write,
};

/// What one chunk's transactions read from the state the block starts from.
#[derive(Default)]
struct Reads {
    /// Hashes of the keys read, every transaction's in turn.
    keys: Vec<u64>,
    /// The ranges scans covered: from, where the scan stopped (`None`: the end of the key
    /// space), descending.
    scans: Vec<(Key, Option<Key>, bool)>,
}

/// A chunk's writes, deltas kept as sums.
type Writes = BTreeMap<Key, Write>;

/// A chunk's run: its outputs, its writes, the hashes of the keys it wrote, and its reads.
struct Chunk<O> {
    outputs: Vec<O>,
    writes: Writes,
    hashes: FxHashSet<u64>,
    reads: Reads,
}

/// The hash a chunk records for a key it read or wrote (the hash the multi-version
/// memory picks its shards by).
fn key_hash(key: &[u8]) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// Below a transaction of a chunk: the chunk's writes so far, then the block's starting
/// state, whose reads are recorded.
struct ChunkBelow<'a, 'b, S: StateReader> {
    storage: &'a Base<'b, S>,
    writes: &'a Writes,
    reads: &'a mut Reads,
}

impl<S: StateReader> ChunkBelow<'_, '_, S> {
    /// The value of `key` in the block's starting state, recorded.
    fn stored(&mut self, key: &[u8]) -> Result<Option<Value>, Stop> {
        self.reads.keys.push(key_hash(key));
        let v = self.storage.get(key);
        if self.storage.failed() {
            return Err(Stop::ReadFailed);
        }
        Ok(v)
    }
}

/// What a key shows through a transaction's own write and its chunk's, over `stored`.
fn visible(own: Option<&Write>, chunk: Option<&Write>, stored: Option<Value>) -> Option<Value> {
    let below = match chunk {
        Some(Write::Value(v)) => v.clone(),
        Some(Write::Delta(d)) => Some(apply_delta(stored.as_deref(), *d)),
        None => stored,
    };
    match own {
        Some(Write::Value(v)) => v.clone(),
        Some(Write::Delta(d)) => Some(apply_delta(below.as_deref(), *d)),
        None => below,
    }
}

impl<S: StateReader> DeltaBelow for ChunkBelow<'_, '_, S> {
    fn read_below(&mut self, key: &[u8]) -> Result<Option<Value>, Stop> {
        match self.writes.get(key) {
            Some(Write::Value(v)) => Ok(v.clone()),
            Some(Write::Delta(d)) => {
                let d = *d;
                Ok(Some(apply_delta(self.stored(key)?.as_deref(), d)))
            }
            None => self.stored(key),
        }
    }

    /// A merge of three ordered sources, one head each: the own writes, the chunk's writes
    /// and the block's starting state (a cursor). The range it covered is recorded.
    fn scan(
        &mut self,
        own: &mut Journaled<Write>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let own = &*own;
        let start = ScanBounds { from, last: None, reverse };
        let mut mine = start.first_in(own.map());
        let mut chunk = start.first_in(self.writes);
        let mut stored = StorageCursor::new(self.storage, from, reverse);
        let mut out = Vec::with_capacity(limit.min(SCAN_CAPACITY));
        while out.len() < limit {
            let heads = [mine.map(|e| e.0), chunk.map(|e| e.0)].map(|k| k.map(Vec::as_slice));
            let [in_mine, in_chunk, in_storage] =
                earliest(reverse, [heads[0], heads[1], stored.head()]);
            if self.storage.failed() {
                return Err(Stop::ReadFailed);
            }
            let (stored_key, stored_value) = match in_storage.then(|| stored.take()).flatten() {
                Some((k, v)) => (Some(k), Some(v)),
                None => (None, None),
            };
            let key = match (stored_key, mine, chunk) {
                (Some(k), ..) => k,
                (None, Some((k, _)), _) if in_mine => k.clone(),
                (None, _, Some((k, _))) if in_chunk => k.clone(),
                _ => break,
            };
            let next = start.after(&key);
            let own_write = mine.filter(|_| in_mine).map(|e| e.1);
            let chunk_write = chunk.filter(|_| in_chunk).map(|e| e.1);
            let value = visible(own_write, chunk_write, stored_value);
            if in_mine {
                mine = next.first_in(own.map());
            }
            if in_chunk {
                chunk = next.first_in(self.writes);
            }
            if let Some(v) = value {
                out.push((key, v));
            }
        }
        // A scan that filled up covered the range up to its last entry.
        let stop = if out.len() == limit { out.last().map(|(k, _)| k.clone()) } else { None };
        self.reads.scans.push((from.to_vec(), stop, reverse));
        Ok(out)
    }
}

/// Fold a transaction's writes into its chunk's: a value replaces, a delta adds to what the
/// chunk holds (a value stays a value).
fn fold_into(chunk: &mut Writes, own: Writes) {
    for (key, w) in own {
        match (chunk.get_mut(&key), w) {
            (Some(Write::Value(v)), Write::Delta(d)) => {
                *v = Some(apply_delta(v.as_deref(), d));
            }
            (Some(Write::Delta(c)), Write::Delta(d)) => *c = c.wrapping_add(d),
            (_, w) => {
                chunk.insert(key, w);
            }
        }
    }
}

/// Run one chunk; `None` when cancelled or when a storage read failed (`base` holds the
/// error).
fn run_chunk<T: Transaction, S: StateReader>(
    txs: &[T],
    base: &Base<'_, S>,
    cancel: Option<&AtomicBool>,
) -> Option<Chunk<T::Output>> {
    let mut outputs = Vec::with_capacity(txs.len());
    let mut writes = Writes::new();
    let mut reads = Reads::default();
    for tx in txs {
        if cancel.is_some_and(|c| c.load(Relaxed)) {
            return None;
        }
        let below = ChunkBelow { storage: base, writes: &writes, reads: &mut reads };
        let mut view = TxView::new(below);
        match tx.execute(&mut view) {
            Ok(out) => outputs.push(out),
            Err(Stop::ReadFailed) => {
                assert!(
                    base.failed(),
                    "a transaction returned Stop::ReadFailed without a failed read"
                );
                return None;
            }
            Err(Stop::Blocked(_)) => unreachable!("a chunk's reads never block"),
        }
        let own = view.own.into_writes();
        fold_into(&mut writes, own);
    }
    // Hashed here, on the chunk's own thread, not after the join.
    let hashes = writes.keys().map(|k| key_hash(k)).collect();
    Some(Chunk { outputs, writes, hashes, reads })
}

/// `value` with the deltas `sum` added, if any.
fn plus(value: Option<Value>, sum: Option<i64>) -> Option<Value> {
    match sum {
        Some(sum) => Some(apply_delta(value.as_deref(), sum)),
        None => value,
    }
}

/// The chunks kept so far, in block order: each one's writes (deltas as sums) and the
/// hashes of their keys.
#[derive(Default)]
struct Kept {
    writes: Vec<Writes>,
    hashes: Vec<FxHashSet<u64>>,
}

impl Kept {
    /// Whether a chunk's reads touch a key the kept chunks wrote.
    fn conflicts(&self, reads: &Reads) -> bool {
        reads.keys.iter().any(|h| self.hashes.iter().any(|kept| kept.contains(h)))
            || reads.scans.iter().any(|(from, stop, reverse)| {
                ScanBounds::covered(from, stop.as_deref(), *reverse).is_some_and(|range| {
                    self.writes.iter().any(|w| w.range::<[u8], _>(range).next().is_some())
                })
            })
    }

    fn keep<O>(&mut self, chunk: Chunk<O>) {
        self.writes.push(chunk.writes);
        self.hashes.push(chunk.hashes);
    }

    /// The block's final values: each key's writes in block order, a delta added to the
    /// value before it (or to the key's value before the block). One sort of the chunks'
    /// sorted runs, on an 8-byte key prefix first.
    fn resolve<S: StateReader>(self, base: &Base<'_, S>) -> BTreeMap<Key, Option<Value>> {
        let len = self.writes.iter().map(BTreeMap::len).sum();
        let mut all: Vec<(u64, Key, Write)> = Vec::with_capacity(len);
        for chunk in self.writes {
            all.extend(chunk.into_iter().map(|(k, w)| (key_prefix64(&k), k, w)));
        }
        // Stable: each key's writes stay in block order.
        all.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut out: Vec<(Key, Option<Value>)> = Vec::with_capacity(all.len());
        let mut current: Option<(Key, Option<Option<Value>>, Option<i64>)> = None;
        let settle = |(key, value, sum): (Key, Option<Option<Value>>, Option<i64>)| {
            let value = match value {
                Some(v) => plus(v, sum),
                None => plus(base.get(&key), sum),
            };
            (key, value)
        };
        for (_, key, w) in all {
            if current.as_ref().is_none_or(|(k, ..)| *k != key) {
                out.extend(current.take().map(settle));
                current = Some((key, None, None));
            }
            if let Some((_, value, sum)) = current.as_mut() {
                match w {
                    Write::Value(v) => (*value, *sum) = (Some(v), None),
                    Write::Delta(d) => *sum = Some(sum.unwrap_or(0).wrapping_add(d)),
                }
            }
        }
        out.extend(current.take().map(settle));
        out.into_iter().collect()
    }
}

/// Under the sequential executor that finishes a switched block: the kept chunks (newest
/// first), then the block's starting state for their deltas.
struct KeptUnder<'a, 'b, S: StateReader> {
    kept: &'a Kept,
    storage: &'a Base<'b, S>,
}

impl<S: StateReader> Under for KeptUnder<'_, '_, S> {
    fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        let mut sum: Option<i64> = None;
        for chunk in self.kept.writes.iter().rev() {
            match chunk.get(key) {
                Some(Write::Value(v)) => return Some(plus(v.clone(), sum)),
                Some(Write::Delta(d)) => sum = Some(sum.unwrap_or(0).wrapping_add(*d)),
                None => {}
            }
        }
        sum.map(|sum| plus(self.storage.get(key), Some(sum)))
    }

    fn first_key(&self, bounds: &ScanBounds<'_>) -> Option<IndexKey> {
        let heads = self.kept.writes.iter().filter_map(|w| bounds.first_in(w).map(|(k, _)| k));
        let first = heads.reduce(|a, b| if (b < a) != bounds.reverse { b } else { a });
        first.map(|k| IndexKey::from(k.as_slice()))
    }
}

/// Run each of `parts` on its own thread (the calling thread runs the first).
fn run_chunks<T: Transaction, S: StateReader + Sync>(
    parts: &[&[T]],
    base: &Base<'_, S>,
    cancel: Option<&AtomicBool>,
) -> Vec<Option<Chunk<T::Output>>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (parts.iter().skip(1))
            .map(|&part| s.spawn(move || run_chunk(part, base, cancel)))
            .collect();
        let first = parts.first().and_then(|part| run_chunk(part, base, cancel));
        let rest = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        std::iter::once(first).chain(rest).collect()
    })
}

/// Run `txs` as `workers` contiguous chunks, one per thread (the calling thread runs the
/// first), then keep the chunks that read nothing an earlier one wrote and run the rest of
/// the block sequentially from the first that did. `reason` is why the block runs this way.
pub(crate) fn run<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
    cancel: Option<&AtomicBool>,
    reason: Reason,
) -> Result<BlockOutput<T::Output>, ExecError<S::Error>> {
    let base = Base::new(storage);
    let size = txs.len().div_ceil(workers.max(1)).max(1);
    let parts: Vec<&[T]> = txs.chunks(size).collect();
    let ran = run_chunks(&parts, &base, cancel);
    if base.failed() {
        return Err(base.finish(()).err().unwrap_or(ExecError::Cancelled));
    }
    let ran: Vec<Chunk<T::Output>> =
        ran.into_iter().collect::<Option<_>>().ok_or(ExecError::Cancelled)?;
    let mut kept = Kept::default();
    let mut outputs = Vec::with_capacity(txs.len());
    let mut counters = Counters { executions: txs.len() as u64, ..Counters::default() };
    let mut switch = None;
    for (i, mut chunk) in ran.into_iter().enumerate() {
        if i > 0 {
            counters.validations += chunk.outputs.len() as u64;
            if kept.conflicts(&chunk.reads) {
                switch = Some(Switch { at: outputs.len(), reason: SwitchReason::Conflict });
                break;
            }
        }
        outputs.append(&mut chunk.outputs);
        kept.keep(chunk);
    }
    let tail = match switch {
        Some(Switch { at, .. }) => {
            let under = KeptUnder { kept: &kept, storage: &base };
            let (tail, tail_writes) = run_over(&txs[at..], &base, &under, cancel)?;
            outputs.extend(tail);
            counters.executions += (txs.len() - at) as u64;
            counters.reexecutions = (txs.len() - at) as u64;
            counters.aborts = 1;
            tail_writes
        }
        None => BTreeMap::new(),
    };
    let mut writes = kept.resolve(&base);
    writes.extend(tail);
    let run = Run { mode: Mode::Partitioned, reason, switch };
    base.finish(BlockOutput { outputs, writes, counters, run })
}

/// Run `txs` over the main trie of `storage` with the partitioned executor on `workers`
/// threads (the calling thread is one of them): the result equals
/// [`crate::execute_sequential`]'s (outputs and writes, or the first storage error). One
/// worker and blocks under [`crate::PARALLEL_MIN_TXS`] run sequentially.
pub fn execute_partitioned<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
) -> Result<BlockOutput<T::Output>, S::Error> {
    let out = if workers <= 1 {
        crate::sequential::run(txs, storage, None, Reason::OneWorker)
    } else if txs.len() < crate::PARALLEL_MIN_TXS {
        crate::sequential::run(txs, storage, None, Reason::SmallBlock)
    } else {
        run(txs, storage, workers, None, Reason::Requested)
    };
    match out {
        Ok(out) => Ok(out),
        Err(ExecError::Storage(e)) => Err(e),
        Err(ExecError::Cancelled) => unreachable!("nothing can cancel a run without a cancel flag"),
    }
}
