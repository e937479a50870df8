//! The block's trie update: one sorted pass over a trie's changes that rewrites exactly the
//! nodes on the changed paths, encoding and hashing each new node once, in any [`Layout`].
//!
//! Input: the pre-state root, the block's changes to this trie sorted by key (each with the
//! key's value before the block, which a store's commit has read anyway for its reverse
//! diff), and a [`PreState`] that serves stored nodes by path and the one live key under a
//! path. Output: the new root and the node writes (nibble path → `hash ‖ encoding`, or a
//! deletion), which leave the stored nodes exactly as a bottom-up rebuild of the new state
//! would (no stale node survives; tested against one). Nodes are stored by path, leaves
//! are not (their keys and values are the flat state's), except a root leaf.
//!
//! The walk descends only where changes lead. At a hashed child that a single existing key's
//! change reaches, the leaf is recognised by hashing the key's old leaf (one short hash),
//! so updates of existing keys never probe storage below the nodes memory holds; inserts
//! that land on another key's leaf, and deletions that collapse a branch, read that leaf (a
//! prefix scan). New subtrees (an insert beside a leaf, a split extension) come from the
//! streaming root builder. A node whose fate depends on its parent travels up as a
//! [`Shape`] and is encoded only where it lands: a leaf or an extension that may be merged
//! upward when a branch collapses and, in layouts without extensions, every branch (its
//! partial key is the parent's to decide). Branches with many changes near the top fan out
//! to the rayon pool, one task per child.
//!
//! Errors: whatever the [`PreState`] fails with travels as [`UpdateError::Source`]; stored
//! nodes or old values that contradict the trie are the other [`UpdateError`]s.
//!
//! Parts: [`out`] collects a task's encodings and hashes them in batches; [`walk`] descends
//! and decides each node's shape; [`place`] encodes shapes where they land.

mod out;
mod place;
mod walk;

#[cfg(test)]
mod mem;
#[cfg(test)]
mod speed;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use state::{KeyValue, H256};

use crate::builder::BuildError;
use crate::mutable::path_hex;
use crate::nibbles::nibble_at;
use crate::node::{ChildRef, Layout, NodeError, NodeValue};
use out::Out;

/// A change to one key of the trie, for [`update_trie`].
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// The key (packed bytes).
    pub key: &'a [u8],
    /// The value before the block (`None`: absent).
    pub old: Option<&'a [u8]>,
    /// The value after it (`None`: deleted).
    pub new: Option<&'a [u8]>,
}

/// What [`update_trie`] reads of the pre-state: stored nodes by nibble path, and the flat
/// state's one live key under a leaf's path. A store implements it over its own storage;
/// its failures travel as [`UpdateError::Source`].
pub trait PreState: Sync {
    /// What reading the pre-state fails with.
    type Error: Send;
    /// The stored node at nibble path `path` (`hash ‖ encoding`), or `None` when nothing is
    /// stored there (a leaf, or no node).
    fn node(&self, path: &[u8]) -> Result<Option<Arc<[u8]>>, Self::Error>;
    /// What memory knows of the node at `path` without I/O: `Some(Some(node))` stored,
    /// `Some(None)` known not to be stored (a leaf or nothing), `None` unknown. Borrowed:
    /// the walk only decodes it (cloning the `Arc` of every visited node cost an atomic
    /// increment and decrement on a cache line the writer thread shares).
    fn node_in_memory(&self, path: &[u8]) -> Option<Option<&[u8]>> {
        let _ = path;
        None
    }
    /// The one live key under nibble path `path` and its value.
    fn leaf_under(&self, path: &[u8]) -> Result<Option<KeyValue>, Self::Error>;
}

/// A node write: nibble path → `hash ‖ encoding` (`None` deletes the stored node).
pub type NodeWrite = (Vec<u8>, Option<Arc<[u8]>>);

/// The result of [`update_trie`].
#[derive(Debug, Default)]
pub struct Updated {
    /// The new root.
    pub root: H256,
    /// Node writes in no particular order; a later write to a path replaces an earlier one.
    pub writes: Vec<NodeWrite>,
    /// Node hashes computed.
    pub hashes: u64,
    /// Leaves read by [`PreState::leaf_under`] (inserts beside a leaf, collapses onto one).
    pub leaf_scans: u64,
    /// Nodes memory knew ([`PreState::node_in_memory`] answered).
    pub known: u64,
    /// Nodes looked up with [`PreState::node`].
    pub probes: u64,
}

/// Why [`update_trie`] failed: the pre-state's own error, or pre-state nodes and claimed
/// old values that contradict each other. Paths are nibbles from the trie's root.
// Exhaustive on purpose: a caller maps each failure to its own typed error (a store's
// corruption naming the trie), and a new kind of failure must break that mapping at compile
// time rather than fall into a catch-all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError<E> {
    /// The pre-state failed to serve a node or a leaf.
    #[error(transparent)]
    Source(E),
    /// A stored node does not carry the hash its parent refers to (or the leaf found under
    /// a hash reference does not hash to it).
    #[error("node at path {} does not match its parent's hash {expected}", path_hex(.path))]
    NodeHash {
        /// The node's nibble path.
        path: Vec<u8>,
        /// The parent's reference.
        expected: H256,
    },
    /// A stored or inline node does not decode.
    #[error("node at path {} does not decode: {source}", path_hex(.path))]
    Node {
        /// The node's nibble path.
        path: Vec<u8>,
        /// The decoder's complaint.
        source: NodeError,
    },
    /// A leaf whose full key has an odd number of nibbles.
    #[error("leaf at path {} has an odd-length key", path_hex(.path))]
    OddKey {
        /// The key's nibbles.
        path: Vec<u8>,
    },
    /// A change claims an old value of a key that the trie does not hold (a key claimed
    /// present that is absent, absent that is present, or with another value).
    #[error("the value of key 0x{} before the update is not the one the trie holds", hex::encode(.key))]
    OldValue {
        /// The key.
        key: Vec<u8>,
    },
    /// A leaf position under which the pre-state holds no key (or, for a value node, not
    /// the key whose value hashes to it).
    #[error("the pre-state holds no key for the leaf at path {}", path_hex(.path))]
    MissingLeaf {
        /// The leaf's nibble path.
        path: Vec<u8>,
    },
    /// The keys of a rebuilt subtree (the changes and the leaf they meet) are not in
    /// strictly ascending order.
    #[error("keys out of order: {0}")]
    KeyOrder(BuildError),
}

