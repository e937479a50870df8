//! Reads through the layer stack: newest diff layer first, then the byte-bounded caches,
//! then RocksDB. Also the [`NodeSource`] the mutable trie loads nodes from, which rebuilds
//! leaves from flat state (leaves are never stored as nodes).
//!
//! Invariant: a read holds the layer lock (shared) from its first layer probe to its cache
//! admission, and commits invalidate cache entries under the same lock (exclusive), so a
//! value read from disk is never admitted after a newer layer changed it.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use rocksdb::{Direction, IteratorMode, ReadOptions, DB};
use trie::{EthLayout, Layout, NodeSource, SourceError, TrieId, H256};

use crate::cache::ByteCache;
use crate::error::StoreError;
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
}

impl Reader {
    /// The newest value of `key` in `column`: layers, cache, disk.
    pub(crate) fn read(&self, column: Column, key: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        let layers = self.layers.read();
        for layer in layers.iter().rev() {
            let map = match column {
                Column::Flat => &layer.flat,
                Column::Nodes => &layer.nodes,
                Column::Meta => &layer.meta,
            };
            if let Some(v) = map.get(key) {
                return Ok(v.as_deref().map(Arc::from));
            }
        }
        match column {
            Column::Flat => {
                if let Some(v) = self.flat_cache.get(key) {
                    return Ok(v);
                }
                let v: Option<Arc<[u8]>> =
                    self.db.get_pinned_cf(cf(&self.db, CF_FLAT)?, key)?.map(|p| Arc::from(&p[..]));
                self.flat_cache.admit(key, v.clone());
                Ok(v)
            }
            Column::Nodes => {
                // An empty cached value records "no node here" (a leaf's path: leaves are
                // never stored); stored values hold at least a 32-byte hash.
                if let Some(v) = self.node_cache.get(key) {
                    return Ok((!v.is_empty()).then_some(v));
                }
                let v: Option<Arc<[u8]>> =
                    self.db.get_pinned_cf(cf(&self.db, CF_NODES)?, key)?.map(|p| Arc::from(&p[..]));
                self.node_cache.admit(key, v.clone().unwrap_or_else(|| Arc::from(&[][..])));
                Ok(v)
            }
            Column::Meta => {
                Ok(self.db.get_pinned_cf(cf(&self.db, CF_META)?, key)?.map(|p| Arc::from(&p[..])))
            }
        }
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

/// One trie of the store seen as a [`NodeSource`].
pub struct StoreSource<'a> {
    pub(crate) reader: &'a Reader,
    pub(crate) trie: TrieId,
}

impl StoreSource<'_> {
    fn node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(v) = self.reader.read(Column::Nodes, &node_key(&self.trie, path))? else {
            return Ok(None);
        };
        // Invariant: the stored hash is the one the parent refers to.
        if v.len() < 32 || &v[..32] != hash.as_bytes() {
            return Err(StoreError::Corrupt(format!(
                "node at path {} of {:?} does not match its parent's hash {hash}",
                trie::trie::path_hex(path),
                self.trie
            )));
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
            && path.iter().enumerate().all(|(i, n)| trie::nibbles::nibble_at(key, i) == *n)
    }
}

impl NodeSource for StoreSource<'_> {
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        if let Some(n) = self.node(path, hash)? {
            return Ok(Some(n));
        }
        let prefix_len = self.trie.prefix_len();
        Ok(self
            .reader
            .leaf_under(&self.trie, path)?
            .map(|(k, v)| self.leaf(path, &k[prefix_len..], &v)))
    }

    fn load_for_key(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, SourceError> {
        if let Some(n) = self.node(path, hash)? {
            return Ok(Some(n));
        }
        // A leaf: if the key being looked up exists, it is the only key under this path.
        if Self::key_has_path(key, path) {
            if let Some(v) = self.reader.get(&self.trie, key)? {
                return Ok(Some(self.leaf(path, key, &v)));
            }
        }
        self.load(path, hash)
    }

    fn trusted(&self) -> bool {
        true
    }
}
