//! Root computation and commit: re-encode and re-hash only the dirty nodes.
//!
//! In layouts without extension nodes an extension slot and the branch below it are
//! encoded as one branch with a partial key, and the branch slot caches the pair's
//! reference too (a dirtiness mark: only a branch standing on its own is asked for its
//! reference).

use state::H256;

use super::value::{self, value_node_mut};
use super::{
    CommittedNode, CommittedValue, Kind, NodeId, NodeSource, Trie, TrieError, TrieUpdates, Value,
    NONE,
};
use crate::nibbles::Nibbles;
use crate::node::{ChildKind, ChildRef, ExtensionCodec, Family, Layout, NibbledCodec, INLINE_MAX};
use crate::source::MemoryNodeSource;

/// One change of the collapse node set (see [`Trie::collapse_delta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollapseDelta {
    /// The node a single branch's collapse needed before, as (hash, encoded length).
    pub before: Option<(H256, usize)>,
    /// The node it needs now.
    pub now: Option<(H256, usize)>,
}

/// A node's canonical form where it stands, computed without changing the structure: a
/// single branch (see `remove.rs`) collapses into its remaining entry, and an extension
/// over one absorbs the result.
enum Canon {
    Leaf {
        path: Vec<u8>,
        value: Value,
    },
    /// Branch `branch` below the partial key `path`: an extension over the branch
    /// (Ethereum), or the branch carrying `path` (layouts without extensions).
    Ext {
        path: Vec<u8>,
        branch: NodeId,
    },
    /// A branch that is not single, where it stands (or an unloaded stub known to be one).
    Branch(NodeId),
}

impl Canon {
    /// The form of this node seen from `nibble` of a parent branch that collapses into it.
    fn below(self, nibble: u8) -> Canon {
        match self {
            Canon::Leaf { mut path, value } => {
                path.insert(0, nibble);
                Canon::Leaf { path, value }
            }
            Canon::Ext { mut path, branch } => {
                path.insert(0, nibble);
                Canon::Ext { path, branch }
            }
            Canon::Branch(branch) => Canon::Ext { path: vec![nibble], branch },
        }
    }

    /// This form behind an extension with path `ep`.
    fn behind(self, ep: &[u8]) -> Canon {
        let join = |p: Vec<u8>| [ep, p.as_slice()].concat();
        match self {
            Canon::Leaf { path, value } => Canon::Leaf { path: join(path), value },
            Canon::Ext { path, branch } => Canon::Ext { path: join(path), branch },
            Canon::Branch(branch) => Canon::Ext { path: ep.to_vec(), branch },
        }
    }
}