/// Below this many changes a branch's children are updated on the calling thread.
const PARALLEL_CHANGES_MIN: usize = 256;
/// Branches deeper than this never fan out (the top levels already give every thread work).
const PARALLEL_DEPTH_MAX: usize = 1;

/// A value as the walk carries it: the bytes, or (Substrate V1) only the hash a stored
/// node holds for its value node.
#[derive(Debug, Clone)]
enum Val<'a> {
    Bytes(Cow<'a, [u8]>),
    Hashed(H256),
}

impl Val<'_> {
    /// The value as a node of layout `L` holds it.
    fn in_node<L: Layout>(&self) -> NodeValue<'_> {
        match self {
            Val::Hashed(h) => NodeValue::Node(*h),
            Val::Bytes(v) if L::FAMILY.value_node_min().is_some_and(|min| v.len() >= min) => {
                NodeValue::Node(L::hash(v))
            }
            Val::Bytes(v) => NodeValue::Inline(v),
        }
    }

    /// The bytes, in a layout whose nodes hold every value inline.
    fn bytes(&self) -> &[u8] {
        match self {
            Val::Bytes(v) => v,
            Val::Hashed(_) => unreachable!("only layouts with value nodes hold hashed values"),
        }
    }
}

/// A branch not yet encoded (layouts without extensions), whose partial key its parent
/// decides: it is encoded where it lands ([`place`]).
#[derive(Debug)]
struct Unplaced<'a> {
    /// Nibbles between its slot and its children.
    partial: Vec<u8>,
    refs: [Ref; 16],
    value: Option<Val<'a>>,
}

/// A node that is not yet placed in its parent, or a branch that is.
#[derive(Debug)]
enum Shape<'a> {
    Empty,
    /// A leaf at nibble depth `start` of its full `key`.
    Leaf {
        key: Cow<'a, [u8]>,
        start: usize,
        value: Val<'a>,
    },
    /// An extension over `path` (nibbles) to a placed branch.
    Extension {
        path: Vec<u8>,
        child: Ref,
    },
    /// A branch, already written at its path when hashed (or inline): layouts with
    /// extensions.
    Placed(Ref),
    /// A branch to be encoded where it lands: layouts without extensions.
    Branch(Box<Unplaced<'a>>),
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

/// The pre-state at a path.
enum Pre<'a> {
    /// As its parent refers to it.
    Ref(ChildRef),
    /// A node that exists only in this pass (the rest of a split extension, or of a
    /// branch's split partial key).
    Virtual(Shape<'a>),
}

/// A pre-state node, decoded.
// A short-lived stack value, like `NodeView`: boxing the branch would allocate on
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
        /// Its partial key: empty in layouts with extensions.
        partial: Vec<u8>,
        children: [ChildRef; 16],
        value: Option<Val<'a>>,
        virt: Option<(u8, Shape<'a>)>,
    },
}

/// Apply `changes` (sorted by key, each a real change: `old != new`) to the trie of layout
/// `L` with root `root` over `pre`. With `verify_old`, every old value a change claims is
/// checked against the trie ([`UpdateError::OldValue`] when it does not hold); without,
/// the old values are trusted as far as they decide the shape (they came from the same
/// store as the nodes).
pub fn update_trie<L: Layout, P: PreState>(
    pre: &P,
    root: H256,
    changes: &[Change<'_>],
    verify_old: bool,
) -> Result<Updated, UpdateError<P::Error>> {
    if changes.is_empty() {
        return Ok(Updated { root, ..Updated::default() });
    }
    let w = Walker::<P, L> { pre, verify_old, _layout: PhantomData };
    let mut out = Out::<L>::default();
    let top = if root == L::empty_root() { ChildRef::EMPTY } else { ChildRef::hash(root) };
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

/// What the walk over `P` fails with.
type WalkError<P> = UpdateError<<P as PreState>::Error>;

/// The walk over one trie's pre-state, in layout `L`.
struct Walker<'p, P: PreState, L: Layout> {
    pre: &'p P,
    /// Check every old value a change claims against the leaf it names (old values from a
    /// caller); the store's own reads need no check.
    verify_old: bool,
    _layout: PhantomData<fn() -> L>,
}

/// How many of `path`'s nibbles every change's key follows from nibble `from` on.
fn followed(changes: &[Change<'_>], from: usize, path: &[u8]) -> usize {
    changes.iter().fold(path.len(), |n, c| {
        let end = (c.key.len() * 2).saturating_sub(from).min(n);
        (0..end).take_while(|&i| nibble_at(c.key, from + i) == path[i]).count()
    })
}

/// Pack an even number of nibbles into bytes.
fn pack(nibbles: &[u8]) -> Option<Vec<u8>> {
    nibbles.len().is_multiple_of(2).then(|| nibbles.chunks(2).map(|p| (p[0] << 4) | p[1]).collect())
}
