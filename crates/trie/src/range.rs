//! Key-range proofs for chunked state (checkpoints): the boundary nodes of a key range, and
//! a verification that rebuilds everything inside the range from its entries.
//!
//! A range is `[start, last]` (`last = None`: to the end of the trie). A node's path
//! *straddles* the range when some keys under it fall inside and some outside; only the
//! nodes at straddling paths (all on the two boundary paths) make the proof. The verifier
//! walks them down from the root, each fetched by the hash its (already checked) parent
//! holds, and at every child slot:
//! - outside the range: takes the reference as it is;
//! - inside: builds the subtree at that slot from the entries under it (streaming builder,
//!   each node encoded and hashed once) and requires the very reference the parent holds;
//! - straddling: descends.
//!
//! Leaves and branch values on the boundary paths are checked against the entries. So an
//! accepted range's entries are exactly the trie's keys in the range, and every node the
//! verification saw (boundary nodes and rebuilt interior nodes) is the trie's node at its
//! path: a restore can store them without hashing anything again.
//!
//! Every layout: a branch with a partial key (Substrate) is handled like an extension
//! over a branch, and a boundary value stored as a value node is checked by its hash (the
//! entries carry the values; the proof holds no value nodes).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use state::H256;

use crate::builder::{EmittedKind, NodeSink, RootBuilder};
use crate::mutable::{path_hex, TrieError};
use crate::nibbles::{nibble_at, NibbleSlice, Nibbles};
use crate::node::{ChildKind, ChildRef, Layout, NodeError, NodeValue, NodeView};
use crate::proof::ProofError;
use crate::source::NodeSource;

/// Where the keys under a nibble path lie relative to a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Outside,
    Inside,
    Straddle,
}

/// A key range as nibble paths: `left` inclusive (empty: from the first key), `right`
/// inclusive (`None`: to the last key).
struct Bounds {
    left: Vec<u8>,
    right: Option<Vec<u8>>,
}

impl Bounds {
    fn new(start: &[u8], last: Option<&[u8]>) -> Self {
        Bounds { left: Nibbles::from_bytes(start).0, right: last.map(|l| Nibbles::from_bytes(l).0) }
    }

    /// Where the keys whose nibbles start with `q` lie.
    fn place(&self, q: &[u8]) -> Place {
        let m = q.len().min(self.left.len());
        let left_straddles = match q[..m].cmp(&self.left[..m]) {
            Ordering::Less => return Place::Outside,
            Ordering::Greater => false,
            // `q` a proper prefix of the start: the key `q` itself sorts before it.
            Ordering::Equal => q.len() < self.left.len(),
        };
        let right_straddles = match &self.right {
            None => false,
            Some(r) => {
                let m = q.len().min(r.len());
                match q[..m].cmp(&r[..m]) {
                    Ordering::Less => false,
                    Ordering::Greater => return Place::Outside,
                    // `q` a prefix of the last key (or equal): longer keys sort after it.
                    Ordering::Equal if q.len() <= r.len() => true,
                    // The last key is a proper prefix of `q`: every key under `q` follows it.
                    Ordering::Equal => return Place::Outside,
                }
            }
        };
        if left_straddles || right_straddles {
            Place::Straddle
        } else {
            Place::Inside
        }
    }

    /// True when the key whose nibbles are `k` lies in the range.
    fn contains(&self, k: &[u8]) -> bool {
        k >= self.left.as_slice() && self.right.as_ref().is_none_or(|r| k <= r.as_slice())
    }
}

/// The proof of the range `[start, last]` of the trie with root `root`: the nodes at the
/// straddling paths that are referenced by hash (and the root node), each once, in
/// depth-first order. Empty when the range is the whole trie or the trie is empty.
pub fn prove_key_range<L: Layout, S: NodeSource>(
    source: &S,
    root: &H256,
    start: &[u8],
    last: Option<&[u8]>,
) -> Result<Vec<Vec<u8>>, TrieError> {
    let bounds = Bounds::new(start, last);
    let mut out = Vec::new();
    if *root == L::empty_root() || bounds.place(&[]) == Place::Inside {
        return Ok(out);
    }
    let mut seen = HashSet::new();
    let enc = load_checked::<L, S>(source, &[], root)?;
    seen.insert(*root);
    out.push(enc.clone());
    prove_below::<L, S>(source, &bounds, &mut Vec::new(), &enc, &mut out, &mut seen)?;
    Ok(out)
}

fn load_checked<L: Layout, S: NodeSource>(
    source: &S,
    path: &[u8],
    hash: &H256,
) -> Result<Vec<u8>, TrieError> {
    let enc = source
        .load(path, hash)?
        .ok_or_else(|| TrieError::MissingNode { path: path_hex(path), hash: *hash })?;
    let actual = L::hash(&enc);
    if actual != *hash {
        return Err(TrieError::HashMismatch { path: path_hex(path), expected: *hash, actual });
    }
    Ok(enc)
}

