use std::collections::{BTreeMap, HashMap};

use std::sync::Arc;

use proptest::prelude::*;
use state::H256;

use super::mem::{Known, Mem};
use super::{update_trie, Change, UpdateError};
use crate::builder::{root_from_sorted, EmittedKind, NodeSink, RootBuilder};
use crate::ethereum::EthLayout;
use crate::hash::keccak256;
use crate::nibbles::NibbleSlice;
use crate::node::{ChildRef, Layout};
use crate::substrate::{SubstrateV0, SubstrateV1};

/// What a bottom-up rebuild stores: every hashed node, and the root whatever its size.
struct Expected<L>(HashMap<Vec<u8>, Arc<[u8]>>, std::marker::PhantomData<L>);

impl<L: Layout> NodeSink for Expected<L> {
    fn node(&mut self, _: EmittedKind, path: NibbleSlice<'_>, enc: &[u8], r: &ChildRef) {
        let hash = match r.as_hash() {
            Some(h) => h,
            None if path.is_empty() => L::hash(enc),
            None => return,
        };
        let mut v = hash.0.to_vec();
        v.extend_from_slice(enc);
        self.0.insert(path.to_nibbles().0, Arc::from(v));
    }
}

fn expected_nodes<L: Layout>(flat: &BTreeMap<Vec<u8>, Vec<u8>>) -> HashMap<Vec<u8>, Arc<[u8]>> {
    let sink = Expected::<L>(HashMap::new(), std::marker::PhantomData);
    let mut b = RootBuilder::<L, _>::with_sink(sink);
    for (k, v) in flat {
        b.add(k, v).unwrap();
    }
    let (root, sink, _) = b.finish_with();
    let mut nodes = sink.0;
    // A root leaf is emitted to no sink: the store keeps it too.
    if !flat.is_empty() && !nodes.contains_key(&Vec::new()) {
        let (k, v) = flat.iter().next().unwrap();
        let mut enc = Vec::new();
        L::encode_leaf(NibbleSlice::new(k), v, &mut enc);
        let mut val = root.0.to_vec();
        val.extend_from_slice(&enc);
        nodes.insert(Vec::new(), Arc::from(val));
    }
    nodes
}

/// Apply one batch (key → new value) to `mem` through the updater; check the root and
/// the stored nodes against a rebuild of the model.
fn step<L: Layout>(mem: &mut Mem, root: &mut H256, batch: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
    let changes: Vec<Change<'_>> = batch
        .iter()
        .map(|(k, v)| Change { key: k, old: mem.flat.get(k).map(Vec::as_slice), new: v.as_deref() })
        .filter(|c| c.old != c.new)
        .collect();
    let u = update_trie::<L, _>(mem, *root, &changes, true).unwrap();
    for (path, v) in u.writes {
        match v {
            Some(v) => mem.nodes.insert(path, v),
            None => mem.nodes.remove(&path),
        };
    }
    for (k, v) in batch {
        match v {
            Some(v) => mem.flat.insert(k.clone(), v.clone()),
            None => mem.flat.remove(k),
        };
    }
    let pairs: Vec<_> = mem.flat.iter().collect();
    let want = root_from_sorted::<L, _, _>(&pairs).unwrap().0;
    assert_eq!(u.root, want, "root after {batch:?}");
    *root = u.root;
    let expected = expected_nodes::<L>(&mem.flat);
    let mut got: Vec<_> = mem.nodes.keys().cloned().collect();
    let mut want: Vec<_> = expected.keys().cloned().collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "stored node paths");
    for (p, v) in &expected {
        assert_eq!(&mem.nodes[p], v, "node at {p:?}");
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 32),
        // Short keys: prefixes of each other, branch values, inline nodes.
        2 => prop::collection::vec(0u8..4, 0..3),
        // A long shared prefix: extensions that split and merge.
        2 => prop::collection::vec(0u8..3, 1..3).prop_map(|t| {
            let mut k = vec![0xab; 20];
            k.extend(t);
            k
        }),
    ]
}

/// New values: deletions, short and long ones; in layouts where an empty value is a
/// value, empty ones and the sizes around Substrate V1's value-node threshold.
fn value<L: Layout>() -> impl Strategy<Value = Option<Vec<u8>>> {
    let empty_len = if L::ALLOW_EMPTY_VALUE { 0 } else { 1 };
    prop_oneof![
        2 => Just(None),
        2 => prop::collection::vec(any::<u8>(), empty_len..3).prop_map(Some),
        3 => prop::collection::vec(any::<u8>(), 1..48).prop_map(Some),
        1 => (32usize..35).prop_map(|n| Some(vec![0x5a; n])),
    ]
}

fn batches<L: Layout>() -> impl Strategy<Value = Vec<BTreeMap<Vec<u8>, Option<Vec<u8>>>>> {
    prop::collection::vec(prop::collection::btree_map(key(), value::<L>(), 0..40), 1..12)
}

