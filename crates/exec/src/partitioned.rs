//! The partitioned executor: the block is cut into contiguous chunks, `workers` per wave;
//! each worker runs one chunk of a wave with the sequential executor's logic against the
//! state the wave starts from (the block's starting state under the chunks of the earlier
//! waves), recording what it read from that state; then the calling thread checks the
//! wave's chunks in block order against the writes of the wave's chunks before them and
//! keeps every chunk whose reads those writes do not touch. At the first chunk that read a
//! key an earlier chunk of its wave wrote (or scanned a range one wrote into), the run
//! switches: the rest of the block runs sequentially on top of the kept chunks' writes,
//! from that chunk's first transaction, or from its last when only the last read a stale
//! key (a block-end hook that reads what every transaction added to: `chain-transfers`).
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
//! where it is faster.
//!
//! Waves: a block whose transactions depend on ones far before them (transfer `i + 5,000`
//! on transfer `i`) conflicts with one chunk per worker, and runs without a conflict when
//! the chunks of a wave are shorter than that distance, since later waves read the earlier
//! ones' writes. The cost model picks the count (1, 2, 4 or [`MAX_WAVES`]) by measuring
//! them (`adaptive.rs`, `Cut`); a wave costs a spawn and join of its threads and an index of
//! its kept chunks' keys (each key's chunks as a bit mask, so a read below a chunk's writes
//! costs one hash probe more, not one per kept chunk). Tried and dropped (docs/benchmarks.md, "Waves"):
//! waves whose conflicting chunk was rolled back to its first conflicting transaction by
//! an undo log; the undo logs and per-wave merges cost more than they saved.
//!
//! Correctness, by the argument of a sequential run: chunk 0 is one. A chunk whose
//! transactions read from the state its wave starts from only keys no earlier chunk of the
//! wave wrote saw, for each such key, the value a sequential run would show it (the
//! earlier waves are kept whole, and the earlier chunks of its own wave leave the key as it
//! was); its reads of keys written within the chunk came from its own earlier transactions,
//! which are themselves right by induction. The same holds for the transactions of a chunk
//! before its last, which is how the prefix of a chunk whose last transaction alone
//! conflicts is kept. Deltas ([`crate::View`]'s `add_delta`) read nothing: a chunk keeps
//! them as sums, folded in block order with the kept chunks' values when the block's final
//! values are resolved (or when a later wave or the sequential part after a switch reads
//! the key). A read hash that collides only makes a chunk look conflicting (the run then
//! switches, never keeps a wrong chunk), and in the index only costs a look into a chunk
//! that does not hold the key.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use state::{apply_delta, key_prefix64, StateReader};

use crate::journal::Journaled;
use crate::mvmemory::IndexKey;
use crate::scan::{scan, Sources};
use crate::sequential::{run_over, Under};
use crate::view::{DeltaBelow, TxView};
use crate::{
    Base, BlockOutput, Counters, ExecError, Key, Mode, Reason, Run, ScanBounds, Stop, Switch,
    SwitchReason, Transaction, Value, Write,
};

/// The most waves a block is cut into.
pub(crate) const MAX_WAVES: usize = 8;
/// The most chunks a block with more than one wave is cut into: the index of the kept
/// chunks marks each key's chunks in a 64-bit mask.
const MAX_CHUNKS: usize = 64;

/// `waves` bounded to `1..=MAX_WAVES` and to at most [`MAX_CHUNKS`] chunks of `workers`.
pub(crate) fn clamp_waves(workers: usize, waves: usize) -> usize {
    waves.clamp(1, MAX_WAVES).min((MAX_CHUNKS / workers.max(1)).max(1))
}

/// A scan's record: from, where it stopped (`None`: the end of the key space), descending.
type ScanRecord = (Key, Option<Key>, bool);

/// What one chunk's transactions read from the state its wave starts from.
#[derive(Default)]
struct Reads {
    /// Hashes of the keys read, every transaction's in turn.
    keys: Vec<u64>,
    /// The ranges scans covered.
    scans: Vec<ScanRecord>,
    /// Where the chunk's last transaction's reads start in `keys` and in `scans`.
    last: (usize, usize),
}

