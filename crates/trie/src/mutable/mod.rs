//! The mutable trie: lazy loading from a [`NodeSource`], cached hashes, dirty paths.
//!
//! Nodes live in an arena (`Vec` of slots plus a free list), so inserting into a loaded
//! trie allocates only for new keys and values. Every slot caches its reference (hash or
//! inline encoding); a mutation clears the caches on the path from the root to the change,
//! so [`Trie::root`] re-encodes and re-hashes exactly the dirty nodes and nothing else.
//! Unloaded subtrees are `Hashed` stubs and are never read unless a key leads into them.
//!
//! Invariants: a slot whose cache is set has all its children cached (or unloaded stubs);
//! `origin` is the hash under which the node exists in the source (pre-state) and is
//! cleared on the first mutation, when the (path, hash) pair is queued as removed.
//! [`Trie::commit`] returns the new and removed nodes; dropping a trie without committing
//! writes nothing anywhere.
//!
//! Layouts. In a layout without extension nodes (Substrate's), a branch carrying a
//! partial key is held as an `Extension` slot over a `Branch` slot: the insert, remove and
//! collapse rules are then the same as Ethereum's, and only encoding, hashing, commit and
//! proofs see the pair as the one node it is (the extension's slot holds the node's
//! origin; the branch's slot caches the pair's reference and never has an origin of its
//! own). Invariant there: an extension's child is a loaded branch. Values live in
//! `Value`s: inline, or (Substrate V1, 33 bytes or more) a value node known by its hash,
//! fetched from the source only when the value is read, and recorded then.

use std::collections::HashMap;
use std::marker::PhantomData;

use state::H256;

use crate::builder::HashStats;
use crate::nibbles::Nibbles;
use crate::node::{
    ChildKind, ChildRef, ExtensionCodec, Family, Layout, NibbledCodec, NodeError, NodeView,
};
use crate::recorder::Recorder;
use crate::source::{NodeSource, SourceError};

mod hashing;
mod insert;
mod remove;
mod seek;
mod value;

pub use hashing::CollapseDelta;
pub use seek::Entry;
pub use value::StoredValue;
pub(crate) use value::Value;

pub(crate) type NodeId = u32;
pub(crate) const NONE: NodeId = u32::MAX;

/// Errors from trie operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrieError {
    /// The source does not have a node the trie needs.
    #[error("missing node {hash} at path {path}")]
    MissingNode {
        /// Nibble path, hex digits.
        path: String,
        /// Expected hash.
        hash: H256,
    },
    /// A loaded node does not hash to the reference that pointed at it.
    #[error("node at path {path} hashes to {actual}, expected {expected}")]
    HashMismatch {
        /// Nibble path, hex digits.
        path: String,
        /// Expected hash.
        expected: H256,
        /// Hash of the bytes supplied.
        actual: H256,
    },
    /// A loaded node does not decode.
    #[error("corrupt node at path {path}: {source}")]
    Corrupt {
        /// Nibble path, hex digits.
        path: String,
        /// Decoder error.
        source: NodeError,
    },
    /// The source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// A nibble path as hex digits, or `(root)` for the empty path (for error messages).
pub fn path_hex(path: &[u8]) -> String {
    if path.is_empty() {
        return "(root)".to_string();
    }
    path.iter().map(|n| char::from_digit(u32::from(*n), 16).unwrap_or('?')).collect()
}

/// The error for a node at `path` that does not decode.
fn corrupt(path: &[u8], source: NodeError) -> TrieError {
    TrieError::Corrupt { path: path_hex(path), source }
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Leaf {
        path: Vec<u8>,
        value: Value,
    },
    Extension {
        path: Vec<u8>,
        child: NodeId,
    },
    Branch {
        children: [NodeId; 16],
        value: Option<Value>,
    },
    /// Not loaded yet.
    Hashed(H256),
}

#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub(crate) kind: Kind,
    /// Cached reference; `ChildRef::EMPTY` means dirty.
    pub(crate) cached: ChildRef,
    /// Hash under which this node exists in the pre-state, if any.
    pub(crate) origin: Option<H256>,
    /// Created or changed since the last commit.
    pub(crate) fresh: bool,
    /// The pre-state node (`origin`) is a leaf.
    pub(crate) origin_leaf: bool,
    /// An unloaded stub known to be a branch: the child of a pre-state extension (in this
    /// layout an extension always leads to a branch). Collapsing a single parent over it
    /// then needs no load.
    pub(crate) known_branch: bool,
}

