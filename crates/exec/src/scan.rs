//! What the executors' scans share: the merge of a scan's ordered sources, one head each,
//! through the seam's one ordered merge ([`state::Join`]), and a cursor over the storage
//! side of one scan.
//!
//! A scan visits, in scan order, every key that storage (the state the block starts from),
//! a layer found by seeking (the block's index of written keys, Block-STM's validated
//! prefix, the earlier waves' chunks), the writes below the transaction and its own writes
//! hold; the executor resolves each key's value from what the sources hold of it (a write
//! may be a delta, and a parallel read is recorded) until the scan has `limit` values.
//! Storage is read through one cursor per scan: a forward range opened once, or reverse
//! steps through `last_before`, each entry read once with its value, and only when the
//! merge needs to compare it, so a scan that fills up reads nothing past its last key.
//! The first version asked storage for the next key after every step and then for that
//! key's value (three allocations and two lookups per entry, and a whole collected range
//! per step on readers that collect ranges); on the `iterate` workload that was half of
//! the block's allocations.

use std::collections::BTreeMap;

use state::{Join, Joined, Order, StateReader};

use crate::mvmemory::IndexKey;
use crate::{Base, Key, ScanBounds, Stop, Value};

/// The most entries a scan's result (and record) is sized for up front: a scan returns
/// `limit` entries unless it runs out, so sizing for it saves the vector's regrowths;
/// larger limits grow as usual.
pub(crate) const SCAN_CAPACITY: usize = 64;

/// The sources a scan merges below and beside a transaction, lowest first.
pub(crate) struct Sources<'c, 'a, 'm, S: StateReader, L, W> {
    /// The state the block starts from.
    pub(crate) storage: &'c Base<'a, S>,
    /// The first key of the seek-found layer within some bounds (it may hold no value).
    pub(crate) layer: L,
    /// The writes between the layer and the transaction (its run's or chunk's), if any.
    pub(crate) written: Option<&'m BTreeMap<Key, W>>,
    /// The transaction's own writes.
    pub(crate) own: &'m BTreeMap<Key, W>,
}

/// What the sources hold of one key of a scan.
pub(crate) struct Found<'m, W> {
    /// Storage's value.
    pub(crate) stored: Option<Value>,
    /// The layer holds the key.
    pub(crate) in_layer: bool,
    /// The write below the transaction.
    pub(crate) written: Option<&'m W>,
    /// The transaction's own write.
    pub(crate) own: Option<&'m W>,
}

/// Scan from `start` in its order: every key of the sources (dead ones included) is passed
/// to `visit` with what each source holds of it, and the values `visit` returns are
/// collected until there are `limit` of them. A failed storage read stops the scan with
/// [`Stop::ReadFailed`]; `visit` may stop it too.
pub(crate) fn scan<'m, S, L, W>(
    sources: Sources<'_, '_, 'm, S, L, W>,
    start: ScanBounds<'_>,
    limit: usize,
    mut visit: impl FnMut(&Key, Found<'m, W>) -> Result<Option<Value>, Stop>,
) -> Result<Vec<(Key, Value)>, Stop>
where
    S: StateReader,
    L: Fn(&ScanBounds<'_>) -> Option<IndexKey>,
{
    let order = if start.reverse { Order::Descending } else { Order::Ascending };
    let stored = StorageCursor::new(sources.storage, start.from, start.reverse)
        .map(|entry| entry.map(|(k, v)| (k, Some(v))));
    let layer = LayerKeys { start, last: None, seek: sources.layer, done: false };
    let below = Join::new(stored, layer, order).map(|j| j.map(|j| split(j, || None)));
    let written = sources.written.into_iter().flat_map(|w| start.entries_in(w));
    let written = Join::new(below, written, order).map(|j| j.map(|j| split(j, || (None, None))));
    let mut keys = Join::new(written, start.entries_in(sources.own), order);
    let mut out = Vec::with_capacity(limit.min(SCAN_CAPACITY));
    while out.len() < limit {
        let Some(joined) = keys.next() else { break };
        let (key, (((stored, layer), written), own)) = split(joined?, || ((None, None), None));
        let found = Found { stored, in_layer: layer.is_some(), written, own };
        if let Some(v) = visit(&key, found)? {
            out.push((key, v));
        }
    }
    Ok(out)
}

/// A joined entry as its key, the lower side's part (`absent()` when only the upper side
/// holds the key) and the upper side's.
fn split<X, K: AsRef<[u8]>, W>(
    joined: Joined<(Key, X), (K, W)>,
    absent: impl FnOnce() -> X,
) -> (Key, (X, Option<W>)) {
    match joined {
        Joined::Base((key, x)) => (key, (x, None)),
        Joined::Overlay((key, w)) => (key.as_ref().to_vec(), (absent(), Some(w))),
        Joined::Both((key, x), (_, w)) => (key, (x, Some(w))),
    }
}

/// The keys of a layer found by seeking, in scan order: the first within the scan, then
/// the first past each one taken (the layer may gain keys meanwhile: a seek sees them).
struct LayerKeys<'s, L> {
    start: ScanBounds<'s>,
    last: Option<IndexKey>,
    seek: L,
    done: bool,
}

impl<L: Fn(&ScanBounds<'_>) -> Option<IndexKey>> Iterator for LayerKeys<'_, L> {
    type Item = (IndexKey, ());

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let bounds = match &self.last {
            Some(last) => self.start.after(last),
            None => self.start,
        };
        let Some(key) = (self.seek)(&bounds) else {
            self.done = true;
            return None;
        };
        self.last = Some(key.clone());
        Some((key, ()))
    }
}