impl Reads {
    /// The reads of the chunk's transactions before its last.
    fn before_last(&self) -> (&[u64], &[ScanRecord]) {
        (&self.keys[..self.last.0], &self.scans[..self.last.1])
    }
}

/// A chunk's writes, deltas kept as sums.
type Writes = BTreeMap<Key, Write>;

/// A chunk's run: its outputs, the writes of its transactions before the last and the
/// last one's own (kept apart, so that a chunk whose last transaction alone conflicts
/// keeps the rest), the hashes of every key it wrote, and its reads.
struct Chunk<O> {
    outputs: Vec<O>,
    writes: Writes,
    last: Writes,
    hashes: FxHashSet<u64>,
    reads: Reads,
}

/// The hash a chunk records for a key it read or wrote (the hash the multi-version
/// memory picks its shards by).
fn key_hash(key: &[u8]) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// The state a wave starts from: the kept chunks of the earlier waves over the block's
/// starting state.
struct Start<'a, 'b, S: StateReader> {
    kept: &'a Kept,
    base: &'a Base<'b, S>,
}

impl<S: StateReader> Start<'_, '_, S> {
    /// The value of `key` (hashed: `hash`).
    fn get(&self, key: &[u8], hash: u64) -> Result<Option<Value>, Stop> {
        let v = match self.kept.get(key, hash, self.base) {
            Some(v) => v,
            None => self.base.get(key),
        };
        if self.base.failed() {
            return Err(Stop::ReadFailed);
        }
        Ok(v)
    }
}

/// Below a transaction of a chunk: the chunk's writes so far, then the state its wave
/// starts from, whose reads are recorded.
struct ChunkBelow<'a, 'b, 'c, S: StateReader> {
    start: &'a Start<'b, 'c, S>,
    writes: &'a Writes,
    reads: &'a mut Reads,
}

impl<S: StateReader> ChunkBelow<'_, '_, '_, S> {
    /// The value of `key` in the state the wave starts from, recorded.
    fn stored(&mut self, key: &[u8]) -> Result<Option<Value>, Stop> {
        let hash = key_hash(key);
        self.reads.keys.push(hash);
        self.start.get(key, hash)
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

impl<S: StateReader> DeltaBelow for ChunkBelow<'_, '_, '_, S> {
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

    /// A merge of four ordered sources ([`scan`]): the own writes, the chunk's writes, the
    /// earlier waves' kept chunks and the block's starting state. The range it covered is
    /// recorded.
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
        let (kept, base) = (self.start.kept, self.start.base);
        let sources = Sources {
            storage: base,
            layer: |bounds: &ScanBounds<'_>| kept.first_key(bounds),
            written: Some(self.writes),
            own: own.map(),
        };
        let start = ScanBounds { from, last: None, reverse };
        let out = scan(sources, start, limit, |key, found| {
            let below = match found.in_layer.then(|| kept.get(key, key_hash(key), base)).flatten() {
                Some(v) => v,
                None => found.stored,
            };
            if base.failed() {
                return Err(Stop::ReadFailed);
            }
            Ok(visible(found.own, found.written, below))
        })?;
        // A scan that filled up covered the range up to its last entry.
        let stop = if out.len() == limit { out.last().map(|(k, _)| k.clone()) } else { None };
        self.reads.scans.push((from.to_vec(), stop, reverse));
        Ok(out)
    }
}

/// Fold a transaction's writes into its chunk's: a value replaces, a delta adds to what the
/// chunk holds (a value stays a value).
fn fold_into(chunk: &mut Writes, own: Writes) {
    use std::collections::btree_map::Entry;
    for (key, w) in own {
        // One search per key: the entry, not a look-up and then an insert.
        match chunk.entry(key) {
            Entry::Vacant(e) => {
                e.insert(w);
            }
            Entry::Occupied(mut e) => match (e.get_mut(), w) {
                (Write::Value(v), Write::Delta(d)) => *v = Some(apply_delta(v.as_deref(), d)),
                (Write::Delta(c), Write::Delta(d)) => *c = c.wrapping_add(d),
                (held, w) => *held = w,
            },
        }
    }
}

