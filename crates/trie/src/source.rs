//! Where the mutable trie loads nodes from: the [`NodeSource`] trait and an in-memory
//! implementation keyed by hash.
//!
//! A source is asked for a node by its full nibble path *and* its hash, so that both a
//! path-keyed store (RocksDB, next layer up) and a hash-keyed map can serve it. A source
//! never needs to verify: the trie checks every loaded node against the expected hash.

use std::collections::HashMap;
use std::sync::Arc;

use state::H256;

use crate::node::Layout;

/// A failure inside a node source (I/O, corruption), carrying the source's own typed
/// error: a store that gets one back from the trie can look inside with
/// [`SourceError::downcast_ref`] instead of parsing text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("node source failed: {0}")]
pub struct SourceError(#[source] Arc<dyn std::error::Error + Send + Sync + 'static>);

impl SourceError {
    /// Wrap the source's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        SourceError(Arc::new(error))
    }

    /// The wrapped error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

/// Two source errors are equal when they are the same error or read the same (errors from
/// I/O have no structural equality; trie errors compare in tests).
impl PartialEq for SourceError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for SourceError {}

/// Supplies encoded nodes to a [`crate::Trie`].
pub trait NodeSource {
    /// The encoding of the node with `hash` at nibble path `path`, or `None` if absent.
    /// A value node (Substrate V1) is asked for by its key's full nibble path and the
    /// value's hash, and its "encoding" is the value itself.
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError>;

    /// Like [`NodeSource::load`], when the walk that reached the node is looking up `key`
    /// (packed bytes). A store that keeps leaves only as flat `key → value` entries can
    /// then rebuild a leaf with one point read instead of a prefix scan.
    fn load_for_key(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, SourceError> {
        let _ = key;
        self.load(path, hash)
    }

    /// True when loaded nodes need no hash check (the source wrote them itself and keeps
    /// them consistent). Untrusted sources (proofs, witnesses, the network) return false,
    /// and the trie re-hashes every node it loads from them.
    fn trusted(&self) -> bool {
        false
    }
}

impl<T: NodeSource + ?Sized> NodeSource for &T {
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        (**self).load(path, hash)
    }

    fn load_for_key(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, SourceError> {
        (**self).load_for_key(path, hash, key)
    }

    fn trusted(&self) -> bool {
        (**self).trusted()
    }
}

/// Nodes held in memory, keyed by hash. Insert-only: a hash-keyed map cannot tell whether
/// a removed node is still referenced from elsewhere, so it keeps everything (an archive).
#[derive(Debug, Default, Clone)]
pub struct MemoryNodeSource {
    nodes: HashMap<H256, Vec<u8>>,
}

impl MemoryNodeSource {
    /// An empty source.
    pub fn new() -> Self {
        Self::default()
    }

    /// Insert an encoded node under its hash.
    pub fn insert<L: Layout>(&mut self, encoded: Vec<u8>) -> H256 {
        let h = L::hash(&encoded);
        self.nodes.insert(h, encoded);
        h
    }

    /// Insert a node whose hash is already known.
    pub fn insert_hashed(&mut self, hash: H256, encoded: Vec<u8>) {
        self.nodes.insert(hash, encoded);
    }

    /// Number of nodes held.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Total encoded bytes held.
    pub fn bytes(&self) -> usize {
        self.nodes.values().map(Vec::len).sum()
    }
}

impl NodeSource for MemoryNodeSource {
    fn load(&self, _path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        Ok(self.nodes.get(hash).cloned())
    }
}
