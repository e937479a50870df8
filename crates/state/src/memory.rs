//! In-memory states for tests, benchmarks and examples: a plain `BTreeMap` (the main trie
//! only) and [`MemoryState`] (one `BTreeMap` per trie).
//!
//! Neither ever answers with an empty value: the map skips them, and [`MemoryState`] never
//! holds one (inserting one removes the key). Reads cost O(log n); range reads clone the
//! entries they yield.

use std::collections::{btree_map, BTreeMap};
use std::convert::Infallible;
use std::ops::Bound;

use crate::id::TrieId;
use crate::reader::{key_bounds, KeyValue, RangeItem, StateReader};
use crate::view::ChangeSet;

/// A plain map is the main trie of a state (every other trie is empty): the state of
/// tests, benchmarks and examples.
impl StateReader for BTreeMap<Vec<u8>, Vec<u8>> {
    type Error = Infallible;
    type Range<'a> = MapRange<'a>;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        Ok(match trie {
            TrieId::Main => BTreeMap::get(self, key).filter(|v| !v.is_empty()).cloned(),
            TrieId::Storage(_) => None,
        })
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<MapRange<'a>, Self::Error> {
        let inner = match (trie, key_bounds(start, end)) {
            (TrieId::Main, Some(bounds)) => self.range::<[u8], _>(bounds),
            _ => btree_map::Range::default(),
        };
        Ok(MapRange { inner })
    }

    fn last_before(&self, trie: &TrieId, before: &[u8]) -> Result<Option<KeyValue>, Self::Error> {
        if *trie != TrieId::Main {
            return Ok(None);
        }
        let below = self.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(before)));
        Ok(below.rev().find(|(_, v)| !v.is_empty()).map(|(k, v)| (k.clone(), v.clone())))
    }
}

/// The range iterator of a plain map (entries with empty values skipped).
#[derive(Debug, Default)]
pub struct MapRange<'a> {
    inner: btree_map::Range<'a, Vec<u8>, Vec<u8>>,
}

impl Iterator for MapRange<'_> {
    type Item = RangeItem<Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.by_ref().find(|(_, v)| !v.is_empty()).map(|(k, v)| Ok((k.clone(), v.clone())))
    }
}

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
        let inner = match (self.tries.get(trie), key_bounds(start, end)) {
            (Some(entries), Some(bounds)) => entries.range::<[u8], _>(bounds),
            _ => btree_map::Range::default(),
        };
        Ok(MemoryRange { inner })
    }

    fn last_before(&self, trie: &TrieId, before: &[u8]) -> Result<Option<KeyValue>, Infallible> {
        let below = self.tries.get(trie).and_then(|entries| {
            entries.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(before))).next_back()
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
    type Item = RangeItem<Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| Ok((k.clone(), v.clone())))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::h256::H256;
    use crate::reader::StateReaderMut;

    fn keys<S: StateReader<Error = Infallible>>(
        s: &S,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Vec<Vec<u8>> {
        let it = s.range(trie, start, end).unwrap_or_else(|e| match e {});
        it.map(|r| r.unwrap_or_else(|e| match e {}).0).collect()
    }

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
        let main = TrieId::Main;
        assert_eq!(keys(&s, &main, b"b", None), vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(keys(&s, &main, b"a", Some(b"c")), vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(keys(&s, &main, b"b", Some(b"b")).is_empty());
        assert!(keys(&s, &main, b"c", Some(b"a")).is_empty());
        assert!(keys(&s, &TrieId::Storage(H256([1; 32])), b"", None).is_empty());
    }

    #[test]
    fn map_skips_empty_values_and_other_tries() {
        let map: BTreeMap<Vec<u8>, Vec<u8>> = [
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), Vec::new()),
            (b"c".to_vec(), b"3".to_vec()),
        ]
        .into_iter()
        .collect();
        assert_eq!(keys(&map, &TrieId::Main, b"", None), vec![b"a".to_vec(), b"c".to_vec()]);
        assert_eq!(StateReader::get(&map, &TrieId::Main, b"b"), Ok(None));
        let before_c = map.last_before(&TrieId::Main, b"c").unwrap_or_else(|e| match e {});
        assert_eq!(before_c, Some((b"a".to_vec(), b"1".to_vec())));
        let storage = TrieId::Storage(H256::ZERO);
        assert_eq!(StateReader::get(&map, &storage, b"a"), Ok(None));
        assert!(keys(&map, &storage, b"", None).is_empty());
    }

    /// A reader that counts its reads through `&mut self`.
    struct Counting(MemoryState, usize);

    impl StateReaderMut for Counting {
        type Error = Infallible;

        fn get(&mut self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Infallible> {
            self.1 += 1;
            StateReader::get(&self.0, trie, key)
        }

        fn range(
            &mut self,
            trie: &TrieId,
            start: &[u8],
            end: Option<&[u8]>,
        ) -> Result<Vec<KeyValue>, Infallible> {
            self.1 += 1;
            self.0.range(trie, start, end)?.collect()
        }
    }

    #[test]
    fn a_mutable_reader_in_a_ref_cell_is_a_reader() {
        let s: MemoryState =
            [b"a", b"b", b"c"].iter().map(|k| (TrieId::Main, k.to_vec(), k.to_vec())).collect();
        let cell = RefCell::new(Counting(s, 0));
        assert_eq!(keys(&cell, &TrieId::Main, b"b", None), vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(StateReader::get(&cell, &TrieId::Main, b"a"), Ok(Some(b"a".to_vec())));
        let last = StateReader::last_before(&cell, &TrieId::Main, b"c");
        assert_eq!(last, Ok(Some((b"b".to_vec(), b"b".to_vec()))));
        assert_eq!(cell.borrow().1, 3);
    }
}
