//! One of the resident trie's 16 parts: a hash map from node key to node, and in front of
//! it a table of the main trie's upper levels indexed by path.
//!
//! A main-trie node 1 to [`DIRECT_DEPTH_MAX`] nibbles deep is found at a position computed
//! from its path (levels one after the other, each in path order), so a lookup there is one
//! load from the table instead of a hash-map probe (its control bytes, then its slot: two
//! cache misses where the table takes one, and no key hashing or comparing). At 1M random
//! keys these levels hold nine nodes in ten. Every other key (the root, deeper nodes, the
//! storage tries) is in the map.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use state::TrieId;

use crate::keys::node_key;

/// The deepest level a part's table may hold.
pub(super) const DIRECT_DEPTH_MAX: u8 = 5;
/// Bytes of one table position (an optional `Arc<[u8]>`).
pub(super) const POSITION_BYTES: u64 = std::mem::size_of::<Option<Arc<[u8]>>>() as u64;
/// The first position of each level (depth − 1 nibbles after the part's own): a level of
/// `d` nibbles has 16^(d−1) positions in each of the 16 parts.
const LEVEL_START: [usize; DIRECT_DEPTH_MAX as usize + 1] = [0, 1, 17, 273, 4369, 69905];

/// A node key, inline up to 16 bytes (a main-trie node up to 28 nibbles deep): a lookup
/// compares bytes already in the table instead of following a pointer to them.
pub(super) type NodeKey = smallvec::SmallVec<[u8; 16]>;

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct Shard {
    map: FxHashMap<NodeKey, Arc<[u8]>>,
    /// Main-trie nodes 1 to `levels` nibbles deep whose path starts with this part's
    /// nibble, by position ([`position`]).
    table: Vec<Option<Arc<[u8]>>>,
    /// Levels the table holds (0: none).
    levels: u8,
    /// Nodes in the table.
    in_table: usize,
}

/// Positions of a table holding `levels` levels.
pub(super) fn table_len(levels: u8) -> usize {
    LEVEL_START[usize::from(levels.min(DIRECT_DEPTH_MAX))]
}

/// The table position of node key `key` when it is a main-trie node 1 to
/// [`DIRECT_DEPTH_MAX`] nibbles deep (`0x00 ‖ packed path ‖ depth`, the padding nibble of
/// an odd path zero); `None` for every other key.
fn position(key: &[u8]) -> Option<usize> {
    let (&tag, rest) = key.split_first()?;
    let (&depth, packed) = rest.split_last()?;
    let d = usize::from(depth);
    if tag != 0 || depth == 0 || depth > DIRECT_DEPTH_MAX || packed.len() != d.div_ceil(2) {
        return None;
    }
    if d % 2 == 1 && packed[d / 2] & 0x0f != 0 {
        return None;
    }
    let mut at = 0;
    for i in 1..d {
        let byte = packed[i / 2];
        at = at * 16 + usize::from(if i % 2 == 0 { byte >> 4 } else { byte & 0x0f });
    }
    Some(LEVEL_START[d - 1] + at)
}

/// The nibble depth of the nodes at table position `at`.
fn depth_at(at: usize) -> usize {
    LEVEL_START.iter().rposition(|&s| s <= at).unwrap_or(0) + 1
}

/// The node key at table position `at` of the part of first nibble `first`.
fn key_at(first: u8, at: usize) -> Vec<u8> {
    let depth = depth_at(at);
    let mut rest = at - LEVEL_START[depth - 1];
    let mut nibbles = vec![0u8; depth];
    nibbles[0] = first;
    for n in nibbles[1..].iter_mut().rev() {
        *n = (rest % 16) as u8;
        rest /= 16;
    }
    node_key(&TrieId::Main, &nibbles)
}

impl Shard {
    /// An empty part whose table holds `levels` levels.
    pub(super) fn with_levels(levels: u8) -> Shard {
        let levels = levels.min(DIRECT_DEPTH_MAX);
        Shard { table: vec![None; table_len(levels)], levels, ..Shard::default() }
    }

