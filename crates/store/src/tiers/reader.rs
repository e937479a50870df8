//! Reads through the byte-bounded caches, then the layer stack (newest diff layer first),
//! then RocksDB (the read order of `docs/design.md`, "Store"). Also the [`NodeSource`] the
//! mutable trie loads nodes from, which rebuilds leaves from flat state (leaves are never
//! stored as nodes); its load order ([`load_node`], [`load_node_for_key`]) is the one the
//! block views of `read/at.rs` load through too.
//!
//! Invariant: every cached entry is the newest value of its key. A read holds the layer
//! lock (shared) from its first probe to its cache admission, and a commit, as it pushes a
//! layer, invalidates the cache entries of the layer's keys under the same lock (exclusive);
//! so a value read from disk is never admitted after a newer layer changed it, and the
//! caches can be asked before the layers.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use rayon::prelude::*;
use rocksdb::{DBRawIterator, DB};
use state::{TrieId, H256};
use trie::{LayoutName, NodeSource, SourceError};

use crate::error::{Corruption, StoreError};
use crate::keys::{
    cf, flat_key, flat_range_for_path, node_key, Column, CF_CODE, CF_FLAT, CF_META, CF_NODES,
};
use crate::rocks::{leaf_scan_iter, scans_one_prefix};
use crate::tiers::cache::ByteCache;
use crate::tiers::layer::{KeyProbe, Layer};

/// A live `flat` entry: its full flat key and its value.
type FlatPair = (Vec<u8>, Arc<[u8]>);

/// Values of a batch of keys, in order (`None`: absent).
pub(crate) type Values = Vec<Option<Arc<[u8]>>>;

/// Smallest share of a batch of flat keys one thread reads.
const BATCH_READ_CHUNK_MIN: usize = 256;

/// The shared read state of a store.
pub(crate) struct Reader {
    pub(crate) db: Arc<DB>,
    /// The layout of every trie in the database.
    pub(crate) layout: LayoutName,
    pub(crate) layers: RwLock<Vec<Arc<Layer>>>,
    pub(crate) node_cache: ByteCache<Arc<[u8]>>,
    pub(crate) flat_cache: ByteCache<Option<Arc<[u8]>>>,
}

/// The node cache's marker for "no node at this path" (a leaf's path; leaves are never
/// stored). Stored values hold at least a 32-byte hash, so they are never empty.
fn no_node() -> Arc<[u8]> {
    Arc::from(&[][..])
}

impl Reader {
    /// The newest value of `key` in `column`: cache, layers, disk.
    pub(crate) fn read(&self, column: Column, key: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        // A flat-cache hit needs no layer lock: the entry is the newest value of its key
        // (module invariant), and a commit invalidates it before it returns, so a hit is the
        // key's value at some moment of this call. Readers on several threads then share no
        // lock word on their hottest path.
        if column == Column::Flat {
            if let Some(v) = self.flat_cache.get(key) {
                return Ok(v);
            }
        }
        let layers = self.layers.read();
        // A cached entry is the newest value (module invariant), so the cache goes first
        // (the flat cache was asked above).
        if column == Column::Nodes {
            if let Some(v) = self.node_cache.get(key) {
                return Ok((!v.is_empty()).then_some(v));
            }
        }
        if let Some(v) = newest_in_layers(&layers, column, key) {
            return Ok(v);
        }
        let on_disk = |name| -> Result<Option<Arc<[u8]>>, StoreError> {
            Ok(self.db.get_pinned_cf(cf(&self.db, name)?, key)?.map(|p| Arc::from(&p[..])))
        };
        match column {
            Column::Flat => {
                let v = on_disk(CF_FLAT)?;
                self.flat_cache.admit(key, v.clone());
                Ok(v)
            }
            Column::Nodes => {
                let v = on_disk(CF_NODES)?;
                self.node_cache.admit(key, v.clone().unwrap_or_else(no_node));
                Ok(v)
            }
            Column::Meta => on_disk(CF_META),
        }
    }

