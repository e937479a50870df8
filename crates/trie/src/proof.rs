//! Proofs: single-key inclusion/exclusion (eth_getProof style), multiproofs and range
//! proofs (snap-sync style), with verifiers for untrusted bytes.
//!
//! A proof is a list of node encodings (and, in Substrate's V1 layout, the value nodes of
//! the values it shows). Verifiers hash every node they use, follow the key through it,
//! and reject proofs with missing, altered, undecodable or unused nodes; they return
//! [`ProofError`] and never panic. A proof of the empty trie is empty or holds only the
//! empty node (Substrate's recorders record it). Every kind works in every layout. A range
//! proof is checked by rebuilding the trie from the two boundary paths plus the supplied
//! entries and comparing roots: everything strictly between the boundaries is discarded
//! from the partial trie and re-inserted from the entries, so an omitted, extra or altered
//! entry changes the root. Its entries carry the values, so it holds no value nodes.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use state::H256;

use crate::builder::root_from_sorted;
use crate::mutable::{path_hex, Entry, Kind, NodeId, Trie, TrieError, Value, NONE};
use crate::nibbles::Nibbles;
use crate::node::{ChildKind, ChildRef, Layout, NodeError, NodeValue, NodeView};
use crate::source::{NodeSource, SourceError};

/// Why a proof does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    /// A node the key's path needs is not in the proof.
    #[error("proof is missing the node at path {path}")]
    MissingNode {
        /// Nibble path, hex digits.
        path: String,
    },
    /// A node does not hash to the reference its parent (or the root) holds.
    #[error("proof node {index} hashes to {actual}, expected {expected}")]
    HashMismatch {
        /// Position in the proof.
        index: usize,
        /// Hash the parent committed to.
        expected: H256,
        /// Hash of the supplied node.
        actual: H256,
    },
    /// A node does not decode.
    #[error("proof node at path {path} is malformed: {source}")]
    Malformed {
        /// Nibble path, hex digits.
        path: String,
        /// Decoder error.
        source: NodeError,
    },
    /// The proof holds nodes that the verification did not use.
    #[error("proof has {0} unused node(s)")]
    UnusedNodes(usize),
    /// The same node appears twice in a multiproof.
    #[error("proof node {0} is a duplicate")]
    DuplicateNode(usize),
    /// The proven value differs from the claimed one.
    #[error("proof shows a different value for the key: claimed {claimed}, proven {proven}")]
    ValueMismatch {
        /// Claimed value, hex (or "absent").
        claimed: String,
        /// Proven value, hex (or "absent").
        proven: String,
    },
    /// Range entries out of order, outside the range, or with empty values.
    #[error("range entries invalid: {0}")]
    BadRange(&'static str),
    /// A range's entries disagree with the trie at a node on its boundary paths (keys
    /// missing, extra, or with other values).
    #[error("range entries disagree with the trie at path {path}: {what}")]
    EntriesMismatch {
        /// Nibble path, hex digits.
        path: String,
        /// What disagreed.
        what: &'static str,
    },
    /// A proof kind a layout does not support (every layout Arbor has supports every kind
    /// today; kept so that callers' matches stay valid for layouts to come).
    #[error("{0} are not supported in this layout")]
    UnsupportedLayout(&'static str),
    /// The rebuilt trie has a different root.
    #[error("range does not match the root: rebuilt {computed}, expected {expected}")]
    RootMismatch {
        /// The committed root.
        expected: H256,
        /// The root rebuilt from proof and entries.
        computed: H256,
    },
}

fn display_value(v: Option<&[u8]>) -> String {
    v.map_or_else(|| "absent".to_string(), |v| format!("0x{}", hex::encode(v)))
}

/// Verify a single-key proof against `root`. Returns the proven value (`None` = proven
/// absent). Nodes must appear in path order, as eth_getProof returns them.
pub fn verify_proof<L: Layout>(
    root: &H256,
    key: &[u8],
    proof: &[impl AsRef<[u8]>],
) -> Result<Option<Vec<u8>>, ProofError> {
    if *root == L::empty_root() {
        return empty_trie_proof::<L>(root, proof).map(|()| None);
    }
    let mut next = 0usize;
    let value = walk::<L>(root, key, |hash, path| {
        let i = next;
        let node = proof.get(i).ok_or_else(|| ProofError::MissingNode { path: path_hex(path) })?;
        next += 1;
        let actual = L::hash(node.as_ref());
        if actual != *hash {
            return Err(ProofError::HashMismatch { index: i, expected: *hash, actual });
        }
        Ok(node.as_ref())
    })?;
    if next != proof.len() {
        return Err(ProofError::UnusedNodes(proof.len() - next));
    }
    Ok(value)
}

/// Verify that `proof` shows `key` holding `expected` (`None` = absent).
pub fn verify_value<L: Layout>(
    root: &H256,
    key: &[u8],
    expected: Option<&[u8]>,
    proof: &[impl AsRef<[u8]>],
) -> Result<(), ProofError> {
    let proven = verify_proof::<L>(root, key, proof)?;
    if proven.as_deref() != expected {
        return Err(ProofError::ValueMismatch {
            claimed: display_value(expected),
            proven: display_value(proven.as_deref()),
        });
    }
    Ok(())
}

/// Verify a multiproof (nodes in any order, each once) for `keys`; returns each key's value.
pub fn verify_multiproof<L: Layout>(
    root: &H256,
    keys: &[impl AsRef<[u8]>],
    proof: &[impl AsRef<[u8]>],
) -> Result<Vec<Option<Vec<u8>>>, ProofError> {
    if *root == L::empty_root() {
        empty_trie_proof::<L>(root, proof)?;
        return Ok(vec![None; keys.len()]);
    }
    let mut by_hash: HashMap<H256, (usize, &[u8])> = HashMap::with_capacity(proof.len());
    for (i, n) in proof.iter().enumerate() {
        if by_hash.insert(L::hash(n.as_ref()), (i, n.as_ref())).is_some() {
            return Err(ProofError::DuplicateNode(i));
        }
    }
    let mut used = HashSet::with_capacity(proof.len());
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        out.push(walk::<L>(root, key.as_ref(), |hash, path| {
            let (i, node) = by_hash
                .get(hash)
                .ok_or_else(|| ProofError::MissingNode { path: path_hex(path) })?;
            used.insert(*i);
            Ok(*node)
        })?);
    }
    if used.len() != proof.len() {
        return Err(ProofError::UnusedNodes(proof.len() - used.len()));
    }
    Ok(out)
}