/// Run one chunk; `None` when cancelled or when a storage read failed (`base` holds the
/// error).
fn run_chunk<T: Transaction, S: StateReader>(
    txs: &[T],
    start: &Start<'_, '_, S>,
    cancel: Option<&AtomicBool>,
) -> Option<Chunk<T::Output>> {
    let mut outputs = Vec::with_capacity(txs.len());
    let mut writes = Writes::new();
    let mut last = Writes::new();
    let mut reads = Reads::default();
    for (i, tx) in txs.iter().enumerate() {
        if cancel.is_some_and(|c| c.load(Relaxed)) {
            return None;
        }
        let is_last = i + 1 == txs.len();
        if is_last {
            reads.last = (reads.keys.len(), reads.scans.len());
        }
        let below = ChunkBelow { start, writes: &writes, reads: &mut reads };
        let mut view = TxView::new(below);
        match tx.execute(&mut view) {
            Ok(out) => outputs.push(out),
            Err(Stop::ReadFailed) => {
                assert!(
                    start.base.failed(),
                    "a transaction returned Stop::ReadFailed without a failed read"
                );
                return None;
            }
            Err(Stop::Blocked(_)) => unreachable!("a chunk's reads never block"),
        }
        let own = view.own.into_writes();
        match is_last {
            true => last = own,
            false => fold_into(&mut writes, own),
        }
    }
    // Hashed here, on the chunk's own thread, not after the join.
    let hashes = writes.keys().chain(last.keys()).map(|k| key_hash(k)).collect();
    Some(Chunk { outputs, writes, last, hashes, reads })
}

/// `value` with the deltas `sum` added, if any.
fn plus(value: Option<Value>, sum: Option<i64>) -> Option<Value> {
    match sum {
        Some(sum) => Some(apply_delta(value.as_deref(), sum)),
        None => value,
    }
}

/// The chunks kept so far, in block order: each one's writes (deltas as sums) and the
/// hashes of their keys, with an index of the keys of the earlier waves' chunks.
#[derive(Default)]
struct Kept {
    writes: Vec<Writes>,
    hashes: Vec<FxHashSet<u64>>,
    /// For the chunks `writes[..indexed]`: per key hash, a bit per chunk holding the key
    /// (or a key of the same hash).
    index: FxHashMap<u64, u64>,
    indexed: usize,
}

impl Kept {
    /// Whether reads touch a key the kept chunks from `since` on wrote.
    fn conflicts(&self, since: usize, keys: &[u64], scans: &[ScanRecord]) -> bool {
        let (hashes, writes) = (&self.hashes[since..], &self.writes[since..]);
        keys.iter().any(|h| hashes.iter().any(|kept| kept.contains(h)))
            || scans.iter().any(|(from, stop, reverse)| {
                ScanBounds::covered(from, stop.as_deref(), *reverse).is_some_and(|range| {
                    writes.iter().any(|w| w.range::<[u8], _>(range).next().is_some())
                })
            })
    }

    fn keep(&mut self, writes: Writes, hashes: FxHashSet<u64>) {
        self.writes.push(writes);
        self.hashes.push(hashes);
    }

    /// Index the chunks kept since the last call, before a wave that reads them.
    fn index_new(&mut self) {
        for (i, hashes) in self.hashes.iter().enumerate().skip(self.indexed) {
            // `clamp_waves` keeps a block with more than one wave within 64 chunks; a
            // wrapped bit would name the wrong chunk, so this is checked, not assumed.
            assert!(i < MAX_CHUNKS, "chunk {i} of a block cut into waves: more than 64");
            let bit = 1u64 << i;
            self.index.reserve(hashes.len());
            for &h in hashes {
                *self.index.entry(h).or_default() |= bit;
            }
        }
        self.indexed = self.hashes.len();
    }

