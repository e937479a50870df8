//! Key-range proofs (`prove_key_range` / `verify_key_range`): every tiling of a trie into
//! ranges verifies and reports exactly the trie's nodes; every mutation is refused.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use state::H256;
use trie::{
    prove_key_range, verify_key_range, ChildRef, EmittedKind, EthLayout, MemoryNodeSource,
    NibbleSlice, NodeSink, ProofError, RootBuilder,
};

/// Nodes reported to a sink: path (nibbles) → (encoding, reference).
#[derive(Default)]
struct Collect(BTreeMap<Vec<u8>, (Vec<u8>, ChildRef)>);

impl NodeSink for Collect {
    fn node(&mut self, _: EmittedKind, path: NibbleSlice<'_>, enc: &[u8], r: &ChildRef) {
        let prev = self.0.insert(path.to_nibbles().0, (enc.to_vec(), *r));
        if let Some(p) = prev {
            assert_eq!(p.0, enc, "two different nodes reported at one path");
        }
    }
}

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn map_strategy() -> impl Strategy<Value = Map> {
    prop::collection::btree_map(
        prop_oneof![
            prop::collection::vec(any::<u8>(), 32..=32),
            prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x10, 0xf0]), 1..5),
        ],
        prop::collection::vec(any::<u8>(), 1..70),
        0..150,
    )
}

fn whole(map: &Map) -> (MemoryNodeSource, H256, Collect) {
    let (src, root) = MemoryNodeSource::committed::<EthLayout, _, _>(map.iter()).unwrap();
    let mut all = Collect::default();
    let mut b = RootBuilder::<EthLayout, _>::with_sink(&mut all);
    for (k, v) in map {
        b.add(k, v).unwrap();
    }
    assert_eq!(b.finish(), root);
    (src, root, all)
}

