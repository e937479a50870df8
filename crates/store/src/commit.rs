//! The commit path: a block's change set becomes the new roots and one immutable layer.
//!
//! 1. The old value of every changed key is read in one batch (layers, then sorted RocksDB
//!    MultiGets on every thread): the reverse diff needs them, and they tell the walk which
//!    keys exist, so that a leaf is recognised without a probe.
//! 2. Every touched trie is updated by one sorted pass ([`trie::update_trie`]) over a pre-state
//!    that serves nodes from the resident trie first ([`crate::resident`]), then the layers,
//!    caches and RocksDB; tries run in parallel, and the big ones fan out by child. Beside
//!    each walk, on the pool, the trie's flat changes and reverse diff are built.
//! 3. The layer is assembled from sorted vectors (flat changes in key order as the change
//!    set gives them, node writes sorted once), with the encoded reverse diff.
//! 4. The layer is published (its keys invalidated in the caches, the `Arc` pushed) and the
//!    resident trie takes the node writes and the nodes the walk loaded.
//!
//! Cost: the keccak calls of the new nodes, one decode per node the walk visits, one
//! batched read per changed key; no cache admission, no copy of a node into a second map.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use rayon::prelude::*;
use rocksdb::DBRawIterator;
use rustc_hash::FxHashMap;
use state::{ChangeSet, KeyValue, TrieId, H256};
use trie::{Change, PreState};

use crate::db::{leaf_scan_iter, scans_one_prefix};
use crate::error::{CommitError, Corruption, StoreError};
use crate::history::ReverseDiff;
use crate::keys::{encode_head, flat_key, node_key, node_key_into, root_key, Column, META_HEAD};
use crate::layer::{touch_counts, ChangeMap, Entry, Layer};
use crate::recent::RecentBlock;
use crate::resident::{OldNode, Resident};
use crate::statedb::{CommitInfo, CommitTimings, StateDb};
use crate::view::{leaf_under_in, Reader, Values};

/// Nodes a walk loaded for the resident trie to admit: node key and stored value.
type LoadedNodes = Vec<(Vec<u8>, Arc<[u8]>)>;

/// Nodes below the resident trie that a walk read or prefetched, by node key, with their
/// values before the block (`None`: no node there). The recent window's capture of the
/// nodes a block replaces takes them from here before it reads any from the store.
type ReadBelow = FxHashMap<Vec<u8>, Option<Arc<[u8]>>>;

/// What the walks of a block read, for the resident trie and the recent window.
pub(crate) struct Walked {
    loaded: LoadedNodes,
    below: ReadBelow,
}

/// Every changed key's flat key, in the change set's order.
pub(crate) fn flat_keys(changes: &ChangeSet) -> Result<Vec<Vec<u8>>, StoreError> {
    changes.iter().flat_map(|(t, kv)| kv.keys().map(move |k| flat_key(t, k))).collect()
}