    /// The blob stored under `hash` (contract code): the layers, newest first, then `code`
    /// on disk (a database opened read-only without the family holds none there). Not
    /// cached: a blob never changes, and the executors keep what they read.
    pub(crate) fn code(&self, hash: &H256) -> Result<Option<Arc<[u8]>>, StoreError> {
        {
            let layers = self.layers.read();
            let found = layers.iter().rev().find_map(|l| l.code.get(&hash.0));
            if let Some(v) = found {
                return Ok(v.cloned());
            }
        }
        // A layer leaves the stack only once it is on disk.
        let Some(h) = self.db.cf_handle(CF_CODE) else { return Ok(None) };
        Ok(self.db.get_pinned_cf(h, hash.0)?.map(|p| Arc::from(&p[..])))
    }

    /// The newest values of `keys` (sorted keys of `column`, flat or nodes), for a commit:
    /// the layers answer what they hold, the rest comes from batched RocksDB MultiGets (which
    /// share memtable and block lookups among neighbouring keys), one sorted chunk per rayon
    /// thread. Nothing is admitted to the caches. Only the committer calls this, so no layer
    /// is pushed meanwhile, and one the writer pops is on disk already.
    pub(crate) fn read_batch(
        &self,
        column: Column,
        keys: &[Vec<u8>],
    ) -> Result<Values, StoreError> {
        let layers: Vec<Arc<Layer>> = self.layers.read().clone();
        let h = cf(&self.db, column.cf())?;
        let chunk = keys.len().div_ceil(rayon::current_num_threads()).max(BATCH_READ_CHUNK_MIN);
        let parts: Vec<Result<Values, StoreError>> = keys
            .par_chunks(chunk.max(1))
            .map(|part| {
                let mut out: Vec<Option<Option<Arc<[u8]>>>> =
                    part.iter().map(|k| newest_in_layers(&layers, column, k)).collect();
                let missing: Vec<&Vec<u8>> =
                    part.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(k, _)| k).collect();
                let mut read = self.db.batched_multi_get_cf(h, missing, true).into_iter();
                for slot in out.iter_mut().filter(|v| v.is_none()) {
                    let v = read.next().unwrap_or_else(|| unreachable!("one result per key"))?;
                    *slot = Some(v.map(|p| Arc::from(&p[..])));
                }
                Ok(out.into_iter().map(Option::flatten).collect())
            })
            .collect();
        let mut values = Vec::with_capacity(keys.len());
        for p in parts {
            values.extend(p?);
        }
        Ok(values)
    }

    /// The node under `key` if memory knows it (the node cache or a layer), without disk
    /// I/O: `Some(None)` means "no node at this path".
    fn node_in_memory(&self, key: &[u8]) -> Option<Option<Arc<[u8]>>> {
        let layers = self.layers.read();
        if let Some(v) = self.node_cache.get(key) {
            return Some((!v.is_empty()).then_some(v));
        }
        newest_in_layers(&layers, Column::Nodes, key)
    }

    /// Forget every cached entry (after writes that bypassed the layers).
    pub(crate) fn clear_caches(&self) {
        self.flat_cache.clear();
        self.node_cache.clear();
    }

    /// Flat value of `key` in `trie`.
    pub(crate) fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        self.read(Column::Flat, &flat_key(trie, key)?)
    }

    /// The one live flat key of `trie` under nibble path `path` (a leaf's key), merging the
    /// layers with the database: the newest layer that mentions a key decides whether it
    /// lives; disk keys no layer mentions are live.
    pub(crate) fn leaf_under(
        &self,
        trie: &TrieId,
        path: &[u8],
    ) -> Result<Option<FlatPair>, StoreError> {
        let layers = self.layers.read().clone();
        let mut iter = leaf_scan_iter(&self.db, scans_one_prefix(trie, path))?;
        leaf_under_in(&layers, &mut iter, trie, path)
    }
}

/// [`Reader::leaf_under`] over a snapshot of the layer stack and a `flat` iterator created
/// after it was taken (so that a layer the writer persists meanwhile is seen either in the
/// snapshot or on disk). The iterator may be reused across calls.
pub(crate) fn leaf_under_in(
    layers: &[Arc<Layer>],
    iter: &mut DBRawIterator<'_>,
    trie: &TrieId,
    path: &[u8],
) -> Result<Option<FlatPair>, StoreError> {
    leaf_under_skipping(layers, iter, trie, path, &|_| false)
}

