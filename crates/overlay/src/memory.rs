//! [`MemoryState`]: an in-memory backend, one `BTreeMap` per trie, implementing
//! [`StateReader`] for tests and benchmarks.
//!
//! Like the store, it never holds an empty value: inserting one removes the key. Reads
//! cost O(log n); range reads allocate the entries they yield.

use std::collections::{btree_map, BTreeMap};
use std::convert::Infallible;

use trie::{StateReader, TrieId};

use crate::ChangeSet;

/// A whole state in memory: per trie, key → value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryState {
    /// Invariant: no empty trie map and no empty value.
    tries: BTreeMap<TrieId, BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemoryState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set `key` in trie `trie` to `value`; an empty value removes the key.
    pub fn insert(&mut self, trie: TrieId, key: Vec<u8>, value: Vec<u8>) {
        if value.is_empty() {
            self.remove(&trie, &key);
        } else {
            self.tries.entry(trie).or_default().insert(key, value);
        }
    }

    /// Remove `key` from trie `trie`, returning its value.
    pub fn remove(&mut self, trie: &TrieId, key: &[u8]) -> Option<Vec<u8>> {
        let entries = self.tries.get_mut(trie)?;
        let old = entries.remove(key);
        if entries.is_empty() {
            self.tries.remove(trie);
        }
        old
    }

    /// The value of `key` in trie `trie`.
    pub fn value(&self, trie: &TrieId, key: &[u8]) -> Option<&[u8]> {
        self.tries.get(trie)?.get(key).map(Vec::as_slice)
    }

    /// Apply a block's changes (`None` or an empty value removes the key).
    pub fn apply(&mut self, changes: &ChangeSet) {
        for (trie, entries) in changes {
            for (key, value) in entries {
                match value {
                    Some(v) => self.insert(*trie, key.clone(), v.clone()),
                    None => {
                        self.remove(trie, key);
                    }
                }
            }
        }
    }

    /// Number of entries over all tries.
    pub fn len(&self) -> usize {
        self.tries.values().map(BTreeMap::len).sum()
    }

    /// True when no trie holds an entry.
    pub fn is_empty(&self) -> bool {
        self.tries.is_empty()
    }

    /// Every entry, ordered by trie and then key.
    pub fn iter(&self) -> impl Iterator<Item = (&TrieId, &[u8], &[u8])> {
        self.tries.iter().flat_map(|(trie, entries)| {
            entries.iter().map(move |(k, v)| (trie, k.as_slice(), v.as_slice()))
        })
    }
}

impl FromIterator<(TrieId, Vec<u8>, Vec<u8>)> for MemoryState {
    fn from_iter<I: IntoIterator<Item = (TrieId, Vec<u8>, Vec<u8>)>>(iter: I) -> Self {
        let mut state = MemoryState::new();
        for (trie, key, value) in iter {
            state.insert(trie, key, value);
        }
        state
    }
}

impl StateReader for MemoryState {
    type Error = Infallible;

    type Range<'a> = MemoryRange<'a>;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Infallible> {
        Ok(self.value(trie, key).map(<[u8]>::to_vec))
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<MemoryRange<'a>, Infallible> {
        let inner = match (self.tries.get(trie), trie::key_bounds(start, end)) {
            (Some(entries), Some(bounds)) => entries.range::<[u8], _>(bounds),
            _ => btree_map::Range::default(),
        };
        Ok(MemoryRange { inner })
    }

    fn last_before(
        &self,
        trie: &TrieId,
        before: &[u8],
    ) -> Result<Option<trie::KeyValue>, Infallible> {
        let below = self.tries.get(trie).and_then(|entries| {
            entries
                .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Excluded(before)))
                .next_back()
        });
        Ok(below.map(|(k, v)| (k.clone(), v.clone())))
    }
}

/// The iterator of [`MemoryState`]'s range reads.
#[derive(Debug, Default)]
pub struct MemoryRange<'a> {
    inner: btree_map::Range<'a, Vec<u8>, Vec<u8>>,
}

impl Iterator for MemoryRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| Ok((k.clone(), v.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_value_removes_and_tries_are_pruned() {
        let mut s = MemoryState::new();
        s.insert(TrieId::Main, b"a".to_vec(), b"1".to_vec());
        assert_eq!(s.len(), 1);
        s.insert(TrieId::Main, b"a".to_vec(), Vec::new());
        assert!(s.is_empty());
        assert_eq!(s, MemoryState::new());
    }

    #[test]
    fn range_respects_bounds_and_never_panics() {
        let s: MemoryState =
            [b"a", b"b", b"c"].iter().map(|k| (TrieId::Main, k.to_vec(), k.to_vec())).collect();
        let keys = |start: &[u8], end: Option<&[u8]>| -> Vec<Vec<u8>> {
            let it = s.range(&TrieId::Main, start, end).unwrap_or_else(|e| match e {});
            it.map(|r| r.unwrap_or_else(|e| match e {}).0).collect()
        };
        assert_eq!(keys(b"b", None), vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(keys(b"a", Some(b"c")), vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(keys(b"b", Some(b"b")).is_empty());
        assert!(keys(b"c", Some(b"a")).is_empty());
        let other = s.range(&TrieId::Storage(trie::H256([1; 32])), b"", None);
        assert_eq!(other.map(Iterator::count).ok(), Some(0));
    }
}