    /// What the kept chunks hold under `key` (hashed: `hash`), deltas added to the
    /// value before them (read from `base` when none is kept); `None`: no kept chunk
    /// wrote it. The unindexed chunks are looked at newest first, then the indexed ones
    /// the key's mask names.
    fn get<S: StateReader>(
        &self,
        key: &[u8],
        hash: u64,
        base: &Base<'_, S>,
    ) -> Option<Option<Value>> {
        let recent = self.writes[self.indexed..].iter().rev();
        let mut mask = match self.indexed {
            0 => 0,
            _ => self.index.get(&hash).copied().unwrap_or(0),
        };
        let marked = std::iter::from_fn(|| {
            let i = 63usize.checked_sub(mask.leading_zeros() as usize)?;
            mask &= !(1u64 << i);
            Some(&self.writes[i])
        });
        let mut sum: Option<i64> = None;
        for chunk in recent.chain(marked) {
            match chunk.get(key) {
                Some(Write::Value(v)) => return Some(plus(v.clone(), sum)),
                Some(Write::Delta(d)) => sum = Some(sum.unwrap_or(0).wrapping_add(*d)),
                None => {}
            }
        }
        sum.map(|sum| plus(base.get(key), Some(sum)))
    }

    /// The kept chunks' first key within `bounds`, in scan order.
    fn first_key(&self, bounds: &ScanBounds<'_>) -> Option<IndexKey> {
        let heads = self.writes.iter().filter_map(|w| bounds.first_in(w).map(|(k, _)| k));
        let first = heads.reduce(|a, b| if (b < a) != bounds.reverse { b } else { a });
        first.map(|k| IndexKey::from(k.as_slice()))
    }

    /// The block's final values: each key's writes in block order, a delta added to the
    /// value before it (or to the key's value before the block). The keys are cut into
    /// `workers` ranges at quantiles of the largest chunk's keys, and each range is
    /// resolved on its own thread ([`resolve_range`]); the ranges then join in key order.
    fn resolve<S: StateReader + Sync>(
        self,
        base: &Base<'_, S>,
        workers: usize,
    ) -> BTreeMap<Key, Option<Value>> {
        let len: usize = self.writes.iter().map(BTreeMap::len).sum();
        let workers = if len < PARALLEL_RESOLVE_MIN { 1 } else { workers.max(1) };
        let bounds = quantile_keys(&self.writes, workers);
        let mut ranges: Vec<Vec<Writes>> = (0..=bounds.len()).map(|_| Vec::new()).collect();
        for mut chunk in self.writes {
            // From the highest bound down: each cut takes the keys at or above it.
            let mut cuts: Vec<Writes> = bounds.iter().rev().map(|b| chunk.split_off(b)).collect();
            cuts.push(chunk);
            for (range, cut) in ranges.iter_mut().zip(cuts.into_iter().rev()) {
                range.push(cut);
            }
        }
        let resolved: Vec<Vec<(Key, Option<Value>)>> = std::thread::scope(|s| {
            let mut ranges = ranges.into_iter();
            let first = ranges.next().unwrap_or_default();
            let handles: Vec<_> = ranges.map(|r| s.spawn(move || resolve_range(r, base))).collect();
            let first = resolve_range(first, base);
            let rest = handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            std::iter::once(first).chain(rest).collect()
        });
        // Already in key order: the map's own sort finds one run.
        resolved.into_iter().flatten().collect()
    }
}

/// Fewer kept writes than this resolve on the calling thread alone.
const PARALLEL_RESOLVE_MIN: usize = 4096;

/// Keys that cut the largest of `chunks` into `parts` ranges of about equal size,
/// ascending (fewer when it holds too few keys).
fn quantile_keys(chunks: &[Writes], parts: usize) -> Vec<Key> {
    let Some(largest) = chunks.iter().max_by_key(|c| c.len()) else { return Vec::new() };
    let step = largest.len() / parts.max(1);
    if parts <= 1 || step == 0 {
        return Vec::new();
    }
    largest.keys().skip(step).step_by(step).take(parts - 1).cloned().collect()
}

