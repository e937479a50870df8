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

use parking_lot::Mutex;

use crate::{apply_delta, Key, Storage, Value, Write};

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

pub(crate) struct MvMemory {
    shards: Vec<Mutex<HashMap<Key, BTreeMap<usize, Entry>>>>,
    last_written: Vec<Mutex<Vec<Key>>>,
    last_reads: Vec<Mutex<Vec<(Key, ReadOrigin)>>>,
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
            last_written: (0..block_size).map(|_| Mutex::new(Vec::new())).collect(),
            last_reads: (0..block_size).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// Record an incarnation's reads and writes; true when it wrote a key its previous
    /// incarnation did not (later transactions must then be validated again).
    pub(crate) fn record(
        &self,
        (txn, incarnation): Version,
        reads: Vec<(Key, ReadOrigin)>,
        writes: BTreeMap<Key, Write>,
    ) -> bool {
        *self.last_reads[txn].lock() = reads;
        let mut prev = self.last_written[txn].lock();
        let mut wrote_new = false;
        for (k, v) in &writes {
            let mut shard = self.shards[shard_of(k)].lock();
            let entry = match v {
                Write::Value(value) => Entry::Written { incarnation, value: value.clone() },
                Write::Delta(amount) => Entry::Delta { amount: *amount },
            };
            shard.entry(k.clone()).or_default().insert(txn, entry);
            if !prev.contains(k) {
                wrote_new = true;
            }
        }
        for k in prev.iter().filter(|k| !writes.contains_key(*k)) {
            if let Some(versions) = self.shards[shard_of(k)].lock().get_mut(k) {
                versions.remove(&txn);
            }
        }
        *prev = writes.into_keys().collect();
        wrote_new
    }

    /// Mark every write of `txn`'s last incarnation as an estimate.
    pub(crate) fn convert_writes_to_estimates(&self, txn: usize) {
        for k in self.last_written[txn].lock().iter() {
            if let Some(versions) = self.shards[shard_of(k)].lock().get_mut(k) {
                versions.insert(txn, Entry::Estimate);
            }
        }
    }

    /// What transaction `txn` reads under `key`.
    pub(crate) fn read(&self, key: &[u8], txn: usize) -> ReadResult {
        let shard = self.shards[shard_of(key)].lock();
        let Some(versions) = shard.get(key) else { return ReadResult::Storage };
        let mut sum: Option<i64> = None;
        for (&idx, entry) in versions.range(..txn).rev() {
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

    /// Whether every read of `txn`'s last incarnation would still see the same thing.
    pub(crate) fn validate_read_set<S: Storage>(&self, txn: usize, storage: &S) -> bool {
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
            for (k, versions) in shard.lock().iter() {
                if versions.is_empty() {
                    continue;
                }
                let mut value: Option<Option<Value>> = None;
                for entry in versions.values() {
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
