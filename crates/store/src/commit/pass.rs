//! One trie's share of a commit: the update pass over a pre-state that serves nodes from the
//! resident trie first, then the layers, caches and RocksDB ([`StorePre`]), with the nodes
//! below the resident trie that the walk will most likely read fetched in one batch first;
//! beside each walk, on the pool, the trie's flat changes and reverse diff.

use std::sync::Arc;

use parking_lot::Mutex;
use rayon::prelude::*;
use rocksdb::DBRawIterator;
use rustc_hash::FxHashMap;
use state::{ChangeSet, KeyValue, TrieId, H256};
use trie::{Change, PreState};

use crate::error::StoreError;
use crate::history::ReverseDiff;
use crate::keys::{node_key, node_key_into, Column};
use crate::rocks::{leaf_scan_iter, scans_one_prefix};
use crate::statedb::StateDb;
use crate::tiers::layer::{Entry, Layer};
use crate::tiers::reader::{leaf_under_in, Reader};
use crate::tiers::resident::{OldNode, Resident};

/// Nodes a walk loaded for the resident trie to admit: node key and stored value.
pub(super) type LoadedNodes = Vec<(Vec<u8>, Arc<[u8]>)>;

/// Nodes below the resident trie that a walk read or prefetched, by node key, with their
/// values before the block (`None`: no node there). The recent window's capture of the
/// nodes a block replaces takes them from here before it reads any from the store.
pub(super) type ReadBelow = FxHashMap<Vec<u8>, Option<Arc<[u8]>>>;

/// What the walks of a block read, for the resident trie and the recent window.
pub(crate) struct Walked {
    pub(super) loaded: LoadedNodes,
    pub(super) below: ReadBelow,
}

/// One trie's share of a commit.
pub(crate) struct TrieCommit {
    pub(crate) trie: TrieId,
    pub(super) old_root: H256,
    pub(crate) root: H256,
    /// `flat` changes in key order.
    pub(super) flat: Vec<Entry>,
    /// Old values of the changed keys: this trie's part of the reverse diff.
    pub(super) undo: ReverseDiff,
    /// Node writes by node key.
    pub(crate) nodes: Vec<Entry>,
    pub(crate) loaded: LoadedNodes,
    /// The nodes its walk read below the resident trie (empty unless asked for).
    pub(super) below: ReadBelow,
    pub(super) hashes: u64,
    pub(super) leaf_scans: u64,
    pub(super) resident_hits: u64,
    pub(super) resident_misses: u64,
}

/// The pre-state one trie's update reads: resident nodes, then the store.
struct StorePre<'a> {
    reader: &'a Reader,
    resident: &'a Resident,
    trie: TrieId,
    /// The layer stack when the pass began; `flat` iterators are created after it.
    layers: &'a [Arc<Layer>],
    /// `flat` iterators for leaf scans, reused (creating one costs more than a seek): in
    /// total order, and in prefix mode ([`leaf_scan_iter`]).
    iters: [Mutex<Vec<DBRawIterator<'a>>>; 2],
    loaded: Mutex<LoadedNodes>,
    /// Nodes below the resident trie read in one batch before the walk ([`prefetch_keys`]).
    prefetched: ReadBelow,
    /// Nodes below the resident trie the walk read one by one (not prefetched), kept only
    /// when `keep_reads`.
    read: Mutex<Vec<OldNode>>,
    /// Whether the commit wants the nodes read below the resident trie (the recent window's
    /// old nodes); without it they are dropped with the walk.
    keep_reads: bool,
}

