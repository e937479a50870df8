//! `PovSession` against a from-scratch reference, over random parent states and random
//! blocks of transactions (reads, writes, deletions that collapse branches, nested
//! transactions committed or rolled back, and candidate transactions the builder keeps or
//! discards).
//!
//! After every transaction k: `proof_size()` must equal the encoded size of the witness
//! that a fresh recorder records when the kept transactions 1..k run from the same parent
//! through a fresh overlay and the root is then computed; `storage_root()` must equal the
//! root built from scratch over the post-state; and the witness must be enough for a
//! trie built from it alone to recompute that root.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use overlay::{Overlay, PovError, PovSession};
use proptest::prelude::*;
use state::{StateReader, TrieId, H256};
use trie::{root_from_sorted, EthLayout, Layout, MemoryNodeSource, NodeSource, SourceError, Trie};

#[derive(Debug, Clone)]
enum TxOp {
    Read(Vec<u8>),
    Write(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Nested(Vec<TxOp>, bool),
}

#[derive(Debug, Clone)]
struct Tx {
    ops: Vec<TxOp>,
    keep: bool,
}

/// Keys from a tiny alphabet (shared prefixes, keys that are prefixes of others) and
/// random 32-byte keys.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop::sample::select(vec![0x00u8, 0x01, 0x10, 0x11]), 1..4),
        prop::collection::vec(any::<u8>(), 32..=32),
    ]
}

/// Short values (inline nodes) and long ones (nodes referenced by hash).
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![prop::collection::vec(1u8..=255, 1..4), prop::collection::vec(1u8..=255, 30..50)]
}

fn tx_op(keys: Vec<Vec<u8>>) -> impl Strategy<Value = TxOp> {
    let pick = prop_oneof![prop::sample::select(keys), key()];
    let leaf = prop_oneof![
        2 => pick.clone().prop_map(TxOp::Read),
        3 => (pick.clone(), value()).prop_map(|(k, v)| TxOp::Write(k, v)),
        3 => pick.prop_map(TxOp::Delete),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        (prop::collection::vec(inner, 1..4), any::<bool>())
            .prop_map(|(ops, c)| TxOp::Nested(ops, c))
    })
}

fn case() -> impl Strategy<Value = (BTreeMap<Vec<u8>, Vec<u8>>, Vec<Tx>)> {
    prop::collection::btree_map(key(), value(), 0..40).prop_flat_map(|parent| {
        let mut keys: Vec<Vec<u8>> = parent.keys().cloned().collect();
        keys.push(vec![0x10]);
        let tx = (prop::collection::vec(tx_op(keys), 1..6), prop::bool::weighted(0.8))
            .prop_map(|(ops, keep)| Tx { ops, keep });
        (Just(parent), prop::collection::vec(tx, 1..10))
    })
}

fn committed(parent: &BTreeMap<Vec<u8>, Vec<u8>>) -> (MemoryNodeSource, H256) {
    MemoryNodeSource::committed(parent).unwrap()
}

