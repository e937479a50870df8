//! Tries nested in the main trie: a state whose main-trie leaves commit to the roots of
//! child tries (the Ethereum account model, whose account leaf holds its storage trie's
//! root), and the changes such a state takes in one commit ([`NestedChanges`]).
//!
//! The store stays model-agnostic: it asks a [`ChildRoots`] which child trie a main-trie
//! leaf commits to and how that leaf reads with a new child root, and the model (the `eth`
//! crate's accounts) answers. So one commit updates the touched child tries first, folds
//! their new roots into the parents' leaves, and then updates the main trie.

use std::collections::{BTreeMap, BTreeSet};

use crate::h256::H256;
use crate::id::TrieId;
use crate::view::ChangeSet;

/// One commit's changes to a state of nested tries.
///
/// Invariant a commit checks: a child trie with changes (or cleared) has its parent leaf in
/// the state after the commit, unless the child is left empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NestedChanges {
    /// Per trie, key → new value (`None` or empty deletes). A main-trie value whose key
    /// has a child trie is the leaf with *any* child root: the commit sets the child's
    /// root after the child's own changes (see [`ChildRoots::with_child_root`]).
    pub changes: ChangeSet,
    /// Child tries emptied before their writes in `changes` apply (a self-destruct, a
    /// contract created where storage was left). A deleted parent leaf clears its child
    /// whether it is named here or not.
    pub cleared: BTreeSet<TrieId>,
    /// Content-addressed blobs the state refers to by hash (contract code), stored outside
    /// the tries. Invariant (the model's to keep): each key is the blob's hash.
    pub code: BTreeMap<H256, Vec<u8>>,
    /// The block's record, kept with it (an Ethereum block's header); `None` for a commit
    /// that is not a whole block of such a chain.
    pub record: Option<Vec<u8>>,
}

impl NestedChanges {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.changes.values().all(|kv| kv.is_empty())
            && self.cleared.is_empty()
            && self.code.is_empty()
            && self.record.is_none()
    }
}

/// Why a main-trie leaf could not take a child root: it is not a leaf of the model.
#[derive(Debug, thiserror::Error)]
#[error("main-trie leaf {key} is not a leaf of this state model: {source}", key = hex_key(.key))]
pub struct LeafError {
    /// The leaf's key.
    pub key: Vec<u8>,
    /// What the model found wrong with it.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

fn hex_key(key: &[u8]) -> String {
    format!("0x{}", hex::encode(key))
}

/// How a state model's main-trie leaves commit to child tries.
pub trait ChildRoots: Send + Sync {
    /// The child trie whose root the main-trie leaf under `key` commits to, if the model
    /// gives that key one.
    fn child_of(&self, key: &[u8]) -> Option<TrieId>;
    /// The main-trie key whose leaf commits to `child`'s root, if `child` is a child trie
    /// of this model. Inverse of [`ChildRoots::child_of`].
    fn parent_of(&self, child: &TrieId) -> Option<Vec<u8>>;
    /// The main-trie leaf `leaf` (under `key`) with its child root set to `root`.
    fn with_child_root(&self, key: &[u8], leaf: &[u8], root: &H256) -> Result<Vec<u8>, LeafError>;
    /// The child root the main-trie leaf `leaf` (under `key`) commits to.
    fn child_root(&self, key: &[u8], leaf: &[u8]) -> Result<H256, LeafError>;
}
