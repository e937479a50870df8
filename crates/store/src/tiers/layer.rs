//! In-memory diff layers: one immutable layer per committed block that is not yet on disk.
//!
//! A layer holds the block's changes per column as sorted vectors, exactly as they will be
//! written (`None` = delete): point reads binary-search them, leaf lookups take a key range,
//! and the background writer builds the block's write batch straight from them. Values are
//! shared (`Arc`), so the committer's resident nodes and the layer hold one copy.
//! Invariant: layers in the stack have consecutive block numbers, oldest first.

use std::ops::{Range, RangeInclusive};
use std::sync::Arc;

use state::{key_prefix64, H256};

use crate::tiers::blocked::{key_hash, place};

/// A key and its new value (`None` = delete).
pub(crate) type Entry = (Vec<u8>, Option<Arc<[u8]>>);

/// One column's changes: keys strictly ascending, each with its new value (`None` = delete).
#[derive(Debug, Default, Clone)]
pub(crate) struct ChangeMap {
    entries: Vec<Entry>,
    /// The first 8 bytes of each key (big-endian, zero-padded): a range query is answered
    /// "nothing here" by integer comparisons alone, which is the common answer when a leaf
    /// scan looks through a stack of layers.
    prefixes: Vec<u64>,
    /// The keys' filter: a point read of a key the map does not hold is mostly answered
    /// without a search.
    filter: KeyFilter,
}

/// A key's hash for [`KeyFilter`]s, computed once for a read through a stack of layers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyProbe(u64);

impl KeyProbe {
    /// The probe of `key`.
    pub(crate) fn of(key: &[u8]) -> KeyProbe {
        KeyProbe(key_hash(key))
    }
}

/// A blocked Bloom filter of a map's keys (`tiers/blocked.rs`: one 64-bit word per probe),
/// 16 to 32 bits per key. A map with no keys has no words and holds nothing.
#[derive(Debug, Default, Clone)]
struct KeyFilter {
    words: Vec<u64>,
}

impl KeyFilter {
    fn of<'a>(keys: impl ExactSizeIterator<Item = &'a [u8]>) -> KeyFilter {
        let n = keys.len();
        if n == 0 {
            return KeyFilter::default();
        }
        let mut words = vec![0u64; n.div_ceil(4).next_power_of_two()];
        for k in keys {
            let (w, bits) = place(key_hash(k), words.len());
            words[w] |= bits;
        }
        KeyFilter { words }
    }

    /// False when the key of `probe` is not in the map; true when it may be.
    fn may_hold(&self, probe: KeyProbe) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let (w, bits) = place(probe.0, self.words.len());
        self.words[w] & bits == bits
    }
}

impl ChangeMap {
    /// From entries already in strictly ascending key order.
    pub(crate) fn from_sorted(entries: Vec<Entry>) -> ChangeMap {
        assert!(
            entries.windows(2).all(|w| w[0].0 < w[1].0),
            "change map entries must be strictly ascending"
        );
        let prefixes = entries.iter().map(|(k, _)| key_prefix64(k)).collect();
        let filter = KeyFilter::of(entries.iter().map(|(k, _)| k.as_slice()));
        ChangeMap { entries, prefixes, filter }
    }