    /// The table's slot for `key`, when the table holds its level.
    fn slot(&self, key: &[u8]) -> Option<usize> {
        position(key).filter(|&at| at < self.table.len())
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&Arc<[u8]>> {
        match self.slot(key) {
            Some(at) => self.table[at].as_ref(),
            None => self.map.get(key),
        }
    }

    /// Insert or replace; returns the replaced node.
    pub(super) fn insert(&mut self, key: &[u8], value: Arc<[u8]>) -> Option<Arc<[u8]>> {
        if let Some(at) = self.slot(key) {
            let old = self.table[at].replace(value);
            self.in_table += usize::from(old.is_none());
            return old;
        }
        // Most writes replace a node the map holds: keep its key instead of allocating one.
        match self.map.get_mut(key) {
            Some(slot) => Some(std::mem::replace(slot, value)),
            None => self.map.insert(NodeKey::from_slice(key), value),
        }
    }

    pub(super) fn remove(&mut self, key: &[u8]) -> Option<Arc<[u8]>> {
        match self.slot(key) {
            Some(at) => {
                let old = self.table[at].take();
                self.in_table -= usize::from(old.is_some());
                old
            }
            None => self.map.remove(key),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.map.len() + self.in_table
    }

    /// Every entry, as `(key length, depth, value)`.
    pub(super) fn sizes(&self) -> impl Iterator<Item = (usize, u8, &Arc<[u8]>)> {
        let mapped = self.map.iter().map(|(k, v)| (k.len(), super::depth(k), v));
        let tabled = self.table.iter().enumerate().filter_map(|(at, v)| {
            let depth = depth_at(at);
            v.as_ref().map(|v| (depth.div_ceil(2) + 2, depth as u8, v))
        });
        mapped.chain(tabled)
    }

    /// Drop every entry at least `limit` nibbles deep (and the table's levels from there);
    /// `evicted` sees each dropped key and value.
    pub(super) fn evict_from(
        &mut self,
        first: u8,
        limit: u8,
        evicted: &mut dyn FnMut(&[u8], &[u8]),
    ) {
        self.map.retain(|k, v| {
            let keep = super::depth(k) < limit;
            if !keep {
                evicted(k, v);
            }
            keep
        });
        let keep_levels = limit.saturating_sub(1).min(self.levels);
        let keep_len = table_len(keep_levels);
        for (at, v) in self.table.iter().enumerate().skip(keep_len) {
            if let Some(v) = v {
                evicted(&key_at(first, at), v);
                self.in_table -= 1;
            }
        }
        self.table.truncate(keep_len);
        self.table.shrink_to_fit();
        self.levels = keep_levels;
    }

    /// Bytes of the table itself.
    pub(super) fn table_bytes(&self) -> u64 {
        self.table.len() as u64 * POSITION_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every main-trie path 1 to 3 nibbles deep under two first nibbles has its own
    /// position, and the position gives the key back; other keys have none.
    #[test]
    fn positions_are_distinct_and_invert() {
        let mut seen = std::collections::HashSet::new();
        for first in [0u8, 0xf] {
            for depth in 1..=3usize {
                for rest in 0..16usize.pow(depth as u32 - 1) {
                    let mut path = vec![first];
                    path.extend((0..depth - 1).rev().map(|i| ((rest >> (4 * i)) & 0xf) as u8));
                    let key = node_key(&TrieId::Main, &path);
                    let at = position(&key).unwrap();
                    assert!(seen.insert((first, at)), "{path:?}");
                    assert_eq!(key_at(first, at), key);
                }
            }
        }
        let storage = node_key(&TrieId::Storage(state::H256([0; 32])), &[1, 2]);
        for other in [node_key(&TrieId::Main, &[]), node_key(&TrieId::Main, &[1; 6]), storage] {
            assert_eq!(position(&other), None, "{other:?}");
        }
        // An odd path whose padding nibble is not zero is no node key of that path.
        assert_eq!(position(&[0, 0x12, 0x31, 3]), None);
        assert_eq!(position(&[0, 0x12, 0x30, 3]), Some(LEVEL_START[2] + 0x23));
    }

    #[test]
    fn table_and_map_hold_their_keys() {
        let mut s = Shard::with_levels(2);
        let v: Arc<[u8]> = Arc::from(vec![1u8; 3]);
        let keys = [
            node_key(&TrieId::Main, &[3]),
            node_key(&TrieId::Main, &[3, 4]),
            node_key(&TrieId::Main, &[3, 4, 5]),
        ];
        for k in &keys {
            assert!(s.insert(k, v.clone()).is_none());
        }
        assert_eq!((s.len(), s.in_table, s.map.len()), (3, 2, 1));
        assert!(keys.iter().all(|k| s.get(k).is_some()));
        let mut gone = Vec::new();
        s.evict_from(3, 2, &mut |k, _| gone.push(k.to_vec()));
        gone.sort();
        let mut want = keys[1..].to_vec();
        want.sort();
        assert_eq!(gone, want);
        assert_eq!((s.len(), s.table.len()), (1, 1));
        assert!(s.remove(&keys[0]).is_some() && s.len() == 0);
    }
}
