//! Deletion, and the normalisation that collapses what deletions left behind.
//!
//! Deletion is lazy: a branch left with one entry stays a branch (a "single"), and an
//! extension over it stays an extension, until the trie is hashed or committed. Hashing
//! computes the collapsed form without changing the structure (see `hashing.rs`);
//! [`Trie::commit`] collapses the structure for real. So the remaining sibling is loaded
//! only if the branch is still single when the root is needed: a later insert under the
//! same branch (a transfer that re-creates an account, say) costs no sibling load, and the
//! set of nodes a root computation needs depends on the final state only, not on the order
//! of the changes. That is what makes an exact witness size possible (see the overlay).
//!
//! Without extension nodes (Substrate) the same rules run on the extension-over-branch
//! pairs that stand for branches with partial keys; a collapse always loads the remaining
//! child there, since the child's own partial key grows.

use state::H256;

use super::{Kind, NodeId, NodeSource, Trie, TrieError, NONE};
use crate::nibbles::Nibbles;
use crate::node::{ChildRef, Layout};

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// Remove `key`; returns whether it was present.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool, TrieError> {
        let path = Nibbles::from_bytes(key).0;
        let mut prefix = Vec::with_capacity(path.len());
        let (root, changed) = self.with_hint(key, |t| t.remove_at(t.root, &mut prefix, &path))?;
        self.set_root(root);
        Ok(changed)
    }

    /// Remove below `id` (at `prefix`); returns the node now at this position.
    pub(crate) fn remove_at(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        rest: &[u8],
    ) -> Result<(NodeId, bool), TrieError> {
        if id == NONE {
            return Ok((NONE, false));
        }
        self.resolve(id, prefix)?;
        match &self.slots[id as usize].kind {
            Kind::Leaf { path, .. } => {
                if path.as_slice() != rest {
                    return Ok((id, false));
                }
                self.free_node(id, prefix);
                Ok((NONE, true))
            }
            Kind::Extension { path, child } => {
                if !rest.starts_with(path) {
                    return Ok((id, false));
                }
                let (ep, child) = (path.clone(), *child);
                prefix.extend_from_slice(&ep);
                let r = self.remove_at(child, prefix, &rest[ep.len()..]);
                prefix.truncate(prefix.len() - ep.len());
                let (nc, changed) = r?;
                if !changed {
                    return Ok((id, false));
                }
                self.touch(id, prefix);
                if nc == NONE {
                    self.free_node(id, prefix);
                    return Ok((NONE, true));
                }
                if let Kind::Extension { child, .. } = &mut self.slots[id as usize].kind {
                    *child = nc;
                }
                Ok((id, true))
            }
            Kind::Branch { .. } => self.remove_from_branch(id, prefix, rest),
            Kind::Hashed(_) => unreachable!("resolved above"),
        }
    }

    /// [`Trie::remove_at`] on branch `id`: drop its value when the key ends here, else
    /// remove below the key's next nibble.
    fn remove_from_branch(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        rest: &[u8],
    ) -> Result<(NodeId, bool), TrieError> {
        let Kind::Branch { children, value } = &self.slots[id as usize].kind else {
            unreachable!("remove_from_branch on a node that is not a branch")
        };
        let Some((&nibble, below)) = rest.split_first() else {
            if value.is_none() {
                return Ok((id, false));
            }
            self.touch(id, prefix);
            if let Kind::Branch { value, .. } = &mut self.slots[id as usize].kind {
                *value = None;
            }
            return Ok((self.drop_if_empty(id, prefix), true));
        };
        let i = nibble as usize;
        let child = children[i];
        if child == NONE {
            return Ok((id, false));
        }
        prefix.push(nibble);
        let r = self.remove_at(child, prefix, below);
        prefix.pop();
        let (nc, changed) = r?;
        if !changed {
            return Ok((id, false));
        }
        self.touch(id, prefix);
        if let Kind::Branch { children, .. } = &mut self.slots[id as usize].kind {
            children[i] = nc;
        }
        Ok((self.drop_if_empty(id, prefix), true))
    }

    /// A branch that lost an entry: free it if nothing is left, else note whether it is
    /// now single (collapsed later).
    fn drop_if_empty(&mut self, id: NodeId, prefix: &[u8]) -> NodeId {
        if let Kind::Branch { children, value: None } = &self.slots[id as usize].kind {
            if children.iter().all(|c| *c == NONE) {
                self.free_node(id, prefix);
                return NONE;
            }
        }
        self.note_shape(id, prefix);
        id
    }

    /// Collapse every single branch below the changed nodes, bottom-up, loading each
    /// remaining sibling (and recording it, when recording). Afterwards the structure is
    /// canonical: no branch has one entry, no extension sits over a leaf or extension.
    pub(crate) fn normalize(&mut self) -> Result<(), TrieError> {
        if self.singles.is_empty() {
            return Ok(());
        }
        let mut prefix = Vec::new();
        let (root, changed) = self.normalize_at(self.root, &mut prefix)?;
        if changed {
            self.root_hash = None;
        }
        self.set_root(root);
        Ok(())
    }

    /// Normalise below `id`; returns the node now at this position and whether anything
    /// changed. A changed node's cached reference is cleared: it may have been computed
    /// (for the same canonical form) over children that are now replaced.
    fn normalize_at(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
    ) -> Result<(NodeId, bool), TrieError> {
        // Unchanged nodes are canonical (the pre-state is); so are their subtrees.
        if id == NONE || !self.slots[id as usize].fresh {
            return Ok((id, false));
        }
        let (out, changed) = match &self.slots[id as usize].kind {
            Kind::Leaf { .. } | Kind::Hashed(_) => return Ok((id, false)),
            Kind::Extension { path, child } => {
                let (ep, child) = (path.clone(), *child);
                prefix.extend_from_slice(&ep);
                let r = self.normalize_at(child, prefix);
                prefix.truncate(prefix.len() - ep.len());
                let (nc, below) = r?;
                if nc != child {
                    if let Kind::Extension { child, .. } = &mut self.slots[id as usize].kind {
                        *child = nc;
                    }
                }
                // An unloaded child is a pre-state branch: nothing to fold.
                if !below || matches!(self.slots[nc as usize].kind, Kind::Hashed(_)) {
                    (id, below)
                } else {
                    (self.merge_extension(id, prefix)?, true)
                }
            }
            Kind::Branch { children, .. } => {
                let children = *children;
                let mut below = false;
                for (i, c) in children.into_iter().enumerate() {
                    if c == NONE {
                        continue;
                    }
                    prefix.push(i as u8);
                    let r = self.normalize_at(c, prefix);
                    prefix.pop();
                    let (nc, ch) = r?;
                    below |= ch;
                    if nc != c {
                        if let Kind::Branch { children, .. } = &mut self.slots[id as usize].kind {
                            children[i] = nc;
                        }
                    }
                }
                let single = self.singles.remove(&id).is_some();
                let out = if single { self.collapse_branch(id, prefix)? } else { id };
                (out, below || single)
            }
        };
        if changed && out != NONE {
            self.slots[out as usize].cached = ChildRef::EMPTY;
        }
        Ok((out, changed))
    }

    /// An extension whose child changed: fold a leaf or extension child into it.
    fn merge_extension(&mut self, id: NodeId, prefix: &[u8]) -> Result<NodeId, TrieError> {
        let Kind::Extension { path: ep, child } = &self.slots[id as usize].kind else {
            unreachable!("merge_extension on a non-extension")
        };
        let (ep, child) = (ep.clone(), *child);
        let mut child_path = prefix.to_vec();
        child_path.extend_from_slice(&ep);
        self.resolve(child, &child_path)?;
        match &mut self.slots[child as usize].kind {
            Kind::Leaf { path, .. } | Kind::Extension { path, .. } => {
                let mut joined = ep;
                joined.extend_from_slice(path);
                *path = joined;
            }
            Kind::Branch { .. } => return Ok(id),
            Kind::Hashed(_) => unreachable!("resolved above"),
        }
        // The child now sits at this extension's path.
        self.touch(child, &child_path);
        self.free_node(id, prefix);
        Ok(child)
    }

    /// A branch that lost an entry: turn it into a leaf or extension if one entry is left.
    fn collapse_branch(&mut self, id: NodeId, prefix: &[u8]) -> Result<NodeId, TrieError> {
        let Kind::Branch { children, value } = &self.slots[id as usize].kind else {
            unreachable!("collapse_branch on a non-branch")
        };
        let mut live = children.iter().enumerate().filter(|(_, c)| **c != NONE);
        let first = live.next().map(|(i, c)| (i, *c));
        let more = live.next().is_some();
        match (first, more, value.is_some()) {
            (_, true, _) | (Some(_), false, true) => Ok(id),
            (None, false, true) => {
                let Kind::Branch { value, .. } =
                    std::mem::replace(&mut self.slots[id as usize].kind, Kind::Hashed(H256::ZERO))
                else {
                    unreachable!()
                };
                let value = value.expect("checked");
                self.slots[id as usize].kind = Kind::Leaf { path: Vec::new(), value };
                Ok(id)
            }
            (None, false, false) => {
                self.free_node(id, prefix);
                Ok(NONE)
            }
            (Some((i, child)), false, false) => {
                // One child left: load it (this read belongs to the witness) and pull it up.
                let mut child_path = prefix.to_vec();
                child_path.push(i as u8);
                let slot = &self.slots[child as usize];
                let known_branch = matches!(slot.kind, Kind::Hashed(_)) && slot.known_branch;
                if !known_branch {
                    self.resolve(child, &child_path)?;
                }
                if known_branch || matches!(self.slots[child as usize].kind, Kind::Branch { .. }) {
                    if !L::FAMILY.has_extensions() {
                        // The child branch takes a partial key: its node moves up to here.
                        self.touch(child, &child_path);
                    }
                    self.slots[id as usize].kind = Kind::Extension { path: vec![i as u8], child };
                    return Ok(id);
                }
                self.touch(child, &child_path);
                if let Kind::Leaf { path, .. } | Kind::Extension { path, .. } =
                    &mut self.slots[child as usize].kind
                {
                    path.insert(0, i as u8);
                }
                self.free_node(id, prefix);
                Ok(child)
            }
        }
    }
}