/// The storage side of one scan, in scan order, read lazily: an entry is fetched when the
/// merge needs to compare it. Yields [`Stop::ReadFailed`] once a read has failed.
pub(crate) struct StorageCursor<'c, 'a, S: StateReader> {
    base: &'c Base<'a, S>,
    reverse: bool,
    /// The forward range, opened when the cursor is made.
    range: Option<S::Range<'a>>,
    /// Reverse scans: the bound of the next fetch (the scan's start with a 0 byte
    /// appended, then the last key taken), one buffer reused for every step.
    bound: Key,
    done: bool,
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
        StorageCursor { base, reverse, range, bound, done: false }
    }
}

impl<S: StateReader> Iterator for StorageCursor<'_, '_, S> {
    type Item = Result<(Key, Value), Stop>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let entry = if self.reverse {
            self.base.entry_before(&self.bound)
        } else {
            self.range.as_mut().and_then(|r| self.base.next_entry(r))
        };
        let Some((key, value)) = entry else {
            self.done = true;
            return self.base.failed().then_some(Err(Stop::ReadFailed));
        };
        if self.reverse {
            self.bound.clear();
            self.bound.extend_from_slice(&key);
        }
        Some(Ok((key, value)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    type Layer = BTreeMap<Key, Option<Value>>;

    /// The model: storage with the layer, the written and the own values applied in turn;
    /// the first `limit` live entries from `from` in scan order; and every key of any
    /// source in scan order (what a scan visits, dead keys included).
    fn model(
        layers: [&Layer; 3],
        storage: &BTreeMap<Key, Value>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> (Vec<(Key, Value)>, Vec<Key>) {
        let mut state: Layer = storage.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect();
        for layer in layers {
            state.extend(layer.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let within = |k: &Key| if reverse { k.as_slice() <= from } else { k.as_slice() >= from };
        let mut keys: Vec<Key> = state.keys().filter(|k| within(k)).cloned().collect();
        if reverse {
            keys.reverse();
        }
        let live = keys.iter().filter_map(|k| Some((k.clone(), state[k].clone()?)));
        (live.take(limit).collect(), keys)
    }

    fn layer() -> impl Strategy<Value = Layer> {
        let key = prop::collection::vec(0u8..4, 0..3);
        let value = prop::option::weighted(0.7, prop::collection::vec(any::<u8>(), 1..3));
        prop::collection::btree_map(key, value, 0..10)
    }

    proptest! {
        #[test]
        fn a_scan_merges_every_source_in_scan_order(
            storage in prop::collection::btree_map(
                prop::collection::vec(0u8..4, 0..3),
                prop::collection::vec(any::<u8>(), 1..3),
                0..10,
            ),
            (under, written, own) in (layer(), layer(), layer()),
            from in prop::collection::vec(0u8..4, 0..3),
            reverse in any::<bool>(),
            limit in 0usize..12,
        ) {
            let base = Base::new(&storage);
            let sources = Sources {
                storage: &base,
                layer: |b: &ScanBounds<'_>| b.first_in(&under).map(|(k, _)| IndexKey::from(&k[..])),
                written: Some(&written),
                own: &own,
            };
            let mut visited = Vec::new();
            let start = ScanBounds { from: &from, last: None, reverse };
            let got = scan(sources, start, limit, |key, found| {
                visited.push(key.clone());
                assert_eq!(found.stored, storage.get(key).cloned());
                assert_eq!(found.in_layer, under.contains_key(key));
                assert_eq!(found.written, written.get(key));
                assert_eq!(found.own, own.get(key));
                let layer = found.in_layer.then(|| under[key].clone());
                Ok(found.own.or(found.written).cloned().or(layer).unwrap_or(found.stored))
            });
            let got = got.expect("the map never fails");
            let (want, keys) = model([&under, &written, &own], &storage, &from, reverse, limit);
            prop_assert_eq!(&got, &want);
            // The scan visits the keys in order, up to its last value when it filled up.
            let stopped = match got.last() {
                Some((last, _)) if got.len() == limit => {
                    keys.iter().position(|k| k == last).map_or(0, |i| i + 1)
                }
                _ if limit == 0 => 0,
                _ => keys.len(),
            };
            prop_assert_eq!(visited, keys[..stopped].to_vec());
        }
    }

    #[test]
    fn the_cursor_walks_storage_both_ways() {
        let map: BTreeMap<Vec<u8>, Vec<u8>> =
            [(b"a".to_vec(), vec![1]), (b"c".to_vec(), vec![3]), (b"e".to_vec(), vec![5])].into();
        let base = Base::new(&map);
        let walk = |from: &[u8], reverse| {
            let c = StorageCursor::new(&base, from, reverse);
            c.map(|e| e.map(|(k, v)| (k[0], v[0]))).collect::<Result<Vec<_>, Stop>>()
        };
        assert_eq!(walk(b"b", false), Ok(vec![(b'c', 3), (b'e', 5)]));
        assert_eq!(walk(b"c", false), Ok(vec![(b'c', 3), (b'e', 5)]));
        assert_eq!(walk(b"c", true), Ok(vec![(b'c', 3), (b'a', 1)]));
        assert_eq!(walk(b"d", true), Ok(vec![(b'c', 3), (b'a', 1)]));
        assert_eq!(walk(b"f", false), Ok(vec![]));
    }
}
