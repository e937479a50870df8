//! Ordered access: the nearest key before or after a probe, in either direction.
//!
//! The walk descends only into subtrees that can hold the answer, so it loads at most two
//! root-to-leaf paths' worth of nodes plus the subtrees it must scan to find a neighbour.
//! The state seam's reads over a trie ([`StateReaderMut`]) are built from it.

use state::{key_bounds, KeyValue, StateReaderMut, TrieId};

use super::{Kind, NodeId, NodeSource, Trie, TrieError, NONE};
use crate::nibbles::Nibbles;
use crate::node::Layout;

/// Which neighbour to look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Keys greater than the probe, smallest first.
    Forward,
    /// Keys less than the probe, largest first.
    Backward,
}

/// A (key, value) pair.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A (nibble path, value) pair found by the walk.
type PathEntry = (Vec<u8>, Vec<u8>);

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// The smallest entry with key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<Option<Entry>, TrieError> {
        self.neighbour(key, Direction::Forward, true)
    }

    /// The smallest entry with key strictly greater than `key`.
    pub fn next_after(&mut self, key: &[u8]) -> Result<Option<Entry>, TrieError> {
        self.neighbour(key, Direction::Forward, false)
    }

    /// The largest entry with key strictly less than `key`.
    pub fn prev_before(&mut self, key: &[u8]) -> Result<Option<Entry>, TrieError> {
        self.neighbour(key, Direction::Backward, false)
    }

    /// Every entry in `[start, end]` (inclusive), in order.
    pub fn range(&mut self, start: &[u8], end: &[u8]) -> Result<Vec<Entry>, TrieError> {
        let mut out = Vec::new();
        let mut cur = self.seek(start)?;
        while let Some((k, v)) = cur {
            if k.as_slice() > end {
                break;
            }
            cur = self.next_after(&k)?;
            out.push((k, v));
        }
        Ok(out)
    }

    /// Every entry with `start <= key < end` (no upper bound when `end` is `None`), in
    /// order: the [`state::StateReader::range`] contract over a trie.
    pub fn entries(&mut self, start: &[u8], end: Option<&[u8]>) -> Result<Vec<Entry>, TrieError> {
        let mut out = Vec::new();
        let mut cur = self.seek(start)?;
        while let Some((k, v)) = cur {
            if end.is_some_and(|end| k.as_slice() >= end) {
                break;
            }
            cur = self.next_after(&k)?;
            out.push((k, v));
        }
        Ok(out)
    }

    fn neighbour(
        &mut self,
        key: &[u8],
        dir: Direction,
        inclusive: bool,
    ) -> Result<Option<Entry>, TrieError> {
        let target = Nibbles::from_bytes(key).0;
        let mut prefix = Vec::new();
        let found = self.find(self.root, &mut prefix, Some(&target), dir, inclusive)?;
        Ok(found.and_then(|(path, value)| Nibbles(path).to_bytes().map(|k| (k, value))))
    }

    /// First entry (in `dir` order) of the subtree at `id` beyond `target` (a remaining
    /// path; `None` = unbounded).
    fn find(
        &mut self,
        id: NodeId,
        prefix: &mut Vec<u8>,
        target: Option<&[u8]>,
        dir: Direction,
        inclusive: bool,
    ) -> Result<Option<PathEntry>, TrieError> {
        if id == NONE {
            return Ok(None);
        }
        self.resolve(id, prefix)?;
        let fwd = dir == Direction::Forward;
        match self.slots[id as usize].kind.clone() {
            Kind::Leaf { path, .. } => {
                let ok = match target {
                    None => true,
                    Some(t) => match path.as_slice().cmp(t) {
                        std::cmp::Ordering::Equal => inclusive,
                        std::cmp::Ordering::Greater => fwd,
                        std::cmp::Ordering::Less => !fwd,
                    },
                };
                if !ok {
                    return Ok(None);
                }
                let mut k = prefix.clone();
                k.extend_from_slice(&path);
                let value = self.read_value(id, &k)?;
                Ok(value.map(|v| (k, v)))
            }
            Kind::Extension { path, child } => {
                let sub = match target {
                    None => None,
                    Some(t) => {
                        let m = path.len().min(t.len());
                        match path[..m].cmp(&t[..m]) {
                            std::cmp::Ordering::Greater if fwd => None,
                            std::cmp::Ordering::Less if !fwd => None,
                            std::cmp::Ordering::Greater | std::cmp::Ordering::Less => {
                                return Ok(None)
                            }
                            std::cmp::Ordering::Equal if t.len() < path.len() => {
                                // Every key below is longer than the probe and extends it.
                                if fwd {
                                    None
                                } else {
                                    return Ok(None);
                                }
                            }
                            std::cmp::Ordering::Equal => Some(&t[path.len()..]),
                        }
                    }
                };
                prefix.extend_from_slice(&path);
                let r = self.find(child, prefix, sub, dir, inclusive);
                prefix.truncate(prefix.len() - path.len());
                r
            }
            Kind::Branch { children, value } => {
                let has_value = value.is_some();
                self.find_in_branch(id, (&children, has_value), prefix, target, dir, inclusive)
            }
            Kind::Hashed(_) => unreachable!("resolved above"),
        }
    }

    /// [`Trie::find`] in branch `id` (its children, and whether it holds a value).
    fn find_in_branch(
        &mut self,
        id: NodeId,
        (children, has_value): (&[NodeId; 16], bool),
        prefix: &mut Vec<u8>,
        target: Option<&[u8]>,
        dir: Direction,
        inclusive: bool,
    ) -> Result<Option<PathEntry>, TrieError> {
        let fwd = dir == Direction::Forward;
        // The branch value's key is `prefix` itself: smaller than every child key.
        let value_ok = has_value
            && match target {
                None => true,
                Some([]) => inclusive,
                Some(_) => !fwd,
            };
        if fwd && value_ok {
            return Ok(self.read_value(id, prefix)?.map(|v| (prefix.clone(), v)));
        }
        let order: Vec<usize> = if fwd { (0..16).collect() } else { (0..16).rev().collect() };
        for i in order {
            let sub = match target {
                None => None,
                Some([]) if fwd => None,
                Some([]) => continue,
                Some(t) => {
                    let ti = t[0] as usize;
                    if i == ti {
                        Some(&t[1..])
                    } else if (i > ti) == fwd {
                        None
                    } else {
                        continue;
                    }
                }
            };
            prefix.push(i as u8);
            let r = self.find(children[i], prefix, sub, dir, inclusive);
            prefix.pop();
            if let Some(e) = r? {
                return Ok(Some(e));
            }
        }
        if !fwd && value_ok {
            return Ok(self.read_value(id, prefix)?.map(|v| (prefix.clone(), v)));
        }
        Ok(None)
    }
}

/// A trie read through its nodes is the main trie of a state (every other trie is
/// empty): the reader of stateless verification and of proof-recording references, as a
/// `RefCell<Trie>`, in every layout (a caller names the layout, `Trie<_, L>`, where
/// inference cannot tell it). Every read walks the trie, so a recorder attached to it
/// records the nodes reads touch.
impl<S: NodeSource, L: Layout> StateReaderMut for Trie<S, L> {
    type Error = TrieError;

    fn get(&mut self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, TrieError> {
        match trie {
            TrieId::Main => Trie::get(self, key),
            TrieId::Storage(_) => Ok(None),
        }
    }

    fn range(
        &mut self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Vec<KeyValue>, TrieError> {
        match (trie, key_bounds(start, end)) {
            (TrieId::Main, Some(_)) => self.entries(start, end),
            _ => Ok(Vec::new()),
        }
    }

    fn last_before(&mut self, trie: &TrieId, before: &[u8]) -> Result<Option<KeyValue>, TrieError> {
        match trie {
            TrieId::Main => self.prev_before(before),
            TrieId::Storage(_) => Ok(None),
        }
    }
}
