//! Insertion: follow the key's path, split the leaf or extension it leaves, and place the
//! value where the path ends (a leaf's value, a branch's value, or a new leaf).
//!
//! In layouts without extension nodes the extension and branch slots of a branch with a
//! partial key are one node (see the module docs of `trie`): where a split takes the
//! extension away from over a branch, or puts one over it, the branch is touched.
//!
//! Each step takes its node's kind out of the arena (a `Hashed` placeholder stands in) and
//! puts the new kind back; when a load below fails, the old kind goes back, so a failed
//! insert leaves the trie's structure as it was. Cost: the nodes on the key's path, plus at
//! most one new branch, one new leaf and one new extension.

use state::H256;

use super::{Kind, NodeId, NodeSource, Trie, TrieError, Value, NONE};
use crate::nibbles::{common_prefix, Nibbles};
use crate::node::Layout;

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// Insert or replace `key`. An empty value removes the key in layouts where it is no
    /// value (Ethereum's); in the others ([`Layout::ALLOW_EMPTY_VALUE`]) it is stored.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<(), TrieError> {
        if value.is_empty() && !L::ALLOW_EMPTY_VALUE {
            return self.remove(key).map(|_| ());
        }
        let path = Nibbles::from_bytes(key).0;
        let mut prefix = Vec::with_capacity(path.len());
        let (root, _) = self.with_hint(key, |t| t.insert_at(t.root, &mut prefix, &path, value))?;
        self.set_root(root);
        Ok(())
    }

    /// Insert below node `id`, which sits at `prefix`; `rest` is the remaining key.
    /// Returns the node now at this position and whether anything changed.
    pub(crate) fn insert_at(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        rest: &[u8],
        value: &[u8],
    ) -> Result<(NodeId, bool), TrieError> {
        if id == NONE {
            let leaf =
                self.new_node(Kind::Leaf { path: rest.to_vec(), value: Value::new::<L>(value) });
            self.root_hash = None;
            return Ok((leaf, true));
        }
        self.resolve(id, prefix)?;
        let kind = std::mem::replace(&mut self.slots[id as usize].kind, Kind::Hashed(H256::ZERO));
        match kind {
            Kind::Leaf { path, value: old } => {
                Ok(self.insert_into_leaf(id, prefix, (path, old), rest, value))
            }
            Kind::Extension { path, child } => {
                self.insert_into_extension(id, prefix, (path, child), rest, value)
            }
            Kind::Branch { children, value: old } => {
                self.insert_into_branch(id, prefix, (children, old), rest, value)
            }
            Kind::Hashed(_) => unreachable!("resolved above"),
        }
    }

    /// [`Trie::insert_at`] on leaf `id` (taken out of its slot as `(path, value)`): replace
    /// its value, or split it into a branch holding both entries.
    fn insert_into_leaf(
        &mut self,
        id: NodeId,
        prefix: &[u8],
        (lp, mut lv): (Vec<u8>, Value),
        rest: &[u8],
        value: &[u8],
    ) -> (NodeId, bool) {
        if lp.as_slice() == rest {
            let changed = lv.set::<L>(value);
            self.slots[id as usize].kind = Kind::Leaf { path: lp, value: lv };
            if changed {
                self.touch(id, prefix);
            }
            return (id, changed);
        }
        self.touch(id, prefix);
        let c = common_prefix(&lp, rest);
        let mut children = [NONE; 16];
        let mut here = None;
        // The old leaf moves below the new branch (reusing its slot).
        if lp.len() == c {
            here = Some(lv);
            self.free.push(id);
            self.slots[id as usize].kind = Kind::Hashed(H256::ZERO);
        } else {
            children[lp[c] as usize] = id;
            self.slots[id as usize].kind = Kind::Leaf { path: lp[c + 1..].to_vec(), value: lv };
        }
        let b = self.new_branch_with(children, here, &rest[c..], value);
        (self.wrap_extension(&rest[..c], b), true)
    }

    /// [`Trie::insert_at`] on extension `id` (taken out of its slot as `(path, child)`):
    /// descend when the key runs through it, else split it where the key leaves it.
    fn insert_into_extension(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        (ep, child): (Vec<u8>, NodeId),
        rest: &[u8],
        value: &[u8],
    ) -> Result<(NodeId, bool), TrieError> {
        let c = common_prefix(&ep, rest);
        if c == ep.len() {
            prefix.extend_from_slice(&ep);
            let r = self.insert_at(child, prefix, &rest[c..], value);
            prefix.truncate(prefix.len() - ep.len());
            let (nc, changed) = match r {
                Ok(r) => r,
                Err(e) => {
                    self.slots[id as usize].kind = Kind::Extension { path: ep, child };
                    return Err(e);
                }
            };
            self.slots[id as usize].kind = Kind::Extension { path: ep, child: nc };
            if changed {
                self.touch(id, prefix);
            }
            return Ok((id, changed));
        }
        // Split the extension at c.
        self.touch(id, prefix);
        let mut children = [NONE; 16];
        let below = if ep.len() - c - 1 > 0 {
            self.new_node(Kind::Extension { path: ep[c + 1..].to_vec(), child })
        } else {
            if !L::FAMILY.has_extensions() {
                // The branch loses its partial key: a new node, at a new path.
                let mut child_path = prefix.clone();
                child_path.extend_from_slice(&ep);
                self.touch(child, &child_path);
            }
            child
        };
        children[ep[c] as usize] = below;
        let b = self.new_branch_with(children, None, &rest[c..], value);
        if c > 0 {
            self.slots[id as usize].kind = Kind::Extension { path: ep[..c].to_vec(), child: b };
            Ok((id, true))
        } else {
            self.free.push(id);
            Ok((b, true))
        }
    }

    /// [`Trie::insert_at`] on branch `id` (taken out of its slot as `(children, value)`):
    /// set its value when the key ends here, else insert below the key's next nibble.
    fn insert_into_branch(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        (mut children, bv): ([NodeId; 16], Option<Value>),
        rest: &[u8],
        value: &[u8],
    ) -> Result<(NodeId, bool), TrieError> {
        let Some((&nibble, below)) = rest.split_first() else {
            let (v, changed) = match bv {
                Some(mut v) => {
                    let changed = v.set::<L>(value);
                    (v, changed)
                }
                None => (Value::new::<L>(value), true),
            };
            self.slots[id as usize].kind = Kind::Branch { children, value: Some(v) };
            if changed {
                self.touch(id, prefix);
                self.note_shape(id, prefix);
            }
            return Ok((id, changed));
        };
        let i = nibble as usize;
        prefix.push(nibble);
        let r = self.insert_at(children[i], prefix, below, value);
        prefix.pop();
        let (nc, changed) = match r {
            Ok(r) => r,
            Err(e) => {
                self.slots[id as usize].kind = Kind::Branch { children, value: bv };
                return Err(e);
            }
        };
        children[i] = nc;
        self.slots[id as usize].kind = Kind::Branch { children, value: bv };
        if changed {
            self.touch(id, prefix);
            self.note_shape(id, prefix);
        }
        Ok((id, changed))
    }

    /// A new branch over `children` and `here` (the value ending at the branch) with
    /// `value` added at `rest`, the key's path from the branch on: as the branch's value
    /// when `rest` is empty, else as a new leaf below nibble `rest[0]`.
    fn new_branch_with(
        &mut self,
        mut children: [NodeId; 16],
        mut here: Option<Value>,
        rest: &[u8],
        value: &[u8],
    ) -> NodeId {
        match rest.split_first() {
            None => {
                assert!(here.is_none(), "two values end at one new branch");
                here = Some(Value::new::<L>(value));
            }
            Some((&nibble, below)) => {
                assert!(children[nibble as usize] == NONE, "two entries below one nibble");
                let value = Value::new::<L>(value);
                let leaf = self.new_node(Kind::Leaf { path: below.to_vec(), value });
                children[nibble as usize] = leaf;
            }
        }
        self.new_node(Kind::Branch { children, value: here })
    }

    /// `child` below an extension over `path`, or `child` itself when `path` is empty.
    fn wrap_extension(&mut self, path: &[u8], child: NodeId) -> NodeId {
        if path.is_empty() {
            child
        } else {
            self.new_node(Kind::Extension { path: path.to_vec(), child })
        }
    }
}