/// Check a proof against the empty trie's root: it holds nothing, or only the empty node
/// itself (which Substrate's recorders record when they read from an empty trie).
fn empty_trie_proof<L: Layout>(root: &H256, proof: &[impl AsRef<[u8]>]) -> Result<(), ProofError> {
    match proof {
        [] => Ok(()),
        [node] if L::hash(node.as_ref()) == *root => Ok(()),
        _ => Err(ProofError::UnusedNodes(proof.len())),
    }
}

/// Follow `key` from `root`, fetching hashed nodes and value nodes through `fetch` (which
/// must check the hash). Returns the value or `None` when the path proves absence.
pub(crate) fn walk<'p, L: Layout>(
    root: &H256,
    key: &[u8],
    mut fetch: impl FnMut(&H256, &[u8]) -> Result<&'p [u8], ProofError>,
) -> Result<Option<Vec<u8>>, ProofError> {
    let path = Nibbles::from_bytes(key).0;
    if *root == L::empty_root() {
        return Ok(None);
    }
    let mut depth = 0usize;
    let mut current = ChildRef::hash(*root);
    loop {
        let inline_copy;
        let bytes: &[u8] = match current.kind() {
            ChildKind::Empty => return Ok(None),
            ChildKind::Hash(h) => fetch(&h, &path[..depth])?,
            ChildKind::Inline(b) => {
                inline_copy = b.to_vec();
                &inline_copy
            }
        };
        let node = L::decode(bytes)
            .map_err(|source| ProofError::Malformed { path: path_hex(&path[..depth]), source })?;
        let value = match node {
            NodeView::Empty => return Ok(None),
            NodeView::Leaf { path: lp, value } => {
                if lp.as_slice() != &path[depth..] {
                    return Ok(None);
                }
                value
            }
            NodeView::Extension { path: ep, child } => {
                if !path[depth..].starts_with(ep.as_slice()) {
                    return Ok(None);
                }
                depth += ep.len();
                current = child;
                continue;
            }
            NodeView::Branch { path: bp, children, value } => {
                if !path[depth..].starts_with(bp.as_slice()) {
                    return Ok(None);
                }
                depth += bp.len();
                if depth < path.len() {
                    current = children[path[depth] as usize];
                    depth += 1;
                    continue;
                }
                match value {
                    Some(v) => v,
                    None => return Ok(None),
                }
            }
        };
        return Ok(Some(match value {
            NodeValue::Inline(v) => v.to_vec(),
            NodeValue::Node(h) => fetch(&h, &path)?.to_vec(),
        }));
    }
}

