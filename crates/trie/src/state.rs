//! The state seam: what every layer above the trie reads state through
//! ([`StateReader`]), what a block's execution writes into ([`StateView`]), and the shape
//! of a block's changes ([`ChangeSet`]). Defined once, here at the bottom of the crate
//! graph: the store, the overlay, the executors and the runtime all use these.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::TrieId;

/// A block's changes: per trie, key → new value (`None` or empty = delete).
pub type ChangeSet = BTreeMap<TrieId, BTreeMap<Vec<u8>, Option<Vec<u8>>>>;

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

/// The key bounds of `start <= key < end` for `BTreeMap::range`; `None` when the range is
/// empty (`end <= start`), which `BTreeMap::range` would panic on.
pub fn key_bounds<'k>(start: &'k [u8], end: Option<&'k [u8]>) -> Option<KeyBounds<'k>> {
    match end {
        Some(end) if end <= start => None,
        Some(end) => Some((Bound::Included(start), Bound::Excluded(end))),
        None => Some((Bound::Included(start), Bound::Unbounded)),
    }
}

/// A plain map is the main trie of a state (every other trie is empty): the state of
/// tests, benchmarks and examples.
impl StateReader for BTreeMap<Vec<u8>, Vec<u8>> {
    type Error = std::convert::Infallible;
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
            _ => std::collections::btree_map::Range::default(),
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
    inner: std::collections::btree_map::Range<'a, Vec<u8>, Vec<u8>>,
}

impl Iterator for MapRange<'_> {
    type Item = RangeItem<std::convert::Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.by_ref().find(|(_, v)| !v.is_empty()).map(|(k, v)| Ok((k.clone(), v.clone())))
    }
}

/// A commit or rollback without an open nested transaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// `commit` or `rollback` without an open transaction.
    #[error("no transaction is open: every commit or rollback needs a matching start")]
    NoTransaction,
}

/// What a runtime executes against: the main trie of the state being built, with its own
/// writes visible, commutative counters and nested transactions. The overlay implements
/// it, and so does each Block-STM transaction's view.
pub trait StateView {
    /// Why a read could not be answered (a storage failure, or, under Block-STM, a read
    /// that must wait for another transaction).
    type Error: std::error::Error + 'static;

    /// The value of `key`, or `None`.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;
    /// Write `value` under `key` (an empty value removes it).
    fn set(&mut self, key: &[u8], value: Vec<u8>);
    /// Remove `key`.
    fn remove(&mut self, key: &[u8]);
    /// Add `amount` to the counter under `key` (see [`apply_delta`]). Views that can defer
    /// it do so without reading the key, so transactions that only bump the same counter
    /// do not depend on each other.
    fn add_delta(&mut self, key: &[u8], amount: i64) -> Result<(), Self::Error>;
    /// Open a nested transaction.
    fn start(&mut self);
    /// Keep the innermost open transaction's writes.
    fn commit(&mut self) -> Result<(), TransactionError>;
    /// Discard the innermost open transaction's writes.
    fn rollback(&mut self) -> Result<(), TransactionError>;
}

/// A counter value after adding `amount`: counters are `u64` big-endian; an absent value
/// (or one that is not 8 bytes) counts as 0, and the sum wraps.
pub fn apply_delta(base: Option<&[u8]>, amount: i64) -> Vec<u8> {
    let n = base.and_then(|b| <[u8; 8]>::try_from(b).ok()).map_or(0, u64::from_be_bytes);
    n.wrapping_add_signed(amount).to_be_bytes().to_vec()
}

/// A trie read through its nodes is the main trie of a state (every other trie is
/// empty): the reader of stateless verification and of proof-recording references. Every
/// read walks the trie, so a recorder attached to it records the nodes reads touch.
impl<S: crate::NodeSource> StateReader for std::cell::RefCell<crate::Trie<S>> {
    type Error = crate::TrieError;
    type Range<'a>
        = VecRange<crate::TrieError>
    where
        S: 'a;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        match trie {
            TrieId::Main => self.borrow_mut().get(key),
            TrieId::Storage(_) => Ok(None),
        }
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Self::Range<'a>, Self::Error> {
        let entries = match (trie, key_bounds(start, end)) {
            (TrieId::Main, Some(_)) => self.borrow_mut().entries(start, end)?,
            _ => Vec::new(),
        };
        Ok(entries.into_iter().map(Ok).collect::<Vec<_>>().into_iter())
    }

    fn last_before(&self, trie: &TrieId, before: &[u8]) -> Result<Option<KeyValue>, Self::Error> {
        match trie {
            TrieId::Main => self.borrow_mut().prev_before(before),
            TrieId::Storage(_) => Ok(None),
        }
    }
}