/// [`leaf_under_in`] that passes over the flat keys `skip` names (a view of an older
/// block decides those keys itself).
pub(crate) fn leaf_under_skipping(
    layers: &[Arc<Layer>],
    iter: &mut DBRawIterator<'_>,
    trie: &TrieId,
    path: &[u8],
    skip: &dyn Fn(&[u8]) -> bool,
) -> Result<Option<FlatPair>, StoreError> {
    let (lo, hi) = flat_range_for_path(trie, path);
    let mut newest: BTreeMap<Vec<u8>, Option<Arc<[u8]>>> = BTreeMap::new();
    for layer in layers.iter().rev() {
        for (k, v) in layer.flat.range(lo.as_slice()..=hi.as_slice()) {
            newest.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let mut live = newest.iter().filter(|(k, _)| !skip(k));
    if let Some((k, v)) = live.find_map(|(k, v)| v.as_ref().map(|v| (k, v))) {
        return Ok(Some((k.clone(), v.clone())));
    }
    // Keys a newer layer deleted are skipped; there are at most as many as the layers
    // deleted under this path.
    iter.seek(&lo);
    while let (Some(k), Some(v)) = (iter.key(), iter.value()) {
        if k > hi.as_slice() {
            break;
        }
        if !newest.contains_key(k) && !skip(k) {
            return Ok(Some((k.to_vec(), Arc::from(v))));
        }
        iter.next();
    }
    iter.status()?;
    Ok(None)
}

/// The value of `key` in the newest layer that mentions it (`Some(None)`: deleted there).
pub(crate) fn newest_in_layers(
    layers: &[Arc<Layer>],
    column: Column,
    key: &[u8],
) -> Option<Option<Arc<[u8]>>> {
    let probe = KeyProbe::of(key);
    layers.iter().rev().find_map(|layer| {
        let map = match column {
            Column::Flat => &layer.flat,
            Column::Nodes => &layer.nodes,
            Column::Meta => &layer.meta,
        };
        map.get_probed(key, probe).map(|v| v.cloned())
    })
}

/// The encoding in `layout` of the leaf of `key` (trie-local) holding `value`, hanging at
/// a path of `depth` nibbles: how the store rebuilds a leaf it never stores.
pub(crate) fn leaf_at(layout: LayoutName, depth: usize, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + key.len() + 8);
    let rest = trie::NibbleSlice::range(key, depth, key.len() * 2);
    layout.encode_leaf(rest, value, &mut out);
    out
}

/// A value node (Substrate V1) asked for at `path`, the full nibble path of its key: the
/// key's value, read by `value`, when it hashes to `hash`. `None` for any other request,
/// and always in layouts without value nodes (no read then).
pub(crate) fn value_node(
    layout: LayoutName,
    path: &[u8],
    hash: &H256,
    value: impl FnOnce(&[u8]) -> Result<Option<Arc<[u8]>>, StoreError>,
) -> Result<Option<Vec<u8>>, StoreError> {
    if !layout.has_value_nodes() || !path.len().is_multiple_of(2) {
        return Ok(None);
    }
    let key: Vec<u8> = path.chunks(2).map(|p| (p[0] << 4) | p[1]).collect();
    Ok(value(&key)?.filter(|v| layout.hash(v) == *hash).map(|v| v.to_vec()))
}

/// One trie of the store seen as a [`NodeSource`].
pub struct StoreSource<'a> {
    pub(crate) reader: &'a Reader,
    pub(crate) trie: TrieId,
}

impl StoreSource<'_> {
    fn checked_node(
        &self,
        v: Option<Arc<[u8]>>,
        path: &[u8],
        hash: &H256,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        checked_node(self.trie, v, path, hash)
    }

    fn leaf(&self, path: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        leaf_at(self.reader.layout, path.len(), key, value)
    }
}

/// The encoding of a stored node value (`hash ‖ encoding`) of `trie` at `path`, checked
/// against the parent's `hash`.
pub(crate) fn checked_node(
    trie: TrieId,
    v: Option<Arc<[u8]>>,
    path: &[u8],
    hash: &H256,
) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(v) = v else { return Ok(None) };
    // Invariant: the stored hash is the one the parent refers to.
    if v.len() < 32 || &v[..32] != hash.as_bytes() {
        return Err(Corruption::NodeHash { trie, path: path.to_vec(), expected: *hash }.into());
    }
    Ok(Some(v[32..].to_vec()))
}

/// Whether nibble path `path` is a prefix of `key`'s nibbles (a walk toward `key`).
pub(crate) fn key_has_path(key: &[u8], path: &[u8]) -> bool {
    path.len() <= key.len() * 2
        && path.iter().enumerate().all(|(i, n)| trie::nibble_at(key, i) == *n)
}