/// Run ops on an overlay; the model tracks the visible values.
fn run<R: StateReader>(
    o: &mut Overlay<R>,
    ops: &[TxOp],
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<(), R::Error> {
    for op in ops {
        match op {
            TxOp::Read(k) => {
                let got = o.get(&TrieId::Main, k)?.map(<[u8]>::to_vec);
                assert_eq!(got.as_ref(), model.get(k), "read {k:?}");
            }
            TxOp::Write(k, v) => {
                o.set(&TrieId::Main, k, v.clone());
                model.insert(k.clone(), v.clone());
            }
            TxOp::Delete(k) => {
                o.remove(&TrieId::Main, k);
                model.remove(k);
            }
            TxOp::Nested(inner, commit) => {
                o.start_transaction();
                let mut m = model.clone();
                run(o, inner, &mut m)?;
                if *commit {
                    o.commit_transaction().unwrap();
                    *model = m;
                } else {
                    o.rollback_transaction().unwrap();
                }
            }
        }
    }
    Ok(())
}

/// The reference witness of the kept transactions: fresh recorder, fresh overlay, then
/// the root over the change set. Returns its nodes by hash.
fn reference_witness(
    src: &MemoryNodeSource,
    root: H256,
    parent: &BTreeMap<Vec<u8>, Vec<u8>>,
    kept: &[Tx],
) -> HashMap<H256, Vec<u8>> {
    let mut t = Trie::from_root(src.clone(), root);
    t.start_recording();
    let mut o = Overlay::new(RefCell::new(t));
    let mut model = parent.clone();
    for tx in kept {
        run(&mut o, &tx.ops, &mut model).unwrap();
    }
    let cs = o.drain_changes().unwrap();
    let mut t = o.into_backend().into_inner();
    for (k, v) in cs.get(&TrieId::Main).into_iter().flatten() {
        t.write(k, v.as_deref()).unwrap();
    }
    t.root().unwrap();
    t.take_recorder().unwrap().take()
}

/// Serves witness nodes by hash only.
struct WitnessSource(HashMap<H256, Vec<u8>>);

impl NodeSource for WitnessSource {
    fn load(&self, _path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        Ok(self.0.get(hash).cloned())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(128)))]

    #[test]
    fn proof_size_and_root_are_exact_after_every_transaction((parent, txs) in case()) {
        let (src, root) = committed(&parent);
        let mut s = PovSession::new(src.clone(), root);
        let mut model = parent.clone();
        let mut kept: Vec<Tx> = Vec::new();
        for tx in &txs {
            s.begin_candidate().unwrap();
            let mut m = model.clone();
            run(s.overlay(), &tx.ops, &mut m).unwrap();
            // The builder asks for the size before deciding.
            s.proof_size().unwrap();
            if tx.keep {
                s.keep().unwrap();
                model = m;
                kept.push(tx.clone());
            } else {
                s.discard().unwrap();
            }
            let want = reference_witness(&src, root, &parent, &kept);
            let want_bytes: usize = want.values().map(Vec::len).sum();
            let witness: HashMap<H256, Vec<u8>> = s
                .witness()
                .unwrap()
                .into_iter()
                .map(|n| (EthLayout::hash(&n), n))
                .collect();
            for (h, n) in want.iter().filter(|(h, _)| !witness.contains_key(*h)) {
                eprintln!("witness lacks {h}: {}", hex::encode(n));
            }
            for (h, n) in witness.iter().filter(|(h, _)| !want.contains_key(*h)) {
                eprintln!("witness has an extra {h}: {}", hex::encode(n));
            }
            prop_assert_eq!(s.proof_size().unwrap(), want_bytes);
            let items: Vec<(&Vec<u8>, &Vec<u8>)> = model.iter().collect();
            let post = root_from_sorted::<EthLayout, _, _>(&items).unwrap().0;
            prop_assert_eq!(s.storage_root().unwrap(), post);
            // The size stays exact after a root computation.
            prop_assert_eq!(s.proof_size().unwrap(), want_bytes);
            // The witness alone re-executes the kept transactions and gives the root.
            prop_assert_eq!(&witness, &want);
            let mut stateless = PovSession::new(WitnessSource(witness), root);
            let mut m2 = parent.clone();
            for tx in &kept {
                run(stateless.overlay(), &tx.ops, &mut m2).unwrap();
            }
            prop_assert_eq!(stateless.storage_root().unwrap(), post);
        }
        // Range reads through the session (parent entries from the recording trie,
        // merged with the overlay's writes) list the model, after roots were computed
        // and the trie changed under the backend. Last: range reads are recorded, so
        // they grow the witness beyond the reference's.
        let listed: Vec<(Vec<u8>, Vec<u8>)> =
            s.overlay().range(&TrieId::Main, &[], None).unwrap().map(Result::unwrap).collect();
        let want_all: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
        prop_assert_eq!(listed, want_all);
        let bounded: Vec<Vec<u8>> = s
            .overlay()
            .range(&TrieId::Main, &[0x01], Some(&[0x11]))
            .unwrap()
            .map(|e| e.unwrap().0)
            .collect();
        let want_bounded: Vec<Vec<u8>> =
            model.range(vec![0x01]..vec![0x11]).map(|(k, _)| k.clone()).collect();
        prop_assert_eq!(bounded, want_bounded);
    }
}

/// Candidate misuse is a typed error and leaves the session usable.
#[test]
fn candidate_misuse_is_refused_with_a_typed_error() {
    let parent = BTreeMap::from([(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
    let (src, root) = committed(&parent);
    let mut s = PovSession::new(src, root);
    assert_eq!(s.keep(), Err(PovError::NoCandidate));
    assert_eq!(s.discard(), Err(PovError::NoCandidate));
    s.begin_candidate().unwrap();
    assert_eq!(s.begin_candidate(), Err(PovError::CandidateOpen));
    s.overlay().set(&TrieId::Main, b"c", b"3".to_vec());
    s.keep().unwrap();
    assert_eq!(s.keep(), Err(PovError::NoCandidate));
    let items = [
        (b"a".to_vec(), b"1".to_vec()),
        (b"b".to_vec(), b"2".to_vec()),
        (b"c".to_vec(), b"3".to_vec()),
    ];
    let want = root_from_sorted::<EthLayout, _, _>(&items).unwrap().0;
    assert_eq!(s.storage_root().unwrap(), want);
}
