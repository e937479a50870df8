//! The block's trie update: one sorted pass over a trie's changes that rewrites exactly the
//! nodes on the changed paths, encoding and hashing each new node once.
//!
//! Input: the pre-state root, the block's changes to this trie sorted by key (each with the
//! key's value before the block, which the commit has read anyway for the reverse diff), and
//! a [`PreState`] that serves stored nodes by path and the one live key under a path. Output:
//! the new root and the node writes (nibble path → `hash ‖ encoding`, or a deletion), which
//! leave the stored nodes exactly as a bottom-up rebuild of the new state would (no stale
//! node survives; tested against one).
//!
//! The walk descends only where changes lead. At a hashed child that a single existing key's
//! change reaches, the leaf is recognised by hashing the key's old leaf (one short keccak),
//! so updates of existing keys never probe storage below the resident branches; inserts that
//! land on another key's leaf, and deletions that collapse a branch, read that leaf (a prefix
//! scan). New subtrees (an insert beside a leaf, a split extension) come from the streaming
//! root builder. A node whose fate depends on its parent (a leaf or an extension that may be
//! merged upward when a branch collapses) travels up as a [`Shape`] and is encoded only where
//! it lands. Branches with many changes near the top fan out to the rayon pool, one task per
//! child.

use std::borrow::Cow;
use std::sync::Arc;

use rayon::prelude::*;
use trie::{
    common_prefix_nibbles, nibble_at, ChildKind, ChildRef, DecodedNode, EmittedKind, EthLayout,
    Layout, NibbleSlice, NodeSink, RootBuilder, TrieId, EMPTY_ROOT, H256,
};

use crate::error::{Corruption, StoreError};

/// A change to one key of the trie.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Change<'a> {
    /// The key (packed bytes).
    pub(crate) key: &'a [u8],
    /// The value before the block (`None`: absent).
    pub(crate) old: Option<&'a [u8]>,
    /// The value after it (`None`: deleted).
    pub(crate) new: Option<&'a [u8]>,
}

/// A key and its value.
pub(crate) type KeyValue = (Vec<u8>, Vec<u8>);

/// A surviving entry of a rebuilt subtree: key and value.
type Pair<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// A leaf's key and, when the changes do not decide it, its value.
type LeafParts<'a> = (Cow<'a, [u8]>, Option<Cow<'a, [u8]>>);

/// What the update reads of the pre-state.
pub(crate) trait PreState: Sync {
    /// The trie being updated (for reports).
    fn trie(&self) -> TrieId;
    /// The stored node at nibble path `path` (`hash ‖ encoding`), or `None` when nothing is
    /// stored there (a leaf, or no node).
    fn node(&self, path: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError>;
    /// What memory knows of the node at `path` without I/O: `Some(Some(node))` stored,
    /// `Some(None)` known not to be stored (a leaf or nothing), `None` unknown. Borrowed:
    /// the walk only decodes it (cloning the `Arc` of every visited node cost an atomic
    /// increment and decrement on a cache line the writer thread shares).
    fn node_in_memory(&self, path: &[u8]) -> Option<Option<&[u8]>> {
        let _ = path;
        None
    }
    /// The one live key under nibble path `path` and its value.
    fn leaf_under(&self, path: &[u8]) -> Result<Option<KeyValue>, StoreError>;
}

/// A node write: nibble path → `hash ‖ encoding` (`None` deletes the stored node).
pub(crate) type NodeWrite = (Vec<u8>, Option<Arc<[u8]>>);

/// The result of [`update_trie`].
#[derive(Debug, Default)]
pub(crate) struct Updated {
    /// The new root.
    pub(crate) root: H256,
    /// Node writes in no particular order; a later write to a path replaces an earlier one.
    pub(crate) writes: Vec<NodeWrite>,
    /// Keccak calls.
    pub(crate) hashes: u64,
    /// Leaves read by a scan of `flat` (inserts beside a leaf, collapses onto one).
    pub(crate) leaf_scans: u64,
    /// Nodes memory knew (resident), and nodes looked up in the store.
    pub(crate) known: u64,
    /// Nodes looked up in the store.
    pub(crate) probes: u64,
}

/// Below this many changes a branch's children are updated on the calling thread.
const PARALLEL_CHANGES_MIN: usize = 256;
/// Branches deeper than this never fan out (the top levels already give every thread work).
const PARALLEL_DEPTH_MAX: usize = 1;

/// A node that is not yet placed in its parent, or a branch that is.
#[derive(Debug)]
enum Shape<'a> {
    Empty,
    /// A leaf at nibble depth `start` of its full `key`.
    Leaf {
        key: Cow<'a, [u8]>,
        start: usize,
        value: Cow<'a, [u8]>,
    },
    /// An extension over `path` (nibbles) to a placed branch.
    Extension {
        path: Vec<u8>,
        child: Ref,
    },
    /// A branch, already written at its path when hashed (or inline).
    Placed(Ref),
}

/// A reference to a node of the new trie: known, or the hash of a node encoded in this
/// task whose hash waits for the task's batch (see [`Out::resolve`]).
#[derive(Debug, Clone, Copy)]
enum Ref {
    Ready(ChildRef),
    /// `Out::pending[id]`.
    Pending(u32),
}

/// A pre-state reference, which is never pending.
fn ready(r: Ref) -> ChildRef {
    match r {
        Ref::Ready(r) => r,
        Ref::Pending(_) => unreachable!("a pre-state reference is never pending"),
    }
}

/// A node write whose value may still wait for its node's hash.
enum Write {
    Ready(NodeWrite),
    /// `hash ‖ encoding` of `Out::pending[id]` at this path.
    Pending(Vec<u8>, u32),
}

/// A node encoded in this task, hashed when the task resolves.
struct Pending {
    /// Its encoding: `Out::arena[start..end]`, after 32 bytes that take its hash (so that
    /// `arena[start - 32..end]` is its stored value, `hash ‖ encoding`).
    start: u32,
    end: u32,
    /// 0 for a node with no pending child, else one more than its highest pending child:
    /// nodes are hashed level by level, so a parent's slots are filled before it is hashed.
    level: u32,
    /// Where its hash goes: the pending parent and the offset of the 32-byte slot in the
    /// parent's encoding.
    parent: Option<(u32, u32)>,
}

/// A claimed old value's leaf, checked when the task resolves: the pending node of its
/// encoding, the hash its parent refers to, and the key (`Out::arena[key.0..key.1]`).
struct Check {
    id: u32,
    expected: H256,
    key: (u32, u32),
}

