//! Deletion, with the branch collapse that pulls in (and records) the remaining sibling.

use super::{Kind, NodeId, NodeSource, Trie, TrieError, NONE};
use crate::hash::H256;
use crate::nibbles::Nibbles;
use crate::node::Layout;

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
                Ok((self.merge_extension(id, prefix)?, true))
            }
            Kind::Branch { children, value } => {
                if rest.is_empty() {
                    if value.is_none() {
                        return Ok((id, false));
                    }
                    self.touch(id, prefix);
                    if let Kind::Branch { value, .. } = &mut self.slots[id as usize].kind {
                        *value = None;
                    }
                    return Ok((self.collapse_branch(id, prefix)?, true));
                }
                let i = rest[0] as usize;
                let child = children[i];
                if child == NONE {
                    return Ok((id, false));
                }
                prefix.push(rest[0]);
                let r = self.remove_at(child, prefix, &rest[1..]);
                prefix.pop();
                let (nc, changed) = r?;
                if !changed {
                    return Ok((id, false));
                }
                self.touch(id, prefix);
                if let Kind::Branch { children, .. } = &mut self.slots[id as usize].kind {
                    children[i] = nc;
                }
                Ok((self.collapse_branch(id, prefix)?, true))
            }
            Kind::Hashed(_) => unreachable!("resolved above"),
        }
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
                self.resolve(child, &child_path)?;
                if let Kind::Branch { .. } = self.slots[child as usize].kind {
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
