//! The descent: each node's pre-state decoded, the changes under it applied, its new
//! shape decided.

use std::borrow::Cow;

use rayon::prelude::*;
use state::H256;

use crate::builder::RootBuilder;
use crate::nibbles::{common_prefix_nibbles, nibble_at};
use crate::node::{ChildKind, ChildRef, Layout, NodeError, NodeValue, NodeView, INLINE_MAX};

use super::out::{BuilderSink, Out};
use super::place::encode_branch;
use super::{
    followed, pack, ready, Change, Loaded, Pre, PreState, Ref, Shape, Unplaced, UpdateError, Val,
    WalkError, Walker, PARALLEL_CHANGES_MIN, PARALLEL_DEPTH_MAX,
};

/// A surviving entry of a rebuilt subtree: key and value.
type Pair<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// A child task's result: its nibble, shape, whether a node was stored there, and output.
type Task<'a, L> = (u8, Shape<'a>, bool, Out<L>);

/// A leaf's key and, when the changes do not decide it, its value.
type LeafParts<'a> = (Cow<'a, [u8]>, Option<Cow<'a, [u8]>>);

/// A branch whose children the changes are rebuilding.
struct Rebuild<'a> {
    /// Its children as the pre-state refers to them; a child the changes empty is cleared.
    children: [ChildRef; 16],
    /// The value at its path (once the changes are applied, the new one).
    value: Option<Val<'a>>,
    /// A child that exists only in this pass (the rest of a split extension or partial
    /// key), under its nibble, until a group of changes takes it over.
    virt: Option<(u8, Shape<'a>)>,
    /// The children the changes reached and left standing: nibble, new shape, and whether
    /// a node was stored at the child's path.
    touched: Vec<(u8, Shape<'a>, bool)>,
}

impl<'a> Rebuild<'a> {
    /// A branch over `children` with `value`, and `virt` beside them.
    fn new(
        children: [ChildRef; 16],
        value: Option<Val<'a>>,
        virt: Option<(u8, Shape<'a>)>,
    ) -> Self {
        Rebuild { children, value, virt, touched: Vec::new() }
    }

    /// `changes` (all below the branch at depth `base`) grouped by child, each with the
    /// child's pre-state: the virtual child when the group is its, else the reference.
    fn groups<'c>(
        &mut self,
        base: usize,
        changes: &'c [Change<'a>],
    ) -> Vec<(u8, Pre<'a>, &'c [Change<'a>])> {
        let mut groups = Vec::with_capacity(16);
        let mut i = 0;
        while i < changes.len() {
            let n = nibble_at(changes[i].key, base);
            let j = i + changes[i..].iter().take_while(|c| nibble_at(c.key, base) == n).count();
            let pre = match self.virt.take() {
                Some((v, shape)) if v == n => Pre::Virtual(shape),
                other => {
                    self.virt = other;
                    Pre::Ref(self.children[n as usize])
                }
            };
            groups.push((n, pre, &changes[i..j]));
            i = j;
        }
        groups
    }

    /// Take the children's new shapes: a child that is gone has its stored node (under
    /// `path`, the branch's) deleted whatever becomes of the branch; the others are
    /// touched.
    fn take_shapes<L: Layout>(
        &mut self,
        path: &mut Vec<u8>,
        shapes: Vec<(u8, Shape<'a>, bool)>,
        out: &mut Out<L>,
    ) {
        self.touched.reserve(shapes.len());
        for (n, shape, below_stored) in shapes {
            if matches!(shape, Shape::Empty) {
                if below_stored {
                    path.push(n);
                    out.delete(path);
                    path.pop();
                }
                self.children[n as usize] = ChildRef::EMPTY;
            } else {
                self.touched.push((n, shape, below_stored));
            }
        }
    }

    /// The mask of its live children: untouched ones, touched ones and the virtual one.
    fn alive(&self) -> u16 {
        let mut alive: u16 = 0;
        for (n, c) in self.children.iter().enumerate() {
            alive |= u16::from(!c.is_empty()) << n;
        }
        for n in self.touched.iter().map(|t| t.0).chain(self.virt.as_ref().map(|v| v.0)) {
            alive |= 1 << n;
        }
        alive
    }
}

impl<P: PreState, L: Layout> Walker<'_, P, L> {
    /// The new shape of the node at `path` (whose pre-state is `pre`) under `changes`
    /// (non-empty, all under `path`), and whether a node was stored at `path` before.
    pub(super) fn apply<'a>(
        &self,
        path: &mut Vec<u8>,
        pre: Pre<'a>,
        changes: &[Change<'a>],
        out: &mut Out<L>,
    ) -> Result<(Shape<'a>, bool), WalkError<P>> {
        let (loaded, stored) = self.load(path, pre, changes, out)?;
        let shape = match loaded {
            // The common case: one change to the key whose leaf this is.
            Loaded::Leaf { value: None, .. } if changes.len() == 1 => match changes[0].new {
                Some(v) => Shape::Leaf {
                    key: Cow::Borrowed(changes[0].key),
                    start: path.len(),
                    value: Val::Bytes(Cow::Borrowed(v)),
                },
                None => Shape::Empty,
            },
            Loaded::Empty => self.build(path, None, changes, out)?,
            Loaded::Leaf { key, value } => self.build(path, Some((key, value)), changes, out)?,
            Loaded::Extension { path: ext, child } => {
                return self.apply_extension(path, ext, child, stored, changes, out);
            }
            Loaded::Branch { partial, children, value, virt: None } if !partial.is_empty() => {
                let branch = Unplaced { partial, refs: children.map(Ref::Ready), value };
                return self.apply_partial(path, branch, stored, changes, out);
            }
            Loaded::Branch { children, value, virt, .. } => {
                let branch = Rebuild::new(children, value, virt);
                let shape = self.apply_branch(path, branch, stored, changes, out)?;
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
        out: &mut Out<L>,
    ) -> Result<(Loaded<'a>, bool), WalkError<P>> {
        let r = match pre {
            Pre::Virtual(Shape::Extension { path, child }) => {
                return Ok((Loaded::Extension { path, child: ready(child) }, false))
            }
            Pre::Virtual(Shape::Placed(r)) => ready(r),
            Pre::Ref(r) => r,
            Pre::Virtual(Shape::Empty) => return Ok((Loaded::Empty, false)),
            Pre::Virtual(Shape::Leaf { key, value, .. }) => {
                let value = match value {
                    Val::Bytes(v) => v,
                    Val::Hashed(_) => unreachable!("a virtual pre-state node is a split's rest"),
                };
                return Ok((Loaded::Leaf { key, value: Some(value) }, false));
            }
            Pre::Virtual(Shape::Branch(b)) => {
                let Unplaced { partial, refs, value } = *b;
                let children = refs.map(ready);
                return Ok((Loaded::Branch { partial, children, value, virt: None }, false));
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
        out: &mut Out<L>,
    ) -> Result<(Loaded<'a>, bool), WalkError<P>> {
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
        match self.pre.node(path).map_err(UpdateError::Source)? {
            Some(v) => self.stored_node(path, hash, &v),
            None => Ok((self.leaf_for(path, Some(hash), changes, out)?, false)),
        }
    }

    /// The hash of the leaf of `key` with `value` at `path` (`None` if it would be inline).
    fn leaf_hash(&self, path: &[u8], key: &[u8], value: &[u8], out: &mut Out<L>) -> Option<H256> {
        out.encode_leaf(key, path.len(), value);
        if out.buf.len() <= INLINE_MAX {
            return None;
        }
        out.hashes += 1;
        Some(L::hash(&out.buf))
    }

    /// The change of `key` claims an old value the trie does not hold.
    pub(super) fn old_value_error(&self, key: &[u8]) -> WalkError<P> {
        UpdateError::OldValue { key: key.to_vec() }
    }

    /// A stored node (`hash ‖ encoding`) at `path`, checked against its parent's `hash`.
    fn stored_node<'a>(
        &self,
        path: &[u8],
        hash: H256,
        v: &[u8],
    ) -> Result<(Loaded<'a>, bool), WalkError<P>> {
        if v.len() < 32 || v[..32] != hash.0 {
            return Err(UpdateError::NodeHash { path: path.to_vec(), expected: hash });
        }
        Ok((self.decoded(path, &v[32..])?, true))
    }

    /// A decoded node at `path`, owned.
    fn decoded<'a>(&self, path: &[u8], bytes: &[u8]) -> Result<Loaded<'a>, WalkError<P>> {
        let node =
            L::decode(bytes).map_err(|source| UpdateError::Node { path: path.to_vec(), source })?;
        Ok(match node {
            NodeView::Empty => Loaded::Empty,
            NodeView::Leaf { path: rest, value } => {
                let mut full = path.to_vec();
                full.extend_from_slice(rest.as_slice());
                let key = pack(&full).ok_or_else(|| UpdateError::OddKey { path: full.clone() })?;
                let value = match value {
                    NodeValue::Inline(v) => v.to_vec(),
                    NodeValue::Node(h) => self.value_of_node(path, &key, h)?,
                };
                Loaded::Leaf { key: Cow::Owned(key), value: Some(Cow::Owned(value)) }
            }
            NodeView::Extension { path: ext, child } => Loaded::Extension { path: ext.0, child },
            NodeView::Branch { path: partial, children, value } => {
                let value = match value {
                    None => None,
                    Some(NodeValue::Inline(v)) => Some(Val::Bytes(Cow::Owned(v.to_vec()))),
                    // Invariant: only layouts with value nodes hold hashed values.
                    Some(NodeValue::Node(_)) if L::FAMILY.has_extensions() => {
                        let source = NodeError::ValueNode;
                        return Err(UpdateError::Node { path: path.to_vec(), source });
                    }
                    Some(NodeValue::Node(h)) => Some(Val::Hashed(h)),
                };
                Loaded::Branch { partial: partial.0, children, value, virt: None }
            }
        })
    }

    /// The value of a stored leaf at `path` that holds only its value node's hash (a root
    /// leaf in Substrate V1): `key`'s flat value, which must hash to it.
    fn value_of_node(&self, path: &[u8], key: &[u8], hash: H256) -> Result<Vec<u8>, WalkError<P>> {
        match self.pre.leaf_under(path).map_err(UpdateError::Source)? {
            Some((k, v)) if k == key && L::hash(&v) == hash => Ok(v),
            _ => Err(UpdateError::MissingLeaf { path: path.to_vec() }),
        }
    }

    /// The leaf at `path` (no node is stored there; `hash` is its reference, when hashed):
    /// the key of the one existing change under it (its old value must give that hash), or
    /// else the one live key a scan finds (which no change may claim absent, and whose leaf
    /// must give that hash).
    fn leaf_for<'a>(
        &self,
        path: &[u8],
        hash: Option<H256>,
        changes: &[Change<'a>],
        out: &mut Out<L>,
    ) -> Result<Loaded<'a>, WalkError<P>> {
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
        let Some((key, value)) = self.pre.leaf_under(path).map_err(UpdateError::Source)? else {
            return Err(UpdateError::MissingLeaf { path: path.to_vec() });
        };
        if changes.iter().any(|c| c.key == key.as_slice()) {
            return Err(self.old_value_error(&key));
        }
        // The key a scan finds must be the leaf its parent refers to: a branch stored there
        // that memory took for a leaf, or `flat` out of step with `nodes`, is reported
        // instead of building a wrong trie.
        if let Some(expected) = hash {
            if self.leaf_hash(path, &key, &value, out) != Some(expected) {
                return Err(UpdateError::NodeHash { path: path.to_vec(), expected });
            }
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
        out: &mut Out<L>,
    ) -> Result<Shape<'a>, WalkError<P>> {
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
            return Ok(Shape::Leaf { key, start, value: Val::Bytes(value) });
        }
        let common = common_prefix_nibbles(&first.0, &last.0);
        let ext: Vec<u8> = (start..common).map(|i| nibble_at(&first.0, i)).collect();
        if !L::FAMILY.has_extensions() {
            return self.built_unplaced(ext, common, &entries, out);
        }
        let branch = Ref::Ready(self.built(common, &entries, out)?);
        Ok(if ext.is_empty() {
            Shape::Placed(branch)
        } else {
            Shape::Extension { path: ext, child: branch }
        })
    }

    /// The branch over `entries` (sorted, at least two, sharing `common` nibbles) with
    /// partial key `partial`, unplaced: its children built and written, the branch itself
    /// left for its parent to encode (layouts without extensions).
    fn built_unplaced<'a>(
        &self,
        partial: Vec<u8>,
        common: usize,
        entries: &[Pair<'a>],
        out: &mut Out<L>,
    ) -> Result<Shape<'a>, WalkError<P>> {
        let mut rest = entries;
        let mut value = None;
        if let Some(((k, v), tail)) = rest.split_first() {
            if k.len() * 2 == common {
                value = Some(Val::Bytes(v.clone()));
                rest = tail;
            }
        }
        let mut refs = [Ref::Ready(ChildRef::EMPTY); 16];
        let mut i = 0;
        while i < rest.len() {
            let n = nibble_at(&rest[i].0, common);
            let j = i + rest[i..].iter().take_while(|e| nibble_at(&e.0, common) == n).count();
            refs[n as usize] = match &rest[i..j] {
                [(k, v)] => {
                    out.encode_leaf(k, common + 1, v);
                    out.pend(&[], None, false)
                }
                group => Ref::Ready(self.built(common + 1, group, out)?),
            };
            i = j;
        }
        Ok(Shape::Branch(Box::new(Unplaced { partial, refs, value })))
    }

    /// Build the branch at nibble depth `depth` over `entries` (sorted, sharing `depth`
    /// nibbles), writing its hashed nodes.
    fn built(
        &self,
        depth: usize,
        entries: &[Pair<'_>],
        out: &mut Out<L>,
    ) -> Result<ChildRef, WalkError<P>> {
        let mut b = RootBuilder::<L, _>::subtree(depth, BuilderSink(&mut out.writes, Vec::new()));
        for (k, v) in entries {
            b.add(k, v).map_err(UpdateError::KeyOrder)?;
        }
        let (r, _, stats) = b.finish_ref();
        out.hashes += stats.hashes;
        Ok(r)
    }

    /// Apply the changes under a branch with a non-empty partial key (layouts without
    /// extensions), stored at `path` when `stored`.
    fn apply_partial<'a>(
        &self,
        path: &mut Vec<u8>,
        branch: Unplaced<'a>,
        stored: bool,
        changes: &[Change<'a>],
        out: &mut Out<L>,
    ) -> Result<(Shape<'a>, bool), WalkError<P>> {
        let base = path.len();
        let Unplaced { partial: mut head, refs, value } = branch;
        // Every change follows `head`; where one leaves the partial key, a new branch
        // holds the old one as its child.
        let tail = head.split_off(followed(changes, base, &head));
        path.extend_from_slice(&head);
        // Nothing is stored at the branch's own path: it lives at its slot.
        let below = match tail.split_first() {
            None => {
                let branch = Rebuild::new(refs.map(ready), value, None);
                self.apply_branch(path, branch, false, changes, out)
            }
            Some((&first, rest)) => {
                let old = Unplaced { partial: rest.to_vec(), refs, value };
                let virt = Some((first, Shape::Branch(Box::new(old))));
                let branch = Rebuild::new([ChildRef::EMPTY; 16], None, virt);
                self.apply_branch(path, branch, false, changes, out)
            }
        };
        path.truncate(base);
        let shape = match below? {
            Shape::Branch(mut b) => {
                head.extend_from_slice(&b.partial);
                b.partial = head;
                Shape::Branch(b)
            }
            Shape::Leaf { key, value, .. } => Shape::Leaf { key, start: base, value },
            Shape::Empty => Shape::Empty,
            Shape::Placed(_) | Shape::Extension { .. } => {
                unreachable!("layouts without extensions place no branch early")
            }
        };
        Ok((shape, stored))
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_extension<'a>(
        &self,
        path: &mut Vec<u8>,
        ext: Vec<u8>,
        child: ChildRef,
        stored: bool,
        changes: &[Change<'a>],
        out: &mut Out<L>,
    ) -> Result<(Shape<'a>, bool), WalkError<P>> {
        let base = path.len();
        let followed = followed(changes, base, &ext);
        if followed == 0 {
            // A change leaves the extension's path at once: split it, as a branch with one
            // child.
            let child = Ref::Ready(child);
            let rest = if ext.len() == 1 {
                Shape::Placed(child)
            } else {
                Shape::Extension { path: ext[1..].to_vec(), child }
            };
            let branch = Rebuild::new([ChildRef::EMPTY; 16], None, Some((ext[0], rest)));
            let shape = self.apply_branch(path, branch, stored, changes, out)?;
            return Ok((shape, stored));
        }
        // Every change follows the first `followed` nibbles: descend by them at once (nibble
        // by nibble, a long extension would recurse as deep as it is long).
        let mut ext = ext;
        let tail = ext.split_off(followed);
        let pre = match tail.is_empty() {
            true => Pre::Ref(child),
            false => Pre::Virtual(Shape::Extension { path: tail, child: Ref::Ready(child) }),
        };
        path.extend_from_slice(&ext);
        let result = self.apply(path, pre, changes, out);
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
                    Shape::Branch(_) => unreachable!("layouts with extensions place branches"),
                }
            }
        };
        path.truncate(base);
        Ok((shape, stored))
    }

    /// Apply the changes under `branch` at `path` (a node was stored there when `stored`).
    fn apply_branch<'a>(
        &self,
        path: &mut Vec<u8>,
        mut branch: Rebuild<'a>,
        stored: bool,
        changes: &[Change<'a>],
        out: &mut Out<L>,
    ) -> Result<Shape<'a>, WalkError<P>> {
        let base = path.len();
        // The change of the key that ends here (it sorts first), then one group per child.
        let (own, rest) = match changes.split_first() {
            Some((c, rest)) if c.key.len() * 2 == base => (Some(c), rest),
            _ => (None, changes),
        };
        let groups = branch.groups(base, rest);
        let shapes = self.apply_children(path, groups, out)?;
        if let Some(c) = own {
            branch.value = c.new.map(|v| Val::Bytes(Cow::Borrowed(v)));
        }
        branch.take_shapes(path, shapes, out);
        let alive = branch.alive();
        match (alive.count_ones(), branch.value) {
            (0, None) => Ok(Shape::Empty),
            (0, Some(v)) => {
                let key = pack(path).ok_or_else(|| UpdateError::OddKey { path: path.clone() })?;
                Ok(Shape::Leaf { key: Cow::Owned(key), start: base, value: v })
            }
            (1, None) => {
                let n = alive.trailing_zeros() as u8;
                let (below, below_stored) = match branch.touched.pop() {
                    Some((_, shape, st)) => (shape, st),
                    None => {
                        self.untouched(path, n, branch.children[n as usize], branch.virt, out)?
                    }
                };
                path.push(n);
                let merged = self.collapse(path, n, below, below_stored, out);
                path.pop();
                Ok(merged)
            }
            (_, value) => {
                branch.value = value;
                Ok(self.close_branch(path, branch, stored, out))
            }
        }
    }

    /// The shape of `branch` at `path` when it keeps two or more children, or one and a
    /// value: its children placed, and the branch itself encoded and written (layouts with
    /// extensions) or left for its parent to encode (layouts without).
    fn close_branch<'a>(
        &self,
        path: &mut Vec<u8>,
        branch: Rebuild<'a>,
        stored: bool,
        out: &mut Out<L>,
    ) -> Shape<'a> {
        let Rebuild { children, value, virt, touched } = branch;
        let mut refs = children.map(Ref::Ready);
        for (n, shape, below_stored) in touched {
            path.push(n);
            refs[n as usize] = self.place(path, shape, below_stored, out);
            path.pop();
        }
        if let Some((v, shape)) = virt {
            path.push(v);
            refs[v as usize] = self.place(path, shape, false, out);
            path.pop();
        }
        if !L::FAMILY.has_extensions() {
            let partial = Vec::new();
            return Shape::Branch(Box::new(Unplaced { partial, refs, value }));
        }
        let r = encode_branch(&refs, value.as_ref().map(Val::bytes), path, out);
        if stored && matches!(r, Ref::Ready(_)) {
            out.delete(path);
        }
        Shape::Placed(r)
    }

    /// Apply each group to its child, on the rayon pool when there is enough work.
    fn apply_children<'a>(
        &self,
        path: &mut Vec<u8>,
        groups: Vec<(u8, Pre<'a>, &[Change<'a>])>,
        out: &mut Out<L>,
    ) -> Result<Vec<(u8, Shape<'a>, bool)>, WalkError<P>> {
        let total: usize = groups.iter().map(|g| g.2.len()).sum();
        if groups.len() > 1 && total >= PARALLEL_CHANGES_MIN && path.len() <= PARALLEL_DEPTH_MAX {
            let base: &[u8] = path;
            let results: Vec<Result<Task<'a, L>, WalkError<P>>> = groups
                .into_par_iter()
                .map(|(n, pre, group)| {
                    let mut p = Vec::with_capacity(64);
                    p.extend_from_slice(base);
                    p.push(n);
                    let mut o = Out::<L>::default();
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
    pub(super) fn untouched<'a>(
        &self,
        path: &mut Vec<u8>,
        n: u8,
        child: ChildRef,
        virt: Option<(u8, Shape<'a>)>,
        out: &mut Out<L>,
    ) -> Result<(Shape<'a>, bool), WalkError<P>> {
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
                (Shape::Leaf { key, start, value: Val::Bytes(value) }, stored)
            }
            Loaded::Extension { path, child } => {
                (Shape::Extension { path, child: Ref::Ready(child) }, stored)
            }
            // Without extensions the branch takes the parent's nibble into its partial key
            // and moves to the parent's slot.
            Loaded::Branch { partial, children, value, .. } if !L::FAMILY.has_extensions() => {
                let refs = children.map(Ref::Ready);
                (Shape::Branch(Box::new(Unplaced { partial, refs, value })), stored)
            }
            // A branch stays where it is: only its reference moves into an extension.
            Loaded::Branch { .. } => (Shape::Placed(Ref::Ready(child)), stored),
        })
    }
}
