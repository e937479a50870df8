//! Differential properties: mutable trie vs root builder vs the reference implementation.

use std::collections::BTreeMap;

use proptest::prelude::*;
use trie::{parallel_root, root_from_sorted, EthLayout, MemoryNodeSource, Trie};

use crate::reference::reference_root;

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Root,
    Commit,
}

/// Keys from a small alphabet so that shared prefixes and prefix keys are common.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop::sample::select(vec![0x00u8, 0x01, 0x10, 0x11, 0xff]), 0..5),
        prop::collection::vec(any::<u8>(), 0..40),
        prop::collection::vec(any::<u8>(), 32..=32),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        prop::collection::vec(any::<u8>(), 1..4),
        prop::collection::vec(any::<u8>(), 20..80),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), value()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => key().prop_map(Op::Remove),
        1 => Just(Op::Root),
        1 => Just(Op::Commit),
    ]
}

fn builder_root(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> state::H256 {
    let items: Vec<(&Vec<u8>, &Vec<u8>)> = model.iter().collect();
    root_from_sorted::<EthLayout, _, _>(&items).unwrap().0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(256)))]

    #[test]
    fn mutable_builder_reference_agree(ops in prop::collection::vec(op(), 1..120)) {
        let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::new());
        let mut model = BTreeMap::new();
        let mut stored = std::collections::HashMap::new();
        for op in ops {
            match op {
                Op::Insert(k, v) => {
                    t.insert(&k, &v).unwrap();
                    if v.is_empty() { model.remove(&k); } else { model.insert(k, v); }
                }
                Op::Remove(k) => {
                    let was = t.remove(&k).unwrap();
                    prop_assert_eq!(was, model.remove(&k).is_some());
                }
                Op::Root => prop_assert_eq!(t.root().unwrap(), reference_root(&model)),
                Op::Commit => {
                    let u = t.commit().unwrap();
                    // Each removed node is one a previous commit wrote at that path, and
                    // is flagged as a leaf exactly when it was one.
                    for r in &u.removed {
                        let was = stored.remove(r.path.as_slice());
                        prop_assert_eq!(was, Some((r.hash, r.is_leaf)), "path {:?}", r.path);
                    }
                    for n in &u.new { stored.insert(n.path.as_slice().to_vec(), (n.hash, n.is_leaf)); }
                    for n in u.new { t.source_mut().insert_hashed(n.hash, n.encoded); }
                    // Reload from the committed root: a fresh trie sees the same state.
                    let mut fresh: Trie<MemoryNodeSource, EthLayout> = Trie::from_root(t.source().clone(), u.root);
                    for (k, v) in &model {
                        let got = fresh.get(k).unwrap();
                        prop_assert_eq!(got.as_ref(), Some(v));
                    }
                }
            }
        }
        let expected = reference_root(&model);
        prop_assert_eq!(t.root().unwrap(), expected);
        prop_assert_eq!(builder_root(&model), expected);
        for (k, v) in &model {
            let got = t.get(k).unwrap();
            prop_assert_eq!(got.as_ref(), Some(v));
        }
    }

    #[test]
    fn serial_and_parallel_builders_agree(
        map in prop::collection::btree_map(prop::collection::vec(any::<u8>(), 1..34), prop::collection::vec(any::<u8>(), 1..60), 0..300)
    ) {
        let items: Vec<(&Vec<u8>, &Vec<u8>)> = map.iter().collect();
        let serial = root_from_sorted::<EthLayout, _, _>(&items).unwrap().0;
        let parallel = parallel_root::<EthLayout, _, _>(&items).unwrap().0;
        prop_assert_eq!(serial, parallel);
        prop_assert_eq!(serial, reference_root(&map));
    }

    #[test]
    fn reloaded_trie_applies_updates(
        base in prop::collection::btree_map(key(), prop::collection::vec(any::<u8>(), 1..50), 1..80),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        // Build, commit into a source, reopen lazily, mutate: roots must match the model.
        let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::new());
        for (k, v) in &base { t.insert(k, v).unwrap(); }
        let u = t.commit().unwrap();
        let mut src = MemoryNodeSource::new();
        for n in u.new { src.insert_hashed(n.hash, n.encoded); }
        let mut lazy: Trie<MemoryNodeSource, EthLayout> = Trie::from_root(src, u.root);
        let mut model = base.clone();
        for op in ops {
            match op {
                Op::Insert(k, v) => {
                    lazy.insert(&k, &v).unwrap();
                    if v.is_empty() { model.remove(&k); } else { model.insert(k, v); }
                }
                Op::Remove(k) => { lazy.remove(&k).unwrap(); model.remove(&k); }
                Op::Root | Op::Commit => prop_assert_eq!(lazy.root().unwrap(), reference_root(&model)),
            }
        }
        prop_assert_eq!(lazy.root().unwrap(), reference_root(&model));
    }
}

/// `root()` after a few updates hashes exactly the nodes on the updated paths: no more.
#[test]
fn incremental_root_hashes_only_dirty_paths() {
    use rand::{Rng, SeedableRng};
    let seed = 0xA4B0_u64;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::new());
    let keys: Vec<[u8; 32]> = (0..10_000).map(|_| rng.gen()).collect();
    for k in &keys {
        t.insert(k, &[7u8; 40]).unwrap();
    }
    t.root().unwrap();
    for round in 0..50 {
        let picked: Vec<[u8; 32]> = (0..3).map(|_| keys[rng.gen_range(0..keys.len())]).collect();
        for k in &picked {
            t.insert(k, &[round as u8 + 100; 40]).unwrap();
        }
        let before = t.hash_stats().hashes;
        t.root().unwrap();
        let hashed = t.hash_stats().hashes - before;
        // Every node on those paths is at least 32 bytes here, so the multiproof lists
        // exactly the nodes that had to be rehashed.
        let on_paths = t.prove_many(&picked).unwrap().len() as u64;
        assert_eq!(hashed, on_paths, "seed {seed:#x} round {round}");
        let again = t.hash_stats().hashes;
        t.root().unwrap();
        assert_eq!(t.hash_stats().hashes, again, "a clean root() hashes nothing");
    }
}

/// The builder hashes every node exactly once: its count equals the number of nodes a
/// commit stores by hash.
#[test]
fn builder_hashes_each_node_once() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for n in [1usize, 2, 17, 300, 5000] {
        let mut map = BTreeMap::new();
        for _ in 0..n {
            map.insert(rng.gen::<[u8; 32]>().to_vec(), vec![rng.gen::<u8>() | 1; 60]);
        }
        let items: Vec<_> = map.iter().collect();
        let (root, stats) = root_from_sorted::<EthLayout, _, _>(&items).unwrap();
        let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::new());
        for (k, v) in &map {
            t.insert(k, v).unwrap();
        }
        let u = t.commit().unwrap();
        assert_eq!(u.root, root);
        assert_eq!(stats.hashes, u.new.len() as u64, "n = {n}");
    }
}
