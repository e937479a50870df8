//! [`StateReader`]: what every layer above the trie reads state through (point reads and
//! ordered ranges of one trie at a time, fallible with the reader's own typed error), and
//! [`StateReaderMut`] for states whose reads change them (a trie that loads nodes).

use std::cell::RefCell;
use std::ops::Bound;

use crate::id::TrieId;

/// An entry of a range read, or the reader's error.
pub type RangeItem<E> = Result<KeyValue, E>;

/// A key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// `BTreeMap::range` bounds over byte-string keys.
pub type KeyBounds<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);

/// The range iterator of readers that collect a range before returning it.
pub type VecRange<E> = std::vec::IntoIter<RangeItem<E>>;

/// Read access to a state: point reads and ordered ranges of one trie at a time, every
/// read fallible with the reader's own typed error.
///
/// Values follow the trie: an empty value means "absent", so no read returns one.
pub trait StateReader {
    /// The error reads can fail with.
    type Error: std::error::Error + Send + Sync + 'static;
    /// The iterator [`StateReader::range`] returns.
    type Range<'a>: Iterator<Item = RangeItem<Self::Error>>
    where
        Self: 'a;

    /// The value of `key` in trie `trie`, or `None`.
    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;

    /// The entries of trie `trie` with `start <= key < end` (no upper bound when `end` is
    /// `None`), in ascending byte order, each key once. Empty, not a panic, when
    /// `end <= start`. The iterator stops after yielding an error.
    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Self::Range<'a>, Self::Error>;

    /// The greatest key of trie `trie` strictly below `before`, with its value. The
    /// provided method walks the range up to `before`; readers with reverse iteration
    /// override it.
    fn last_before(&self, trie: &TrieId, before: &[u8]) -> Result<Option<KeyValue>, Self::Error> {
        let mut last = None;
        for entry in self.range(trie, &[], Some(before))? {
            last = Some(entry?);
        }
        Ok(last)
    }
}

impl<T: StateReader + ?Sized> StateReader for &T {
    type Error = T::Error;
    type Range<'a>
        = T::Range<'a>
    where
        Self: 'a;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        (**self).get(trie, key)
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Self::Range<'a>, Self::Error> {
        (**self).range(trie, start, end)
    }

    fn last_before(&self, trie: &TrieId, before: &[u8]) -> Result<Option<KeyValue>, Self::Error> {
        (**self).last_before(trie, before)
    }
}

/// The first eight bytes of `key` as a big-endian integer, zero-padded: a smaller key never
/// has a larger prefix, so ordered keys have non-decreasing prefixes, and comparing prefixes
/// first (integers, no load of the keys' bytes) orders keys as comparing them does whenever
/// the prefixes differ.
pub fn key_prefix64(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

/// The key bounds of `start <= key < end` for `BTreeMap::range`; `None` when the range is
/// empty (`end <= start`), which `BTreeMap::range` would panic on.
pub fn key_bounds<'k>(start: &'k [u8], end: Option<&'k [u8]>) -> Option<KeyBounds<'k>> {
    match end {
        Some(end) if end <= start => None,
        Some(end) => Some((Bound::Included(start), Bound::Excluded(end))),
        None => Some((Bound::Included(start), Bound::Unbounded)),
    }
}

/// A state whose reads change it: a trie loads the nodes a read walks through (and a
/// recorder attached to it records them), the reader of stateless verification and of
/// proof-recording references. The same contract as [`StateReader`], through `&mut self`;
/// in a `RefCell` it is a [`StateReader`] (each read borrows it for its duration, and
/// range reads collect their entries).
pub trait StateReaderMut {
    /// The error reads can fail with.
    type Error: std::error::Error + Send + Sync + 'static;

    /// [`StateReader::get`].
    fn get(&mut self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;

    /// [`StateReader::range`], collected.
    fn range(
        &mut self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Vec<KeyValue>, Self::Error>;

    /// [`StateReader::last_before`]; the provided method reads the range up to `before`.
    fn last_before(
        &mut self,
        trie: &TrieId,
        before: &[u8],
    ) -> Result<Option<KeyValue>, Self::Error> {
        Ok(self.range(trie, &[], Some(before))?.pop())
    }
}

impl<T: StateReaderMut + ?Sized> StateReader for RefCell<T> {
    type Error = T::Error;
    type Range<'a>
        = VecRange<T::Error>
    where
        Self: 'a;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        StateReaderMut::get(&mut *self.borrow_mut(), trie, key)
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Self::Range<'a>, Self::Error> {
        let entries = StateReaderMut::range(&mut *self.borrow_mut(), trie, start, end)?;
        Ok(entries.into_iter().map(Ok).collect::<Vec<_>>().into_iter())
    }

    fn last_before(&self, trie: &TrieId, before: &[u8]) -> Result<Option<KeyValue>, Self::Error> {
        StateReaderMut::last_before(&mut *self.borrow_mut(), trie, before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bounds_of_empty_ranges_are_none() {
        assert_eq!(key_bounds(b"b", Some(b"b")), None);
        assert_eq!(key_bounds(b"c", Some(b"a")), None);
        assert_eq!(key_bounds(b"a", None), Some((Bound::Included(&b"a"[..]), Bound::Unbounded)));
    }
}