/// What [`Trie::commit`] collects from the fresh nodes.
#[derive(Default)]
struct Fresh {
    nodes: Vec<CommittedNode>,
    values: Vec<CommittedValue>,
}

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// The root hash; hashes only nodes changed since the last call. Fails only when a
    /// branch that deletions left with one entry needs its remaining child and the source
    /// does not have it (or fails).
    pub fn root(&mut self) -> Result<H256, TrieError> {
        if let Some(h) = self.root_hash {
            return Ok(h);
        }
        self.load_collapse_children()?;
        let h = if self.root == NONE {
            L::empty_root()
        } else {
            let r = self.hash_node(self.root);
            match r.kind() {
                ChildKind::Hash(h) => h,
                // A short root is still committed to by its hash.
                ChildKind::Inline(bytes) => {
                    self.stats.hashes += 1;
                    self.stats.bytes += bytes.len() as u64;
                    L::hash(bytes)
                }
                ChildKind::Empty => unreachable!("a live node has a reference"),
            }
        };
        self.root_hash = Some(h);
        Ok(h)
    }

    /// Load the remaining child of every single branch whose child is not loaded yet, so
    /// that hashing can collapse it. Recorded unless `record_collapse_loads` is off.
    fn load_collapse_children(&mut self) -> Result<(), TrieError> {
        // Only branches that became single since the last root can have an unloaded
        // child: a single's child stays loaded (and a changed child is loaded anyway).
        let mut fresh = std::mem::take(&mut self.new_singles);
        fresh.sort_unstable();
        fresh.dedup();
        let pending: Vec<(NodeId, NodeId, Vec<u8>)> = fresh
            .into_iter()
            .filter_map(|id| {
                let path = self.singles.get(&id)?;
                let Kind::Branch { children, value: None } = &self.slots[id as usize].kind else {
                    return None;
                };
                let (i, &c) = children.iter().enumerate().find(|(_, c)| **c != NONE)?;
                let stub = &self.slots[c as usize];
                (matches!(stub.kind, Kind::Hashed(_)) && !stub.known_branch).then(|| {
                    let mut p = path.clone();
                    p.push(i as u8);
                    (id, c, p)
                })
            })
            .collect();
        for (n, (_, c, path)) in pending.iter().enumerate() {
            if let Err(e) = self.resolve_for_collapse(*c, path) {
                // Try again at the next root.
                self.new_singles.extend(pending[n..].iter().map(|(id, _, _)| *id));
                return Err(e);
            }
        }
        Ok(())
    }

    /// The pre-state nodes that collapsing the current single branches needs and that no
    /// operation has visited otherwise: for each single branch whose remaining child is an
    /// unchanged pre-state node referenced by hash and not known to be a branch, that child
    /// (hash and encoding). Loads the children not loaded yet (recorded only if
    /// `record_collapse_loads` is on). Costs O(single branches); hashes nothing.
    pub fn collapse_nodes(&mut self) -> Result<Vec<(H256, Vec<u8>)>, TrieError> {
        let singles: Vec<(NodeId, Vec<u8>)> =
            self.singles.iter().map(|(&id, path)| (id, path.clone())).collect();
        let mut out = Vec::new();
        for (id, path) in singles {
            out.extend(self.collapse_need(id, &path)?);
        }
        Ok(out)
    }

    /// How the set of collapse nodes (see [`Trie::collapse_nodes`]) changed since the last
    /// call: for each single branch whose shape or subtree changed, the node its collapse
    /// needed before (if any) and the one it needs now (if any), as (hash, encoded length).
    /// Costs O(branches changed since the last call), loading children as needed.
    pub fn collapse_delta(&mut self) -> Result<Vec<CollapseDelta>, TrieError> {
        let mut dirty = std::mem::take(&mut self.dirty_singles);
        dirty.sort_unstable();
        dirty.dedup();
        let mut out = Vec::new();
        for id in dirty {
            let now = match self.singles.get(&id).cloned() {
                Some(path) => self.collapse_need(id, &path)?.map(|(h, enc)| (h, enc.len())),
                None => None,
            };
            let before = match now {
                Some(n) => self.collapse_of.insert(id, n),
                None => self.collapse_of.remove(&id),
            };
            if before != now {
                out.push(CollapseDelta { before, now });
            }
        }
        Ok(out)
    }

    /// The unchanged pre-state node (hash, encoding) the collapse of single branch `id`
    /// (at `path`) needs, loading it if it is not loaded yet.
    fn collapse_need(
        &mut self,
        id: NodeId,
        path: &[u8],
    ) -> Result<Option<(H256, Vec<u8>)>, TrieError> {
        let Kind::Branch { children, value: None } = &self.slots[id as usize].kind else {
            return Ok(None);
        };
        let Some((i, &c)) = children.iter().enumerate().find(|(_, c)| **c != NONE) else {
            return Ok(None);
        };
        let slot = &self.slots[c as usize];
        if slot.fresh || slot.origin.is_none() {
            return Ok(None);
        }
        if matches!(slot.kind, Kind::Hashed(_)) {
            if slot.known_branch {
                return Ok(None);
            }
            let mut child_path = path.to_vec();
            child_path.push(i as u8);
            self.resolve_for_collapse(c, &child_path)?;
        }
        let origin = self.slots[c as usize].origin.expect("checked above");
        let mut enc = Vec::new();
        self.encode_clean(c, &mut enc);
        Ok(Some((origin, enc)))
    }

    /// Resolve a node needed only to collapse its single parent.
    pub(crate) fn resolve_for_collapse(
        &mut self,
        id: NodeId,
        path: &[u8],
    ) -> Result<(), TrieError> {
        let held = if self.record_collapse_loads { None } else { self.recorder.take() };
        let r = self.resolve(id, path);
        if held.is_some() {
            self.recorder = held;
        }
        r
    }

    /// The canonical form of node `id` where it stands. Every node it needs is loaded
    /// (see [`Trie::load_collapse_children`]).
    fn canon(&self, id: NodeId) -> Canon {
        match &self.slots[id as usize].kind {
            Kind::Leaf { path, value } => Canon::Leaf { path: path.clone(), value: value.clone() },
            Kind::Extension { path, child } => {
                if self.is_single(*child) {
                    self.canon(*child).behind(path)
                } else {
                    Canon::Ext { path: path.clone(), branch: *child }
                }
            }
            Kind::Branch { children, value } if self.is_single(id) => {
                match children.iter().enumerate().find(|(_, c)| **c != NONE) {
                    Some((i, &c)) => self.canon(c).below(i as u8),
                    None => Canon::Leaf {
                        path: Vec::new(),
                        value: value.clone().expect("a single branch without a child has a value"),
                    },
                }
            }
            // Only stubs known to be branches are left unloaded under a single branch.
            Kind::Branch { .. } | Kind::Hashed(_) => Canon::Branch(id),
        }
    }

    /// Reference of node `id`, computing dirty descendants first.
    pub(crate) fn hash_node(&mut self, id: NodeId) -> ChildRef {
        let cached = self.slots[id as usize].cached;
        if !cached.is_empty() {
            return cached;
        }
        // Children first, collecting their references in the same pass (each child slot
        // is read once); then encode this node from them.
        let mut inner = NONE;
        let mut buf = match &self.slots[id as usize].kind {
            Kind::Extension { child, .. } if self.is_single(*child) => self.encode_canon(id),
            Kind::Branch { .. } if self.is_single(id) => self.encode_canon(id),
            Kind::Extension { child, .. } => {
                let c = *child;
                match L::FAMILY {
                    Family::Ethereum(codec) => {
                        let r = self.hash_node(c);
                        let mut buf = std::mem::take(&mut self.buf);
                        buf.clear();
                        if let Kind::Extension { path, .. } = &self.slots[id as usize].kind {
                            codec.encode_extension_unpacked(path, &r, &mut buf);
                        }
                        buf
                    }
                    Family::Substrate(codec) => {
                        inner = c;
                        let refs = self.hash_children(inner);
                        let mut buf = std::mem::take(&mut self.buf);
                        buf.clear();
                        if let Kind::Extension { path, .. } = &self.slots[id as usize].kind {
                            let value = self.branch_value(inner).map(Value::view);
                            codec.encode_branch_with(path, &refs, value, &mut buf);
                        }
                        buf
                    }
                }
            }
            Kind::Branch { .. } => {
                let refs = self.hash_children(id);
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                value::encode_branch::<L>(&refs, self.branch_value(id), &mut buf);
                buf
            }
            Kind::Leaf { path, value } => {
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                value::encode_leaf::<L>(path, value, &mut buf);
                buf
            }
            Kind::Hashed(_) => unreachable!("unloaded nodes always carry their hash"),
        };
        let r = L::child_ref(&buf);
        if r.as_hash().is_some() {
            self.stats.hashes += 1;
            self.stats.bytes += buf.len() as u64;
        }
        buf.clear();
        std::mem::swap(&mut self.buf, &mut buf);
        self.slots[id as usize].cached = r;
        if inner != NONE {
            self.slots[inner as usize].cached = r;
        }
        r
    }

    /// The references of branch `id`'s children, hashing dirty ones first.
    fn hash_children(&mut self, id: NodeId) -> [ChildRef; 16] {
        let Kind::Branch { children, .. } = &self.slots[id as usize].kind else {
            panic!("hash_children of a node that is not a branch")
        };
        let children = *children;
        let mut refs = [ChildRef::EMPTY; 16];
        for (r, c) in refs.iter_mut().zip(children) {
            if c != NONE {
                *r = self.hash_node(c);
            }
        }
        refs
    }

    /// The value branch `id` holds.
    fn branch_value(&self, id: NodeId) -> Option<&Value> {
        let Kind::Branch { value, .. } = &self.slots[id as usize].kind else {
            panic!("branch_value of a node that is not a branch")
        };
        value.as_ref()
    }

    /// The encoding of node `id`'s canonical form (in the shared buffer).
    fn encode_canon(&mut self, id: NodeId) -> Vec<u8> {
        match self.canon(id) {
            Canon::Leaf { path, value } => {
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                value::encode_leaf::<L>(&path, &value, &mut buf);
                buf
            }
            Canon::Ext { path, branch } => match L::FAMILY {
                Family::Ethereum(codec) => {
                    let r = self.hash_node(branch);
                    let mut buf = std::mem::take(&mut self.buf);
                    buf.clear();
                    codec.encode_extension_unpacked(&path, &r, &mut buf);
                    buf
                }
                Family::Substrate(codec) => {
                    // The branch stays where it is in the structure: its own cache is not set.
                    let refs = self.hash_children(branch);
                    let mut buf = std::mem::take(&mut self.buf);
                    buf.clear();
                    let value = self.branch_value(branch).map(Value::view);
                    codec.encode_branch_with(&path, &refs, value, &mut buf);
                    buf
                }
            },
            // `canon` of a single node never stops at a plain branch: hash_node handles those.
            Canon::Branch(_) => unreachable!("encode_canon of a plain branch"),
        }
    }

    /// Compute the root and return every new node and every removed pre-state node.
    /// Afterwards the trie's nodes count as pre-state for recording and later commits.
    pub fn commit(&mut self) -> Result<TrieUpdates, TrieError> {
        self.normalize()?;
        self.singles.clear();
        self.collapse_of.clear();
        self.dirty_singles.clear();
        self.new_singles.clear();
        let root = self.root()?;
        let mut fresh = Fresh::default();
        if self.root != NONE {
            let mut path = Vec::new();
            self.collect_fresh(self.root, &mut path, true, &mut fresh);
        }
        let removed = std::mem::take(&mut self.removed);
        Ok(TrieUpdates { root, new: fresh.nodes, removed, values: fresh.values })
    }

    fn collect_fresh(&mut self, id: NodeId, path: &mut Vec<u8>, is_root: bool, out: &mut Fresh) {
        let slot = &self.slots[id as usize];
        if !slot.fresh {
            return;
        }
        match &slot.kind {
            Kind::Extension { path: ep, child } => {
                let (ep_len, c) = (ep.len(), *child);
                path.extend_from_slice(ep);
                if L::FAMILY.has_extensions() {
                    self.collect_fresh(c, path, false, out);
                } else {
                    // The branch below is part of this node.
                    self.collect_branch(c, path, out);
                    self.slots[c as usize].fresh = false;
                }
                path.truncate(path.len() - ep_len);
            }
            Kind::Branch { .. } => self.collect_branch(id, path, out),
            Kind::Leaf { path: lp, value: Value::Node(n) } if !n.committed => {
                let len = path.len();
                path.extend_from_slice(lp);
                self.collect_value(id, path, out);
                path.truncate(len);
            }
            Kind::Leaf { .. } | Kind::Hashed(_) => {}
        }
        let mut encoded = Vec::new();
        self.encode_clean(id, &mut encoded);
        let slot = &mut self.slots[id as usize];
        slot.fresh = false;
        if encoded.len() > INLINE_MAX || is_root {
            let hash = slot.cached.as_hash().unwrap_or_else(|| L::hash(&encoded));
            slot.origin = Some(hash);
            let is_leaf = matches!(slot.kind, Kind::Leaf { .. });
            slot.origin_leaf = is_leaf;
            out.nodes.push(CommittedNode { path: Nibbles(path.clone()), hash, encoded, is_leaf });
        }
    }

    /// [`Trie::collect_fresh`] below branch `id`, whose children hang at `path`.
    fn collect_branch(&mut self, id: NodeId, path: &mut Vec<u8>, out: &mut Fresh) {
        let Kind::Branch { children, .. } = &self.slots[id as usize].kind else {
            panic!("collect_branch of a node that is not a branch")
        };
        let children = *children;
        for (i, c) in children.into_iter().enumerate() {
            if c != NONE {
                path.push(i as u8);
                self.collect_fresh(c, path, false, out);
                path.pop();
            }
        }
        self.collect_value(id, path, out);
    }

    /// Report the value node of `id` (key nibbles `key_path`) if it is new.
    fn collect_value(&mut self, id: NodeId, key_path: &[u8], out: &mut Fresh) {
        let Some(n) = value_node_mut(&mut self.slots[id as usize].kind) else { return };
        if n.committed {
            return;
        }
        n.committed = true;
        let value = n.bytes.clone().expect("a value node this trie wrote holds its bytes");
        out.values.push(CommittedValue { path: Nibbles(key_path.to_vec()), hash: n.hash, value });
    }
}

/// A hash-keyed source fed from commits: its trie-side half (the source itself knows
/// nothing of tries).
impl MemoryNodeSource {
    /// Keep every node and value node a commit wrote (nothing is deleted: see the type's
    /// docs).
    pub fn apply(&mut self, updates: TrieUpdates) {
        for n in updates.new {
            self.insert_hashed(n.hash, n.encoded);
        }
        for v in updates.values {
            self.insert_hashed(v.hash, v.value);
        }
    }

    /// The committed state of `entries` (key, value) in layout `L`: its nodes, value nodes
    /// included, and its root.
    pub fn committed<L: Layout, K: AsRef<[u8]>, V: AsRef<[u8]>>(
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(MemoryNodeSource, H256), TrieError> {
        let mut t: Trie<MemoryNodeSource, L> = Trie::new(Self::new());
        for (k, v) in entries {
            t.insert(k.as_ref(), v.as_ref())?;
        }
        let u = t.commit()?;
        let root = u.root;
        let mut src = t.into_source();
        src.apply(u);
        Ok((src, root))
    }
}
