//! Reads through the byte-bounded caches, then the layer stack (newest diff layer first),
//! then RocksDB. Also the [`NodeSource`] the mutable trie loads nodes from, which rebuilds
//! leaves from flat state (leaves are never stored as nodes).
//!
//! Invariant: every cached entry is the newest value of its key. A read holds the layer
//! lock (shared) from its first probe to its cache admission, and a commit, as it pushes a
//! layer, updates or invalidates the cache entries of the layer's keys under the same lock
//! (exclusive); so a value read from disk is never admitted after a newer layer changed it,
//! and the caches can be asked before the layers.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use rocksdb::{Direction, IteratorMode, ReadOptions, DB};
use trie::{EthLayout, Layout, NodeSource, SourceError, TrieId, H256};

use crate::cache::ByteCache;
use crate::error::{Corruption, StoreError};
use crate::keys::{flat_key, flat_range_for_path, node_key, Column, CF_FLAT, CF_META, CF_NODES};
use crate::layer::Layer;
use crate::state::cf;

/// A live `flat` entry: its full flat key and its value.
type FlatPair = (Vec<u8>, Arc<[u8]>);

/// The shared read state of a store.
pub(crate) struct Reader {
    pub(crate) db: Arc<DB>,
    pub(crate) layers: RwLock<Vec<Arc<Layer>>>,
    pub(crate) node_cache: ByteCache<Arc<[u8]>>,
    pub(crate) flat_cache: ByteCache<Option<Arc<[u8]>>>,
    /// Nodes shallower than `top_depth` nibbles; unlike `node_cache` it takes the nodes
    /// each commit writes (see [`Reader::publish_nodes`]).
    pub(crate) top_cache: ByteCache<Arc<[u8]>>,
    pub(crate) top_depth: u8,
}

/// The node cache's marker for "no node at this path" (a leaf's path; leaves are never
/// stored). Stored values hold at least a 32-byte hash, so they are never empty.
fn no_node() -> Arc<[u8]> {
    Arc::from(&[][..])
}

impl Reader {
    /// The newest value of `key` in `column`: cache, layers, disk.
    pub(crate) fn read(&self, column: Column, key: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        let layers = self.layers.read();
        // A cached entry is the newest value (module invariant), so the cache goes first.
        match column {
            Column::Flat => {
                if let Some(v) = self.flat_cache.get(key) {
                    return Ok(v);
                }
            }
            Column::Nodes => {
                if let Some(v) = self.node_cache_for(key).get(key) {
                    return Ok((!v.is_empty()).then_some(v));
                }
            }
            Column::Meta => {}
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
                self.node_cache_for(key).admit(key, v.clone().unwrap_or_else(no_node));
                Ok(v)
            }
            Column::Meta => on_disk(CF_META),
        }
    }

    /// Bring the flat values of `keys` (sorted flat keys) into the flat cache: the keys no
    /// cache entry or layer knows are read with one batched RocksDB MultiGet, which shares
    /// the memtable and block lookups among neighbouring keys.
    pub(crate) fn prefetch_flat(&self, keys: &[Vec<u8>]) -> Result<(), StoreError> {
        let layers = self.layers.read();
        let missing: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|k| {
                !self.flat_cache.contains(k) && newest_in_layers(&layers, Column::Flat, k).is_none()
            })
            .collect();
        let values =
            self.db.batched_multi_get_cf(cf(&self.db, CF_FLAT)?, missing.iter().copied(), true);
        for (k, v) in missing.into_iter().zip(values) {
            self.flat_cache.admit(k, v?.map(|p| Arc::from(&p[..])));
        }
        Ok(())
    }

    /// The cache that holds the node under node key `key` (its last byte is the path
    /// length, see [`node_key`]).
    fn node_cache_for(&self, key: &[u8]) -> &ByteCache<Arc<[u8]>> {
        match key.last() {
            Some(&depth) if depth < self.top_depth => &self.top_cache,
            _ => &self.node_cache,
        }
    }

    /// The node under `key` if memory knows it (a layer or a cache), without disk I/O:
    /// `Some(None)` means "no node at this path".
    fn node_in_memory(&self, key: &[u8]) -> Option<Option<Arc<[u8]>>> {
        let layers = self.layers.read();
        if let Some(v) = self.node_cache_for(key).get(key) {
            return Some((!v.is_empty()).then_some(v));
        }
        newest_in_layers(&layers, Column::Nodes, key)
    }

    /// Make a new layer's node changes visible to the caches. Call with the layer lock held
    /// exclusively, as the layer is pushed (see the module invariant): the top-node cache
    /// takes each new top node (a deletion becomes "no node here"); the node cache, which
    /// never admits fresh writes, drops the keys instead.
    pub(crate) fn publish_nodes(&self, layer: &Layer) {
        for (k, v) in &layer.nodes {
            let cache = self.node_cache_for(k);
            if std::ptr::eq(cache, &self.top_cache) {
                cache.admit(k, v.as_deref().map_or_else(no_node, Arc::from));
            } else {
                cache.invalidate(k);
            }
        }
    }

    /// Forget every cached entry (after writes that bypassed the layers).
    pub(crate) fn clear_caches(&self) {
        self.flat_cache.clear();
        self.node_cache.clear();
        self.top_cache.clear();
    }

    /// Flat value of `key` in `trie`.
    pub(crate) fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        self.read(Column::Flat, &flat_key(trie, key)?)
    }

    /// The one live flat key of `trie` under nibble path `path` (a leaf's key), merging the
    /// layers with the database: the newest layer that mentions a key decides whether it
    /// lives; disk keys no layer mentions are live.
    fn leaf_under(&self, trie: &TrieId, path: &[u8]) -> Result<Option<FlatPair>, StoreError> {
        let (lo, hi) = flat_range_for_path(trie, path);
        let mut newest: BTreeMap<Vec<u8>, Option<Arc<[u8]>>> = BTreeMap::new();
        {
            let layers = self.layers.read();
            for layer in layers.iter().rev() {
                for (k, v) in layer.flat.range(lo.clone()..=hi.clone()) {
                    newest.entry(k.clone()).or_insert_with(|| v.as_deref().map(Arc::from));
                }
            }
        }
        if let Some((k, v)) = newest.iter().find_map(|(k, v)| v.as_ref().map(|v| (k, v))) {
            return Ok(Some((k.clone(), v.clone())));
        }
        let mut opts = ReadOptions::default();
        opts.set_iterate_upper_bound(hi.clone());
        let iter = self.db.iterator_cf_opt(
            cf(&self.db, CF_FLAT)?,
            opts,
            IteratorMode::From(&lo, Direction::Forward),
        );
        // Keys a newer layer deleted are skipped; there are at most as many as the layers
        // deleted under this path.
        for item in iter {
            let (k, v) = item?;
            if !newest.contains_key(&k[..]) {
                return Ok(Some((k.to_vec(), Arc::from(&v[..]))));
            }
        }
        Ok(None)
    }
}