    /// From entries in any order; of several writes to one key the last one counts.
    pub(crate) fn from_writes(entries: Vec<Entry>) -> ChangeMap {
        // Sorted by the keys' 8-byte prefixes (an integer compare; the prefix order never
        // contradicts the key order) and by whole keys only where prefixes tie: a commit
        // sorts its ~20k node writes and the nodes they replace this way. A stable sort
        // keeps each key's writes in their order; the last of each run is kept.
        let mut keyed: Vec<(u64, Entry)> =
            entries.into_iter().map(|e| (key_prefix64(&e.0), e)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1 .0.cmp(&b.1 .0)));
        let mut out: Vec<Entry> = Vec::with_capacity(keyed.len());
        let mut prefixes = Vec::with_capacity(keyed.len());
        for (p, e) in keyed {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => {
                    out.push(e);
                    prefixes.push(p);
                }
            }
        }
        let filter = KeyFilter::of(out.iter().map(|(k, _)| k.as_slice()));
        ChangeMap { entries: out, prefixes, filter }
    }

    /// A map of `other`'s keys, each with no value (to be given by [`ChangeMap::with_values`]).
    pub(crate) fn keys_of(other: &ChangeMap) -> ChangeMap {
        let entries = other.entries.iter().map(|(k, _)| (k.clone(), None)).collect();
        ChangeMap { entries, prefixes: other.prefixes.clone(), filter: other.filter.clone() }
    }

    /// The same keys with `values`, by position.
    ///
    /// # Panics
    /// If `values` does not hold one value per key.
    pub(crate) fn with_values(mut self, values: Vec<Option<Arc<[u8]>>>) -> ChangeMap {
        assert_eq!(values.len(), self.entries.len(), "one value per key");
        for (entry, v) in self.entries.iter_mut().zip(values) {
            entry.1 = v;
        }
        self
    }

    /// The key at position `at` (ascending).
    pub(crate) fn key_at(&self, at: usize) -> &[u8] {
        &self.entries[at].0
    }

    /// The change of `key`: `Some(None)` means deleted.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<&Arc<[u8]>>> {
        self.get_probed(key, KeyProbe::of(key))
    }

    /// [`ChangeMap::get`] with the key's probe, computed once for a read of many maps.
    pub(crate) fn get_probed(&self, key: &[u8], probe: KeyProbe) -> Option<Option<&Arc<[u8]>>> {
        if !self.filter.may_hold(probe) {
            return None;
        }
        // Searched by the 8-byte prefixes (integer compares), then by whole keys among the
        // entries that share the key's prefix. That run is binary-searched, not walked: the
        // keys of one child trie (a contract's storage) all share their first 8 bytes (the
        // trie's tag and its account's hash), so a layer may hold thousands in one run.
        let p = key_prefix64(key);
        let first = self.prefixes.partition_point(|x| *x < p);
        let run = self.prefixes[first..].partition_point(|x| *x == p);
        let entries = &self.entries[first..first + run];
        let at = entries.binary_search_by(|(k, _)| k.as_slice().cmp(key)).ok()?;
        Some(entries[at].1.as_ref())
    }

    /// The changes with keys in `range`, ascending.
    pub(crate) fn range(&self, range: RangeInclusive<&[u8]>) -> &[Entry] {
        &self.entries[self.span(range.start(), range.end(), true)]
    }

    /// The positions of the changes with `start <= key` and `key < end` (`key <= end` when
    /// `inclusive`), found by binary search.
    pub(crate) fn span(&self, start: &[u8], end: &[u8], inclusive: bool) -> Range<usize> {
        // The keys in the range have prefixes between the bounds' prefixes: integer compares
        // narrow the search (to nothing, mostly), whole keys are compared only within.
        let (plo, phi) = (key_prefix64(start), key_prefix64(end));
        let first = self.prefixes.partition_point(|p| *p < plo);
        let last = first + self.prefixes[first..].partition_point(|p| *p <= phi);
        let within = &self.entries[first..last];
        let lo = within.partition_point(|(k, _)| k.as_slice() < start);
        let hi = match inclusive {
            true => within.partition_point(|(k, _)| k.as_slice() <= end),
            false => within.partition_point(|(k, _)| k.as_slice() < end),
        };
        first + lo..first + hi.max(lo)
    }

    /// The change at position `at` (of [`ChangeMap::span`]).
    pub(crate) fn entry(&self, at: usize) -> &Entry {
        &self.entries[at]
    }

    /// Number of changes.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every change, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// Every change, ascending, with its key's 8-byte prefix.
    pub(crate) fn iter_prefixed(&self) -> impl Iterator<Item = (u64, &Entry)> {
        self.prefixes.iter().copied().zip(&self.entries)
    }

    /// Approximate heap bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|(k, v)| (k.len() + v.as_ref().map_or(0, |v| v.len()) + 56) as u64)
            .sum()
    }
}

/// One block's changes, waiting to be persisted.
#[derive(Debug, Default)]
pub(crate) struct Layer {
    /// Block number.
    pub(crate) number: u64,
    /// State root after the block.
    pub(crate) root: H256,
    /// `flat` changes.
    pub(crate) flat: ChangeMap,
    /// `nodes` changes.
    pub(crate) nodes: ChangeMap,
    /// `meta` changes (head, per-trie roots).
    pub(crate) meta: ChangeMap,
    /// `code` writes (hash → blob; never a deletion).
    pub(crate) code: ChangeMap,
    /// The encoded reverse diff, stored under the block number.
    pub(crate) history: Vec<u8>,
    /// A history entry old enough to prune in the same batch.
    pub(crate) prune: Option<u64>,
    /// Approximate heap bytes held (keys + values + history).
    pub(crate) bytes: u64,
    /// `Some(w)` marks the node buffer (see `catch_up.rs`): no flat, meta or history, only the
    /// node writes of blocks `w + 1..=number` that `nodes` on disk (at block `w`) lacks.
    /// It sits at the bottom of the stack, below every block's layer.
    pub(crate) lag_base: Option<u64>,
}

