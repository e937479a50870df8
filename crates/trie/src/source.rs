//! Where the mutable trie loads nodes from: the [`NodeSource`] trait and an in-memory
//! implementation keyed by hash.
//!
//! A source is asked for a node by its full nibble path *and* its hash, so that both a
//! path-keyed store (RocksDB, next layer up) and a hash-keyed map can serve it. A source
//! never needs to verify: the trie checks every loaded node against the expected hash.

use std::collections::HashMap;
use std::sync::Arc;

use crate::hash::H256;
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

/// Supplies encoded nodes to a [`crate::trie::Trie`].
pub trait NodeSource {
    /// The encoding of the node with `hash` at nibble path `path`, or `None` if absent.
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

/// Which trie of a state a key or node belongs to.
///
/// One state holds the main trie and, in the Ethereum model, one storage trie per account
/// (named by the account's secure key). Stores prefix flat keys and node paths with
/// [`TrieId::prefix`] so that one trie's data sits together on disk.
// Exhaustive on purpose: every variant has an on-disk prefix, so a new one is a schema
// change that must break every match rather than fall into a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrieId {
    /// The main (account) trie.
    Main,
    /// A storage trie, named by its account's secure key.
    Storage(H256),
}

impl TrieId {
    /// Length of [`TrieId::prefix`] for this id.
    pub fn prefix_len(&self) -> usize {
        match self {
            TrieId::Main => 1,
            TrieId::Storage(_) => 33,
        }
    }

    /// Append the on-disk prefix: `0x00` for the main trie, `0x01 ‖ account` for storage.
    pub fn write_prefix(&self, out: &mut Vec<u8>) {
        match self {
            TrieId::Main => out.push(0x00),
            TrieId::Storage(h) => {
                out.push(0x01);
                out.extend_from_slice(&h.0);
            }
        }
    }

    /// The on-disk prefix.
    pub fn prefix(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.prefix_len());
        self.write_prefix(&mut v);
        v
    }

    /// Split a prefixed key into its trie id and the rest; `None` if malformed.
    pub fn split(bytes: &[u8]) -> Option<(TrieId, &[u8])> {
        match bytes.first()? {
            0x00 => Some((TrieId::Main, &bytes[1..])),
            0x01 => {
                let h = H256::from_slice(bytes.get(1..33)?)?;
                Some((TrieId::Storage(h), &bytes[33..]))
            }
            _ => None,
        }
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

    /// Keep every node a commit wrote (nothing is deleted: see the type's docs).
    pub fn apply(&mut self, updates: crate::trie::TrieUpdates) {
        for n in updates.new {
            self.nodes.insert(n.hash, n.encoded);
        }
    }

    /// The committed state of `entries` (key, value): its nodes and its root.
    pub fn committed<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(MemoryNodeSource, H256), crate::trie::TrieError> {
        let mut t: crate::trie::Trie<MemoryNodeSource> = crate::trie::Trie::new(Self::new());
        for (k, v) in entries {
            t.insert(k.as_ref(), v.as_ref())?;
        }
        let u = t.commit()?;
        let root = u.root;
        let mut src = t.into_source();
        src.apply(u);
        Ok((src, root))
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