/// Collect the straddling children of the node `enc` at `path`.
fn prove_below<L: Layout, S: NodeSource>(
    source: &S,
    bounds: &Bounds,
    path: &mut Vec<u8>,
    enc: &[u8],
    out: &mut Vec<Vec<u8>>,
    seen: &mut HashSet<H256>,
) -> Result<(), TrieError> {
    let node =
        L::decode(enc).map_err(|source| TrieError::Corrupt { path: path_hex(path), source })?;
    let mut visit = |path: &mut Vec<u8>, child: &ChildRef| -> Result<(), TrieError> {
        if bounds.place(path) != Place::Straddle {
            return Ok(());
        }
        match child.kind() {
            ChildKind::Empty => Ok(()),
            ChildKind::Inline(bytes) => prove_below::<L, S>(source, bounds, path, bytes, out, seen),
            ChildKind::Hash(h) => {
                let enc = load_checked::<L, S>(source, path, &h)?;
                if seen.insert(h) {
                    out.push(enc.clone());
                }
                prove_below::<L, S>(source, bounds, path, &enc, out, seen)
            }
        }
    };
    match node {
        NodeView::Empty | NodeView::Leaf { .. } => Ok(()),
        NodeView::Extension { path: ext, child } => {
            let n = path.len();
            path.extend_from_slice(&ext.0);
            let r = visit(path, &child);
            path.truncate(n);
            r
        }
        NodeView::Branch { path: partial, children, .. } => {
            let n = path.len();
            path.extend_from_slice(&partial.0);
            let mut r = Ok(());
            for (i, child) in children.iter().enumerate() {
                path.push(i as u8);
                r = visit(path, child);
                path.pop();
                if r.is_err() {
                    break;
                }
            }
            path.truncate(n);
            r
        }
    }
}

/// What a verified range held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeStats {
    /// Boundary nodes checked (from the proof or inline in one).
    pub boundary_nodes: usize,
    /// Subtrees rebuilt from entries.
    pub subtrees: usize,
}

/// Verify that `entries` (strictly ascending, non-empty values) are exactly the keys of the
/// trie with root `root` in `[start, last]` (`last = None`: to the end), given `proof` from
/// [`prove_key_range`] (any order, each node once, none unused).
///
/// `sink` receives every branch and extension node of the trie that the verification
/// established, with its path and reference: the boundary nodes and the nodes rebuilt
/// inside the range (the same calls the streaming builder makes for a whole trie, so a
/// store keeps those referenced by hash, and the root).
pub fn verify_key_range<L, K, V, S>(
    root: &H256,
    start: &[u8],
    last: Option<&[u8]>,
    entries: &[(K, V)],
    proof: &[impl AsRef<[u8]>],
    sink: &mut S,
) -> Result<RangeStats, ProofError>
where
    L: Layout,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
    S: NodeSink,
{
    check_entries::<L, K, V>(start, last, entries)?;
    let bounds = Bounds::new(start, last);
    let mut v = Verifier::<L, S> {
        bounds,
        nodes: HashMap::with_capacity(proof.len()),
        sink,
        stats: RangeStats::default(),
        _layout: std::marker::PhantomData,
    };
    for (i, n) in proof.iter().enumerate() {
        if v.nodes.insert(L::hash(n.as_ref()), (n.as_ref(), false)).is_some() {
            return Err(ProofError::DuplicateNode(i));
        }
    }
    if *root == L::empty_root() {
        if !entries.is_empty() {
            return Err(mismatch(&[], "entries in an empty trie"));
        }
    } else if v.bounds.place(&[]) == Place::Inside {
        let mut b = RootBuilder::<L, &mut S>::with_sink(&mut *v.sink);
        for (k, val) in entries {
            b.add(k.as_ref(), val.as_ref())
                .map_err(|_| ProofError::BadRange("keys not strictly ascending"))?;
        }
        let (computed, _, _) = b.finish_with();
        if computed != *root {
            return Err(ProofError::RootMismatch { expected: *root, computed });
        }
        v.stats.subtrees = 1;
    } else {
        let enc = v.fetch(&[], root)?;
        if enc.is_empty() {
            // No node encodes to nothing (and a reference cannot be made of it).
            let source = NodeError::Truncated;
            return Err(ProofError::Malformed { path: path_hex(&[]), source });
        }
        v.node(&mut Vec::new(), enc, &L::child_ref(enc), entries)?;
    }
    let unused = v.nodes.values().filter(|(_, used)| !used).count();
    if unused > 0 {
        return Err(ProofError::UnusedNodes(unused));
    }
    Ok(v.stats)
}