/// The pre-state at a path.
enum Pre<'a> {
    /// As its parent refers to it.
    Ref(ChildRef),
    /// A node that exists only in this pass (the rest of a split extension).
    Virtual(Shape<'a>),
}

/// A pre-state node, decoded.
// A short-lived stack value, like `trie::DecodedNode`: boxing the branch would allocate on
// every visit.
#[allow(clippy::large_enum_variant)]
enum Loaded<'a> {
    Empty,
    /// A leaf; `value` is `None` when its key is among the changes (which decide it).
    Leaf {
        key: Cow<'a, [u8]>,
        value: Option<Cow<'a, [u8]>>,
    },
    Extension {
        path: Vec<u8>,
        child: ChildRef,
    },
    Branch {
        children: [ChildRef; 16],
        value: Option<Vec<u8>>,
        virt: Option<(u8, Shape<'a>)>,
    },
}

/// Writes and hash count of one task.
///
/// Node hashes are not computed where a node is encoded: the encoding goes into `arena`
/// as a pending node and its parent gets a 32-byte slot for the hash. [`Out::resolve`]
/// then hashes the pending nodes level by level, eight at a time ([`keccak8`]), filling
/// each parent's slot before the parent's level is hashed.
#[derive(Default)]
struct Out {
    writes: Vec<Write>,
    hashes: u64,
    leaf_scans: u64,
    known: u64,
    probes: u64,
    buf: Vec<u8>,
    arena: Vec<u8>,
    pending: Vec<Pending>,
    checks: Vec<Check>,
    /// The hashes of `pending`, once resolved.
    resolved: Vec<H256>,
}

/// Bytes of an RLP list header, from its first byte.
fn list_header_len(first: u8) -> usize {
    if first <= 0xf7 {
        1
    } else {
        1 + usize::from(first - 0xf7)
    }
}

impl Out {
    /// Encode into `self.buf` the leaf of `key` with `value`, hanging `start` nibbles deep.
    fn encode_leaf(&mut self, key: &[u8], start: usize, value: &[u8]) {
        self.buf.clear();
        EthLayout::encode_leaf(NibbleSlice::range(key, start, key.len() * 2), value, &mut self.buf);
    }

    fn delete(&mut self, path: &[u8]) {
        self.writes.push(Write::Ready((path.to_vec(), None)));
    }

    /// The reference to the encoding in `self.buf`: inline when short (unless `force`),
    /// else a pending node. `children` are the pending nodes it refers to, each with the
    /// offset of its hash slot in `self.buf`. A hashed node that is stored at `stored_at`
    /// gets its write here, in order, with the value filled in when resolved.
    fn pend(&mut self, children: &[(u32, u32)], stored_at: Option<&[u8]>, force: bool) -> Ref {
        if self.buf.len() <= trie::INLINE_MAX && !force {
            debug_assert!(children.is_empty(), "a node with a hashed child is not inline");
            return Ref::Ready(EthLayout::child_ref(&self.buf));
        }
        let id = self.pending.len() as u32;
        self.arena.extend_from_slice(&[0u8; 32]);
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(&self.buf);
        let mut level = 0;
        for &(child, offset) in children {
            let c = &mut self.pending[child as usize];
            c.parent = Some((id, offset));
            level = level.max(c.level + 1);
        }
        self.pending.push(Pending { start, end: self.arena.len() as u32, level, parent: None });
        if let Some(path) = stored_at {
            self.writes.push(Write::Pending(path.to_vec(), id));
        }
        self.hashes += 1;
        Ref::Pending(id)
    }

    /// Check, when resolved, that the leaf encoded in `self.buf` hashes to `expected`;
    /// false when it cannot (an inline leaf under a hash reference).
    fn check(&mut self, expected: H256, key: &[u8]) -> bool {
        if self.buf.len() <= trie::INLINE_MAX {
            return false;
        }
        let Ref::Pending(id) = self.pend(&[], None, false) else {
            unreachable!("a long encoding is pending")
        };
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(key);
        self.checks.push(Check { id, expected, key: (start, self.arena.len() as u32) });
        true
    }

    /// Hash every pending node, level by level, filling the parents' slots; then give the
    /// pending writes their values and run the checks. `Err` names the key of the first
    /// failed check.
    fn resolve(&mut self) -> Result<(), Vec<u8>> {
        let mut order: Vec<u32> = (0..self.pending.len() as u32).collect();
        order.sort_by_key(|&id| self.pending[id as usize].level);
        self.resolved.resize(self.pending.len(), H256::ZERO);
        let mut digests: Vec<[u8; 32]> = Vec::new();
        for level in order
            .chunk_by(|a, b| self.pending[*a as usize].level == self.pending[*b as usize].level)
        {
            let msgs: Vec<&[u8]> = level
                .iter()
                .map(|&id| {
                    let p = &self.pending[id as usize];
                    &self.arena[p.start as usize..p.end as usize]
                })
                .collect();
            digests.clear();
            digests.resize(msgs.len(), [0u8; 32]);
            keccak8::keccak256_many(&msgs, &mut digests);
            for (&id, d) in level.iter().zip(&digests) {
                self.resolved[id as usize] = H256(*d);
                let p = &self.pending[id as usize];
                let own = p.start as usize - 32;
                self.arena[own..own + 32].copy_from_slice(d);
                if let Some((parent, offset)) = p.parent {
                    let at = (self.pending[parent as usize].start + offset) as usize;
                    self.arena[at..at + 32].copy_from_slice(d);
                }
            }
        }
        if let Some(c) = self.checks.iter().find(|c| self.resolved[c.id as usize] != c.expected) {
            return Err(self.arena[c.key.0 as usize..c.key.1 as usize].to_vec());
        }
        for w in &mut self.writes {
            if let Write::Pending(path, id) = w {
                let p = &self.pending[*id as usize];
                let value = Arc::from(&self.arena[p.start as usize - 32..p.end as usize]);
                *w = Write::Ready((std::mem::take(path), Some(value)));
            }
        }
        self.checks.clear();
        Ok(())
    }

    /// `r` with a resolved pending node replaced by its hash.
    fn settled(&self, r: Ref) -> Ref {
        match r {
            Ref::Pending(id) => Ref::Ready(ChildRef::hash(self.resolved[id as usize])),
            ready => ready,
        }
    }

    /// The writes, once resolved.
    fn into_writes(self) -> Vec<NodeWrite> {
        self.writes
            .into_iter()
            .map(|w| match w {
                Write::Ready(w) => w,
                Write::Pending(..) => unreachable!("writes are taken once resolved"),
            })
            .collect()
    }

