//! `PovSession` against a from-scratch reference, over random parent states and random
//! blocks of transactions (reads, writes, empty values, deletions that collapse branches,
//! nested transactions committed or rolled back, and candidate transactions the builder
//! keeps or discards), in every layout: one generic check, run for Ethereum's layout and
//! Substrate's V0 and V1.
//!
//! After every transaction k: `proof_size()` must equal the size (by the layout's rule) of
//! the witness that a fresh recorder records when the kept transactions 1..k run from the
//! same parent through a fresh overlay and their writes are then applied and the root
//! computed; `storage_root()` must equal the root built from scratch over the post-state;
//! and the witness must be enough for a session over it alone to re-execute the kept
//! transactions and recompute that root. Plus the cumulus proof-size vector (Substrate
//! V1) through the session.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use overlay::{Overlay, PovError, PovSession};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use state::{StateReader, TrieId, H256};
use trie::{
    root_from_sorted, EthLayout, Layout, MemoryNodeSource, NodeSource, SourceError, SubstrateV0,
    SubstrateV1, Trie,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

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

/// Short values (inline nodes) and long ones (nodes referenced by hash; in Substrate V1,
/// 33 bytes or more are value nodes), and empty ones when `empty` (a value in Substrate's
/// layouts, a removal in Ethereum's).
fn value(empty: bool) -> impl Strategy<Value = Vec<u8>> {
    let empty = if empty { 1 } else { 0 };
    prop_oneof![
        empty => Just(Vec::new()),
        4 => prop::collection::vec(1u8..=255, 1..4),
        4 => prop::collection::vec(1u8..=255, 30..50),
    ]
}

fn tx_op(keys: Vec<Vec<u8>>) -> impl Strategy<Value = TxOp> {
    let pick = prop_oneof![prop::sample::select(keys), key()];
    let leaf = prop_oneof![
        2 => pick.clone().prop_map(TxOp::Read),
        3 => (pick.clone(), value(true)).prop_map(|(k, v)| TxOp::Write(k, v)),
        3 => pick.prop_map(TxOp::Delete),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        (prop::collection::vec(inner, 1..4), any::<bool>())
            .prop_map(|(ops, c)| TxOp::Nested(ops, c))
    })
}

/// A parent state (empty values only where the layout holds them) and a block.
fn case<L: Layout>() -> impl Strategy<Value = (Model, Vec<Tx>)> {
    let parent = prop::collection::btree_map(key(), value(L::ALLOW_EMPTY_VALUE), 0..40);
    parent.prop_flat_map(|parent| {
        let mut keys: Vec<Vec<u8>> = parent.keys().cloned().collect();
        keys.push(vec![0x10]);
        let tx = (prop::collection::vec(tx_op(keys), 1..6), prop::bool::weighted(0.8))
            .prop_map(|(ops, keep)| Tx { ops, keep });
        (Just(parent), prop::collection::vec(tx, 1..10))
    })
}

fn committed<L: Layout>(parent: &Model) -> (MemoryNodeSource, H256) {
    MemoryNodeSource::committed::<L, _, _>(parent).unwrap()
}