fn check_entries<L: Layout, K: AsRef<[u8]>, V: AsRef<[u8]>>(
    start: &[u8],
    last: Option<&[u8]>,
    entries: &[(K, V)],
) -> Result<(), ProofError> {
    for w in entries.windows(2) {
        if w[0].0.as_ref() >= w[1].0.as_ref() {
            return Err(ProofError::BadRange("keys not strictly ascending"));
        }
    }
    if entries.first().is_some_and(|(k, _)| k.as_ref() < start) {
        return Err(ProofError::BadRange("entry before the range start"));
    }
    if let (Some(l), Some((k, _))) = (last, entries.last()) {
        if k.as_ref() > l {
            return Err(ProofError::BadRange("entry after the range end"));
        }
    }
    if !L::ALLOW_EMPTY_VALUE && entries.iter().any(|(_, v)| v.as_ref().is_empty()) {
        return Err(ProofError::BadRange("empty value"));
    }
    Ok(())
}

/// True when a node's `value` is `bytes` (a value node by its hash).
fn holds<L: Layout>(value: NodeValue<'_>, bytes: &[u8]) -> bool {
    match value {
        NodeValue::Inline(v) => v == bytes,
        NodeValue::Node(h) => L::hash(bytes) == h,
    }
}

fn mismatch(path: &[u8], what: &'static str) -> ProofError {
    ProofError::EntriesMismatch { path: path_hex(path), what }
}