/// A node written by [`Trie::commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedNode {
    /// Full nibble path from the root.
    pub path: Nibbles,
    /// Hash of the encoding.
    pub hash: H256,
    /// The encoding.
    pub encoded: Vec<u8>,
    /// True for leaves (a store that recomputes leaves from flat state skips them).
    pub is_leaf: bool,
}

/// A value node (Substrate V1: a value of 33 bytes or more, stored apart from its leaf or
/// branch) written by [`Trie::commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedValue {
    /// The key's full nibble path (a path-keyed store serves the value from its flat
    /// state by this key instead of storing it).
    pub path: Nibbles,
    /// Hash of the value: the reference its node holds.
    pub hash: H256,
    /// The value.
    pub value: Vec<u8>,
}

/// Everything a commit changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrieUpdates {
    /// The new root.
    pub root: H256,
    /// Nodes referenced by hash that are new (parents before children is not guaranteed).
    pub new: Vec<CommittedNode>,
    /// Pre-state nodes that no longer exist at their path.
    pub removed: Vec<RemovedNode>,
    /// Value nodes that are new (layouts with value nodes only). Value nodes that stop
    /// being referenced are not listed: path-keyed stores serve values from flat state, and
    /// a hash-keyed store cannot tell whether another key still holds the same value.
    pub values: Vec<CommittedValue>,
}

/// A pre-state node that a commit replaced or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedNode {
    /// Full nibble path from the root.
    pub path: Nibbles,
    /// Its hash.
    pub hash: H256,
    /// True for leaves (a store that never stores leaves has nothing to delete).
    pub is_leaf: bool,
}

