//! Multi-version memory: for each key, the values written by each transaction (by block
//! index), with the incarnation that wrote them, or an ESTIMATE marker while the writer is
//! being re-executed. Reads by transaction `j` see the entry of the highest index below `j`.
//!
//! Sharded by key hash: each shard is a mutex over `key → (index → entry)`. Per
//! transaction the memory keeps the keys it last wrote (to replace them atomically and to
//! turn them into estimates on abort) and the reads of its last incarnation (to validate).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use parking_lot::{Mutex, RwLock};

use crate::{apply_delta, Key, ScanBounds, Storage, Value, Write};

/// A transaction incarnation: (block index, incarnation number).
pub(crate) type Version = (usize, u32);

#[derive(Debug, Clone)]
enum Entry {
    Written { incarnation: u32, value: Option<Value> },
    Delta { amount: i64 },
    Estimate,
}

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadResult {
    /// A lower transaction's write.
    Version(Version, Option<Value>),
    /// No lower transaction wrote the key: read storage.
    Storage,
    /// A lower transaction's write is being re-executed.
    Blocked(usize),
    /// Lower transactions added deltas (summed) on top of `base`: a lower write, or
    /// storage (`None`).
    Deltas { base: Option<Option<Value>>, sum: i64 },
}

impl ReadResult {
    /// The value read, resolving deltas on storage; `None` when blocked.
    pub(crate) fn resolve<S: Storage>(&self, key: &[u8], storage: &S) -> Option<Option<Value>> {
        match self {
            ReadResult::Version(_, v) => Some(v.clone()),
            ReadResult::Storage => Some(storage.get(key)),
            ReadResult::Blocked(_) => None,
            ReadResult::Deltas { base, sum } => {
                let base = match base {
                    Some(b) => b.clone(),
                    None => storage.get(key),
                };
                Some(Some(apply_delta(base.as_deref(), *sum)))
            }
        }
    }
}

/// Where a read's value came from, for validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadOrigin {
    Version(Version),
    Storage,
    /// A value resolved from deltas: validated by value.
    Resolved(Option<Value>),
}

const SHARDS: usize = 64;

/// A range scan of one incarnation: what lay below the transaction in the range it
/// covered (`from` up to `stop` inclusive; `None`: to the end of the key space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanRecord {
    pub(crate) from: Key,
    pub(crate) reverse: bool,
    pub(crate) stop: Option<Key>,
    /// The live entries below the transaction in that range, in scan order.
    pub(crate) below: Vec<(Key, Value)>,
}

/// One key's versions, and the highest transaction that read it from below.
#[derive(Debug, Default)]
struct KeyState {
    versions: BTreeMap<usize, Entry>,
    max_reader: Option<usize>,
}

pub(crate) struct MvMemory {
    shards: Vec<Mutex<HashMap<Key, KeyState>>>,
    /// One more than the highest transaction that started a scan (0: none).
    max_scanner: AtomicUsize,
    /// Every key any incarnation wrote during the block (for scans).
    keys: RwLock<std::collections::BTreeSet<Key>>,
    last_written: Vec<Mutex<Vec<Key>>>,
    last_reads: Vec<Mutex<Vec<(Key, ReadOrigin)>>>,
    last_scans: Vec<Mutex<Vec<ScanRecord>>>,
}

fn shard_of(key: &[u8]) -> usize {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() as usize) % SHARDS
}