/// The node buffer at the bottom of a layer stack, if the nodes lag (see `catch_up.rs`).
pub(crate) fn node_buffer_of(stack: &[Arc<Layer>]) -> Option<&Arc<Layer>> {
    stack.first().filter(|l| l.lag_base.is_some())
}

/// The layers of a stack that are blocks (all but the node buffer), oldest first.
pub(crate) fn block_layers(stack: &[Arc<Layer>]) -> impl Iterator<Item = &Arc<Layer>> + Clone {
    stack.iter().filter(|l| l.lag_base.is_none())
}

/// Load the reference count of every value of `entries`, ahead of cloning them. A clone
/// increments a count somewhere else in memory each time, and atomic increments do not
/// overlap, so each one waits for its own cache miss; plain loads of the counts do overlap,
/// so this brings those lines in many at a time and the clones that follow find them.
pub(crate) fn touch_counts<'a>(entries: impl Iterator<Item = &'a Entry>) {
    let counts: usize = entries.filter_map(|(_, v)| v.as_ref()).map(Arc::strong_count).sum();
    std::hint::black_box(counts);
}

impl Layer {
    /// Recompute [`Layer::bytes`].
    pub(crate) fn measure(&mut self) {
        self.bytes = self.flat.bytes()
            + self.nodes.bytes()
            + self.meta.bytes()
            + self.code.bytes()
            + self.history.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(b: u8) -> Option<Arc<[u8]>> {
        Some(Arc::from(vec![b]))
    }

    /// The filter never hides a key the map holds, and rules out most keys it does not
    /// hold, including keys of one storage trie (a shared 33-byte head).
    #[test]
    fn the_key_filter_keeps_every_key_and_rules_out_most_others() {
        let key = |trie: u8, i: u32| {
            let mut k = vec![1u8; 33];
            k[1] = trie;
            k.extend_from_slice(&trie::keccak256(&i.to_be_bytes()).0);
            k
        };
        let writes: Vec<Entry> = (0..5_000).map(|i| (key(7, i), v(1))).collect();
        let m = ChangeMap::from_writes(writes);
        for i in 0..5_000 {
            assert_eq!(m.get(&key(7, i)), Some(Some(&Arc::from(vec![1u8]))), "key {i} lost");
        }
        let passed = (5_000..105_000)
            .map(|i| key(7, i))
            .chain((0..100_000).map(|i| key(8, i)))
            .filter(|k| m.filter.may_hold(KeyProbe::of(k)))
            .count();
        assert!(passed < 200_000 / 25, "{passed} of 200,000 absent keys passed the filter");
        assert!(ChangeMap::default().get(b"any").is_none());
    }

    #[test]
    fn last_write_wins_and_ranges() {
        let m = ChangeMap::from_writes(vec![
            (b"b".to_vec(), v(1)),
            (b"a".to_vec(), None),
            (b"b".to_vec(), v(2)),
            (b"c".to_vec(), v(3)),
            (b"b".to_vec(), None),
        ]);
        assert_eq!(m.iter().count(), 3);
        assert_eq!(m.get(b"b"), Some(None));
        assert_eq!(m.get(b"c").flatten().map(|v| v[0]), Some(3));
        assert_eq!(m.get(b"d"), None);
        let r = m.range(b"b".as_slice()..=b"z".as_slice());
        assert_eq!(
            r.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
            vec![b"b".to_vec(), b"c".to_vec()]
        );
        assert!(m.range(b"x".as_slice()..=b"a".as_slice()).is_empty());
        // Keys sharing their first 8 bytes: the prefix check must not cut them off.
        let long = |tail: u8| [[7u8; 8].as_slice(), &[tail]].concat();
        let m = ChangeMap::from_sorted(vec![(long(1), v(1)), (long(5), v(5))]);
        assert_eq!(m.range(long(2).as_slice()..=long(6).as_slice()).len(), 1);
        assert_eq!(m.range(long(2).as_slice()..=long(4).as_slice()).len(), 0);
        assert_eq!(m.range(vec![7u8; 7].as_slice()..=long(0).as_slice()).len(), 0);
        assert_eq!(m.range(vec![7u8; 7].as_slice()..=long(1).as_slice()).len(), 1);
        // Point reads among keys with one prefix, and a zero-padded shorter key.
        assert_eq!(m.get(&long(5)).flatten().map(|v| v[0]), Some(5));
        assert_eq!(m.get(&long(3)), None);
        assert_eq!(m.get(&[7u8; 8]), None);
        let m = ChangeMap::from_sorted(vec![
            (vec![1], v(1)),
            (vec![1, 0], v(2)),
            (vec![1, 0, 0], v(3)),
        ]);
        assert_eq!(m.get(&[1, 0]).flatten().map(|v| v[0]), Some(2));
        assert_eq!(m.get(&[1, 0, 0]).flatten().map(|v| v[0]), Some(3));
        assert_eq!(m.get(&[1, 0, 0, 0]), None);
    }

    /// Keys of one child trie share their first 8 bytes (tag and account hash): a point
    /// read finds each of many such keys, and none of the keys between them.
    #[test]
    fn point_reads_in_a_long_run_of_one_prefix() {
        let key = |i: u16| [[7u8; 8].as_slice(), &i.to_be_bytes(), &[0; 22]].concat();
        let m = ChangeMap::from_writes((0..2000).map(|i| (key(2 * i), v(i as u8))).collect());
        for i in 0..2000u16 {
            assert_eq!(m.get(&key(2 * i)).flatten().map(|v| v[0]), Some(i as u8));
            assert_eq!(m.get(&key(2 * i + 1)), None);
        }
    }

    /// A map of another's keys takes its values by position and answers point reads and
    /// ranges like a map built from the same entries.
    #[test]
    fn keys_of_with_values_is_the_map_of_those_entries() {
        let long = |tail: u8| [[7u8; 8].as_slice(), &[tail]].concat();
        let writes = vec![(long(3), v(9)), (vec![1], None), (long(1), v(8))];
        let m = ChangeMap::from_writes(writes);
        let keys: Vec<&[u8]> = (0..m.len()).map(|at| m.key_at(at)).collect();
        assert_eq!(keys, [[1u8].as_slice(), &long(1), &long(3)]);
        let old = ChangeMap::keys_of(&m).with_values(vec![v(1), None, v(3)]);
        let want = ChangeMap::from_sorted(vec![(vec![1], v(1)), (long(1), None), (long(3), v(3))]);
        assert_eq!(old.iter().collect::<Vec<_>>(), want.iter().collect::<Vec<_>>());
        assert_eq!(old.get(&long(3)).flatten().map(|v| v[0]), Some(3));
        assert_eq!(old.get(&long(1)), Some(None));
        assert_eq!(old.range(long(2).as_slice()..=long(4).as_slice()).len(), 1);
        let short = std::panic::catch_unwind(|| ChangeMap::keys_of(&m).with_values(vec![v(1)]));
        assert!(short.is_err(), "a value missing for a key must not pass");
    }

    proptest::proptest! {
        /// Any writes (short keys sharing prefixes, repeated keys) give the map that a
        /// model of last-write-wins over sorted keys gives, with each key's own prefix.
        #[test]
        fn from_writes_matches_a_sorted_model(
            writes in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..11), proptest::option::of(0u8..4)),
                0..60,
            ),
        ) {
            let model: std::collections::BTreeMap<Vec<u8>, Option<u8>> =
                writes.iter().cloned().collect();
            let entries = writes.iter().map(|(k, b)| (k.clone(), b.and_then(v))).collect();
            let m = ChangeMap::from_writes(entries);
            let got: Vec<(Vec<u8>, Option<u8>)> =
                m.iter().map(|(k, val)| (k.clone(), val.as_ref().map(|x| x[0]))).collect();
            let want: Vec<(Vec<u8>, Option<u8>)> = model.clone().into_iter().collect();
            proptest::prop_assert_eq!(got, want);
            for (k, _) in &writes {
                let at = m.entries.partition_point(|e| e.0 < *k);
                proptest::prop_assert_eq!(m.prefixes[at], key_prefix64(k));
            }
            // Point reads, including keys that share a prefix with many others and keys
            // that are absent (each written key with a byte appended or its last dropped).
            for (k, _) in &writes {
                let mut probes = vec![k.clone(), [k.as_slice(), &[1]].concat()];
                probes.extend(k.split_last().map(|(_, head)| head.to_vec()));
                for probe in probes {
                    let got = m.get(&probe).map(|val| val.map(|x| x[0]));
                    proptest::prop_assert_eq!(got, model.get(&probe).copied());
                }
            }
            // Spans between any two written keys (either end, exclusive or not).
            for (a, _) in &writes {
                for (b, _) in &writes {
                    for inclusive in [false, true] {
                        let got: Vec<&Vec<u8>> =
                            m.span(a, b, inclusive).map(|i| &m.entry(i).0).collect();
                        let want: Vec<&Vec<u8>> = model
                            .keys()
                            .filter(|k| *k >= a && (*k < b || (inclusive && *k == b)))
                            .collect();
                        proptest::prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }
}