/// One key range's final values, from its writes in every chunk (in block order): a merge
/// of the chunks' sorted maps, one head each, the least head found on an 8-byte key
/// prefix first; each key's writes folded in block order.
fn resolve_range<S: StateReader>(
    chunks: Vec<Writes>,
    base: &Base<'_, S>,
) -> Vec<(Key, Option<Value>)> {
    let len = chunks.iter().map(BTreeMap::len).sum();
    let mut out: Vec<(Key, Option<Value>)> = Vec::with_capacity(len);
    let mut runs: Vec<_> = chunks.into_iter().map(BTreeMap::into_iter).collect();
    let head = |run: &mut std::collections::btree_map::IntoIter<Key, Write>| {
        run.next().map(|(k, w)| (key_prefix64(&k), k, w))
    };
    let mut heads: Vec<Option<(u64, Key, Write)>> = runs.iter_mut().map(head).collect();
    let mut holders: Vec<usize> = Vec::with_capacity(heads.len());
    loop {
        let least = heads.iter().flatten().map(|(p, k, _)| (*p, k)).min();
        let Some((prefix, key)) = least else { break };
        holders.clear();
        holders.extend(heads.iter().enumerate().filter_map(|(i, h)| {
            h.as_ref().filter(|(p, k, _)| *p == prefix && k == key).map(|_| i)
        }));
        // The key's writes in block order: a value resets, a delta adds.
        let (mut held, mut value, mut sum): (Option<Key>, Option<Option<Value>>, Option<i64>) =
            (None, None, None);
        for &i in &holders {
            if let Some((_, k, w)) = heads[i].take() {
                match w {
                    Write::Value(v) => (value, sum) = (Some(v), None),
                    Write::Delta(d) => sum = Some(sum.unwrap_or(0).wrapping_add(d)),
                }
                held.get_or_insert(k);
            }
            heads[i] = head(&mut runs[i]);
        }
        let Some(key) = held else { break };
        let value = match value {
            Some(v) => plus(v, sum),
            None => plus(base.get(&key), sum),
        };
        out.push((key, value));
    }
    out
}

impl<S: StateReader> Under for Start<'_, '_, S> {
    fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        self.kept.get(key, key_hash(key), self.base)
    }

    fn first_key(&self, bounds: &ScanBounds<'_>) -> Option<IndexKey> {
        self.kept.first_key(bounds)
    }
}

/// Run each of `parts` on its own thread (the calling thread runs the first).
fn run_chunks<T: Transaction, S: StateReader + Sync>(
    parts: &[&[T]],
    start: &Start<'_, '_, S>,
    cancel: Option<&AtomicBool>,
) -> Vec<Option<Chunk<T::Output>>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (parts.iter().skip(1))
            .map(|&part| s.spawn(move || run_chunk(part, start, cancel)))
            .collect();
        let first = parts.first().and_then(|part| run_chunk(part, start, cancel));
        let rest = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        std::iter::once(first).chain(rest).collect()
    })
}

/// What a wave's checks leave: the kept chunks, the outputs so far and the counters.
struct Merge<O> {
    kept: Kept,
    outputs: Vec<O>,
    counters: Counters,
}

impl<O> Merge<O> {
    /// Keep a wave's chunks in block order while none read what an earlier chunk of the
    /// wave wrote; the switch at the first that did, if one did.
    fn wave(&mut self, ran: Vec<Chunk<O>>) -> Option<Switch> {
        let since = self.kept.writes.len();
        for (i, mut chunk) in ran.into_iter().enumerate() {
            self.counters.executions += chunk.outputs.len() as u64;
            if i > 0 {
                self.counters.validations += chunk.outputs.len() as u64;
            }
            if self.kept.conflicts(since, &chunk.reads.keys, &chunk.reads.scans) {
                let (keys, scans) = chunk.reads.before_last();
                if !self.kept.conflicts(since, keys, scans) {
                    // Only the last transaction read a stale key: keep the others.
                    chunk.outputs.pop();
                    self.outputs.append(&mut chunk.outputs);
                    self.kept.keep(chunk.writes, FxHashSet::default());
                }
                return Some(Switch { at: self.outputs.len(), reason: SwitchReason::Conflict });
            }
            fold_into(&mut chunk.writes, chunk.last);
            self.outputs.append(&mut chunk.outputs);
            self.kept.keep(chunk.writes, chunk.hashes);
        }
        None
    }
}