/// The value of `key` in the newest layer that mentions it (`Some(None)`: deleted there).
fn newest_in_layers(
    layers: &[Arc<Layer>],
    column: Column,
    key: &[u8],
) -> Option<Option<Arc<[u8]>>> {
    layers.iter().rev().find_map(|layer| {
        let map = match column {
            Column::Flat => &layer.flat,
            Column::Nodes => &layer.nodes,
            Column::Meta => &layer.meta,
        };
        map.get(key).map(|v| v.as_deref().map(Arc::from))
    })
}

/// One trie of the store seen as a [`NodeSource`].
pub struct StoreSource<'a> {
    pub(crate) reader: &'a Reader,
    pub(crate) trie: TrieId,
}

impl StoreSource<'_> {
    fn node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self.reader.read(Column::Nodes, &node_key(&self.trie, path))?;
        self.checked_node(v, path, hash)
    }

    /// The encoding of a stored node value, checked against the parent's `hash`.
    fn checked_node(
        &self,
        v: Option<Arc<[u8]>>,
        path: &[u8],
        hash: &H256,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(v) = v else { return Ok(None) };
        // Invariant: the stored hash is the one the parent refers to.
        if v.len() < 32 || &v[..32] != hash.as_bytes() {
            return Err(Corruption::NodeHash {
                trie: self.trie,
                path: path.to_vec(),
                expected: *hash,
            }
            .into());
        }
        Ok(Some(v[32..].to_vec()))
    }

    fn leaf(&self, path: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(value.len() + key.len() + 8);
        let rest = trie::NibbleSlice::range(key, path.len(), key.len() * 2);
        EthLayout::encode_leaf(rest, value, &mut out);
        out
    }

    fn key_has_path(key: &[u8], path: &[u8]) -> bool {
        path.len() <= key.len() * 2
            && path.iter().enumerate().all(|(i, n)| trie::nibble_at(key, i) == *n)
    }
}

impl StoreSource<'_> {
    /// The leaf under `path` when no node is stored there: the one live flat key under it.
    fn leaf_by_scan(&self, path: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let prefix_len = self.trie.prefix_len();
        Ok(self
            .reader
            .leaf_under(&self.trie, path)?
            .map(|(k, v)| self.leaf(path, &k[prefix_len..], &v)))
    }
}

impl NodeSource for StoreSource<'_> {
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        if let Some(n) = self.node(path, hash)? {
            return Ok(Some(n));
        }
        Ok(self.leaf_by_scan(path)?)
    }

    fn load_for_key(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, SourceError> {
        let nk = node_key(&self.trie, path);
        // The looked-up key's value, when the walk is on its path (read only if needed).
        let value = || -> Result<Option<Arc<[u8]>>, StoreError> {
            if Self::key_has_path(key, path) {
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
                    if leaf.len() >= 32 && EthLayout::hash(&leaf) == *hash {
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
        match value()? {
            Some(v) => Ok(Some(self.leaf(path, key, &v))),
            None => Ok(self.leaf_by_scan(path)?),
        }
    }

    fn trusted(&self) -> bool {
        true
    }
}
