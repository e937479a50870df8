//! Root computation and commit: re-encode and re-hash only the dirty nodes.

use super::{CommittedNode, Kind, NodeId, NodeSource, Trie, TrieUpdates, NONE};
use crate::hash::H256;
use crate::nibbles::Nibbles;
use crate::node::{ChildRef, Layout, INLINE_MAX};

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// The root hash; hashes only nodes changed since the last call.
    pub fn root(&mut self) -> H256 {
        if let Some(h) = self.root_hash {
            return h;
        }
        let h = if self.root == NONE {
            L::empty_root()
        } else {
            let r = self.hash_node(self.root);
            match r.as_hash() {
                Some(h) => h,
                None => {
                    // A short root is still committed to by its hash.
                    self.buf.clear();
                    let mut buf = std::mem::take(&mut self.buf);
                    self.encode_clean(self.root, &mut buf);
                    self.stats.hashes += 1;
                    self.stats.bytes += buf.len() as u64;
                    let h = L::hash(&buf);
                    self.buf = buf;
                    h
                }
            }
        };
        self.root_hash = Some(h);
        h
    }

    /// Reference of node `id`, computing dirty descendants first.
    pub(crate) fn hash_node(&mut self, id: NodeId) -> ChildRef {
        let cached = self.slots[id as usize].cached;
        if !cached.is_empty() {
            return cached;
        }
        // Children first, collecting their references in the same pass (each child slot
        // is read once); then encode this node from them.
        let mut buf = match &self.slots[id as usize].kind {
            Kind::Extension { child, .. } => {
                let c = *child;
                let r = self.hash_node(c);
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                if let Kind::Extension { path, .. } = &self.slots[id as usize].kind {
                    L::encode_extension_unpacked(path, &r, &mut buf);
                }
                buf
            }
            Kind::Branch { children, .. } => {
                let children = *children;
                let mut refs = [ChildRef::EMPTY; 16];
                for (r, c) in refs.iter_mut().zip(children) {
                    if c != NONE {
                        *r = self.hash_node(c);
                    }
                }
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                if let Kind::Branch { value, .. } = &self.slots[id as usize].kind {
                    L::encode_branch(&refs, value.as_deref(), &mut buf);
                }
                buf
            }
            Kind::Leaf { path, value } => {
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                L::encode_leaf_unpacked(path, value, &mut buf);
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
        r
    }

    /// Compute the root and return every new node and every removed pre-state node.
    /// Afterwards the trie's nodes count as pre-state for recording and later commits.
    pub fn commit(&mut self) -> TrieUpdates {
        let root = self.root();
        let mut new = Vec::new();
        if self.root != NONE {
            let mut path = Vec::new();
            self.collect_fresh(self.root, &mut path, true, &mut new);
        }
        let removed = std::mem::take(&mut self.removed);
        TrieUpdates { root, new, removed }
    }

    fn collect_fresh(
        &mut self,
        id: NodeId,
        path: &mut Vec<u8>,
        is_root: bool,
        out: &mut Vec<CommittedNode>,
    ) {
        let slot = &self.slots[id as usize];
        if !slot.fresh {
            return;
        }
        match &slot.kind {
            Kind::Extension { path: ep, child } => {
                let (ep_len, c) = (ep.len(), *child);
                path.extend_from_slice(ep);
                self.collect_fresh(c, path, false, out);
                path.truncate(path.len() - ep_len);
            }
            Kind::Branch { children, .. } => {
                let children = *children;
                for (i, c) in children.into_iter().enumerate() {
                    if c != NONE {
                        path.push(i as u8);
                        self.collect_fresh(c, path, false, out);
                        path.pop();
                    }
                }
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
            out.push(CommittedNode { path: Nibbles(path.clone()), hash, encoded, is_leaf });
        }
    }
}