/// Run `txs` as contiguous chunks, `workers` per wave over `waves` waves (bounded by
/// [`clamp_waves`]), one chunk of a wave per thread (the calling thread runs the first);
/// keep the chunks that read nothing an earlier chunk of their wave wrote, and run the
/// rest of the block sequentially from the first that did. `reason` is why the block runs
/// this way.
pub(crate) fn run<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
    waves: usize,
    cancel: Option<&AtomicBool>,
    reason: Reason,
) -> Result<BlockOutput<T::Output>, ExecError<S::Error>> {
    let base = Base::new(storage);
    let workers = workers.max(1);
    let waves = clamp_waves(workers, waves);
    let size = txs.len().div_ceil(workers * waves).max(1);
    let parts: Vec<&[T]> = txs.chunks(size).collect();
    let mut merge = Merge {
        kept: Kept::default(),
        outputs: Vec::with_capacity(txs.len()),
        counters: Counters::default(),
    };
    let mut switch = None;
    for wave in parts.chunks(workers) {
        merge.kept.index_new();
        let ran = run_chunks(wave, &Start { kept: &merge.kept, base: &base }, cancel);
        if base.failed() {
            return Err(base.finish(()).err().unwrap_or(ExecError::Cancelled));
        }
        let ran: Vec<Chunk<T::Output>> =
            ran.into_iter().collect::<Option<_>>().ok_or(ExecError::Cancelled)?;
        switch = merge.wave(ran);
        if switch.is_some() {
            break;
        }
    }
    let Merge { kept, mut outputs, mut counters } = merge;
    let tail = match switch {
        Some(Switch { at, .. }) => {
            let start = Start { kept: &kept, base: &base };
            let (tail, tail_writes) = run_over(&txs[at..], &base, &start, cancel)?;
            outputs.extend(tail);
            counters.reexecutions = counters.executions - at as u64;
            counters.executions += (txs.len() - at) as u64;
            counters.aborts = 1;
            tail_writes
        }
        None => BTreeMap::new(),
    };
    let mut writes = kept.resolve(&base, workers);
    writes.extend(tail);
    let run = Run { mode: Mode::Partitioned, reason, switch, waves };
    base.finish(BlockOutput { outputs, writes, counters, run })
}

/// Run `txs` over the main trie of `storage` with the partitioned executor on `workers`
/// threads (the calling thread is one of them), one wave of chunks: the result equals
/// [`crate::execute_sequential`]'s (outputs and writes, or the first storage error). One
/// worker and blocks under [`crate::PARALLEL_MIN_TXS`] run sequentially.
pub fn execute_partitioned<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
) -> Result<BlockOutput<T::Output>, S::Error> {
    execute_partitioned_waves(txs, storage, workers, 1)
}

/// [`execute_partitioned`] with the block cut into `waves` waves of `workers` chunks each
/// (1 to 8, and at most 64 chunks; later waves read the earlier ones' writes).
pub fn execute_partitioned_waves<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
    waves: usize,
) -> Result<BlockOutput<T::Output>, S::Error> {
    let out = if workers <= 1 {
        crate::sequential::run(txs, storage, None, Reason::OneWorker)
    } else if txs.len() < crate::PARALLEL_MIN_TXS {
        crate::sequential::run(txs, storage, None, Reason::SmallBlock)
    } else {
        run(txs, storage, workers, waves, None, Reason::Requested)
    };
    match out {
        Ok(out) => Ok(out),
        Err(ExecError::Storage(e)) => Err(e),
        Err(ExecError::Cancelled) => unreachable!("nothing can cancel a run without a cancel flag"),
    }
}
