//! The witness recorder: what it records is exactly enough to replay the same operations
//! statelessly, it includes the siblings a collapsing deletion loads, and scopes nest.

use std::collections::BTreeMap;

use proptest::prelude::*;
use trie::{EthLayout, MemoryNodeSource, Trie, TrieError};

#[derive(Debug, Clone)]
enum Op {
    Get(Vec<u8>),
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop::sample::select(vec![0x00u8, 0x01, 0x10, 0xff]), 1..4),
        prop::collection::vec(any::<u8>(), 32..=32),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        key().prop_map(Op::Get),
        (key(), prop::collection::vec(any::<u8>(), 1..60)).prop_map(|(k, v)| Op::Insert(k, v)),
        key().prop_map(Op::Remove),
    ]
}

fn apply(t: &mut Trie<MemoryNodeSource, EthLayout>, op: &Op) -> Result<(), TrieError> {
    match op {
        Op::Get(k) => t.get(k).map(|_| ()),
        Op::Insert(k, v) => t.insert(k, v),
        Op::Remove(k) => t.remove(k).map(|_| ()),
    }
}

fn committed(base: &BTreeMap<Vec<u8>, Vec<u8>>) -> (MemoryNodeSource, state::H256) {
    MemoryNodeSource::committed::<EthLayout, _, _>(base).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(256)))]

    /// Operations + root on a lazily loaded trie, recorded; the same operations on a trie
    /// whose only source is the witness succeed and reach the same root.
    #[test]
    fn witness_suffices_for_stateless_replay(
        base in prop::collection::btree_map(key(), prop::collection::vec(any::<u8>(), 1..60), 1..60),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let (src, root) = committed(&base);
        let mut full: Trie<MemoryNodeSource, EthLayout> = Trie::from_root(src, root);
        full.start_recording();
        for op in &ops { apply(&mut full, op).unwrap(); }
        let post = full.root().unwrap();
        let rec = full.take_recorder().unwrap();
        let mut witness = MemoryNodeSource::new();
        let mut total = 0;
        for n in rec.witness() {
            total += n.len();
            witness.insert::<trie::EthLayout>(n);
        }
        prop_assert_eq!(total, rec.encoded_bytes());
        let mut stateless: Trie<MemoryNodeSource, EthLayout> = Trie::from_root(witness, root);
        for op in &ops { apply(&mut stateless, op).unwrap(); }
        prop_assert_eq!(stateless.root().unwrap(), post);
    }

    /// A rolled-back scope forgets what it first recorded, unless read again afterwards.
    #[test]
    fn rollback_forgets_scope(
        base in prop::collection::btree_map(key(), prop::collection::vec(any::<u8>(), 1..60), 1..60),
        before in prop::collection::vec(op(), 0..10),
        inside in prop::collection::vec(op(), 1..10),
    ) {
        let (src, root) = committed(&base);
        // Reference: only `before` recorded.
        let mut a: Trie<MemoryNodeSource, EthLayout> = Trie::from_root(src.clone(), root);
        a.start_recording();
        for op in &before { apply(&mut a, op).unwrap(); }
        let expected = a.recorder().unwrap().encoded_bytes();
        // Same, plus a scope with `inside` that is rolled back. (The trie's data changes are
        // not undone by the recorder; only what was recorded.)
        let mut b: Trie<MemoryNodeSource, EthLayout> = Trie::from_root(src, root);
        b.start_recording();
        for op in &before { apply(&mut b, op).unwrap(); }
        b.recorder_mut().unwrap().start();
        for op in &inside { apply(&mut b, op).unwrap(); }
        prop_assert!(b.recorder().unwrap().encoded_bytes() >= expected);
        b.recorder_mut().unwrap().rollback();
        prop_assert_eq!(b.recorder().unwrap().encoded_bytes(), expected);
    }
}

/// Deleting one of two children collapses the branch when the root is computed, and that
/// must record the other child, which nobody read.
#[test]
fn collapse_records_sibling() {
    let base: BTreeMap<Vec<u8>, Vec<u8>> =
        [(vec![0x10; 32], vec![1u8; 40]), (vec![0x20; 32], vec![2u8; 40])].into_iter().collect();
    let (src, root) = committed(&base);
    let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::from_root(src, root);
    t.start_recording();
    t.remove(&[0x10; 32]).unwrap();
    // Deletion is lazy: root branch + removed leaf so far.
    assert_eq!(t.recorder().unwrap().len(), 2);
    // The root needs the collapse, which loads the sibling leaf.
    t.root().unwrap();
    let rec = t.recorder().unwrap();
    assert_eq!(rec.len(), 3);
    let sibling = trie::keccak256(
        &rec.witness().into_iter().find(|n| n.windows(3).any(|w| w == [2, 2, 2])).unwrap(),
    );
    assert!(rec.contains(&sibling));
}
