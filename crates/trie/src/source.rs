//! Where the mutable trie loads nodes from: the [`NodeSource`] trait and an in-memory
//! implementation keyed by hash.
//!
//! A source is asked for a node by its full nibble path *and* its hash, so that both a
//! path-keyed store (RocksDB, next layer up) and a hash-keyed map can serve it. A source
//! never needs to verify: the trie checks every loaded node against the expected hash.

use std::collections::HashMap;

use crate::hash::H256;
use crate::node::Layout;

/// A failure inside a node source (I/O, corruption).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node source failed: {0}")]
pub struct SourceError(pub String);

/// Supplies encoded nodes to a [`crate::trie::Trie`].
pub trait NodeSource {
    /// The encoding of the node with `hash` at nibble path `path`, or `None` if absent.
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError>;
}

impl<T: NodeSource + ?Sized> NodeSource for &T {
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        (**self).load(path, hash)
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