    fn absorb(&mut self, other: Out) {
        self.hashes += other.hashes;
        self.leaf_scans += other.leaf_scans;
        self.known += other.known;
        self.probes += other.probes;
        self.writes.extend(other.writes);
    }
}

/// A stored node's value, `hash ‖ encoding`: assembled in `scratch` (two memcpys), then
/// copied into one allocation (`Arc::from_iter` would write it byte by byte).
fn stored_value(scratch: &mut Vec<u8>, hash: &H256, encoding: &[u8]) -> Arc<[u8]> {
    scratch.clear();
    scratch.extend_from_slice(&hash.0);
    scratch.extend_from_slice(encoding);
    Arc::from(scratch.as_slice())
}

/// Collects the builder's hashed nodes as writes (with a scratch buffer).
struct BuilderSink<'o>(&'o mut Vec<Write>, Vec<u8>);

impl NodeSink for BuilderSink<'_> {
    fn node(&mut self, _: EmittedKind, path: NibbleSlice<'_>, encoded: &[u8], r: &ChildRef) {
        if let Some(h) = r.as_hash() {
            let value = stored_value(&mut self.1, &h, encoded);
            self.0.push(Write::Ready((path.to_nibbles().0, Some(value))));
        }
    }
}

/// Apply `changes` (sorted by key, each a real change: `old != new`) to the trie with root
/// `root` over `pre`. With `verify_old`, every old value a change claims is checked against
/// the trie ([`Corruption::OldValue`] when it does not hold); without, the old values are
/// trusted as far as they decide the shape (they came from the same store).
pub(crate) fn update_trie<P: PreState>(
    pre: &P,
    root: H256,
    changes: &[Change<'_>],
    verify_old: bool,
) -> Result<Updated, StoreError> {
    if changes.is_empty() {
        return Ok(Updated { root, ..Updated::default() });
    }
    let w = Walker { pre, verify_old };
    let mut out = Out::default();
    let top = if root == EMPTY_ROOT { ChildRef::EMPTY } else { ChildRef::hash(root) };
    let mut path = Vec::with_capacity(64);
    let (shape, stored) = w.apply(&mut path, Pre::Ref(top), changes, &mut out)?;
    let root = w.place_root(shape, stored, &mut out)?;
    Ok(Updated {
        root,
        hashes: out.hashes,
        leaf_scans: out.leaf_scans,
        known: out.known,
        probes: out.probes,
        writes: out.into_writes(),
    })
}

struct Walker<'p, P: PreState> {
    pre: &'p P,
    /// Check every old value a change claims against the leaf it names (old values from a
    /// caller); the store's own reads need no check.
    verify_old: bool,
}

/// The key's nibbles from `from` on equal `path`.
fn key_follows(key: &[u8], from: usize, path: &[u8]) -> bool {
    key.len() * 2 >= from + path.len()
        && path.iter().enumerate().all(|(i, n)| nibble_at(key, from + i) == *n)
}

/// Pack an even number of nibbles into bytes.
fn pack(nibbles: &[u8]) -> Option<Vec<u8>> {
    nibbles.len().is_multiple_of(2).then(|| nibbles.chunks(2).map(|p| (p[0] << 4) | p[1]).collect())
}

impl<'p, P: PreState> Walker<'p, P> {
    fn corrupt(&self, c: Corruption) -> StoreError {
        c.into()
    }

    /// The new shape of the node at `path` (whose pre-state is `pre`) under `changes`
    /// (non-empty, all under `path`), and whether a node was stored at `path` before.
    fn apply<'a>(
        &self,
        path: &mut Vec<u8>,
        pre: Pre<'a>,
        changes: &[Change<'a>],
        out: &mut Out,
    ) -> Result<(Shape<'a>, bool), StoreError> {
        let (loaded, stored) = self.load(path, pre, changes, out)?;
        let shape = match loaded {
            // The common case: one change to the key whose leaf this is.
            Loaded::Leaf { value: None, .. } if changes.len() == 1 => match changes[0].new {
                Some(v) => Shape::Leaf {
                    key: Cow::Borrowed(changes[0].key),
                    start: path.len(),
                    value: Cow::Borrowed(v),
                },
                None => Shape::Empty,
            },
            Loaded::Empty => self.build(path, None, changes, out)?,
            Loaded::Leaf { key, value } => self.build(path, Some((key, value)), changes, out)?,
            Loaded::Extension { path: ext, child } => {
                return self.apply_extension(path, ext, child, stored, changes, out);
            }
            Loaded::Branch { children, value, virt } => {
                let shape = self.apply_branch(path, children, value, virt, stored, changes, out)?;
                return Ok((shape, stored));
            }
        };
        Ok((shape, stored))
    }

    /// Decode the pre-state at `path`; the flag says whether a node is stored there.
    fn load<'a>(
        &self,
        path: &[u8],
        pre: Pre<'a>,
        changes: &[Change<'a>],
        out: &mut Out,
    ) -> Result<(Loaded<'a>, bool), StoreError> {
        let r = match pre {
            Pre::Virtual(Shape::Extension { path, child }) => {
                return Ok((Loaded::Extension { path, child: ready(child) }, false))
            }
            Pre::Virtual(Shape::Placed(r)) => ready(r),
            Pre::Ref(r) => r,
            Pre::Virtual(Shape::Empty) => return Ok((Loaded::Empty, false)),
            Pre::Virtual(Shape::Leaf { key, value, .. }) => {
                return Ok((Loaded::Leaf { key, value: Some(value) }, false))
            }
        };
        match r.kind() {
            ChildKind::Empty => Ok((Loaded::Empty, false)),
            ChildKind::Inline(bytes) => Ok((self.decoded(path, bytes)?, false)),
            ChildKind::Hash(h) => self.load_hashed(path, h, changes, out),
        }
    }

    fn load_hashed<'a>(
        &self,
        path: &[u8],
        hash: H256,
        changes: &[Change<'a>],
        out: &mut Out,
    ) -> Result<(Loaded<'a>, bool), StoreError> {
        let known = self.pre.node_in_memory(path);
        if known.is_some() {
            out.known += 1;
        }
        match known {
            Some(Some(v)) => return self.stored_node(path, hash, v),
            // Nothing stored under a hash reference: a leaf.
            Some(None) => return Ok((self.leaf_for(path, Some(hash), changes, out)?, false)),
            None => {}
        }
        // One existing key's change: if its old leaf hashes to the reference, this is it.
        if let [c @ Change { old: Some(old), .. }] = changes {
            if self.leaf_hash(path, c.key, old, out) == Some(hash) {
                return Ok((Loaded::Leaf { key: Cow::Borrowed(c.key), value: None }, false));
            }
        }
        out.probes += 1;
        match self.pre.node(path)? {
            Some(v) => self.stored_node(path, hash, &v),
            None => Ok((self.leaf_for(path, Some(hash), changes, out)?, false)),
        }
    }

