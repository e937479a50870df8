//! The one ordered merge of writes over a base: [`Join`] walks two key-ordered sources
//! together and says, for each key either holds, which of them hold it; [`MergeWrites`]
//! builds on it the read every layered state needs — an overlay of writes (a new value or
//! a deletion) over a base that can fail — and the executors' scans, whose writes can be
//! deltas, resolve [`Join`]'s entries themselves.
//!
//! Invariants the caller keeps: each side is strictly ordered by its keys' bytes, in the
//! [`Order`] the merge is built with, and yields each key once. The merge keeps one head
//! per side, pulls a side only to compare or to replace the head it took (so a merge that
//! stops early reads nothing past its last key), compares each pair of heads once, and
//! allocates nothing. The base's first error is yielded as soon as the base produces it,
//! and ends the merge; once over, a merge only returns `None` (it is fused).

use std::cmp::Ordering;
use std::iter::Peekable;

/// The direction of a merge's keys: ascending bytes, or descending (a reverse scan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Ascending byte order.
    #[default]
    Ascending,
    /// Descending byte order.
    Descending,
}

impl Order {
    /// How `a` sorts against `b` in this order.
    pub fn cmp(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            Order::Ascending => a.cmp(b),
            Order::Descending => b.cmp(a),
        }
    }
}

/// Which sides of a [`Join`] hold its next key, with their entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined<B, O> {
    /// Only the base holds the key.
    Base(B),
    /// Only the overlay holds the key.
    Overlay(O),
    /// Both hold it (the keys are equal).
    Both(B, O),
}

/// Two ordered sources walked together: a fallible base of `(key, value)` entries and an
/// overlay of `(key, write)` entries, yielding every key of either once, in order, as a
/// [`Joined`]. See the module docs for the invariants and the cost.
pub struct Join<B: Iterator, O: Iterator> {
    base: B,
    overlay: Peekable<O>,
    /// The base's entry that is not yet yielded. Invariant: never an error (the base's
    /// error is yielded as soon as it is pulled).
    head: Option<B::Item>,
    /// The base returned `None` (never pulled again).
    base_done: bool,
    /// An error was yielded: the merge is over.
    failed: bool,
    order: Order,
}

impl<B: Iterator, O: Iterator> Join<B, O> {
    /// The join of `base` and `overlay`, both ordered by `order`.
    pub fn new(base: B, overlay: O, order: Order) -> Self {
        Join {
            base,
            overlay: overlay.peekable(),
            head: None,
            base_done: false,
            failed: false,
            order,
        }
    }
}

impl<KB, V, E, B, KO, W, O> Iterator for Join<B, O>
where
    B: Iterator<Item = Result<(KB, V), E>>,
    O: Iterator<Item = (KO, W)>,
    KB: AsRef<[u8]>,
    KO: AsRef<[u8]>,
{
    type Item = Result<Joined<(KB, V), (KO, W)>, E>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.head.is_none() && !self.base_done {
            match self.base.next() {
                None => self.base_done = true,
                Some(Err(e)) => {
                    self.failed = true;
                    return Some(Err(e));
                }
                Some(entry) => self.head = Some(entry),
            }
        }
        let order = match (&self.head, self.overlay.peek()) {
            (None, None) => return None,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(Err(_)), Some(_)) => Ordering::Less,
            (Some(Ok((kb, _))), Some((ko, _))) => self.order.cmp(kb.as_ref(), ko.as_ref()),
        };
        let joined = match order {
            Ordering::Less => Joined::Base(self.head.take()?.ok()?),
            Ordering::Greater => Joined::Overlay(self.overlay.next()?),
            Ordering::Equal => Joined::Both(self.head.take()?.ok()?, self.overlay.next()?),
        };
        Some(Ok(joined))
    }
}

impl<B: Iterator, O: Iterator> std::fmt::Debug for Join<B, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Join")
            .field("order", &self.order)
            .field("base_done", &self.base_done)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// Writes over a base, in key order: the base's entries with the overlay's writes applied
/// (`Some(value)` replaces or adds the key, `None` deletes it), each key once. On a key
/// both hold the overlay wins and the base's key is kept (no copy); a key only the overlay
/// holds is converted into the base's key type (`&[u8]` into `Vec<u8>`, say).
pub struct MergeWrites<B: Iterator, O: Iterator> {
    join: Join<B, O>,
}

/// [`MergeWrites`] of `writes` over `base`, both in ascending key order.
pub fn merge_writes<B: Iterator, O: Iterator>(base: B, writes: O) -> MergeWrites<B, O> {
    MergeWrites::new(base, writes, Order::Ascending)
}

impl<B: Iterator, O: Iterator> MergeWrites<B, O> {
    /// The writes of `writes` over `base`, both ordered by `order`.
    pub fn new(base: B, writes: O, order: Order) -> Self {
        MergeWrites { join: Join::new(base, writes, order) }
    }
}