fn run_batches<L: Layout>(batches: &[BTreeMap<Vec<u8>, Option<Vec<u8>>>]) {
    let mut mem = Mem::default();
    let mut root = L::empty_root();
    for batch in batches {
        step::<L>(&mut mem, &mut root, batch);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(200)
    ))]

    #[test]
    fn batches_give_the_rebuilt_root_and_nodes(batches in batches::<EthLayout>()) {
        run_batches::<EthLayout>(&batches);
    }

    #[test]
    fn substrate_v0_batches_give_the_rebuilt_root_and_nodes(batches in batches::<SubstrateV0>()) {
        run_batches::<SubstrateV0>(&batches);
    }

    #[test]
    fn substrate_v1_batches_give_the_rebuilt_root_and_nodes(batches in batches::<SubstrateV1>()) {
        run_batches::<SubstrateV1>(&batches);
    }
}

/// Many changes: the top branches fan out to the pool, then most keys go and branches
/// collapse, then every key goes.
fn fan_out_and_collapse<L: Layout>() {
    let mut mem = Mem::default();
    let mut root = L::empty_root();
    let key = |i: u32| keccak256(&i.to_be_bytes()).0.to_vec();
    let insert: BTreeMap<_, _> = (0..3000u32).map(|i| (key(i), Some(vec![1; 40]))).collect();
    step::<L>(&mut mem, &mut root, &insert);
    let mixed: BTreeMap<_, _> = (0..3000u32)
        .step_by(3)
        .map(|i| (key(i), (i % 2 == 0).then(|| vec![2; 3])))
        .chain((3000..3500u32).map(|i| (key(i), Some(vec![3; 33]))))
        .collect();
    step::<L>(&mut mem, &mut root, &mixed);
    let delete_all: BTreeMap<_, _> = mem.flat.keys().map(|k| (k.clone(), None)).collect();
    step::<L>(&mut mem, &mut root, &delete_all);
    assert_eq!(root, L::empty_root());
    assert!(mem.nodes.is_empty());
}

#[test]
fn large_batches_fan_out_and_collapse() {
    fan_out_and_collapse::<EthLayout>();
    fan_out_and_collapse::<SubstrateV0>();
    fan_out_and_collapse::<SubstrateV1>();
}

/// Keys sharing more than 63 and than 318 nibbles (Substrate's header continuation bytes),
/// split and merged again.
#[test]
fn long_partial_keys_split_and_merge() {
    fn run<L: Layout>() {
        let mut mem = Mem::default();
        let mut root = L::empty_root();
        for len in [40usize, 170] {
            let base = vec![0x3c; len];
            let mut other = base.clone();
            other.push(1);
            let mut third = base.clone();
            third[len - 1] = 0x3d;
            let one: BTreeMap<_, _> =
                [(base.clone(), Some(vec![1; 40])), (other.clone(), Some(vec![2; 3]))].into();
            step::<L>(&mut mem, &mut root, &one);
            step::<L>(&mut mem, &mut root, &[(third.clone(), Some(vec![3; 34]))].into());
            step::<L>(&mut mem, &mut root, &[(base.clone(), None), (third, None)].into());
            step::<L>(&mut mem, &mut root, &[(other, None)].into());
            assert_eq!(root, L::empty_root());
        }
    }
    run::<EthLayout>();
    run::<SubstrateV0>();
    run::<SubstrateV1>();
}

fn refuses_wrong_old_values<L: Layout>() {
    for known in [Known::EvenPaths, Known::Nothing] {
        let mut mem = Mem { known, ..Mem::default() };
        let mut root = L::empty_root();
        let batch: BTreeMap<_, _> = (0..50u8).map(|i| (vec![i; 32], Some(vec![i; 40]))).collect();
        step::<L>(&mut mem, &mut root, &batch);
        let (present, absent) = (vec![7u8; 32], vec![0xee; 32]);
        let claims = [
            // Present, with another value.
            Change { key: &present, old: Some(&[9; 40]), new: Some(&[1]) },
            // Present, claimed absent.
            Change { key: &present, old: None, new: Some(&[1]) },
            // Absent, claimed present.
            Change { key: &absent, old: Some(&[1; 40]), new: Some(&[2]) },
        ];
        for claim in claims {
            let e = update_trie::<L, _>(&mem, root, &[claim], true).unwrap_err();
            let key = claim.key.to_vec();
            assert!(
                matches!(&e, UpdateError::OldValue { key: k } if *k == key),
                "{known:?}, {claim:?}: {e:?}"
            );
        }
    }
}

#[test]
fn wrong_old_values_are_refused() {
    refuses_wrong_old_values::<EthLayout>();
    refuses_wrong_old_values::<SubstrateV0>();
    refuses_wrong_old_values::<SubstrateV1>();
}