/// Entries of a key range with the proof that they are all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeProof {
    /// Every (key, value) with `start <= key <= end`, ascending.
    pub entries: Vec<Entry>,
    /// Nodes on the paths to `start` and to the last entry (deduplicated).
    pub proof: Vec<Vec<u8>>,
}

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// Nodes on the path to `key` (inclusion or exclusion proof), root first; in layouts
    /// with value nodes, the value node of a proven value last.
    pub fn prove(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>, TrieError> {
        let mut out = Vec::new();
        self.prove_into(key, true, &mut out, &mut HashSet::new())?;
        Ok(out)
    }

    /// One proof for many keys: every node once, in first-use order.
    pub fn prove_many(&mut self, keys: &[impl AsRef<[u8]>]) -> Result<Vec<Vec<u8>>, TrieError> {
        self.prove_paths(keys, true)
    }

    /// The nodes on the paths to `keys`, each once, with the value nodes of the proven
    /// values when `values` is set.
    fn prove_paths(
        &mut self,
        keys: &[impl AsRef<[u8]>],
        values: bool,
    ) -> Result<Vec<Vec<u8>>, TrieError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for k in keys {
            self.prove_into(k.as_ref(), values, &mut out, &mut seen)?;
        }
        Ok(out)
    }

    /// All entries in `[start, end]` with the boundary proofs. When no key lies in the
    /// range, the entries hold the first key after `start` (if any), so that the proof still
    /// shows the gap; an empty result then proves that no key at or after `start` exists.
    /// The entries carry the values, so the proof holds no value nodes.
    pub fn prove_range(&mut self, start: &[u8], end: &[u8]) -> Result<RangeProof, TrieError> {
        let mut entries = self.range(start, end)?;
        if entries.is_empty() {
            entries.extend(self.seek(start)?);
        }
        let last = entries.last().map_or(start, |(k, _)| k.as_slice()).to_vec();
        let proof = self.prove_paths(&[start, &last], false)?;
        Ok(RangeProof { entries, proof })
    }

    fn prove_into(
        &mut self,
        key: &[u8],
        values: bool,
        out: &mut Vec<Vec<u8>>,
        seen: &mut HashSet<H256>,
    ) -> Result<(), TrieError> {
        // Proofs show canonical nodes: collapse what deletions left first.
        self.normalize()?;
        self.root()?;
        let path = Nibbles::from_bytes(key).0;
        let mut id = self.root;
        let mut depth = 0;
        let mut is_root = true;
        while id != NONE {
            self.resolve(id, &path[..depth])?;
            let mut enc = Vec::new();
            self.encode_clean(id, &mut enc);
            if (is_root || enc.len() >= 32) && seen.insert(L::hash(&enc)) {
                out.push(enc);
            }
            is_root = false;
            // Without extension nodes, an extension slot and its branch are one node.
            let node = match &self.slots[id as usize].kind {
                Kind::Extension { path: ep, child } if !L::FAMILY.has_extensions() => {
                    if !path[depth..].starts_with(ep) {
                        break;
                    }
                    depth += ep.len();
                    *child
                }
                _ => id,
            };
            match &self.slots[node as usize].kind {
                Kind::Leaf { path: lp, .. } => {
                    if values && lp.as_slice() == &path[depth..] {
                        self.prove_value(node, &path, out, seen)?;
                    }
                    break;
                }
                Kind::Extension { path: ep, child } => {
                    if !path[depth..].starts_with(ep) {
                        break;
                    }
                    depth += ep.len();
                    id = *child;
                }
                Kind::Branch { children, .. } => {
                    if depth == path.len() {
                        if values {
                            self.prove_value(node, &path, out, seen)?;
                        }
                        break;
                    }
                    id = children[path[depth] as usize];
                    depth += 1;
                }
                Kind::Hashed(_) => unreachable!("resolved above"),
            }
        }
        Ok(())
    }

    /// Add the value node of the value `id` holds for the key `key_path`, if it is one.
    fn prove_value(
        &mut self,
        id: NodeId,
        key_path: &[u8],
        out: &mut Vec<Vec<u8>>,
        seen: &mut HashSet<H256>,
    ) -> Result<(), TrieError> {
        if let Some((Some(hash), bytes)) = self.value_ref(id, key_path)? {
            if seen.insert(hash) {
                out.push(bytes.to_vec());
            }
        }
        Ok(())
    }
}