    /// The hash of the leaf of `key` with `value` at `path` (`None` if it would be inline).
    fn leaf_hash(&self, path: &[u8], key: &[u8], value: &[u8], out: &mut Out) -> Option<H256> {
        out.encode_leaf(key, path.len(), value);
        if out.buf.len() <= trie::INLINE_MAX {
            return None;
        }
        out.hashes += 1;
        Some(EthLayout::hash(&out.buf))
    }

    /// The change of `key` claims an old value the trie does not hold.
    fn old_value_error(&self, key: &[u8]) -> StoreError {
        self.corrupt(Corruption::OldValue { trie: self.pre.trie(), key: key.to_vec() })
    }

    /// A stored node (`hash ‖ encoding`) at `path`, checked against its parent's `hash`.
    fn stored_node<'a>(
        &self,
        path: &[u8],
        hash: H256,
        v: &[u8],
    ) -> Result<(Loaded<'a>, bool), StoreError> {
        if v.len() < 32 || v[..32] != hash.0 {
            let trie = self.pre.trie();
            return Err(self.corrupt(Corruption::NodeHash {
                trie,
                path: path.to_vec(),
                expected: hash,
            }));
        }
        Ok((self.decoded(path, &v[32..])?, true))
    }

    /// A decoded node at `path`, owned.
    fn decoded<'a>(&self, path: &[u8], bytes: &[u8]) -> Result<Loaded<'a>, StoreError> {
        let node = EthLayout::decode(bytes).map_err(|source| {
            self.corrupt(Corruption::Node { trie: self.pre.trie(), path: path.to_vec(), source })
        })?;
        Ok(match node {
            DecodedNode::Empty => Loaded::Empty,
            DecodedNode::Leaf { path: rest, value } => {
                let mut full = path.to_vec();
                full.extend_from_slice(rest.as_slice());
                let key = pack(&full).ok_or_else(|| {
                    self.corrupt(Corruption::OddKey { trie: self.pre.trie(), path: full.clone() })
                })?;
                Loaded::Leaf { key: Cow::Owned(key), value: Some(Cow::Owned(value.to_vec())) }
            }
            DecodedNode::Extension { path: ext, child } => Loaded::Extension { path: ext.0, child },
            DecodedNode::Branch { children, value } => {
                Loaded::Branch { children, value: value.map(<[u8]>::to_vec), virt: None }
            }
        })
    }

    /// The leaf at `path` (no node is stored there; `hash` is its reference, when hashed):
    /// the key of the one existing change under it (its old value must give that hash), or
    /// else the one live key a scan finds (which no change may claim absent).
    fn leaf_for<'a>(
        &self,
        path: &[u8],
        hash: Option<H256>,
        changes: &[Change<'a>],
        out: &mut Out,
    ) -> Result<Loaded<'a>, StoreError> {
        let mut existing = changes.iter().filter(|c| c.old.is_some());
        match (existing.next(), existing.next()) {
            (Some(c), None) => {
                if let (true, Some(expected)) = (self.verify_old, hash) {
                    // Checked with the task's batch of hashes (see `Out::resolve`).
                    out.encode_leaf(c.key, path.len(), c.old.unwrap_or_default());
                    if !out.check(expected, c.key) {
                        return Err(self.old_value_error(c.key));
                    }
                }
                return Ok(Loaded::Leaf { key: Cow::Borrowed(c.key), value: None });
            }
            (Some(_), Some(c)) => return Err(self.old_value_error(c.key)),
            (None, _) => {}
        }
        out.leaf_scans += 1;
        let Some((key, value)) = self.pre.leaf_under(path)? else {
            let trie = self.pre.trie();
            return Err(self.corrupt(Corruption::MissingLeaf { trie, path: path.to_vec() }));
        };
        if changes.iter().any(|c| c.key == key.as_slice()) {
            return Err(self.old_value_error(&key));
        }
        Ok(Loaded::Leaf { key: Cow::Owned(key), value: Some(Cow::Owned(value)) })
    }

    /// The new subtree at `path` over an empty slot or a leaf: the surviving entries, as a
    /// leaf, an extension to a built branch, or a built branch.
    fn build<'a>(
        &self,
        path: &[u8],
        leaf: Option<LeafParts<'a>>,
        changes: &[Change<'a>],
        out: &mut Out,
    ) -> Result<Shape<'a>, StoreError> {
        let mut entries: Vec<Pair<'a>> = Vec::with_capacity(changes.len() + 1);
        // The key whose leaf this is, when one of the changes decided it (verified there).
        let claimed = match &leaf {
            Some((key, None)) => Some(key.clone()),
            _ => None,
        };
        let mut kept = match leaf {
            Some((key, Some(value))) => Some((key, value)),
            _ => None,
        };
        for c in changes {
            if let Some((k, v)) = &kept {
                if k.as_ref() < c.key {
                    entries.extend(kept.take());
                } else if k.as_ref() == c.key {
                    // The change decides the key's value (an inline leaf that it reaches).
                    if c.old != Some(v.as_ref()) {
                        return Err(self.old_value_error(c.key));
                    }
                    kept = None;
                    if let Some(v) = c.new {
                        entries.push((Cow::Borrowed(c.key), Cow::Borrowed(v)));
                    }
                    continue;
                }
            }
            // Any other key under an empty slot or another key's leaf did not exist.
            if c.old.is_some() && claimed.as_deref() != Some(c.key) {
                return Err(self.old_value_error(c.key));
            }
            if let Some(v) = c.new {
                entries.push((Cow::Borrowed(c.key), Cow::Borrowed(v)));
            }
        }
        entries.extend(kept);
        let start = path.len();
        let (first, last) = match (entries.first(), entries.last()) {
            (Some(f), Some(l)) => (f, l),
            _ => return Ok(Shape::Empty),
        };
        if entries.len() == 1 {
            let (key, value) = entries.pop().unwrap_or_else(|| unreachable!("one entry"));
            return Ok(Shape::Leaf { key, start, value });
        }
        let common = common_prefix_nibbles(&first.0, &last.0);
        let ext: Vec<u8> = (start..common).map(|i| nibble_at(&first.0, i)).collect();
        let branch = Ref::Ready(self.built(common, &entries, out)?);
        Ok(if ext.is_empty() {
            Shape::Placed(branch)
        } else {
            Shape::Extension { path: ext, child: branch }
        })
    }

    /// Build the branch at nibble depth `depth` over `entries` (sorted, sharing `depth`
    /// nibbles), writing its hashed nodes.
    fn built(
        &self,
        depth: usize,
        entries: &[Pair<'_>],
        out: &mut Out,
    ) -> Result<ChildRef, StoreError> {
        let mut b =
            RootBuilder::<EthLayout, _>::subtree(depth, BuilderSink(&mut out.writes, Vec::new()));
        for (k, v) in entries {
            b.add(k, v).map_err(|source| {
                self.corrupt(Corruption::FlatOrder { trie: self.pre.trie(), source })
            })?;
        }
        let (r, _, stats) = b.finish_ref();
        out.hashes += stats.hashes;
        Ok(r)
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_extension<'a>(
        &self,
        path: &mut Vec<u8>,
        ext: Vec<u8>,
        child: ChildRef,
        stored: bool,
        changes: &[Change<'a>],
        out: &mut Out,
    ) -> Result<(Shape<'a>, bool), StoreError> {
        let base = path.len();
        if !changes.iter().all(|c| key_follows(c.key, base, &ext)) {
            // A change leaves the extension's path: split it, as a branch with one child.
            let child = Ref::Ready(child);
            let rest = if ext.len() == 1 {
                Shape::Placed(child)
            } else {
                Shape::Extension { path: ext[1..].to_vec(), child }
            };
            let children = [ChildRef::EMPTY; 16];
            let virt = Some((ext[0], rest));
            let shape = self.apply_branch(path, children, None, virt, stored, changes, out)?;
            return Ok((shape, stored));
        }
        path.extend_from_slice(&ext);
        let result = self.apply(path, Pre::Ref(child), changes, out);
        let (below, below_stored) = match result {
            Ok(r) => r,
            Err(e) => {
                path.truncate(base);
                return Err(e);
            }
        };
        let shape = match below {
            Shape::Placed(r) => Shape::Extension { path: ext, child: r },
            merged => {
                // The node below is not placed at its path: it merges into this one.
                if below_stored {
                    out.delete(path);
                }
                match merged {
                    Shape::Empty => Shape::Empty,
                    Shape::Leaf { key, value, .. } => Shape::Leaf { key, start: base, value },
                    Shape::Extension { path: deeper, child } => {
                        let mut joined = ext;
                        joined.extend_from_slice(&deeper);
                        Shape::Extension { path: joined, child }
                    }
                    Shape::Placed(_) => unreachable!("handled above"),
                }
            }
        };
        path.truncate(base);
        Ok((shape, stored))
    }

    /// Apply the changes under a branch; `virt` is a child that exists only in this pass.
    #[allow(clippy::too_many_arguments)]
    fn apply_branch<'a>(
        &self,
        path: &mut Vec<u8>,
        mut children: [ChildRef; 16],
        value: Option<Vec<u8>>,
        mut virt: Option<(u8, Shape<'a>)>,
        stored: bool,
        changes: &[Change<'a>],
        out: &mut Out,
    ) -> Result<Shape<'a>, StoreError> {
        let base = path.len();
        // The change of the key that ends here (it sorts first), then one group per child.
        let (own, rest) = match changes.split_first() {
            Some((c, rest)) if c.key.len() * 2 == base => (Some(c), rest),
            _ => (None, changes),
        };
        let mut groups: Vec<(u8, Pre<'a>, &[Change<'a>])> = Vec::with_capacity(16);
        let mut i = 0;
        while i < rest.len() {
            let n = nibble_at(rest[i].key, base);
            let j = i + rest[i..].iter().take_while(|c| nibble_at(c.key, base) == n).count();
            let pre = match virt.take() {
                Some((v, shape)) if v == n => Pre::Virtual(shape),
                other => {
                    virt = other;
                    Pre::Ref(children[n as usize])
                }
            };
            groups.push((n, pre, &rest[i..j]));
            i = j;
        }
        let shapes = self.apply_children(path, groups, out)?;
        let new_value: Option<Cow<'a, [u8]>> = match own {
            Some(c) => c.new.map(Cow::Borrowed),
            None => value.map(Cow::Owned),
        };
        // Children that are gone: delete their stored nodes whatever becomes of this one.
        let mut touched = Vec::with_capacity(shapes.len());
        for (n, shape, below_stored) in shapes {
            if matches!(shape, Shape::Empty) {
                if below_stored {
                    path.push(n);
                    out.delete(path);
                    path.pop();
                }
                children[n as usize] = ChildRef::EMPTY;
            } else {
                touched.push((n, shape, below_stored));
            }
        }
        let mut alive: u16 = 0;
        for (n, c) in children.iter().enumerate() {
            alive |= u16::from(!c.is_empty()) << n;
        }
        for n in touched.iter().map(|t| t.0).chain(virt.as_ref().map(|v| v.0)) {
            alive |= 1 << n;
        }
        match (alive.count_ones(), new_value) {
            (0, None) => Ok(Shape::Empty),
            (0, Some(v)) => {
                let key = pack(path).ok_or_else(|| {
                    self.corrupt(Corruption::OddKey { trie: self.pre.trie(), path: path.clone() })
                })?;
                Ok(Shape::Leaf { key: Cow::Owned(key), start: base, value: v })
            }
            (1, None) => {
                let n = alive.trailing_zeros() as u8;
                let (below, below_stored) = match touched.pop() {
                    Some((_, shape, st)) => (shape, st),
                    None => self.untouched(path, n, children[n as usize], virt.take(), out)?,
                };
                path.push(n);
                let merged = self.collapse(path, n, below, below_stored, out);
                path.pop();
                Ok(merged)
            }
            (_, value) => {
                let mut refs = children.map(Ref::Ready);
                for (n, shape, below_stored) in touched {
                    path.push(n);
                    refs[n as usize] = self.place(path, shape, below_stored, out);
                    path.pop();
                }
                if let Some((v, shape)) = virt.take() {
                    path.push(v);
                    refs[v as usize] = self.place(path, shape, false, out);
                    path.pop();
                }
                let r = encode_branch(&refs, value.as_deref(), path, out);
                if stored && matches!(r, Ref::Ready(_)) {
                    out.delete(path);
                }
                Ok(Shape::Placed(r))
            }
        }
    }

    /// Apply each group to its child, on the rayon pool when there is enough work.
    fn apply_children<'a>(
        &self,
        path: &mut Vec<u8>,
        groups: Vec<(u8, Pre<'a>, &[Change<'a>])>,
        out: &mut Out,
    ) -> Result<Vec<(u8, Shape<'a>, bool)>, StoreError> {
        let total: usize = groups.iter().map(|g| g.2.len()).sum();
        if groups.len() > 1 && total >= PARALLEL_CHANGES_MIN && path.len() <= PARALLEL_DEPTH_MAX {
            let base: &[u8] = path;
            let results: Vec<Result<(u8, Shape<'a>, bool, Out), StoreError>> = groups
                .into_par_iter()
                .map(|(n, pre, group)| {
                    let mut p = Vec::with_capacity(64);
                    p.extend_from_slice(base);
                    p.push(n);
                    let mut o = Out::default();
                    let (s, st) = self.apply(&mut p, pre, group, &mut o)?;
                    let s = self.settle(s, &mut o)?;
                    Ok((n, s, st, o))
                })
                .collect();
            let results = results.into_iter().collect::<Result<Vec<_>, _>>()?;
            // One allocation for every child's writes (growing by doubling would copy them
            // again and touch fresh pages at each step).
            out.writes.reserve(results.iter().map(|r| r.3.writes.len()).sum());
            let mut shapes = Vec::with_capacity(results.len());
            for (n, s, st, o) in results {
                out.absorb(o);
                shapes.push((n, s, st));
            }
            return Ok(shapes);
        }
        let mut shapes = Vec::with_capacity(groups.len());
        for (n, pre, group) in groups {
            path.push(n);
            let r = self.apply(path, pre, group, out);
            path.pop();
            let (s, st) = r?;
            shapes.push((n, s, st));
        }
        Ok(shapes)
    }

    /// The shape of an untouched child `n` of the branch at `path` (the branch collapses
    /// onto it).
    fn untouched<'a>(
        &self,
        path: &mut Vec<u8>,
        n: u8,
        child: ChildRef,
        virt: Option<(u8, Shape<'a>)>,
        out: &mut Out,
    ) -> Result<(Shape<'a>, bool), StoreError> {
        if let Some((v, shape)) = virt {
            if v == n {
                return Ok((shape, false));
            }
        }
        path.push(n);
        let loaded = self.load(path, Pre::Ref(child), &[], out);
        path.pop();
        let (loaded, stored) = loaded?;
        let start = path.len() + 1;
        Ok(match loaded {
            Loaded::Empty => (Shape::Empty, stored),
            Loaded::Leaf { key, value } => {
                let value = value.unwrap_or_else(|| unreachable!("a scanned leaf has its value"));
                (Shape::Leaf { key, start, value }, stored)
            }
            Loaded::Extension { path, child } => {
                (Shape::Extension { path, child: Ref::Ready(child) }, stored)
            }
            // A branch stays where it is: only its reference moves into an extension.
            Loaded::Branch { .. } => (Shape::Placed(Ref::Ready(child)), stored),
        })
    }

    /// The single child `n` (at `path`, already extended by `n`) absorbs its collapsing
    /// parent: the result describes the node at the parent's path.
    fn collapse<'a>(
        &self,
        path: &[u8],
        n: u8,
        below: Shape<'a>,
        below_stored: bool,
        out: &mut Out,
    ) -> Shape<'a> {
        match below {
            Shape::Placed(r) => Shape::Extension { path: vec![n], child: r },
            other => {
                if below_stored {
                    out.delete(path);
                }
                match other {
                    Shape::Leaf { key, start, value } => {
                        Shape::Leaf { key, start: start - 1, value }
                    }
                    Shape::Extension { path: deeper, child } => {
                        let mut joined = Vec::with_capacity(deeper.len() + 1);
                        joined.push(n);
                        joined.extend_from_slice(&deeper);
                        Shape::Extension { path: joined, child }
                    }
                    Shape::Empty | Shape::Placed(_) => {
                        unreachable!("a live child is not empty; placed is handled above")
                    }
                }
            }
        }
    }

    /// Encode `shape` at `path` where its parent refers to it; write it when it is a hashed
    /// node that is stored (extensions), delete a stored node it replaces.
    fn place(&self, path: &[u8], shape: Shape<'_>, stored: bool, out: &mut Out) -> Ref {
        match shape {
            Shape::Empty => {
                if stored {
                    out.delete(path);
                }
                Ref::Ready(ChildRef::EMPTY)
            }
            Shape::Leaf { key, start, value } => {
                out.encode_leaf(&key, start, &value);
                if stored {
                    out.delete(path);
                }
                out.pend(&[], None, false)
            }
            Shape::Extension { path: ext, child } => {
                let r = encode_extension(&ext, child, Some(path), false, out);
                if stored && matches!(r, Ref::Ready(_)) {
                    out.delete(path);
                }
                r
            }
            Shape::Placed(r) => {
                let inline = matches!(r, Ref::Ready(c) if c.as_hash().is_none());
                if stored && inline {
                    out.delete(path);
                }
                r
            }
        }
    }

    /// Resolve a task's pending hashes (a failed check is the claimed key's error) and
    /// give its shape ready references.
    fn settle<'a>(&self, shape: Shape<'a>, out: &mut Out) -> Result<Shape<'a>, StoreError> {
        out.resolve().map_err(|key| self.old_value_error(&key))?;
        Ok(match shape {
            Shape::Placed(r) => Shape::Placed(out.settled(r)),
            Shape::Extension { path, child } => {
                Shape::Extension { path, child: out.settled(child) }
            }
            other => other,
        })
    }

    /// The root: stored whatever its size, and always committed to by its hash. Resolves
    /// every pending hash of the top task.
    fn place_root(
        &self,
        shape: Shape<'_>,
        stored: bool,
        out: &mut Out,
    ) -> Result<H256, StoreError> {
        let root = match shape {
            Shape::Empty => {
                if stored {
                    out.delete(&[]);
                }
                None
            }
            Shape::Placed(Ref::Pending(id)) => Some(Ref::Pending(id)),
            Shape::Placed(Ref::Ready(r)) => match r.kind() {
                ChildKind::Hash(h) => Some(Ref::Ready(ChildRef::hash(h))),
                ChildKind::Inline(bytes) => {
                    out.buf.clear();
                    out.buf.extend_from_slice(bytes);
                    Some(out.pend(&[], Some(&[]), true))
                }
                ChildKind::Empty => None,
            },
            Shape::Leaf { key, start, value } => {
                out.encode_leaf(&key, start, &value);
                Some(out.pend(&[], Some(&[]), true))
            }
            Shape::Extension { path, child } => {
                Some(encode_extension(&path, child, Some(&[]), true, out))
            }
        };
        out.resolve().map_err(|key| self.old_value_error(&key))?;
        Ok(match root.map(|r| out.settled(r)) {
            Some(Ref::Ready(r)) => {
                r.as_hash().unwrap_or_else(|| unreachable!("the root is hashed"))
            }
            Some(Ref::Pending(_)) => unreachable!("resolved"),
            None => EMPTY_ROOT,
        })
    }
}