impl MvMemory {
    pub(crate) fn new(block_size: usize) -> Self {
        MvMemory {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            max_scanner: AtomicUsize::new(0),
            keys: RwLock::new(std::collections::BTreeSet::new()),
            last_written: (0..block_size).map(|_| Mutex::new(Vec::new())).collect(),
            last_reads: (0..block_size).map(|_| Mutex::new(Vec::new())).collect(),
            last_scans: (0..block_size).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// Record an incarnation's reads, scans and writes. Returns true when a higher
    /// transaction may have read a key this incarnation writes and its previous one did
    /// not (the higher ones must then be validated again): a higher reader of that key is
    /// recorded, or a higher transaction has started a scan.
    /// This is the paper's "wrote a new location", narrowed by read markers so that a
    /// conflict-free block is not re-validated after every first execution.
    pub(crate) fn record(
        &self,
        (txn, incarnation): Version,
        reads: Vec<(Key, ReadOrigin)>,
        scans: Vec<ScanRecord>,
        writes: BTreeMap<Key, Write>,
    ) -> bool {
        *self.last_reads[txn].lock() = reads;
        *self.last_scans[txn].lock() = scans;
        let mut affects = false;
        let unseen: Vec<&Key> = {
            let keys = self.keys.read();
            writes.keys().filter(|k| !keys.contains(*k)).collect()
        };
        if !unseen.is_empty() {
            let mut keys = self.keys.write();
            keys.extend(unseen.into_iter().cloned());
            // Under the index's write lock: a scan registers under its read lock before
            // it walks the index, so it either is seen here or sees these keys.
            affects |= self.max_scanner.load(SeqCst) > txn + 1;
        }
        let mut prev = self.last_written[txn].lock();
        for (k, v) in &writes {
            let entry = match v {
                Write::Value(value) => Entry::Written { incarnation, value: value.clone() },
                Write::Delta(amount) => Entry::Delta { amount: *amount },
            };
            let new_here = !prev.contains(k);
            {
                let mut shard = self.shards[shard_of(k)].lock();
                let state = shard.entry(k.clone()).or_default();
                state.versions.insert(txn, entry);
                affects |= new_here && state.max_reader.is_some_and(|r| r > txn);
            }
            // A higher scan may have passed this key's place before the key entered the
            // index (another transaction put it there later): checked after the entry is
            // in place, so a scan registered later reads the entry instead.
            affects |= new_here && self.max_scanner.load(SeqCst) > txn + 1;
        }
        for k in prev.iter().filter(|k| !writes.contains_key(*k)) {
            if let Some(state) = self.shards[shard_of(k)].lock().get_mut(k) {
                state.versions.remove(&txn);
            }
        }
        *prev = writes.into_keys().collect();
        affects
    }

    /// Note that `txn` starts a scan (see [`MvMemory::record`]).
    pub(crate) fn note_scan(&self, txn: usize) {
        let _index = self.keys.read();
        self.max_scanner.fetch_max(txn + 1, SeqCst);
    }

    /// Mark every write of `txn`'s last incarnation as an estimate.
    pub(crate) fn convert_writes_to_estimates(&self, txn: usize) {
        for k in self.last_written[txn].lock().iter() {
            if let Some(state) = self.shards[shard_of(k)].lock().get_mut(k) {
                state.versions.insert(txn, Entry::Estimate);
            }
        }
    }

    /// What transaction `txn` reads under `key`.
    /// The read is marked on the key (under the same lock), so that a lower transaction
    /// writing the key later knows a higher one may have read past it.
    pub(crate) fn read(&self, key: &[u8], txn: usize) -> ReadResult {
        let mut shard = self.shards[shard_of(key)].lock();
        let state = match shard.get_mut(key) {
            Some(s) => s,
            None => shard.entry(key.to_vec()).or_default(),
        };
        state.max_reader = Some(state.max_reader.map_or(txn, |r| r.max(txn)));
        let mut sum: Option<i64> = None;
        for (&idx, entry) in state.versions.range(..txn).rev() {
            match entry {
                Entry::Estimate => return ReadResult::Blocked(idx),
                Entry::Delta { amount } => sum = Some(sum.unwrap_or(0).wrapping_add(*amount)),
                Entry::Written { incarnation, value } => {
                    return match sum {
                        None => ReadResult::Version((idx, *incarnation), value.clone()),
                        Some(sum) => ReadResult::Deltas { base: Some(value.clone()), sum },
                    }
                }
            }
        }
        match sum {
            None => ReadResult::Storage,
            Some(sum) => ReadResult::Deltas { base: None, sum },
        }
    }

    /// The next key written during the block within `bounds`, in scan order.
    pub(crate) fn next_key(&self, bounds: &ScanBounds<'_>) -> Option<Key> {
        bounds.first_of(self.keys.read().range::<[u8], _>(bounds.range())).cloned()
    }

    /// The live entries below `txn` in the part of a scan from `from` up to `stop`, or
    /// `None` if a lower transaction's write in it is an estimate.
    fn replay<S: Storage>(
        &self,
        txn: usize,
        scan: &ScanRecord,
        storage: &S,
    ) -> Option<Vec<(Key, Value)>> {
        let mut got = Vec::new();
        let mut last: Option<Key> = None;
        loop {
            let b = ScanBounds { from: &scan.from, last: last.as_deref(), reverse: scan.reverse };
            let Some(k) = b.earlier(self.next_key(&b), storage.next_key(&b)) else { break };
            if !b.covers(&k, scan.stop.as_deref()) {
                break;
            }
            if let Some(v) = self.read(&k, txn).resolve(&k, storage)? {
                got.push((k.clone(), v));
            }
            last = Some(k);
        }
        Some(got)
    }

    /// Whether every read and scan of `txn`'s last incarnation would still see the same.
    pub(crate) fn validate_read_set<S: Storage>(&self, txn: usize, storage: &S) -> bool {
        let scans_ok = self.last_scans[txn]
            .lock()
            .iter()
            .all(|scan| self.replay(txn, scan, storage).as_ref() == Some(&scan.below));
        if !scans_ok {
            return false;
        }
        let reads = self.last_reads[txn].lock();
        reads.iter().all(|(k, origin)| match (self.read(k, txn), origin) {
            (ReadResult::Storage, ReadOrigin::Storage) => true,
            (ReadResult::Version(v, _), ReadOrigin::Version(w)) => v == *w,
            (r @ ReadResult::Deltas { .. }, ReadOrigin::Resolved(value)) => {
                r.resolve(k, storage).as_ref() == Some(value)
            }
            _ => false,
        })
    }

    /// The final value of every written key, deltas resolved in block order.
    pub(crate) fn snapshot<S: Storage>(&self, storage: &S) -> BTreeMap<Key, Option<Value>> {
        let mut out = BTreeMap::new();
        for shard in &self.shards {
            for (k, state) in shard.lock().iter() {
                let mut value: Option<Option<Value>> = None;
                for entry in state.versions.values() {
                    value = Some(match entry {
                        Entry::Written { value, .. } => value.clone(),
                        Entry::Delta { amount } => {
                            let base = value.unwrap_or_else(|| storage.get(k));
                            Some(apply_delta(base.as_deref(), *amount))
                        }
                        Entry::Estimate => {
                            unreachable!("no estimates remain once the block is done")
                        }
                    });
                }
                if let Some(v) = value {
                    out.insert(k.clone(), v);
                }
            }
        }
        out
    }
}