/// Untrusted nodes (a proof, a block witness) served by hash, remembering which ones were
/// loaded, so that a verifier can refuse nodes nothing needed.
#[derive(Debug, Default)]
pub struct UsedNodes {
    nodes: HashMap<H256, Vec<u8>>,
    used: RefCell<HashSet<H256>>,
}

impl UsedNodes {
    /// Serve `nodes` (keyed by their hash).
    pub fn new(nodes: HashMap<H256, Vec<u8>>) -> Self {
        Self { nodes, used: RefCell::default() }
    }

    /// The nodes held, by hash.
    pub fn nodes(&self) -> &HashMap<H256, Vec<u8>> {
        &self.nodes
    }

    /// How many distinct nodes were never loaded.
    pub fn unused(&self) -> usize {
        self.nodes.len() - self.used.borrow().len()
    }
}

impl NodeSource for UsedNodes {
    fn load(&self, _path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        let n = self.nodes.get(hash).cloned();
        if n.is_some() {
            self.used.borrow_mut().insert(*hash);
        }
        Ok(n)
    }
}

fn trie_to_proof_error(e: TrieError) -> ProofError {
    match e {
        TrieError::MissingNode { path, .. } => ProofError::MissingNode { path },
        TrieError::Corrupt { path, source } => ProofError::Malformed { path, source },
        // A proof source serves nodes by their own hash and cannot fail.
        other => ProofError::Malformed { path: other.to_string(), source: NodeError::BadLeaf },
    }
}