/// Encode a branch over `refs` (pending children get a slot for their hash) and make it a
/// reference: pending and stored at `path` when hashed.
fn encode_branch(refs: &[Ref; 16], value: Option<&[u8]>, path: &[u8], out: &mut Out) -> Ref {
    let mut children = [ChildRef::EMPTY; 16];
    for (c, r) in children.iter_mut().zip(refs) {
        *c = match r {
            Ref::Ready(r) => *r,
            Ref::Pending(_) => ChildRef::hash(H256::ZERO),
        };
    }
    out.buf.clear();
    EthLayout::encode_branch(&children, value, &mut out.buf);
    let mut waiting = [(0u32, 0u32); 16];
    let mut count = 0;
    let mut at = list_header_len(out.buf[0]);
    for (c, r) in children.iter().zip(refs) {
        if let Ref::Pending(id) = r {
            waiting[count] = (*id, at as u32 + 1);
            count += 1;
        }
        at += c.encoded_len();
    }
    out.pend(&waiting[..count], Some(path), false)
}

/// Encode an extension over `ext` to `child` and make it a reference (pending and stored at
/// `stored_at` when hashed, or always with `force`).
fn encode_extension(
    ext: &[u8],
    child: Ref,
    stored_at: Option<&[u8]>,
    force: bool,
    out: &mut Out,
) -> Ref {
    let (r, pending) = match child {
        Ref::Ready(r) => (r, None),
        Ref::Pending(id) => (ChildRef::hash(H256::ZERO), Some(id)),
    };
    out.buf.clear();
    EthLayout::encode_extension_unpacked(ext, &r, &mut out.buf);
    match pending {
        // The child's hash is the encoding's last 32 bytes.
        Some(id) => out.pend(&[(id, (out.buf.len() - 32) as u32)], stored_at, force),
        None => out.pend(&[], stored_at, force),
    }
}

