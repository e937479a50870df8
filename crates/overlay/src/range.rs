//! Ordered iteration over a key range of one trie: [`RangeIter`] is the seam's one
//! ordered merge ([`state::merge_writes`]) of the overlay's writes over the backend's
//! entries (its [`StateReader::range`]).
//!
//! The merge streams: it holds one peeked entry from each side, costs O(log n) to position
//! in the overlay's index plus O(1) amortised per entry produced or skipped, and allocates
//! only the entries it yields. A key the overlay removed hides the backend's entry; a key
//! the overlay wrote replaces it. Range reads do not fill the overlay's read cache.

use std::collections::btree_map;

use state::{merge_writes, MergeWrites, StateReader};

use crate::slot::Slot;

/// The entries of a key range of one trie as the overlay sees them: overlay writes merged
/// over the backend, in ascending key order. Yields `(key, value)`; stops after the first
/// backend error.
pub struct RangeIter<'a, R: StateReader + 'a> {
    merge: MergeWrites<R::Range<'a>, Written<'a>>,
}

/// The overlay's written keys in the range, ascending, each with its newest value (`None`:
/// removed). Keys the overlay only cached are skipped: the backend yields them itself.
struct Written<'a> {
    index: btree_map::Range<'a, Vec<u8>, usize>,
    slots: &'a [Slot],
}

impl<'a> Iterator for Written<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        let slots = self.slots;
        self.index.by_ref().find_map(|(key, &idx)| {
            let version = slots[idx].newest()?;
            Some((key.as_slice(), version.value.as_deref()))
        })
    }
}

impl<'a, R: StateReader + 'a> RangeIter<'a, R> {
    pub(crate) fn new(
        backend: R::Range<'a>,
        overlay: btree_map::Range<'a, Vec<u8>, usize>,
        slots: &'a [Slot],
    ) -> Self {
        RangeIter { merge: merge_writes(backend, Written { index: overlay, slots }) }
    }
}

impl<'a, R: StateReader + 'a> Iterator for RangeIter<'a, R> {
    type Item = Result<(Vec<u8>, Vec<u8>), R::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.merge.next()
    }
}

impl<'a, R: StateReader + 'a> std::fmt::Debug for RangeIter<'a, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter").field("merge", &self.merge).finish()
    }
}