/// The smallest key after `k`.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = k.to_vec();
    s.push(0);
    s
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn entries_in(map: &Map, start: &[u8], last: Option<&[u8]>) -> Entries {
    map.iter()
        .filter(|(k, _)| k.as_slice() >= start && last.is_none_or(|l| k.as_slice() <= l))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Split the keys at the given cut indexes into tiles `(start, last, entries)`.
fn tiles(map: &Map, cuts: &BTreeSet<usize>) -> Vec<(Vec<u8>, Option<Vec<u8>>, Entries)> {
    let keys: Vec<&Vec<u8>> = map.keys().collect();
    let mut out = Vec::new();
    let mut start = Vec::new();
    for &c in cuts.iter().filter(|c| **c < keys.len()) {
        let last = keys[c].clone();
        out.push((start.clone(), Some(last.clone()), entries_in(map, &start, Some(&last))));
        start = successor(&last);
    }
    out.push((start.clone(), None, entries_in(map, &start, None)));
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(128)))]

    #[test]
    fn tilings_verify_and_report_exactly_the_trie(map in map_strategy(), cuts in prop::collection::btree_set(0usize..150, 0..12)) {
        let (src, root, all) = whole(&map);
        let mut seen = Collect::default();
        for (start, last, entries) in tiles(&map, &cuts) {
            let proof = prove_key_range::<EthLayout, _>(&src, &root, &start, last.as_deref()).unwrap();
            verify_key_range::<EthLayout, _, _, _>(&root, &start, last.as_deref(), &entries, &proof, &mut seen).unwrap();
        }
        // Every reported node is the trie's node at that path; every node a store keeps
        // (referenced by hash, or the root) was reported.
        for (path, node) in &seen.0 {
            prop_assert_eq!(all.0.get(path), Some(node), "path {:?}", path);
        }
        for (path, (_, r)) in &all.0 {
            if r.as_hash().is_some() || path.is_empty() {
                prop_assert!(seen.0.contains_key(path), "node at {:?} never reported", path);
            }
        }
    }

    #[test]
    fn arbitrary_ranges_verify(map in map_strategy(), a in prop::collection::vec(any::<u8>(), 0..34), b in prop::option::of(prop::collection::vec(any::<u8>(), 0..34))) {
        let (src, root, _) = whole(&map);
        let (start, last) = match &b {
            Some(b) if b < &a => (b.clone(), Some(a.clone())),
            _ => (a.clone(), b.clone()),
        };
        let entries = entries_in(&map, &start, last.as_deref());
        let proof = prove_key_range::<EthLayout, _>(&src, &root, &start, last.as_deref()).unwrap();
        verify_key_range::<EthLayout, _, _, _>(&root, &start, last.as_deref(), &entries, &proof, &mut ()).unwrap();
    }

    #[test]
    fn mutated_ranges_are_refused(map in map_strategy(), cut in 0usize..150, pick in any::<prop::sample::Index>(), byte in any::<u8>(), kind in 0u8..6) {
        prop_assume!(map.len() >= 3);
        let (src, root, _) = whole(&map);
        let keys: Vec<&Vec<u8>> = map.keys().collect();
        let last = keys[cut % (keys.len() - 1)].clone();
        let start = Vec::new();
        let mut entries = entries_in(&map, &start, Some(&last));
        let mut proof = prove_key_range::<EthLayout, _>(&src, &root, &start, Some(&last)).unwrap();
        let i = pick.index(entries.len());
        match kind {
            0 => { let v = &mut entries[i].1; let j = pick.index(v.len()); v[j] ^= byte | 1; }
            1 => { entries.remove(i); }
            2 => {
                // A key that is not in the trie, inside the range.
                let mut k = entries[i].0.clone();
                k.push(byte);
                prop_assume!(!map.contains_key(&k) && k.as_slice() < last.as_slice());
                let at = entries.partition_point(|(e, _)| e < &k);
                entries.insert(at, (k, vec![1]));
            }
            3 => { prop_assume!(!proof.is_empty()); let j = pick.index(proof.len()); proof.remove(j); }
            4 => { proof.push(vec![0xc2, 0x80, byte]); }
            _ => { prop_assume!(!proof.is_empty()); let j = pick.index(proof.len()); let n = proof[j].clone(); proof.push(n); }
        }
        let r = verify_key_range::<EthLayout, _, _, _>(&root, &start, Some(&last), &entries, &proof, &mut ());
        prop_assert!(r.is_err(), "mutation {} accepted", kind);
    }
}

#[test]
fn empty_trie_and_whole_trie() {
    let map = Map::new();
    let (src, root, _) = whole(&map);
    let proof = prove_key_range::<EthLayout, _>(&src, &root, b"", None).unwrap();
    assert!(proof.is_empty());
    let none: Entries = Vec::new();
    verify_key_range::<EthLayout, _, _, _>(&root, b"", None, &none, &proof, &mut ()).unwrap();
    let one = vec![(b"k".to_vec(), b"v".to_vec())];
    let err = verify_key_range::<EthLayout, _, _, _>(&root, b"", None, &one, &proof, &mut ());
    assert!(matches!(err, Err(ProofError::EntriesMismatch { .. })), "{err:?}");
}

#[test]
fn a_range_from_another_trie_is_refused() {
    let a: Map = (0u8..40).map(|i| (vec![i; 32], vec![i + 1; 40])).collect();
    let mut b = a.clone();
    b.insert(vec![200; 32], vec![9; 40]);
    let (src_a, root_a, _) = whole(&a);
    let (_, root_b, _) = whole(&b);
    let last = vec![20u8; 32];
    let entries = entries_in(&a, b"", Some(&last));
    let proof = prove_key_range::<EthLayout, _>(&src_a, &root_a, b"", Some(&last)).unwrap();
    assert!(verify_key_range::<EthLayout, _, _, _>(
        &root_b,
        b"",
        Some(&last),
        &entries,
        &proof,
        &mut ()
    )
    .is_err());
}
