//! Ordered iteration over a key range of one trie: [`RangeIter`] merges the backend's
//! entries (its [`StateReader::range`]) with the overlay's writes.
//!
//! The merge is a streaming two-way merge: it holds one peeked entry from each side,
//! costs O(log n) to position in the overlay's index plus O(1) amortised per entry
//! produced or skipped, and allocates only the entries it yields. A key the overlay
//! removed hides the backend's entry; a key the overlay wrote replaces it. Range reads do
//! not fill the overlay's read cache.

use std::collections::btree_map;
use std::iter::Peekable;

use state::StateReader;

use crate::slot::Slot;

/// The entries of a key range of one trie as the overlay sees them: overlay writes merged
/// over the backend, in ascending key order. Yields `(key, value)`; stops after the first
/// backend error.
pub struct RangeIter<'a, R: StateReader + 'a> {
    backend: Peekable<R::Range<'a>>,
    overlay: btree_map::Range<'a, Vec<u8>, usize>,
    slots: &'a [Slot],
    /// The next overlay entry with a version: key and newest value (`None` = removed).
    overlay_peeked: Option<(&'a [u8], Option<&'a [u8]>)>,
    failed: bool,
}

/// Which side the merge takes its next entry from.
enum Step {
    /// The overlay's entry; `shadows` when the backend holds the same key.
    Overlay { shadows: bool },
    /// The backend's entry (or error).
    Backend,
}

impl<'a, R: StateReader + 'a> RangeIter<'a, R> {
    pub(crate) fn new(
        backend: R::Range<'a>,
        overlay: btree_map::Range<'a, Vec<u8>, usize>,
        slots: &'a [Slot],
    ) -> Self {
        RangeIter {
            backend: backend.peekable(),
            overlay,
            slots,
            overlay_peeked: None,
            failed: false,
        }
    }

    /// The next overlay key that has a version; keys the overlay only cached are skipped
    /// (the backend yields them itself).
    fn peek_overlay(&mut self) -> Option<(&'a [u8], Option<&'a [u8]>)> {
        if self.overlay_peeked.is_none() {
            let slots = self.slots;
            self.overlay_peeked = self.overlay.by_ref().find_map(|(key, &idx)| {
                let version = slots[idx].newest()?;
                Some((key.as_slice(), version.value.as_deref()))
            });
        }
        self.overlay_peeked
    }
}

impl<'a, R: StateReader + 'a> Iterator for RangeIter<'a, R> {
    type Item = Result<(Vec<u8>, Vec<u8>), R::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let overlay = self.peek_overlay();
            let step = match (overlay, self.backend.peek()) {
                (None, None) => return None,
                (_, Some(Err(_))) => {
                    self.failed = true;
                    return self.backend.next();
                }
                (Some(_), None) => Step::Overlay { shadows: false },
                (None, Some(Ok(_))) => Step::Backend,
                (Some((key, _)), Some(Ok((backend_key, _)))) => {
                    match key.cmp(backend_key.as_slice()) {
                        std::cmp::Ordering::Less => Step::Overlay { shadows: false },
                        std::cmp::Ordering::Equal => Step::Overlay { shadows: true },
                        std::cmp::Ordering::Greater => Step::Backend,
                    }
                }
            };
            match step {
                Step::Backend => return self.backend.next(),
                Step::Overlay { shadows } => {
                    self.overlay_peeked = None;
                    if shadows {
                        self.backend.next();
                    }
                    if let Some((key, Some(value))) = overlay {
                        return Some(Ok((key.to_vec(), value.to_vec())));
                    }
                    // Removed in the overlay: the backend's entry (if any) stays hidden.
                }
            }
        }
    }
}

impl<'a, R: StateReader + 'a> std::fmt::Debug for RangeIter<'a, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter")
            .field("overlay_peeked", &self.overlay_peeked)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}
