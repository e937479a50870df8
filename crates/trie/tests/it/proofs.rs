//! Proof generation and verification, including hostile mutations of valid proofs.

use std::collections::BTreeMap;

use proptest::prelude::*;
use trie::{
    verify_multiproof, verify_proof, verify_range_proof, EthLayout, MemoryNodeSource, Trie,
};

fn build(map: &BTreeMap<Vec<u8>, Vec<u8>>) -> Trie<MemoryNodeSource, EthLayout> {
    let mut t = Trie::new(MemoryNodeSource::new());
    for (k, v) in map {
        t.insert(k, v).unwrap();
    }
    t
}

fn map_strategy() -> impl Strategy<Value = BTreeMap<Vec<u8>, Vec<u8>>> {
    prop::collection::btree_map(
        prop_oneof![
            prop::collection::vec(any::<u8>(), 32..=32),
            prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x10, 0xf0]), 1..5),
        ],
        prop::collection::vec(any::<u8>(), 1..70),
        1..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(128)))]

    #[test]
    fn single_proofs_verify_and_mutations_fail(map in map_strategy(), probes in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..33), 1..8), seed in any::<u64>()) {
        let mut t = build(&map);
        let root = t.root().unwrap();
        let keys: Vec<Vec<u8>> = map.keys().take(4).cloned().chain(probes).collect();
        let mut rng = seed;
        for key in keys {
            let proof = t.prove(&key).unwrap();
            let truth = map.get(&key).cloned();
            prop_assert_eq!(verify_proof::<EthLayout>(&root, &key, &proof).unwrap(), truth.clone());
            // Remove any single node: rejected.
            for i in 0..proof.len() {
                let mut p = proof.clone();
                p.remove(i);
                prop_assert!(verify_proof::<EthLayout>(&root, &key, &p).is_err());
            }
            // An extra node: rejected.
            let mut p = proof.clone();
            p.push(proof[0].clone());
            prop_assert!(verify_proof::<EthLayout>(&root, &key, &p).is_err());
            // Flip bytes: rejected, or (never, barring collisions) the same fact.
            for _ in 0..8 {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let mut p = proof.clone();
                let i = (rng >> 33) as usize % p.len();
                let j = (rng >> 13) as usize % p[i].len();
                p[i][j] ^= 1 << ((rng >> 7) % 8);
                match verify_proof::<EthLayout>(&root, &key, &p) {
                    Err(_) => {}
                    Ok(v) => prop_assert_eq!(v, truth.clone()),
                }
                // Truncation.
                let mut p = proof.clone();
                p[i].truncate(j);
                prop_assert!(verify_proof::<EthLayout>(&root, &key, &p).is_err());
            }
        }
    }

    #[test]
    fn multiproofs_verify(map in map_strategy(), extra in prop::collection::vec(prop::collection::vec(any::<u8>(), 32..=32), 0..5)) {
        let mut t = build(&map);
        let root = t.root().unwrap();
        let keys: Vec<Vec<u8>> = map.keys().step_by(3).cloned().chain(extra).collect();
        let proof = t.prove_many(&keys).unwrap();
        let values = verify_multiproof::<EthLayout>(&root, &keys, &proof).unwrap();
        for (k, v) in keys.iter().zip(values) {
            prop_assert_eq!(v, map.get(k).cloned());
        }
        if proof.len() > 1 {
            let mut p = proof.clone();
            p.pop();
            prop_assert!(verify_multiproof::<EthLayout>(&root, &keys, &p).is_err());
        }
    }

    #[test]
    fn range_proofs_verify_and_tampering_fails(map in map_strategy(), a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), gap in any::<bool>()) {
        let mut t = build(&map);
        let root = t.root().unwrap();
        let keys: Vec<&Vec<u8>> = map.keys().collect();
        let (i, j) = { let (x, y) = (a.index(keys.len()), b.index(keys.len())); (x.min(y), x.max(y)) };
        let mut start = keys[i].clone();
        if gap {
            // Start between keys (an absent key), as snap sync requests do.
            start.push(0);
        }
        let end = keys[j].clone();
        let rp = t.prove_range(&start, &end).unwrap();
        let res = verify_range_proof::<EthLayout>(&root, &start, &rp.entries, &rp.proof);
        prop_assert!(res.is_ok(), "start {:?} end {:?} keys {:?}: {:?}", start, end, keys, res);
        if !rp.entries.is_empty() {
            // Drop the first entry or one strictly inside: rejected. (Dropping the last one
            // makes a smaller range whose claim is still true.)
            let n = rp.entries.len();
            for k in [0, n / 2] {
                if k > 0 && k + 1 >= n { continue; }
                let mut e = rp.entries.clone();
                e.remove(k);
                prop_assert!(verify_range_proof::<EthLayout>(&root, &start, &e, &rp.proof).is_err(), "dropped {} of {:?} start {:?} keys {:?}", k, rp.entries, start, keys);
            }
            // Alter a value: rejected.
            let mut e = rp.entries.clone();
            e[0].1.push(1);
            prop_assert!(verify_range_proof::<EthLayout>(&root, &start, &e, &rp.proof).is_err());
        }
        // Whole-trie range without proofs.
        let all: Vec<(Vec<u8>, Vec<u8>)> = map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let empty: Vec<Vec<u8>> = Vec::new();
        verify_range_proof::<EthLayout>(&root, &[], &all, &empty).unwrap();
    }
}