/// The in-memory pre-state the unit tests and the speed probe update.
#[cfg(test)]
mod mem {
    use std::collections::{BTreeMap, HashMap};

    use super::*;

    /// Which stored nodes memory knows without a lookup ([`PreState::node_in_memory`]).
    #[derive(Debug, Clone, Copy, Default)]
    pub(super) enum Known {
        /// Nodes at paths of even length ("resident" and complete): every lookup kind is
        /// exercised.
        #[default]
        EvenPaths,
        /// None: every node is looked up.
        Nothing,
        /// Every node.
        Everything,
    }

    /// Stored nodes by path, and the flat state, as the store keeps them.
    #[derive(Default)]
    pub(super) struct Mem {
        pub(super) nodes: HashMap<Vec<u8>, Arc<[u8]>>,
        pub(super) flat: BTreeMap<Vec<u8>, Vec<u8>>,
        pub(super) known: Known,
    }

    impl PreState for Mem {
        fn trie(&self) -> TrieId {
            TrieId::Main
        }

        fn node(&self, path: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
            Ok(self.nodes.get(path).cloned())
        }

        fn node_in_memory(&self, path: &[u8]) -> Option<Option<&[u8]>> {
            let known = match self.known {
                Known::EvenPaths => path.len().is_multiple_of(2),
                Known::Nothing => false,
                Known::Everything => true,
            };
            known.then(|| self.nodes.get(path).map(|v| &v[..]))
        }