/// One trie's share of a commit.
pub(crate) struct TrieCommit {
    pub(crate) trie: TrieId,
    old_root: H256,
    pub(crate) root: H256,
    /// `flat` changes in key order.
    flat: Vec<Entry>,
    /// Old values of the changed keys: this trie's part of the reverse diff.
    undo: ReverseDiff,
    /// Node writes by node key.
    pub(crate) nodes: Vec<Entry>,
    pub(crate) loaded: LoadedNodes,
    /// The nodes its walk read below the resident trie (empty unless asked for).
    below: ReadBelow,
    hashes: u64,
    leaf_scans: u64,
    resident_hits: u64,
    resident_misses: u64,
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

/// Every changed key's value before the block from the caller's `prior` (in the change
/// set's order; empty values are absent), by one merge of the two sorted maps.
fn priors<'p>(
    changes: &ChangeSet,
    prior: &'p ChangeSet,
) -> Result<Vec<Option<&'p [u8]>>, CommitError> {
    let mut olds = Vec::with_capacity(changes.values().map(|kv| kv.len()).sum());
    for (trie, kv) in changes {
        let mut known = prior.get(trie).map(|p| p.iter().peekable());
        for k in kv.keys() {
            let found = known.as_mut().and_then(|p| {
                while p.next_if(|(pk, _)| *pk < k).is_some() {}
                p.next_if(|(pk, _)| *pk == k)
            });
            let (_, old) =
                found.ok_or_else(|| CommitError::MissingPrior { trie: *trie, key: k.clone() })?;
            olds.push(old.as_deref().filter(|v| !v.is_empty()));
        }
    }
    Ok(olds)
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
    /// Apply one block's changes, compute the new roots, and queue the block for
    /// persistence. Returns once the block is an in-memory layer (see [`StateDb::flush`]).
    /// Nothing of the block is visible if it fails. The keys' old values (for the reverse
    /// diff and the walk) are read here; [`StateDb::commit_with_prior`] takes them from the
    /// caller instead.
    pub fn commit(&mut self, changes: &ChangeSet) -> Result<CommitInfo, CommitError> {
        self.commit_reading(changes, None)
    }

    /// [`StateDb::commit`] that publishes the block only if its new main-trie root is
    /// `expected` (a block header's post-state root): on a mismatch nothing of the block is
    /// visible or queued, [`CommitError::RootMismatch`], and the store stays at its head.
    pub fn commit_expecting(
        &mut self,
        changes: &ChangeSet,
        expected: H256,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_reading(changes, Some(expected))
    }

    /// A commit that reads the changed keys' old values itself.
    fn commit_reading(
        &mut self,
        changes: &ChangeSet,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        self.prepare(changes)?;
        let start = Instant::now();
        let keys = flat_keys(changes)?;
        let values = self.reader().read_batch(Column::Flat, &keys)?;
        let olds: Vec<Option<&[u8]>> = values.iter().map(|v| v.as_deref()).collect();
        let read = start.elapsed();
        let mut info = self.commit_with_olds(changes, keys, &olds, false, expected)?;
        info.timings.read_old_values = read;
        Ok(info)
    }

    /// [`StateDb::commit`] with every changed key's value before the block given by the
    /// caller (`prior`: per trie, key → old value or `None` for absent), as an executor that
    /// read them has them: the commit reads nothing but the nodes it rewrites. Every
    /// changed key needs a prior value ([`CommitError::MissingPrior`]). A prior value the
    /// trie contradicts (a key claimed absent that exists, present that does not, or with
    /// another value) is [`CommitError::PriorMismatch`], and nothing is committed; claims
    /// about keys whose value does not change are not checked (they change nothing).
    pub fn commit_with_prior(
        &mut self,
        changes: &ChangeSet,
        prior: &ChangeSet,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_prior(changes, prior, None)
    }

    /// [`StateDb::commit_with_prior`] that publishes only if the new main-trie root is
    /// `expected` (see [`StateDb::commit_expecting`]).
    pub fn commit_with_prior_expecting(
        &mut self,
        changes: &ChangeSet,
        prior: &ChangeSet,
        expected: H256,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_prior(changes, prior, Some(expected))
    }

    fn commit_prior(
        &mut self,
        changes: &ChangeSet,
        prior: &ChangeSet,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        self.prepare(changes)?;
        let start = Instant::now();
        let keys = flat_keys(changes)?;
        let olds = priors(changes, prior)?;
        let gathered = start.elapsed();
        let info =
            self.commit_with_olds(changes, keys, &olds, true, expected).map_err(|e| match e {
                CommitError::Store(s) => match s.corruption() {
                    Some(Corruption::OldValue { trie, key }) => {
                        CommitError::PriorMismatch { trie: *trie, key: key.clone() }
                    }
                    _ => CommitError::Store(s),
                },
                e => e,
            });
        info.map(|mut info| {
            info.timings.read_old_values = gathered;
            info
        })
    }

    /// The checks before any work, and the resident trie filled if it is not.
    fn prepare(&mut self, changes: &ChangeSet) -> Result<(), CommitError> {
        self.check_poison()?;
        self.check_complete()?;
        self.check_keys(changes)?;
        if !self.resident.is_complete() {
            let layers = self.reader().layers.read().clone();
            let db = self.reader().db.clone();
            self.resident.fill(&db, &layers)?;
        }
        Ok(())
    }

    /// The commit once the old values are known (`olds[i]` is `keys[i]`'s, in the change
    /// set's order).
    fn commit_with_olds(
        &mut self,
        changes: &ChangeSet,
        keys: Vec<Vec<u8>>,
        olds: &[Option<&[u8]>],
        verify_old: bool,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        let (head_number, head_root) = (self.head_number(), self.head_root());
        let number = head_number
            .checked_add(1)
            .ok_or(StoreError::from(Corruption::HeadNumber { number: head_number }))?;
        let mut timings = CommitTimings::default();

        let start = Instant::now();
        let keep_reads = self.shared().recent.read().enabled();
        let tries = self.update_tries(changes, keys, olds, verify_old, keep_reads)?;
        timings.trie_updates = start.elapsed();

        let start = Instant::now();
        let (layer, walked, info) = self.assemble(number, head_root, tries)?;
        timings.assemble = start.elapsed();
        if let Some(expected) = expected.filter(|e| *e != info.root) {
            return Err(CommitError::RootMismatch { expected, computed: info.root });
        }

        let start = Instant::now();
        // The resident trie takes the block before it is published: only the committer
        // reads it, and a failed publish poisons the store.
        self.apply_resident(&layer, walked)?;
        let layer = self.push_layer(layer).inspect_err(|_| {
            self.shared().recent.write().truncate_above(head_number);
        })?;
        timings.publish = start.elapsed();
        self.set_head_in_memory(number, layer.root);
        Ok(CommitInfo { timings, ..info })
    }

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

    /// The block's layer from its tries' results, the nodes to admit, and the commit info.
    fn assemble(
        &mut self,
        number: u64,
        head_root: H256,
        tries: Vec<TrieCommit>,
    ) -> Result<(Layer, Walked, CommitInfo), StoreError> {
        let mut rev = ReverseDiff::new();
        let mut flat = Vec::new();
        let mut nodes = Vec::new();
        let mut meta = Vec::new();
        let mut loaded = Vec::new();
        let mut below = ReadBelow::default();
        let mut roots = Vec::with_capacity(tries.len());
        let (mut hashes, mut leaf_scans, mut hits, mut misses) = (0, 0, 0, 0);
        let mut main_root = head_root;
        for mut t in tries {
            rev.append(t.undo);
            flat.extend(t.flat);
            nodes.extend(t.nodes);
            loaded.extend(t.loaded);
            if below.len() < t.below.len() {
                std::mem::swap(&mut below, &mut t.below);
            }
            below.extend(t.below);
            if t.trie == TrieId::Main {
                main_root = t.root;
            } else if t.root != t.old_root {
                let key = root_key(&t.trie);
                let new =
                    (t.root != self.layout().empty_root()).then(|| Arc::from(t.root.0.as_slice()));
                rev.record(Column::Meta, key.clone(), self.read_meta(&key)?);
                meta.push((key, new));
            }
            roots.push((t.trie, t.root));
            hashes += t.hashes;
            leaf_scans += t.leaf_scans;
            hits += t.resident_hits;
            misses += t.resident_misses;
        }
        self.resident.count(hits, misses);
        let head = (self.head_number(), head_root);
        rev.record(Column::Meta, META_HEAD.to_vec(), Some(encode_head(head.0, &head.1)));
        meta.push((META_HEAD.to_vec(), Some(Arc::from(encode_head(number, &main_root)))));
        let mut layer = Layer {
            number,
            root: main_root,
            flat: ChangeMap::from_sorted(flat),
            nodes: ChangeMap::from_writes(nodes),
            meta: ChangeMap::from_writes(meta),
            history: rev.encode(),
            prune: number.checked_sub(self.config().layers.history_depth),
            bytes: 0,
            lag_base: None,
        };
        layer.measure();
        let info = CommitInfo {
            number,
            root: main_root,
            roots,
            hashes,
            leaf_scans,
            timings: CommitTimings::default(),
        };
        Ok((layer, Walked { loaded, below }, info))
    }

    /// The resident trie takes the block's node writes and the nodes its walk loaded; with
    /// the recent window on, the nodes the writes replace go to the window with the block's
    /// old values, before the block is published (see `recent.rs`): flat and meta from the
    /// reverse diff, nodes from what the resident trie held and, below its levels, what the
    /// walk read (every node it rewrote or deleted) and one batched read of the rest (nodes
    /// written where the walk read nothing, most of them new). The resident update runs
    /// beside the diff and the read.
    fn apply_resident(&mut self, layer: &Layer, walked: Walked) -> Result<(), StoreError> {
        let Walked { loaded, mut below } = walked;
        // The apply clones every written node's `Arc`.
        touch_counts(layer.nodes.iter());
        let writes = layer.nodes.iter().map(|(k, v)| (k.as_slice(), v.as_ref()));
        if !self.shared().recent.read().enabled() {
            self.resident.apply(loaded, writes);
            return Ok(());
        }
        // The old nodes are keyed exactly like the layer's node writes (each written key's
        // node before the block, `None` where there was none), so they are filled by
        // position and take the layer's keys in its order, with no sort.
        let mut old: Values = vec![None; layer.nodes.len()];
        let mut unknown = Vec::new();
        for (at, (k, _)) in layer.nodes.iter().enumerate() {
            if self.resident.keeps(k) {
                continue;
            }
            match below.remove(k) {
                Some(node) => old[at] = node,
                None => unknown.push(at),
            }
        }
        let (resident, shared) = self.resident_and_shared();
        let number = layer.number;
        let rest = || -> Result<(RecentBlock, ChangeMap, Values), StoreError> {
            drop(below);
            let entries = ReverseDiff::decode(&layer.history)
                .map_err(|source| Corruption::History { number, source })?;
            let block = RecentBlock::from_reverse(number, entries)
                .ok_or(Corruption::HistoryHead { number })?;
            let values = match unknown.is_empty() {
                true => Vec::new(),
                false => {
                    let keys: Vec<Vec<u8>> =
                        unknown.iter().map(|&at| layer.nodes.key_at(at).to_vec()).collect();
                    shared.reader.read_batch(Column::Nodes, &keys)?
                }
            };
            Ok((block, ChangeMap::keys_of(&layer.nodes), values))
        };
        let (captured, rest) = rayon::join(|| resident.apply_capturing(loaded, writes), rest);
        let (mut block, keys, values) = rest?;
        for (at, node) in unknown.into_iter().zip(values).chain(captured) {
            old[at] = node;
        }
        block.set_old_nodes(keys.with_values(old));
        shared.recent.write().push(block);
        Ok(())
    }

    fn read_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.reader().read(Column::Meta, key)?.map(|v| v.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn set(entries: &[(&[u8], Option<&[u8]>)]) -> ChangeSet {
        let kv: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            entries.iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect();
        ChangeSet::from([(TrieId::Main, kv)])
    }

    #[test]
    fn priors_merge_the_sorted_maps() {
        let changes = set(&[(b"b", Some(b"1")), (b"d", None), (b"f", Some(b"2"))]);
        // Extra claims before, between and after the changed keys are skipped; an empty
        // value is absent.
        let prior = set(&[
            (b"a", Some(b"x")),
            (b"b", Some(b"old")),
            (b"c", None),
            (b"d", Some(b"")),
            (b"e", Some(b"y")),
            (b"f", None),
            (b"g", Some(b"z")),
        ]);
        let olds = priors(&changes, &prior).unwrap();
        assert_eq!(olds, vec![Some(b"old".as_slice()), None, None]);
        let missing = set(&[(b"b", Some(b"old")), (b"f", None)]);
        let e = priors(&changes, &missing).unwrap_err();
        assert!(matches!(e, CommitError::MissingPrior { ref key, .. } if key == b"d"), "{e:?}");
        let e = priors(&changes, &ChangeSet::new()).unwrap_err();
        assert!(matches!(e, CommitError::MissingPrior { ref key, .. } if key == b"b"), "{e:?}");
    }
}
