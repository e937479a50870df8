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

use crate::{Key, Value};

/// A transaction incarnation: (block index, incarnation number).
pub(crate) type Version = (usize, u32);

#[derive(Debug, Clone)]
enum Entry {
    Written { incarnation: u32, value: Option<Value> },
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
}

/// Where a read's value came from, for validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadOrigin {
    Version(Version),
    Storage,
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
        writes: BTreeMap<Key, Option<Value>>,
    ) -> bool {
        *self.last_reads[txn].lock() = reads;
        let mut prev = self.last_written[txn].lock();
        let mut wrote_new = false;
        for (k, v) in &writes {
            let mut shard = self.shards[shard_of(k)].lock();
            shard
                .entry(k.clone())
                .or_default()
                .insert(txn, Entry::Written { incarnation, value: v.clone() });
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
        match versions.range(..txn).next_back() {
            None => ReadResult::Storage,
            Some((&idx, Entry::Estimate)) => ReadResult::Blocked(idx),
            Some((&idx, Entry::Written { incarnation, value })) => {
                ReadResult::Version((idx, *incarnation), value.clone())
            }
        }
    }

    /// Whether every read of `txn`'s last incarnation would still see the same origin.
    pub(crate) fn validate_read_set(&self, txn: usize) -> bool {
        let reads = self.last_reads[txn].lock();
        reads.iter().all(|(k, origin)| match (self.read(k, txn), origin) {
            (ReadResult::Storage, ReadOrigin::Storage) => true,
            (ReadResult::Version(v, _), ReadOrigin::Version(w)) => v == *w,
            _ => false,
        })
    }

    /// The final value of every written key: the entry of the highest writer.
    pub(crate) fn snapshot(&self) -> BTreeMap<Key, Option<Value>> {
        let mut out = BTreeMap::new();
        for shard in &self.shards {
            for (k, versions) in shard.lock().iter() {
                if let Some((_, Entry::Written { value, .. })) = versions.iter().next_back() {
                    out.insert(k.clone(), value.clone());
                }
            }
        }
        out
    }
}