struct Verifier<'p, 's, L, S> {
    bounds: Bounds,
    /// Proof nodes by hash, and whether the walk used them.
    nodes: HashMap<H256, (&'p [u8], bool)>,
    sink: &'s mut S,
    stats: RangeStats,
    _layout: std::marker::PhantomData<L>,
}

impl<'p, L: Layout, S: NodeSink> Verifier<'p, '_, L, S> {
    fn fetch(&mut self, path: &[u8], hash: &H256) -> Result<&'p [u8], ProofError> {
        match self.nodes.get_mut(hash) {
            Some((enc, used)) => {
                *used = true;
                Ok(*enc)
            }
            None => Err(ProofError::MissingNode { path: path_hex(path) }),
        }
    }

    /// Check the boundary node `enc` at `path` (its parent refers to it by `reference`)
    /// against `entries`, the entries under `path`.
    fn node<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        path: &mut Vec<u8>,
        enc: &[u8],
        reference: &ChildRef,
        entries: &[(K, V)],
    ) -> Result<(), ProofError> {
        self.stats.boundary_nodes += 1;
        let malformed = |source| ProofError::Malformed { path: path_hex(path), source };
        match L::decode(enc).map_err(malformed)? {
            NodeView::Empty => Err(mismatch(path, "an empty node inside a trie")),
            NodeView::Leaf { path: rest, value } => {
                let mut key = path.clone();
                key.extend_from_slice(&rest.0);
                if key.len() % 2 == 1 {
                    return Err(malformed(NodeError::BadLeaf));
                }
                let expected = self.bounds.contains(&key).then_some((key, value));
                self.leaf(path, expected, entries)
            }
            NodeView::Extension { path: ext, child } => {
                self.emit(EmittedKind::Extension, path, enc, reference);
                let n = path.len();
                path.extend_from_slice(&ext.0);
                let r = self
                    .below_partial(path, entries, |v, path, under| v.child(path, &child, under));
                path.truncate(n);
                r
            }
            NodeView::Branch { path: partial, children, value } => {
                self.emit(EmittedKind::Branch, path, enc, reference);
                let n = path.len();
                path.extend_from_slice(&partial.0);
                let r = self.below_partial(path, entries, |v, path, under| {
                    v.branch(path, &children, value, under)
                });
                path.truncate(n);
                r
            }
        }
    }

    /// Run `f` on the entries under `path` (the end of a node's partial key), after
    /// checking that they are all of `entries` (those under the node).
    fn below_partial<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        path: &mut Vec<u8>,
        entries: &[(K, V)],
        f: impl FnOnce(&mut Self, &mut Vec<u8>, &[(K, V)]) -> Result<(), ProofError>,
    ) -> Result<(), ProofError> {
        let under = self.under_prefix(path, entries);
        if under.len() != entries.len() {
            return Err(mismatch(path, "an entry off the node's partial key"));
        }
        f(self, path, entries)
    }

    /// Check a branch's value and children (its children hang at `path`) against
    /// `entries`, the entries under it.
    fn branch<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        path: &mut Vec<u8>,
        children: &[ChildRef; 16],
        value: Option<NodeValue<'_>>,
        entries: &[(K, V)],
    ) -> Result<(), ProofError> {
        let rest = self.branch_value(path, value, entries)?;
        let d = path.len();
        let mut from = 0;
        for (i, child) in children.iter().enumerate() {
            let to =
                from + rest[from..].partition_point(|(k, _)| nibble_at(k.as_ref(), d) <= i as u8);
            path.push(i as u8);
            let r = self.child(path, child, &rest[from..to]);
            path.pop();
            r?;
            from = to;
        }
        Ok(())
    }

    /// The entries of `entries` whose key starts with nibbles `path` (a contiguous run).
    fn under_prefix<'e, K: AsRef<[u8]>, V>(
        &self,
        path: &[u8],
        entries: &'e [(K, V)],
    ) -> &'e [(K, V)] {
        let cmp = |k: &[u8]| -> Ordering {
            for (i, n) in path.iter().enumerate() {
                if i >= k.len() * 2 {
                    return Ordering::Less;
                }
                match nibble_at(k, i).cmp(n) {
                    Ordering::Equal => {}
                    o => return o,
                }
            }
            Ordering::Equal
        };
        let lo = entries.partition_point(|(k, _)| cmp(k.as_ref()) == Ordering::Less);
        let hi = lo + entries[lo..].partition_point(|(k, _)| cmp(k.as_ref()) == Ordering::Equal);
        &entries[lo..hi]
    }

    /// Check a branch's value slot (the key whose nibbles are `path`) and return the
    /// entries below it.
    fn branch_value<'e, K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        path: &[u8],
        value: Option<NodeValue<'_>>,
        entries: &'e [(K, V)],
    ) -> Result<&'e [(K, V)], ProofError> {
        let here = entries.first().filter(|(k, _)| k.as_ref().len() * 2 == path.len());
        let expected = value.filter(|_| self.bounds.contains(path));
        if value.is_some() && path.len() % 2 == 1 {
            return Err(ProofError::Malformed { path: path_hex(path), source: NodeError::BadLeaf });
        }
        match (expected, here) {
            (None, None) => Ok(entries),
            (Some(v), Some((_, got))) if holds::<L>(v, got.as_ref()) => Ok(&entries[1..]),
            _ => Err(mismatch(path, "a branch value differs from the entries")),
        }
    }

    fn leaf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        path: &[u8],
        expected: Option<(Vec<u8>, NodeValue<'_>)>,
        entries: &[(K, V)],
    ) -> Result<(), ProofError> {
        let ok = match (expected, entries) {
            (None, []) => true,
            (Some((key, value)), [(k, v)]) => {
                Nibbles::from_bytes(k.as_ref()).0 == key && holds::<L>(value, v.as_ref())
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(mismatch(path, "a boundary leaf differs from the entries"))
        }
    }

    /// Check the child slot at `path` holding `child` against `entries` (those under it).
    fn child<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        path: &mut Vec<u8>,
        child: &ChildRef,
        entries: &[(K, V)],
    ) -> Result<(), ProofError> {
        match self.bounds.place(path) {
            // Entries lie in the range, so none is under an outside path.
            Place::Outside => Ok(()),
            Place::Inside => {
                if entries.is_empty() {
                    return match child.is_empty() {
                        true => Ok(()),
                        false => Err(mismatch(path, "keys missing from the entries")),
                    };
                }
                let mut b = RootBuilder::<L, &mut S>::subtree(path.len(), &mut *self.sink);
                for (k, v) in entries {
                    b.add(k.as_ref(), v.as_ref())
                        .map_err(|_| ProofError::BadRange("keys not strictly ascending"))?;
                }
                let (built, _, _) = b.finish_ref();
                self.stats.subtrees += 1;
                if built != *child {
                    return Err(mismatch(path, "entries differ from the trie"));
                }
                Ok(())
            }
            Place::Straddle => match child.kind() {
                ChildKind::Empty if entries.is_empty() => Ok(()),
                ChildKind::Empty => Err(mismatch(path, "entries under an empty slot")),
                ChildKind::Inline(bytes) => {
                    let bytes = bytes.to_vec();
                    self.node(path, &bytes, child, entries)
                }
                ChildKind::Hash(h) => {
                    let enc = self.fetch(path, &h)?;
                    self.node(path, enc, child, entries)
                }
            },
        }
    }

    fn emit(&mut self, kind: EmittedKind, path: &[u8], enc: &[u8], reference: &ChildRef) {
        let mut packed = Vec::with_capacity(path.len().div_ceil(2));
        for pair in path.chunks(2) {
            packed.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
        }
        self.sink.node(kind, NibbleSlice::range(&packed, 0, path.len()), enc, reference);
    }
}