/// A Merkle-Patricia trie over a node source. See the module docs.
pub struct Trie<S: NodeSource, L: Layout> {
    pub(crate) slots: Vec<Slot>,
    free: Vec<NodeId>,
    pub(crate) root: NodeId,
    pub(crate) source: S,
    removed: Vec<RemovedNode>,
    recorder: Option<Recorder>,
    root_hash: Option<H256>,
    stats: HashStats,
    buf: Vec<u8>,
    /// The key the current operation looks up (a hint for leaf-by-key sources).
    key_hint: Vec<u8>,
    /// Whether `key_hint` is set (the buffer is kept to avoid an allocation per operation).
    has_hint: bool,
    /// Branches left with a single entry (one child and no value, or a value and no
    /// child) by deletions; collapsed by hashing (virtually) and by commit (for real).
    pub(crate) singles: HashMap<NodeId, Vec<u8>>,
    /// Whether loads made only to collapse a single branch are recorded (the default).
    pub(crate) record_collapse_loads: bool,
    /// Branches whose single-ness or subtree changed since the last [`Trie::collapse_delta`].
    pub(crate) dirty_singles: Vec<NodeId>,
    /// Branches that became single since the last root: their remaining child may need
    /// loading before hashing.
    pub(crate) new_singles: Vec<NodeId>,
    /// For each single branch, the pre-state node its collapse needs (as last reported).
    pub(crate) collapse_of: HashMap<NodeId, (H256, usize)>,
    _layout: PhantomData<L>,
}

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// An empty trie.
    pub fn new(source: S) -> Self {
        Trie {
            slots: Vec::new(),
            free: Vec::new(),
            root: NONE,
            source,
            removed: Vec::new(),
            recorder: None,
            root_hash: Some(L::empty_root()),
            stats: HashStats::default(),
            buf: Vec::with_capacity(600),
            key_hint: Vec::new(),
            has_hint: false,
            singles: HashMap::new(),
            record_collapse_loads: true,
            dirty_singles: Vec::new(),
            new_singles: Vec::new(),
            collapse_of: HashMap::new(),
            _layout: PhantomData,
        }
    }

    /// Run `f` with `key` as the lookup hint for the node source.
    pub(crate) fn with_hint<T>(&mut self, key: &[u8], f: impl FnOnce(&mut Self) -> T) -> T {
        self.key_hint.clear();
        self.key_hint.extend_from_slice(key);
        self.has_hint = true;
        let out = f(self);
        self.has_hint = false;
        out
    }

    /// The trie with root `root`, loading nodes from `source` as needed.
    pub fn from_root(source: S, root: H256) -> Self {
        let mut t = Self::new(source);
        if root != L::empty_root() {
            t.root = t.alloc(Slot {
                kind: Kind::Hashed(root),
                cached: ChildRef::hash(root),
                origin: Some(root),
                fresh: false,
                origin_leaf: false,
                known_branch: false,
            });
            t.root_hash = Some(root);
        }
        t
    }

    /// The node source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Take the node source back (the trie's loaded nodes are dropped).
    pub fn into_source(self) -> S {
        self.source
    }

    /// Put a recorder in place (replacing any), for example one taken from another trie.
    pub fn set_recorder(&mut self, recorder: Recorder) {
        self.recorder = Some(recorder);
    }

    /// Whether nodes loaded only to collapse a branch that deletions left with one entry
    /// are recorded (default: yes, as a witness for the root computation needs them).
    /// Turned off, [`Trie::collapse_nodes`] reports them instead, so that a caller can
    /// count the ones the *current* state needs (exact per-transaction proof sizes).
    pub fn set_record_collapse_loads(&mut self, record: bool) {
        self.record_collapse_loads = record;
    }

    /// Mutable access to the node source (to apply a commit to it).
    pub fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// Hash work done so far by [`Trie::root`] and [`Trie::commit`].
    pub fn hash_stats(&self) -> HashStats {
        self.stats
    }

    /// Start recording every pre-state node read (replaces any previous recorder), counting
    /// sizes by the layout's rule ([`Recorder::for_layout`]).
    pub fn start_recording(&mut self) {
        self.recorder = Some(Recorder::for_layout::<L>());
    }

    /// The recorder, if recording.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.recorder.as_ref()
    }

    /// Mutable recorder access (scopes).
    pub fn recorder_mut(&mut self) -> Option<&mut Recorder> {
        self.recorder.as_mut()
    }

    /// Stop recording and return the recorder.
    pub fn take_recorder(&mut self) -> Option<Recorder> {
        self.recorder.take()
    }

    /// Number of live arena slots (loaded nodes plus stubs).
    pub fn loaded_nodes(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Replace the root node, invalidating the cached root hash if it changed.
    pub(crate) fn set_root(&mut self, id: NodeId) {
        if id != self.root || (id != NONE && self.slots[id as usize].cached.is_empty()) {
            self.root_hash = None;
        }
        self.root = id;
    }

    fn alloc(&mut self, slot: Slot) -> NodeId {
        if let Some(id) = self.free.pop() {
            self.slots[id as usize] = slot;
            id
        } else {
            self.slots.push(slot);
            (self.slots.len() - 1) as NodeId
        }
    }

    pub(crate) fn new_node(&mut self, kind: Kind) -> NodeId {
        self.alloc(Slot {
            kind,
            cached: ChildRef::EMPTY,
            origin: None,
            fresh: true,
            origin_leaf: false,
            known_branch: false,
        })
    }

    /// Mark `id` (at `path`) as changed: clears its cache and queues its pre-state version.
    pub(crate) fn touch(&mut self, id: NodeId, path: &[u8]) {
        let slot = &mut self.slots[id as usize];
        slot.cached = ChildRef::EMPTY;
        slot.fresh = true;
        if let Some(hash) = slot.origin.take() {
            let is_leaf = slot.origin_leaf;
            self.removed.push(RemovedNode { path: Nibbles(path.to_vec()), hash, is_leaf });
        }
        self.root_hash = None;
    }

    /// Keep [`Trie::singles`] up to date after branch `id` (at `path`) changed.
    pub(crate) fn note_shape(&mut self, id: NodeId, path: &[u8]) {
        if self.is_single(id) || self.singles.contains_key(&id) {
            self.dirty_singles.push(id);
        }
        if self.is_single(id) {
            self.new_singles.push(id);
            self.singles.entry(id).or_insert_with(|| path.to_vec());
        } else {
            self.singles.remove(&id);
        }
    }

    /// A loaded branch with exactly one entry (its canonical form is a leaf or extension).
    pub(crate) fn is_single(&self, id: NodeId) -> bool {
        match &self.slots[id as usize].kind {
            Kind::Branch { children, value } => {
                let n = children.iter().filter(|c| **c != NONE).count();
                n + usize::from(value.is_some()) == 1
            }
            _ => false,
        }
    }

    /// Touch and release a slot.
    pub(crate) fn free_node(&mut self, id: NodeId, path: &[u8]) {
        if self.singles.remove(&id).is_some() {
            self.dirty_singles.push(id);
        }
        self.touch(id, path);
        self.slots[id as usize].kind = Kind::Hashed(H256::ZERO);
        self.free.push(id);
    }

    /// Make sure `id` is loaded (decoding a `Hashed` stub) and record it if recording.
    pub(crate) fn resolve(&mut self, id: NodeId, path: &[u8]) -> Result<(), TrieError> {
        if let Kind::Hashed(hash) = self.slots[id as usize].kind {
            let loaded = if self.has_hint {
                self.source.load_for_key(path, &hash, &self.key_hint)?
            } else {
                self.source.load(path, &hash)?
            };
            let bytes =
                loaded.ok_or_else(|| TrieError::MissingNode { path: path_hex(path), hash })?;
            if !self.source.trusted() {
                let actual = L::hash(&bytes);
                if actual != hash {
                    return Err(TrieError::HashMismatch {
                        path: path_hex(path),
                        expected: hash,
                        actual,
                    });
                }
            }
            let decoded = L::decode(&bytes)
                .map_err(|source| TrieError::Corrupt { path: path_hex(path), source })?;
            let kind = self.kind_from_decoded(decoded, path, ChildRef::hash(hash))?;
            let slot = &mut self.slots[id as usize];
            slot.origin_leaf = matches!(kind, Kind::Leaf { .. });
            slot.kind = kind;
            if let Some(r) = self.recorder.as_mut() {
                r.record(hash, &bytes);
            }
            return Ok(());
        }
        if self.recorder.is_some() {
            self.record_visit(id);
        }
        Ok(())
    }

    fn record_visit(&mut self, id: NodeId) {
        let Some(origin) = self.slots[id as usize].origin else { return };
        if self.recorder.as_ref().is_some_and(|r| r.contains(&origin)) {
            return;
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        self.encode_clean(id, &mut buf);
        if let Some(r) = self.recorder.as_mut() {
            r.record(origin, &buf);
        }
        self.buf = buf;
    }

    /// Encode a node whose children all have cached references.
    pub(crate) fn encode_clean(&self, id: NodeId, out: &mut Vec<u8>) {
        match &self.slots[id as usize].kind {
            Kind::Leaf { path, value } => value::encode_leaf::<L>(path, value, out),
            Kind::Extension { path, child } => match L::FAMILY {
                Family::Ethereum(codec) => {
                    let c = self.slots[*child as usize].cached;
                    assert!(!c.is_empty(), "clean extension with dirty child");
                    codec.encode_extension_unpacked(path, &c, out)
                }
                Family::Substrate(codec) => {
                    let (refs, value) = self.clean_branch(*child);
                    codec.encode_branch_with(path, &refs, value.map(Value::view), out)
                }
            },
            Kind::Branch { .. } => {
                let (refs, value) = self.clean_branch(id);
                value::encode_branch::<L>(&refs, value, out)
            }
            Kind::Hashed(_) => unreachable!("encode_clean on an unloaded node"),
        }
    }

    /// The children's cached references and the value of branch `branch`, whose children
    /// all have cached references.
    fn clean_branch(&self, branch: NodeId) -> ([ChildRef; 16], Option<&Value>) {
        let Kind::Branch { children, value } = &self.slots[branch as usize].kind else {
            panic!("an extension in a layout without extension nodes holds a branch")
        };
        (self.child_refs(children), value.as_ref())
    }

    fn child_refs(&self, children: &[NodeId; 16]) -> [ChildRef; 16] {
        let mut refs = [ChildRef::EMPTY; 16];
        for (r, &c) in refs.iter_mut().zip(children) {
            if c != NONE {
                *r = self.slots[c as usize].cached;
                assert!(!r.is_empty(), "clean branch with dirty child");
            }
        }
        refs
    }

    /// The slot kind of a decoded node at `path` that its parent refers to by `r`.
    fn kind_from_decoded(
        &mut self,
        node: NodeView<'_>,
        path: &[u8],
        r: ChildRef,
    ) -> Result<Kind, TrieError> {
        Ok(match node {
            NodeView::Empty => return Err(corrupt(path, NodeError::BadExtension)),
            NodeView::Leaf { path: rest, value } => {
                let value = Value::from_view::<L>(value).map_err(|source| corrupt(path, source))?;
                Kind::Leaf { path: rest.0, value }
            }
            NodeView::Extension { path: ext, child } => {
                let mut child_path = path.to_vec();
                child_path.extend_from_slice(ext.as_slice());
                let child = self.child_from_ref(child, &child_path)?;
                self.slots[child as usize].known_branch = true;
                Kind::Extension { path: ext.0, child }
            }
            NodeView::Branch { path: partial, children, value } => {
                let mut ids = [NONE; 16];
                let mut child_path = path.to_vec();
                child_path.extend_from_slice(partial.as_slice());
                child_path.push(0);
                for (i, c) in children.iter().enumerate() {
                    if !c.is_empty() {
                        *child_path.last_mut().expect("pushed") = i as u8;
                        ids[i] = self.child_from_ref(*c, &child_path)?;
                    }
                }
                let value = value.map(Value::from_view::<L>).transpose();
                let value = value.map_err(|source| corrupt(path, source))?;
                let branch = Kind::Branch { children: ids, value };
                if partial.is_empty() {
                    return Ok(branch);
                }
                // A branch with a partial key (no extension nodes): an extension over a
                // branch that caches the pair's reference (see the module docs).
                let inner = self.alloc(Slot {
                    kind: branch,
                    cached: r,
                    origin: None,
                    fresh: false,
                    origin_leaf: false,
                    known_branch: false,
                });
                Kind::Extension { path: partial.0, child: inner }
            }
        })
    }

    fn child_from_ref(&mut self, r: ChildRef, path: &[u8]) -> Result<NodeId, TrieError> {
        match r.kind() {
            ChildKind::Empty => Ok(NONE),
            ChildKind::Hash(h) => Ok(self.alloc(Slot {
                kind: Kind::Hashed(h),
                cached: r,
                origin: Some(h),
                fresh: false,
                origin_leaf: false,
                known_branch: false,
            })),
            ChildKind::Inline(bytes) => {
                let decoded = L::decode(bytes)
                    .map_err(|source| TrieError::Corrupt { path: path_hex(path), source })?;
                let kind = self.kind_from_decoded(decoded, path, r)?;
                Ok(self.alloc(Slot {
                    kind,
                    cached: r,
                    origin: None,
                    fresh: false,
                    origin_leaf: false,
                    known_branch: false,
                }))
            }
        }
    }

    /// The value under `key`, loading nodes as needed.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TrieError> {
        self.with_hint(key, |t| t.get_inner(key))
    }

    fn get_inner(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TrieError> {
        let path = Nibbles::from_bytes(key).0;
        match self.holder(&path)? {
            Some(id) => self.read_value(id, &path),
            None => Ok(None),
        }
    }

    /// Walk to the node that holds the value of the key with nibbles `path`, loading (and
    /// recording) the nodes on the way: the leaf with that path, or the branch where the
    /// path ends (which may hold no value); `None` when the key's path leaves the trie.
    pub(crate) fn holder(&mut self, path: &[u8]) -> Result<Option<NodeId>, TrieError> {
        let mut id = self.root;
        let mut depth = 0;
        while id != NONE {
            self.resolve(id, &path[..depth])?;
            match &self.slots[id as usize].kind {
                Kind::Leaf { path: lp, .. } => {
                    return Ok((lp.as_slice() == &path[depth..]).then_some(id));
                }
                Kind::Extension { path: ep, child } => {
                    if !path[depth..].starts_with(ep) {
                        return Ok(None);
                    }
                    depth += ep.len();
                    id = *child;
                }
                Kind::Branch { children, .. } => {
                    if depth == path.len() {
                        return Ok(Some(id));
                    }
                    id = children[path[depth] as usize];
                    depth += 1;
                }
                Kind::Hashed(_) => unreachable!("resolved above"),
            }
        }
        Ok(None)
    }

    /// Set `key` to `value`, or remove it when `value` is `None` (or empty, in layouts
    /// where an empty value is no value: see [`Trie::insert`]).
    pub fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), TrieError> {
        match value {
            Some(v) => self.insert(key, v),
            None => self.remove(key).map(|_| ()),
        }
    }
}