/// Run ops on an overlay; the model tracks the visible values (an empty value is one if
/// the overlay keeps empty values, else a removal).
fn run<R: StateReader>(
    o: &mut Overlay<R>,
    ops: &[TxOp],
    model: &mut Model,
) -> Result<(), R::Error> {
    for op in ops {
        match op {
            TxOp::Read(k) => {
                let got = o.get(&TrieId::Main, k)?.map(<[u8]>::to_vec);
                assert_eq!(got.as_ref(), model.get(k), "read {k:?}");
            }
            TxOp::Write(k, v) => {
                o.set(&TrieId::Main, k, v.clone());
                if v.is_empty() && !o.keeps_empty_values() {
                    model.remove(k);
                } else {
                    model.insert(k.clone(), v.clone());
                }
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
/// every surviving write applied to the trie (writing reads no old value: in Substrate V1
/// a value node enters the witness only where a value is read) and the root. Returns its
/// nodes by hash and its size by the layout's rule.
fn reference_witness<L: Layout>(
    src: &MemoryNodeSource,
    root: H256,
    parent: &Model,
    kept: &[Tx],
) -> (HashMap<H256, Vec<u8>>, usize) {
    let mut t: Trie<MemoryNodeSource, L> = Trie::from_root(src.clone(), root);
    t.start_recording();
    let mut o = Overlay::new(RefCell::new(t)).keep_empty_values(L::ALLOW_EMPTY_VALUE);
    let mut model = parent.clone();
    for tx in kept {
        run(&mut o, &tx.ops, &mut model).unwrap();
    }
    let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = o
        .pending_writes()
        .into_iter()
        .map(|(_, k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
        .collect();
    let mut t = o.into_backend().into_inner();
    for (k, v) in &writes {
        t.write(k, v.as_deref()).unwrap();
    }
    t.root().unwrap();
    let mut recorder = t.take_recorder().unwrap();
    let bytes = recorder.encoded_bytes();
    (recorder.take(), bytes)
}

/// Serves witness nodes by hash only.
struct WitnessSource(HashMap<H256, Vec<u8>>);

impl NodeSource for WitnessSource {
    fn load(&self, _path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        Ok(self.0.get(hash).cloned())
    }
}

/// Run the block through a session and check it against the reference after every
/// transaction, then check range reads.
fn check_block<L: Layout>(parent: &Model, txs: &[Tx]) -> Result<(), TestCaseError> {
    let (src, root) = committed::<L>(parent);
    let mut s: PovSession<MemoryNodeSource, L> = PovSession::new(src.clone(), root);
    let mut model = parent.clone();
    let mut kept: Vec<Tx> = Vec::new();
    for tx in txs {
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
        check_exact(&mut s, (&src, root), parent, &kept, &model)?;
    }
    check_ranges(&mut s, &model)
}

/// After a transaction: the session's size, root and witness against the reference of the
/// kept transactions, and the witness alone re-executing them.
fn check_exact<L: Layout>(
    s: &mut PovSession<MemoryNodeSource, L>,
    (src, root): (&MemoryNodeSource, H256),
    parent: &Model,
    kept: &[Tx],
    model: &Model,
) -> Result<(), TestCaseError> {
    let (want, want_bytes) = reference_witness::<L>(src, root, parent, kept);
    let witness: HashMap<H256, Vec<u8>> =
        s.witness().unwrap().into_iter().map(|n| (L::hash(&n), n)).collect();
    for (h, n) in want.iter().filter(|(h, _)| !witness.contains_key(*h)) {
        eprintln!("witness lacks {h}: {}", hex::encode(n));
    }
    for (h, n) in witness.iter().filter(|(h, _)| !want.contains_key(*h)) {
        eprintln!("witness has an extra {h}: {}", hex::encode(n));
    }
    prop_assert_eq!(s.proof_size().unwrap(), want_bytes);
    let items: Vec<(&Vec<u8>, &Vec<u8>)> = model.iter().collect();
    let post = root_from_sorted::<L, _, _>(&items).unwrap().0;
    prop_assert_eq!(s.storage_root().unwrap(), post);
    // The size stays exact after a root computation.
    prop_assert_eq!(s.proof_size().unwrap(), want_bytes);
    // The witness alone re-executes the kept transactions and gives the root.
    prop_assert_eq!(&witness, &want);
    let mut stateless: PovSession<WitnessSource, L> = PovSession::new(WitnessSource(witness), root);
    let mut m2 = parent.clone();
    for tx in kept {
        run(stateless.overlay(), &tx.ops, &mut m2).unwrap();
    }
    prop_assert_eq!(stateless.storage_root().unwrap(), post);
    Ok(())
}

/// Range reads through the session (parent entries from the recording trie, merged with
/// the overlay's writes) list the model, after roots were computed and the trie changed
/// under the backend. Last: range reads are recorded, so they grow the witness beyond
/// the reference's.
fn check_ranges<L: Layout>(
    s: &mut PovSession<MemoryNodeSource, L>,
    model: &Model,
) -> Result<(), TestCaseError> {
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
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(128)))]

    #[test]
    fn proof_size_and_root_are_exact_after_every_transaction_ethereum(
        (parent, txs) in case::<EthLayout>()
    ) {
        check_block::<EthLayout>(&parent, &txs)?;
    }

    #[test]
    fn proof_size_and_root_are_exact_after_every_transaction_substrate_v0(
        (parent, txs) in case::<SubstrateV0>()
    ) {
        check_block::<SubstrateV0>(&parent, &txs)?;
    }

    #[test]
    fn proof_size_and_root_are_exact_after_every_transaction_substrate_v1(
        (parent, txs) in case::<SubstrateV1>()
    ) {
        check_block::<SubstrateV1>(&parent, &txs)?;
    }
}

/// Candidate misuse is a typed error and leaves the session usable.
fn candidate_misuse_is_refused<L: Layout>() {
    let parent = Model::from([(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
    let (src, root) = committed::<L>(&parent);
    let mut s: PovSession<MemoryNodeSource, L> = PovSession::new(src, root);
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
    let want = root_from_sorted::<L, _, _>(&items).unwrap().0;
    assert_eq!(s.storage_root().unwrap(), want);
}

#[test]
fn candidate_misuse_is_refused_with_a_typed_error() {
    candidate_misuse_is_refused::<EthLayout>();
    candidate_misuse_is_refused::<SubstrateV0>();
    candidate_misuse_is_refused::<SubstrateV1>();
}

/// In Ethereum's layout an empty value written through the session deletes the key.
#[test]
fn an_empty_value_deletes_in_the_ethereum_layout() {
    let parent = Model::from([(b"a".to_vec(), b"1".to_vec())]);
    let (src, root) = committed::<EthLayout>(&parent);
    let mut s = PovSession::<_, EthLayout>::new(src, root);
    s.overlay().set(&TrieId::Main, b"a", Vec::new());
    assert_eq!(s.storage_root().unwrap(), EthLayout::empty_root());
}

/// The cumulus proof-size vector through the session: a V1 parent holding `key1` and
/// `key2` with 64-byte values; reading `key1` makes the proof 175 bytes (root branch,
/// leaf, value node, each SCALE-encoded), then reading `key2` 275. A discarded candidate
/// takes back what it added; writing a key over its value node does not read it.
#[test]
fn cumulus_proof_size_vector_through_the_session() {
    let parent =
        Model::from([(b"key1".to_vec(), vec![1u8; 64]), (b"key2".to_vec(), vec![2u8; 64])]);
    let (src, root) = committed::<SubstrateV1>(&parent);
    let mut s: PovSession<MemoryNodeSource, SubstrateV1> = PovSession::new(src, root);
    assert_eq!(s.proof_size().unwrap(), 0);
    for (key, total) in [(b"key1", 175), (b"key2", 275)] {
        s.begin_candidate().unwrap();
        let got = s.overlay().get(&TrieId::Main, key).unwrap().map(<[u8]>::to_vec);
        assert_eq!(got.as_ref(), parent.get(&key[..]));
        assert_eq!(s.proof_size().unwrap(), total, "after reading {key:?}");
        if key == b"key2" {
            s.discard().unwrap();
            assert_eq!(s.proof_size().unwrap(), 175, "after discarding the read of key2");
        } else {
            s.keep().unwrap();
        }
    }
    // Overwriting key2 walks its path, adding its leaf (a header and the value's hash:
    // 33 bytes, 34 SCALE-encoded), but reads no value node; an empty value is a value,
    // not a removal (key3 lands in the root branch's empty slot 3).
    s.overlay().set(&TrieId::Main, b"key2", vec![3u8; 64]);
    s.overlay().set(&TrieId::Main, b"key3", Vec::new());
    let size = s.proof_size().unwrap();
    assert_eq!(size, 175 + 34);
    let items = [
        (b"key1".to_vec(), vec![1u8; 64]),
        (b"key2".to_vec(), vec![3u8; 64]),
        (b"key3".to_vec(), Vec::new()),
    ];
    let want = root_from_sorted::<SubstrateV1, _, _>(&items).unwrap().0;
    assert_eq!(s.storage_root().unwrap(), want);
    assert_eq!(s.proof_size().unwrap(), size);
    let value2 = SubstrateV1::hash(&[2u8; 64]);
    let witness: Vec<H256> = s.witness().unwrap().iter().map(|n| SubstrateV1::hash(n)).collect();
    assert!(!witness.contains(&value2), "key2's old value node is not read");
    assert_eq!(s.overlay().get(&TrieId::Main, b"key3").unwrap(), Some(&[][..]));
}