/// Verify a range proof: `entries` are all the keys in `[start, last entry]` of the trie
/// with root `root`; with no entries, the proof shows that no key at or after `start` exists.
pub fn verify_range_proof<L: Layout>(
    root: &H256,
    start: &[u8],
    entries: &[Entry],
    proof: &[impl AsRef<[u8]>],
) -> Result<(), ProofError> {
    for w in entries.windows(2) {
        if w[0].0 >= w[1].0 {
            return Err(ProofError::BadRange("keys not strictly ascending"));
        }
    }
    if entries.first().is_some_and(|(k, _)| k.as_slice() < start) {
        return Err(ProofError::BadRange("entry before the range start"));
    }
    if !L::ALLOW_EMPTY_VALUE && entries.iter().any(|(_, v)| v.is_empty()) {
        return Err(ProofError::BadRange("empty value"));
    }
    if proof.is_empty() {
        // No boundary proofs: the entries must be the whole trie.
        let (computed, _) = root_from_sorted::<L, _, _>(entries)
            .map_err(|_| ProofError::BadRange("keys not strictly ascending"))?;
        return if computed == *root {
            Ok(())
        } else {
            Err(ProofError::RootMismatch { expected: *root, computed })
        };
    }
    let mut nodes = HashMap::with_capacity(proof.len());
    for (i, n) in proof.iter().enumerate() {
        if nodes.insert(L::hash(n.as_ref()), n.as_ref().to_vec()).is_some() {
            return Err(ProofError::DuplicateNode(i));
        }
    }
    let mut trie: Trie<UsedNodes, L> = Trie::from_root(UsedNodes::new(nodes), *root);
    let left = Nibbles::from_bytes(start).0;
    let right = entries.last().map(|(k, _)| Nibbles::from_bytes(k).0);
    let mut prefix = Vec::new();
    let r = trie
        .unset(trie.root, &mut prefix, Some(&left), right.as_deref())
        .map_err(trie_to_proof_error)?;
    trie.set_root(r);
    for (k, v) in entries {
        trie.insert(k, v).map_err(trie_to_proof_error)?;
    }
    let computed = trie.root().map_err(trie_to_proof_error)?;
    if computed != *root {
        return Err(ProofError::RootMismatch { expected: *root, computed });
    }
    let unused = trie.source().unused();
    if unused > 0 {
        return Err(ProofError::UnusedNodes(unused));
    }
    Ok(())
}

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// Drop every key `k` with `left <= k <= right` below `id` (remaining paths; `None` =
    /// unbounded). Loads only the nodes on the two boundary paths. The result may hold
    /// branches with a single entry; re-inserting the range restores canonical shape.
    fn unset(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Result<NodeId, TrieError> {
        if id == NONE || (left.is_none() && right.is_none()) {
            return Ok(NONE);
        }
        self.resolve(id, prefix)?;
        match self.slots[id as usize].kind.clone() {
            Kind::Leaf { path, .. } => {
                let inside = left.is_none_or(|l| path.as_slice() >= l)
                    && right.is_none_or(|r| path.as_slice() <= r);
                Ok(if inside { NONE } else { id })
            }
            Kind::Extension { path, child } => {
                let Some((sub_left, sub_right)) = extension_bounds(&path, left, right) else {
                    return Ok(id);
                };
                prefix.extend_from_slice(&path);
                let nc = self.unset(child, prefix, sub_left, sub_right);
                prefix.truncate(prefix.len() - path.len());
                let nc = nc?;
                if nc == NONE {
                    return Ok(NONE);
                }
                if nc != child || self.slots[nc as usize].cached.is_empty() {
                    self.touch(id, prefix);
                    self.slots[id as usize].kind = Kind::Extension { path, child: nc };
                }
                Ok(id)
            }
            Kind::Branch { children, value } => {
                self.unset_branch(id, prefix, (children, value), left, right)
            }
            Kind::Hashed(_) => unreachable!("resolved above"),
        }
    }

    /// [`Trie::unset`] on branch `id` (a copy of its `(children, value)`): drop its value
    /// when the range covers it, and the range's part of every child the range reaches.
    fn unset_branch(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        (mut children, value): ([NodeId; 16], Option<Value>),
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Result<NodeId, TrieError> {
        let mut changed = false;
        let value_inside = left.is_none_or(<[u8]>::is_empty);
        let value = if value_inside && value.is_some() {
            changed = true;
            None
        } else {
            value
        };
        for i in 0..16u8 {
            let Some((sub_left, sub_right)) = child_bounds(i, left, right) else { continue };
            let c = children[i as usize];
            if c == NONE {
                continue;
            }
            prefix.push(i);
            let nc = self.unset(c, prefix, sub_left, sub_right);
            prefix.pop();
            let nc = nc?;
            if nc != c || (nc != NONE && self.slots[nc as usize].cached.is_empty()) {
                changed = true;
            }
            children[i as usize] = nc;
        }
        if !changed {
            return Ok(id);
        }
        self.touch(id, prefix);
        if value.is_none() && children.iter().all(|c| *c == NONE) {
            self.singles.remove(&id);
            return Ok(NONE);
        }
        self.slots[id as usize].kind = Kind::Branch { children, value };
        self.note_shape(id, prefix);
        Ok(id)
    }
}

/// The bounds of [`Trie::unset`] below an extension over `path`, or `None` when every key
/// below it lies outside `left..=right` (the extension stays as it is).
fn extension_bounds<'k>(
    path: &[u8],
    left: Option<&'k [u8]>,
    right: Option<&'k [u8]>,
) -> Option<UnsetBounds<'k>> {
    use std::cmp::Ordering::*;
    let sub_left = match left {
        None => None,
        Some(l) => {
            let m = path.len().min(l.len());
            match path[..m].cmp(&l[..m]) {
                Less => return None,
                Greater => None,
                // Every key below extends the bound: all are inside on this side.
                Equal if l.len() < path.len() => None,
                // Keep descending while the bound lasts, so that the node the prover
                // included at the bound's end is loaded (and checked).
                Equal => Some(&l[path.len()..]),
            }
        }
    };
    let sub_right = match right {
        None => None,
        Some(r) => {
            let m = path.len().min(r.len());
            match path[..m].cmp(&r[..m]) {
                Greater => return None,
                Less => None,
                Equal if r.len() < path.len() => return None,
                Equal => Some(&r[path.len()..]),
            }
        }
    };
    Some((sub_left, sub_right))
}

/// The bounds of [`Trie::unset`] below nibble `i` of a branch, or `None` when every key
/// below it lies outside `left..=right` (the child stays as it is).
fn child_bounds<'k>(
    i: u8,
    left: Option<&'k [u8]>,
    right: Option<&'k [u8]>,
) -> Option<UnsetBounds<'k>> {
    let sub_left = match left {
        None => None,
        Some([]) => None,
        Some(l) if i < l[0] => return None,
        Some(l) if i == l[0] => Some(&l[1..]),
        Some(_) => None,
    };
    let sub_right = match right {
        None => None,
        Some([]) => return None,
        Some(r) if i > r[0] => return None,
        Some(r) if i == r[0] => Some(&r[1..]),
        Some(_) => None,
    };
    Some((sub_left, sub_right))
}

/// The `(left, right)` bounds of [`Trie::unset`] on remaining paths (`None` = unbounded).
type UnsetBounds<'k> = (Option<&'k [u8]>, Option<&'k [u8]>);