/// The node reads of one trie, at the head ([`StoreSource`]) or at a recent block (the
/// block view's source): what [`load_node`] and [`load_node_for_key`] ask, in their order.
pub(crate) trait StoredNodes {
    /// The stored branch or extension node at `path`, checked against the parent's `hash`.
    fn node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError>;
    /// A V1 value node asked for by its hash (the key's flat value when it hashes to it).
    fn value_node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError>;
    /// The leaf under `path` when no node is stored there, rebuilt from the one live flat
    /// key under it.
    fn leaf_by_scan(&self, path: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// On a walk toward `key`: the stored node at `path`, else (no node is stored there,
    /// so it is a leaf) the leaf of `key` when `key` exists, the only key under the path.
    fn node_or_key_leaf(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError>;
}

/// [`NodeSource::load`] for every source of the store: a value node asked for by hash,
/// else the stored node at `path`, else the leaf under it (leaves are never stored).
pub(crate) fn load_node(
    source: &impl StoredNodes,
    path: &[u8],
    hash: &H256,
) -> Result<Option<Vec<u8>>, SourceError> {
    if let Some(v) = source.value_node(path, hash)? {
        return Ok(Some(v));
    }
    if let Some(n) = source.node(path, hash)? {
        return Ok(Some(n));
    }
    Ok(source.leaf_by_scan(path)?)
}

/// [`NodeSource::load_for_key`] for every source of the store: [`load_node`] with the
/// looked-up key's own leaf tried before a scan.
pub(crate) fn load_node_for_key(
    source: &impl StoredNodes,
    path: &[u8],
    hash: &H256,
    key: &[u8],
) -> Result<Option<Vec<u8>>, SourceError> {
    if let Some(v) = source.value_node(path, hash)? {
        return Ok(Some(v));
    }
    if let Some(n) = source.node_or_key_leaf(path, hash, key)? {
        return Ok(Some(n));
    }
    Ok(source.leaf_by_scan(path)?)
}

impl StoredNodes for StoreSource<'_> {
    fn node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self.reader.read(Column::Nodes, &node_key(&self.trie, path))?;
        self.checked_node(v, path, hash)
    }

    fn value_node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        value_node(self.reader.layout, path, hash, |k| self.reader.get(&self.trie, k))
    }

    /// The leaf under `path` when no node is stored there: the one live flat key under it.
    fn leaf_by_scan(&self, path: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let prefix_len = self.trie.prefix_len();
        Ok(self
            .reader
            .leaf_under(&self.trie, path)?
            .map(|(k, v)| self.leaf(path, &k[prefix_len..], &v)))
    }

    fn node_or_key_leaf(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let nk = node_key(&self.trie, path);
        // The looked-up key's value, when the walk is on its path (read only if needed).
        let value = || -> Result<Option<Arc<[u8]>>, StoreError> {
            if key_has_path(key, path) {
                self.reader.get(&self.trie, key)
            } else {
                Ok(None)
            }
        };
        let stored = match self.reader.node_in_memory(&nk) {
            Some(known) => known,
            None => {
                // Before probing `nodes` on disk: if the key exists and its leaf, rebuilt
                // from its flat value, hashes to what the parent holds, the node is that
                // leaf (a stored node with the same hash would be a keccak collision).
                // Most walks end at a leaf, so this saves a disk probe per key for one
                // short hash.
                if let Some(v) = value()? {
                    let leaf = self.leaf(path, key, &v);
                    if leaf.len() >= 32 && self.reader.layout.hash(&leaf) == *hash {
                        return Ok(Some(leaf));
                    }
                }
                self.reader.read(Column::Nodes, &nk)?
            }
        };
        if let Some(n) = self.checked_node(stored, path, hash)? {
            return Ok(Some(n));
        }
        // No node is stored here, so it is a leaf: if the key being looked up exists, it
        // is the only key under this path.
        Ok(value()?.map(|v| self.leaf(path, key, &v)))
    }
}

impl NodeSource for StoreSource<'_> {
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        load_node(self, path, hash)
    }

    fn load_for_key(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, SourceError> {
        load_node_for_key(self, path, hash, key)
    }

    fn trusted(&self) -> bool {
        true
    }
}
