//! What both executors' scans share: a cursor over the storage side of one scan, and the
//! choice of the next key among the sources a scan merges.
//!
//! A scan merges ordered sources (the transaction's own writes, the writes below it, the
//! state the block starts from) by keeping one head per source and taking the earliest.
//! Storage is read through one cursor per scan: a forward range opened once, or reverse
//! steps through `last_before`, each entry read once with its value. The first version
//! asked storage for the next key after every step and then for that key's value (three
//! allocations and two lookups per entry, and a whole collected range per step on readers
//! that collect ranges); on the `iterate` workload that was half of the block's
//! allocations.

use crate::{Base, Key, Value};
use state::StateReader;

/// The most entries a scan's result (and record) is sized for up front: a scan returns
/// `limit` entries unless it runs out, so sizing for it saves the vector's regrowths;
/// larger limits grow as usual.
pub(crate) const SCAN_CAPACITY: usize = 64;

/// The storage side of one scan, read lazily: an entry is fetched when the merge needs
/// to compare it, so a scan that fills up reads nothing past its last key.
pub(crate) struct StorageCursor<'c, 'a, S: StateReader> {
    base: &'c Base<'a, S>,
    reverse: bool,
    /// The forward range, opened at the first fetch.
    range: Option<S::Range<'a>>,
    /// Reverse scans: the bound of the next fetch (the scan's start with a 0 byte
    /// appended, then the last key taken), one buffer reused for every step.
    bound: Key,
    next: Fetch,
    head: Option<(Key, Value)>,
}

/// The state of a [`StorageCursor`]'s head.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fetch {
    /// Nothing fetched yet.
    Start,
    /// The head was taken: fetch the next entry.
    Taken,
    /// The head is current.
    Fetched,
    /// Storage has no more entries in scan order.
    Done,
}

impl<'c, 'a, S: StateReader> StorageCursor<'c, 'a, S> {
    /// A cursor over the entries from `from` (inclusive) in scan order.
    pub(crate) fn new(base: &'c Base<'a, S>, from: &[u8], reverse: bool) -> Self {
        let mut bound = Vec::new();
        if reverse {
            // At or below `from`: strictly below its successor.
            bound.reserve_exact(from.len() + 1);
            bound.extend_from_slice(from);
            bound.push(0);
        }
        let range = if reverse { None } else { base.entries_from(from) };
        StorageCursor { base, reverse, range, bound, next: Fetch::Start, head: None }
    }

    /// The key of the next entry, fetching it if needed.
    pub(crate) fn head(&mut self) -> Option<&[u8]> {
        if matches!(self.next, Fetch::Start | Fetch::Taken) {
            self.head = if self.reverse {
                self.base.entry_before(&self.bound)
            } else {
                self.range.as_mut().and_then(|r| self.base.next_entry(r))
            };
            self.next = if self.head.is_some() { Fetch::Fetched } else { Fetch::Done };
        }
        self.head.as_ref().map(|(k, _)| k.as_slice())
    }

    /// Take the entry [`StorageCursor::head`] returned; the next one is fetched on demand.
    pub(crate) fn take(&mut self) -> Option<(Key, Value)> {
        let (key, value) = self.head.take()?;
        if self.reverse {
            self.bound.clear();
            self.bound.extend_from_slice(&key);
        }
        self.next = Fetch::Taken;
        Some((key, value))
    }
}

/// Which of the sources' heads hold the next key in scan order (ascending, or descending
/// with `reverse`); all false once every source is exhausted.
pub(crate) fn earliest<const N: usize>(reverse: bool, heads: [Option<&[u8]>; N]) -> [bool; N] {
    let best =
        heads
            .iter()
            .flatten()
            .copied()
            .reduce(|a, b| if b != a && (b < a) != reverse { b } else { a });
    heads.map(|h| h.is_some() && h == best)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn earliest_takes_every_source_holding_the_next_key() {
        let (a, b): (&[u8], &[u8]) = (b"a", b"b");
        assert_eq!(earliest(false, [Some(b), Some(a), None, Some(a)]), [false, true, false, true]);
        assert_eq!(earliest(true, [Some(b), Some(a), None, Some(b)]), [true, false, false, true]);
        assert_eq!(earliest::<2>(false, [None, None]), [false, false]);
    }

    #[test]
    fn the_cursor_walks_storage_both_ways() {
        let map: BTreeMap<Vec<u8>, Vec<u8>> =
            [(b"a".to_vec(), vec![1]), (b"c".to_vec(), vec![3]), (b"e".to_vec(), vec![5])].into();
        let base = Base::new(&map);
        let walk = |from: &[u8], reverse| {
            let mut c = StorageCursor::new(&base, from, reverse);
            let mut keys = Vec::new();
            while c.head().is_some() {
                keys.push(c.take().map(|(k, v)| (k[0], v[0])));
            }
            keys.into_iter().flatten().collect::<Vec<_>>()
        };
        assert_eq!(walk(b"b", false), [(b'c', 3), (b'e', 5)]);
        assert_eq!(walk(b"c", false), [(b'c', 3), (b'e', 5)]);
        assert_eq!(walk(b"c", true), [(b'c', 3), (b'a', 1)]);
        assert_eq!(walk(b"d", true), [(b'c', 3), (b'a', 1)]);
        assert_eq!(walk(b"f", false), []);
    }
}