impl<KB, V, E, B, KO, VO, O> Iterator for MergeWrites<B, O>
where
    B: Iterator<Item = Result<(KB, V), E>>,
    O: Iterator<Item = (KO, Option<VO>)>,
    KB: AsRef<[u8]>,
    KO: AsRef<[u8]> + Into<KB>,
    VO: Into<V>,
{
    type Item = Result<(KB, V), E>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            return match self.join.next()? {
                Err(e) => Some(Err(e)),
                Ok(Joined::Base(entry)) => Some(Ok(entry)),
                Ok(Joined::Overlay((key, Some(value)))) => Some(Ok((key.into(), value.into()))),
                Ok(Joined::Both((key, _), (_, Some(value)))) => Some(Ok((key, value.into()))),
                // Deleted in the overlay: the base's entry (if any) stays hidden.
                Ok(Joined::Overlay((_, None)) | Joined::Both(_, (_, None))) => continue,
            };
        }
    }
}

impl<B: Iterator, O: Iterator> std::fmt::Debug for MergeWrites<B, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeWrites").field("join", &self.join).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    type Entry = (Vec<u8>, Vec<u8>);
    type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

    fn ok(entries: &[(&str, &str)]) -> Vec<Result<Entry, &'static str>> {
        entries.iter().map(|(k, v)| Ok((k.as_bytes().to_vec(), v.as_bytes().to_vec()))).collect()
    }

    fn writes(entries: &[(&str, Option<&str>)]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        entries
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec())))
            .collect()
    }

    fn strings(
        items: Vec<Result<Entry, &'static str>>,
    ) -> Vec<Result<(String, String), &'static str>> {
        let s = |b: Vec<u8>| String::from_utf8(b).expect("test keys are UTF-8");
        items.into_iter().map(|r| r.map(|(k, v)| (s(k), s(v)))).collect()
    }

    #[test]
    fn the_overlay_wins_deletes_and_adds() {
        let base = ok(&[("a", "1"), ("b", "2"), ("d", "4"), ("e", "5")]);
        let over = writes(&[("b", Some("B")), ("c", Some("C")), ("d", None), ("f", None)]);
        let merged: Vec<_> = merge_writes(base.into_iter(), over.into_iter()).collect();
        let want = [("a", "1"), ("b", "B"), ("c", "C"), ("e", "5")];
        let want: Vec<_> = want.iter().map(|(k, v)| Ok((k.to_string(), v.to_string()))).collect();
        assert_eq!(strings(merged), want);
    }

    #[test]
    fn an_empty_side_leaves_the_other() {
        let base = ok(&[("a", "1"), ("b", "2")]);
        let merged: Vec<_> =
            merge_writes(base.clone().into_iter(), writes(&[]).into_iter()).collect();
        assert_eq!(merged, base);
        let over = writes(&[("a", Some("1")), ("b", None)]);
        let merged: Vec<_> = merge_writes(ok(&[]).into_iter(), over.into_iter()).collect();
        assert_eq!(merged, ok(&[("a", "1")]));
    }

    #[test]
    fn the_first_error_is_yielded_when_pulled_and_ends_the_merge() {
        let mut base = ok(&[("a", "1"), ("c", "3")]);
        base.push(Err("disk"));
        base.extend(ok(&[("e", "5")]));
        let over = writes(&[("b", Some("2")), ("d", Some("4"))]);
        let merged: Vec<_> = merge_writes(base.into_iter(), over.into_iter()).collect();
        let mut want = ok(&[("a", "1"), ("b", "2"), ("c", "3")]);
        want.push(Err("disk"));
        assert_eq!(merged, want);

        // An error at the start comes before any overlay entry.
        let base: Vec<Result<Entry, &str>> = vec![Err("first")];
        let mut merged = merge_writes(base.into_iter(), writes(&[("a", Some("1"))]).into_iter());
        assert_eq!(merged.next(), Some(Err("first")));
        assert_eq!(merged.next(), None);
        assert_eq!(merged.next(), None);
    }

    #[test]
    fn a_merge_that_stops_reads_nothing_past_its_last_key() {
        let pulls = Cell::new(0);
        let base = (0u8..100).map(|i| {
            pulls.set(pulls.get() + 1);
            Ok::<_, ()>((vec![i], vec![i]))
        });
        let over: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![(vec![1], None)];
        let first: Vec<_> = merge_writes(base, over.into_iter()).take(3).collect();
        assert_eq!(first, [Ok((vec![0], vec![0])), Ok((vec![2], vec![2])), Ok((vec![3], vec![3]))]);
        assert_eq!(pulls.get(), 4, "entries 0 to 3, the deleted 1 included, and no more");
    }

    #[test]
    fn the_join_names_the_sides_of_each_key_in_either_order() {
        let base = ok(&[("c", "3"), ("b", "2")]);
        let over = [(&b"d"[..], 'd'), (b"c", 'c'), (b"a", 'a')];
        let joined: Vec<_> =
            Join::new(base.into_iter(), over.into_iter(), Order::Descending).collect();
        let k = |s: &str| s.as_bytes().to_vec();
        assert_eq!(
            joined,
            [
                Ok(Joined::Overlay((&b"d"[..], 'd'))),
                Ok(Joined::Both((k("c"), k("3")), (&b"c"[..], 'c'))),
                Ok(Joined::Base((k("b"), k("2")))),
                Ok(Joined::Overlay((&b"a"[..], 'a'))),
            ]
        );
        assert_eq!(Order::Descending.cmp(b"a", b"b"), Ordering::Greater);
        assert_eq!(Order::default().cmp(b"a", b"b"), Ordering::Less);
    }

    /// The model: the base map with the writes applied.
    fn model(base: &BTreeMap<Vec<u8>, Vec<u8>>, writes: &Writes) -> Vec<Entry> {
        let mut m = base.clone();
        for (k, w) in writes {
            match w {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        m.into_iter().collect()
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(0u8..4, 0..4)
    }

    fn maps() -> impl Strategy<Value = (BTreeMap<Vec<u8>, Vec<u8>>, Writes)> {
        let value = prop::collection::vec(any::<u8>(), 0..3);
        (
            prop::collection::btree_map(key(), value.clone(), 0..24),
            prop::collection::btree_map(key(), prop::option::of(value), 0..24),
        )
    }

    proptest! {
        #[test]
        fn merged_writes_equal_the_model_both_ways((base, writes) in maps()) {
            let want = model(&base, &writes);
            let b = base.iter().map(|(k, v)| Ok::<_, ()>((k.clone(), v.clone())));
            let w = writes.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
            let got: Result<Vec<_>, ()> = merge_writes(b, w).collect();
            prop_assert_eq!(got, Ok(want.clone()));

            let b = base.iter().rev().map(|(k, v)| Ok::<_, ()>((k.clone(), v.clone())));
            let w = writes.iter().rev().map(|(k, v)| (k.as_slice(), v.as_deref()));
            let got: Result<Vec<_>, ()> = MergeWrites::new(b, w, Order::Descending).collect();
            prop_assert_eq!(got, Ok(want.into_iter().rev().collect::<Vec<_>>()));
        }

        #[test]
        fn the_join_yields_every_key_of_either_side_once(
            (base, writes) in maps(),
            descending in any::<bool>(),
        ) {
            let order = if descending { Order::Descending } else { Order::Ascending };
            let mut keys: Vec<&Vec<u8>> = base.keys().chain(writes.keys()).collect();
            keys.sort();
            keys.dedup();
            if descending {
                keys.reverse();
            }
            let b: Vec<_> = base.iter().map(Ok::<_, ()>).collect();
            let w: Vec<_> = writes.iter().collect();
            let (b, w) = if descending {
                (b.into_iter().rev().collect::<Vec<_>>(), w.into_iter().rev().collect::<Vec<_>>())
            } else {
                (b, w)
            };
            let joined: Vec<_> = Join::new(b.into_iter(), w.into_iter(), order)
                .map(|j| j.expect("no errors"))
                .collect();
            prop_assert_eq!(joined.len(), keys.len());
            for (j, k) in joined.iter().zip(keys) {
                let (from_base, from_writes) = match j {
                    Joined::Base((kb, _)) => (Some(*kb), None),
                    Joined::Overlay((kw, _)) => (None, Some(*kw)),
                    Joined::Both((kb, _), (kw, _)) => (Some(*kb), Some(*kw)),
                };
                prop_assert_eq!(from_base, base.get_key_value(k).map(|e| e.0));
                prop_assert_eq!(from_writes, writes.get_key_value(k).map(|e| e.0));
            }
        }

        #[test]
        fn an_error_in_the_base_stops_the_merge_where_it_is_pulled(
            (base, writes) in maps(),
            at in any::<prop::sample::Index>(),
        ) {
            let entries: Vec<Entry> = base.into_iter().collect();
            let p = at.index(entries.len() + 1);
            // Before the error is pulled, the merge yields everything up to the base's
            // entry before it (both sides); then the error, then nothing.
            let seen = |k: &Vec<u8>| p > 0 && *k <= entries[p - 1].0;
            let before: BTreeMap<_, _> = entries[..p].iter().cloned().collect();
            let written: Writes =
                writes.iter().filter(|(k, _)| seen(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            let mut want: Vec<Result<Entry, &str>> =
                model(&before, &written).into_iter().map(Ok).collect();
            want.push(Err("broken"));

            let mut b: Vec<Result<Entry, &str>> = entries[..p].iter().cloned().map(Ok).collect();
            b.push(Err("broken"));
            b.extend(entries[p..].iter().cloned().map(Ok));
            let w = writes.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
            let mut merged = merge_writes(b.into_iter(), w);
            let got: Vec<_> = merged.by_ref().collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(merged.next(), None);
        }
    }
}