        fn leaf_under(&self, path: &[u8]) -> Result<Option<KeyValue>, StoreError> {
            // The keys under `path` are the ones from its first (zero-padded) bytes on, up
            // to the first that is not under it.
            let mut lo = Vec::new();
            for pair in path.chunks(2) {
                lo.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
            }
            let mut under = self.flat.range(lo..).take_while(|(k, _)| key_follows(k, 0, path));
            let first = under.next().map(|(k, v)| (k.clone(), v.clone()));
            assert!(under.next().is_none(), "two keys under the leaf at {path:?}");
            Ok(first)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use trie::{root_from_sorted, EthLayout, Layout};

    use super::mem::{Known, Mem};
    use super::*;

    /// What a bottom-up rebuild stores: every hashed node, and the root whatever its size.
    struct Expected(HashMap<Vec<u8>, Arc<[u8]>>);

    impl NodeSink for Expected {
        fn node(&mut self, _: EmittedKind, path: NibbleSlice<'_>, enc: &[u8], r: &ChildRef) {
            let hash = match r.as_hash() {
                Some(h) => h,
                None if path.is_empty() => EthLayout::hash(enc),
                None => return,
            };
            let mut v = hash.0.to_vec();
            v.extend_from_slice(enc);
            self.0.insert(path.to_nibbles().0, Arc::from(v));
        }
    }

    fn expected_nodes(flat: &BTreeMap<Vec<u8>, Vec<u8>>) -> HashMap<Vec<u8>, Arc<[u8]>> {
        let mut b = RootBuilder::<EthLayout, _>::with_sink(Expected(HashMap::new()));
        for (k, v) in flat {
            b.add(k, v).unwrap();
        }
        let (root, sink, _) = b.finish_with();
        let mut nodes = sink.0;
        // A root leaf is emitted to no sink: the store keeps it too.
        if !flat.is_empty() && !nodes.contains_key(&Vec::new()) {
            let (k, v) = flat.iter().next().unwrap();
            let mut enc = Vec::new();
            EthLayout::encode_leaf(NibbleSlice::new(k), v, &mut enc);
            let mut val = root.0.to_vec();
            val.extend_from_slice(&enc);
            nodes.insert(Vec::new(), Arc::from(val));
        }
        nodes
    }

    /// Apply one batch (key → new value) to `mem` through the updater; check the root and
    /// the stored nodes against a rebuild of the model.
    fn step(mem: &mut Mem, root: &mut H256, batch: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
        let changes: Vec<Change<'_>> = batch
            .iter()
            .map(|(k, v)| Change {
                key: k,
                old: mem.flat.get(k).map(Vec::as_slice),
                new: v.as_deref(),
            })
            .filter(|c| c.old != c.new)
            .collect();
        let u = update_trie(mem, *root, &changes, true).unwrap();
        for (path, v) in u.writes {
            match v {
                Some(v) => mem.nodes.insert(path, v),
                None => mem.nodes.remove(&path),
            };
        }
        for (k, v) in batch {
            match v {
                Some(v) => mem.flat.insert(k.clone(), v.clone()),
                None => mem.flat.remove(k),
            };
        }
        let pairs: Vec<_> = mem.flat.iter().collect();
        let want = root_from_sorted::<EthLayout, _, _>(&pairs).unwrap().0;
        assert_eq!(u.root, want, "root after {batch:?}");
        *root = u.root;
        let expected = expected_nodes(&mem.flat);
        let mut got: Vec<_> = mem.nodes.keys().cloned().collect();
        let mut want: Vec<_> = expected.keys().cloned().collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "stored node paths");
        for (p, v) in &expected {
            assert_eq!(&mem.nodes[p], v, "node at {p:?}");
        }
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 32),
            // Short keys: prefixes of each other, branch values, inline nodes.
            2 => prop::collection::vec(0u8..4, 0..3),
            // A long shared prefix: extensions that split and merge.
            2 => prop::collection::vec(0u8..3, 1..3).prop_map(|t| {
                let mut k = vec![0xab; 20];
                k.extend(t);
                k
            }),
        ]
    }

    fn value() -> impl Strategy<Value = Option<Vec<u8>>> {
        prop_oneof![
            2 => Just(None),
            2 => prop::collection::vec(any::<u8>(), 1..3).prop_map(Some),
            3 => prop::collection::vec(any::<u8>(), 1..48).prop_map(Some),
        ]
    }

    fn batches() -> impl Strategy<Value = Vec<BTreeMap<Vec<u8>, Option<Vec<u8>>>>> {
        prop::collection::vec(prop::collection::btree_map(key(), value(), 0..40), 1..12)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(200)
        ))]

        #[test]
        fn batches_give_the_rebuilt_root_and_nodes(batches in batches()) {
            let mut mem = Mem::default();
            let mut root = EMPTY_ROOT;
            for batch in &batches {
                step(&mut mem, &mut root, batch);
            }
        }
    }

    #[test]
    fn large_batches_fan_out_and_collapse() {
        let mut mem = Mem::default();
        let mut root = EMPTY_ROOT;
        let key = |i: u32| trie::keccak256(&i.to_be_bytes()).0.to_vec();
        let insert: BTreeMap<_, _> = (0..3000u32).map(|i| (key(i), Some(vec![1; 40]))).collect();
        step(&mut mem, &mut root, &insert);
        let mixed: BTreeMap<_, _> = (0..3000u32)
            .step_by(3)
            .map(|i| (key(i), (i % 2 == 0).then(|| vec![2; 3])))
            .chain((3000..3500u32).map(|i| (key(i), Some(vec![3; 33]))))
            .collect();
        step(&mut mem, &mut root, &mixed);
        let delete_all: BTreeMap<_, _> = mem.flat.keys().map(|k| (k.clone(), None)).collect();
        step(&mut mem, &mut root, &delete_all);
        assert_eq!(root, EMPTY_ROOT);
        assert!(mem.nodes.is_empty());
    }

    #[test]
    fn wrong_old_values_are_refused() {
        for known in [Known::EvenPaths, Known::Nothing] {
            let mut mem = Mem { known, ..Mem::default() };
            let mut root = EMPTY_ROOT;
            let batch: BTreeMap<_, _> =
                (0..50u8).map(|i| (vec![i; 32], Some(vec![i; 40]))).collect();
            step(&mut mem, &mut root, &batch);
            let (present, absent) = (vec![7u8; 32], vec![0xee; 32]);
            let claims = [
                // Present, with another value.
                Change { key: &present, old: Some(&[9; 40]), new: Some(&[1]) },
                // Present, claimed absent.
                Change { key: &present, old: None, new: Some(&[1]) },
                // Absent, claimed present.
                Change { key: &absent, old: Some(&[1; 40]), new: Some(&[2]) },
            ];
            for claim in claims {
                let e = update_trie(&mem, root, &[claim], true).unwrap_err();
                let key = claim.key.to_vec();
                assert!(
                    matches!(e.corruption(), Some(Corruption::OldValue { key: k, .. }) if *k == key),
                    "{known:?}, {claim:?}: {e:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod speed {
    //! `cargo test --release -p store --lib -- --ignored pass_speed --nocapture`: the walk's
    //! own cost on an in-memory pre-state of 1M keys (no RocksDB), for profiling.
    use std::time::Instant;

    use super::mem::{Known, Mem};
    use super::*;

    #[test]
    #[ignore]
    fn pass_speed() {
        let key = |i: u32| trie::keccak256(&i.to_be_bytes()).0.to_vec();
        let mut mem = Mem { known: Known::Everything, ..Mem::default() };
        let insert: Vec<Change<'_>> = Vec::new();
        drop(insert);
        let n = 1_000_000u32;
        let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
        let value = vec![7u8; 100];
        let mut sorted: Vec<&Vec<u8>> = keys.iter().collect();
        sorted.sort();
        let changes: Vec<Change<'_>> =
            sorted.iter().map(|k| Change { key: k, old: None, new: Some(&value) }).collect();
        let u = update_trie(&mem, EMPTY_ROOT, &changes, false).unwrap();
        for (p, v) in u.writes {
            mem.nodes.insert(p, v.unwrap());
        }
        for k in &keys {
            mem.flat.insert(k.clone(), value.clone());
        }
        let root = u.root;
        let new_value = vec![9u8; 100];
        let mut block: Vec<&Vec<u8>> = (0..10_000).map(|i| &keys[(i * 97) as usize]).collect();
        block.sort();
        for verify in [false, true] {
            let changes: Vec<Change<'_>> = block
                .iter()
                .map(|k| Change { key: k, old: Some(&value), new: Some(&new_value) })
                .collect();
            for _ in 0..3 {
                let start = Instant::now();
                let u = update_trie(&mem, root, &changes, verify).unwrap();
                eprintln!(
                    "verify {verify}: {:?} for 10k updates, {} hashes, {} writes",
                    start.elapsed(),
                    u.hashes,
                    u.writes.len()
                );
            }
        }
    }
}