/// The node keys below the resident trie that the walk will most likely read: each changed
/// key's paths at the resident depth limit and one nibble deeper (with every level above
/// the limit resident, a block of random keys reaches a stored node at the limit on nearly
/// every path, and one a level deeper on about half), less those the resident trie's filter
/// of deeper keys rules out (the walk takes a leaf there without a read). Sorted, without
/// repeats. Empty when the resident trie keeps every level.
fn prefetch_keys(trie: &TrieId, resident: &Resident, changes: &[Change<'_>]) -> Vec<Vec<u8>> {
    let Some(limit) = resident.floor() else {
        return Vec::new();
    };
    let mut nibbles = Vec::with_capacity(64);
    let mut keys = Vec::with_capacity(changes.len() * 2);
    for c in changes {
        nibbles.clear();
        nibbles.extend(c.key.iter().flat_map(|b| [b >> 4, b & 0x0f]));
        for depth in [usize::from(limit), usize::from(limit) + 1] {
            if depth < nibbles.len() {
                let key = node_key(trie, &nibbles[..depth]);
                if resident.may_hold_deep(&key) {
                    keys.push(key);
                }
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

thread_local! {
    /// A node key buffer per thread: the walk looks up a node key per node it visits.
    static NODE_KEY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl PreState for StorePre<'_> {
    type Error = StoreError;

    fn node_in_memory(&self, path: &[u8]) -> Option<Option<&[u8]>> {
        NODE_KEY.with_borrow_mut(|key| {
            node_key_into(&self.trie, path, key);
            self.resident.lookup(key).map(|v| v.map(|v| &v[..]))
        })
    }

    fn node(&self, path: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        let key = node_key(&self.trie, path);
        if let Some(v) = self.resident.get(&key) {
            return Ok(Some(v.clone()));
        }
        let (v, fresh) = match self.prefetched.get(&key) {
            Some(v) => (v.clone(), false),
            None => (self.reader.read(Column::Nodes, &key)?, true),
        };
        if self.resident.keeps(&key) {
            if let Some(v) = &v {
                self.loaded.lock().push((key, v.clone()));
            }
        } else if fresh && self.keep_reads {
            self.read.lock().push((key, v.clone()));
        }
        Ok(v)
    }

    fn leaf_under(&self, path: &[u8]) -> Result<Option<KeyValue>, StoreError> {
        let by_prefix = scans_one_prefix(&self.trie, path);
        let pool = &self.iters[usize::from(by_prefix)];
        let mut iter = match pool.lock().pop() {
            Some(iter) => iter,
            None => leaf_scan_iter(&self.reader.db, by_prefix)?,
        };
        let found = leaf_under_in(self.layers, &mut iter, &self.trie, path);
        pool.lock().push(iter);
        let prefix = self.trie.prefix_len();
        Ok(found?.map(|(k, v)| (k[prefix..].to_vec(), v.to_vec())))
    }
}

/// A trie's `flat` changes (its keys `flat_keys`, in the changes' order) and its part of
/// the reverse diff: every changed key's old value.
fn flat_and_undo(list: &[Change<'_>], flat_keys: Vec<Vec<u8>>) -> (Vec<Entry>, ReverseDiff) {
    let bytes = list.iter().zip(&flat_keys).map(|(c, k)| ReverseDiff::entry_len(k, c.old));
    let mut undo = ReverseDiff::with_capacity(bytes.sum());
    let mut flat = Vec::with_capacity(list.len());
    for (c, fk) in list.iter().zip(flat_keys) {
        undo.record_ref(Column::Flat, &fk, c.old);
        flat.push((fk, c.new.map(Arc::from)));
    }
    (flat, undo)
}

impl StateDb {
    /// Update every touched trie in parallel. With `keep_reads`, each trie's result holds
    /// the nodes its walk read below the resident trie ([`TrieCommit`]'s `below`).
    pub(crate) fn update_tries(
        &self,
        changes: &ChangeSet,
        keys: Vec<Vec<u8>>,
        olds: &[Option<&[u8]>],
        verify_old: bool,
        keep_reads: bool,
    ) -> Result<Vec<TrieCommit>, StoreError> {
        let mut jobs = Vec::with_capacity(changes.len());
        let mut at = 0;
        let mut keys = keys.into_iter();
        for (trie, kv) in changes {
            let n = kv.len();
            let trie_keys: Vec<Vec<u8>> = keys.by_ref().take(n).collect();
            jobs.push((*trie, kv, trie_keys, &olds[at..at + n]));
            at += n;
        }
        // Iterators for leaf scans are created after this snapshot (see `leaf_under_in`).
        let layers: Vec<Arc<Layer>> = self.reader().layers.read().clone();
        jobs.into_par_iter()
            .map(|(trie, kv, keys, olds)| {
                let changes: Vec<(Change<'_>, Vec<u8>)> = kv
                    .iter()
                    .zip(keys)
                    .zip(olds)
                    .filter_map(|(((k, v), fk), &old)| {
                        let new = v.as_deref().filter(|v| !v.is_empty());
                        (old != new).then_some((Change { key: k, old, new }, fk))
                    })
                    .collect();
                self.update_one(trie, &layers, changes, verify_old, keep_reads)
            })
            .collect()
    }

    /// One trie's update: the walk, and beside it on the pool the trie's flat changes and
    /// reverse diff (which need only the changes), so that neither waits for the other.
    fn update_one(
        &self,
        trie: TrieId,
        layers: &[Arc<Layer>],
        changes: Vec<(Change<'_>, Vec<u8>)>,
        verify_old: bool,
        keep_reads: bool,
    ) -> Result<TrieCommit, StoreError> {
        let old_root = self.stored_root(&trie)?;
        let (list, flat_keys): (Vec<Change<'_>>, Vec<Vec<u8>>) = changes.into_iter().unzip();
        let wanted = prefetch_keys(&trie, &self.resident, &list);
        let values = self.reader().read_batch(Column::Nodes, &wanted)?;
        let pre = StorePre {
            reader: self.reader(),
            resident: &self.resident,
            trie,
            layers,
            iters: [Mutex::new(Vec::new()), Mutex::new(Vec::new())],
            loaded: Mutex::new(Vec::new()),
            prefetched: wanted.into_iter().zip(values).collect(),
            read: Mutex::new(Vec::new()),
            keep_reads,
        };
        let layout = self.reader().layout;
        let (updated, (flat, undo)) = rayon::join(
            || crate::layout::update(layout, trie, &pre, old_root, &list, verify_old),
            || flat_and_undo(&list, flat_keys),
        );
        let updated = updated?;
        let nodes = updated.writes.into_par_iter().map(|(p, v)| (node_key(&trie, &p), v)).collect();
        Ok(TrieCommit {
            trie,
            old_root,
            root: updated.root,
            flat,
            undo,
            nodes,
            loaded: pre.loaded.into_inner(),
            below: match keep_reads {
                true => {
                    let mut below = pre.prefetched;
                    below.extend(pre.read.into_inner());
                    below
                }
                false => ReadBelow::default(),
            },
            hashes: updated.hashes,
            leaf_scans: updated.leaf_scans,
            resident_hits: updated.known,
            resident_misses: updated.probes,
        })
    }
}
