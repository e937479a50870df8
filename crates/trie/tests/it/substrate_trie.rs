//! The mutable trie in Substrate's layouts against trie-db (the oracle of `substrate.rs`):
//! random batches of inserts, updates and deletions (back to the empty trie too), with
//! commits and reloads from the committed nodes; after each batch the root equals
//! trie-db's, Arbor's proofs read correctly through trie-db and verify with Arbor's
//! checkers, and a recorder over a reloaded trie records what trie-db's records. Range
//! and key-range proofs, and the V1 proof-size vector through the recorder. Every suite runs
//! for both layouts through one generic function.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;
use state::H256;
use trie::{
    prove_key_range, verify_key_range, verify_multiproof, verify_proof, verify_range_proof, Layout,
    MemoryNodeSource, NibbleSlice, NodeSink, Recorder, SubstrateV0, SubstrateV1, Trie, TrieUpdates,
    SUBSTRATE_EMPTY_ROOT,
};
use trie_db::TrieLayout;

use crate::substrate::{
    key, oracle, oracle_get, oracle_proof, proof_db, value, Blake2Hasher, Model, OracleV0, OracleV1,
};

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

/// A batch of changes, and whether the trie commits (and reloads) after it.
type Batch = (Vec<Op>, bool);

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (key(), value()).prop_map(|(k, v)| Op::Insert(k, v)),
        1 => key().prop_map(Op::Remove),
    ]
}

fn batches() -> impl Strategy<Value = Vec<Batch>> {
    prop::collection::vec((prop::collection::vec(op(), 1..25), any::<bool>()), 1..6)
}

/// Paths (nibbles) → (hash, is_leaf) of the nodes a store following the commits holds.
type Stored = HashMap<Vec<u8>, (H256, bool)>;

struct Run<L: Layout> {
    trie: Trie<MemoryNodeSource, L>,
    model: Model,
    stored: Stored,
}

impl<L: Layout> Run<L> {
    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Insert(k, v) => {
                self.trie.insert(k, v).unwrap();
                self.model.insert(k.clone(), v.clone());
            }
            Op::Remove(k) => {
                let was = self.trie.remove(k).unwrap();
                prop_assert_eq!(was, self.model.remove(k).is_some());
            }
        }
        Ok(())
    }

    /// Commit, check the update lists against the nodes previous commits wrote, and go on
    /// with a trie reloaded from the committed root.
    fn commit(&mut self) -> Result<(), TestCaseError> {
        let u: TrieUpdates = self.trie.commit().unwrap();
        for r in &u.removed {
            let was = self.stored.remove(r.path.as_slice());
            prop_assert_eq!(was, Some((r.hash, r.is_leaf)), "removed path {:?}", r.path);
        }
        for n in &u.new {
            self.stored.insert(n.path.as_slice().to_vec(), (n.hash, n.is_leaf));
        }
        for v in &u.values {
            prop_assert!(L::FAMILY.value_node_min().is_some_and(|min| v.value.len() >= min));
            prop_assert_eq!(L::hash(&v.value), v.hash);
        }
        let root = u.root;
        self.trie.source_mut().apply(u);
        let source = self.trie.source().clone();
        self.trie = Trie::from_root(source, root);
        Ok(())
    }
}

/// Probe keys: some present, some absent, some prefixes of present keys.
fn probes(model: &Model, extra: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = model.keys().step_by(3).take(6).cloned().collect();
    out.extend(model.keys().take(3).map(|k| k[..k.len() / 2].to_vec()));
    out.extend(extra.iter().cloned());
    out
}

/// Roots, proofs both ways and recorded reads of Arbor's trie against trie-db's.
fn check_state<L: Layout, O: TrieLayout<Hash = Blake2Hasher>>(
    run: &mut Run<L>,
    extra: &[Vec<u8>],
) -> Result<(), TestCaseError> {
    let (db, expected) = oracle::<O>(&run.model);
    let root = run.trie.root().unwrap();
    prop_assert_eq!(root, expected);
    let probes = probes(&run.model, extra);
    let want: Vec<Option<Vec<u8>>> = probes.iter().map(|k| run.model.get(k).cloned()).collect();

    // A multiproof: read through trie-db, checked by Arbor, and the same set of nodes
    // trie-db's recorder takes for the same reads.
    let proof = run.trie.prove_many(&probes).unwrap();
    let from_proof = proof_db(&proof);
    for (k, w) in probes.iter().zip(&want) {
        prop_assert_eq!(&oracle_get::<O>(&from_proof, &root, k), &Ok(w.clone()), "key {:02x?}", k);
    }
    prop_assert_eq!(&verify_multiproof::<L>(&root, &probes, &proof).unwrap(), &want);
    let recorded = oracle_proof::<O>(&db, &root, &probes);
    prop_assert_eq!(node_set(&proof), node_set(&recorded));
    for (k, w) in probes.iter().zip(&want).take(3) {
        let single = run.trie.prove(k).unwrap();
        prop_assert_eq!(&verify_proof::<L>(&root, k, &single).unwrap(), w);
        prop_assert_eq!(&oracle_get::<O>(&proof_db(&single), &root, k), &Ok(w.clone()));
    }
    Ok(())
}

/// A proof's nodes as a set; the empty node, which trie-db records for an empty trie and
/// Arbor's proofs leave out, is dropped.
fn node_set(nodes: &[Vec<u8>]) -> HashSet<Vec<u8>> {
    nodes.iter().filter(|n| n.as_slice() != [0u8]).cloned().collect()
}

/// Reads through a recorder on a trie loaded from committed nodes record exactly what
/// trie-db's recorder does for the same reads (values and value nodes included).
fn check_recorded_reads<L: Layout, O: TrieLayout<Hash = Blake2Hasher>>(
    run: &Run<L>,
    extra: &[Vec<u8>],
) -> Result<(), TestCaseError> {
    let (db, root) = oracle::<O>(&run.model);
    let mut t: Trie<MemoryNodeSource, L> = Trie::from_root(run.trie.source().clone(), root);
    t.start_recording();
    let probes = probes(&run.model, extra);
    for k in &probes {
        prop_assert_eq!(t.get(k).unwrap(), run.model.get(k).cloned());
    }
    let ours: Vec<Vec<u8>> = t.recorder().unwrap().witness();
    let theirs = oracle_proof::<O>(&db, &root, &probes);
    prop_assert_eq!(node_set(&ours), node_set(&theirs));
    let size: usize = node_set(&theirs).iter().map(|n| L::PROOF_SIZE.item_size(n.len())).sum();
    prop_assert_eq!(t.recorder().unwrap().encoded_bytes(), size);
    Ok(())
}

fn run_batches<L: Layout, O: TrieLayout<Hash = Blake2Hasher>>(
    batches: &[Batch],
    clear: bool,
    extra: &[Vec<u8>],
) -> Result<(), TestCaseError> {
    let mut run = Run::<L> {
        trie: Trie::new(MemoryNodeSource::new()),
        model: Model::new(),
        stored: Stored::new(),
    };
    for (ops, commit) in batches {
        for op in ops {
            run.apply(op)?;
        }
        check_state::<L, O>(&mut run, extra)?;
        if *commit {
            run.commit()?;
            check_recorded_reads::<L, O>(&run, extra)?;
            check_state::<L, O>(&mut run, extra)?;
        }
    }
    if clear {
        let keys: Vec<Vec<u8>> = run.model.keys().cloned().collect();
        for k in keys {
            run.apply(&Op::Remove(k))?;
        }
        prop_assert_eq!(run.trie.root().unwrap(), SUBSTRATE_EMPTY_ROOT);
        check_state::<L, O>(&mut run, extra)?;
        run.commit()?;
        prop_assert!(run.stored.is_empty(), "nodes left after deleting every key");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(48)))]

    #[test]
    fn mutable_trie_agrees_with_trie_db(
        batches in batches(),
        clear in any::<bool>(),
        extra in prop::collection::vec(key(), 0..3),
    ) {
        run_batches::<SubstrateV0, OracleV0>(&batches, clear, &extra)?;
        run_batches::<SubstrateV1, OracleV1>(&batches, clear, &extra)?;
    }

    #[test]
    fn range_proofs_verify_and_mutations_fail(
        model in prop::collection::btree_map(key(), value(), 1..40),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        flip in any::<prop::sample::Index>(),
    ) {
        check_ranges::<SubstrateV0>(&model, &cuts, flip)?;
        check_ranges::<SubstrateV1>(&model, &cuts, flip)?;
    }
}

/// A committed trie of `model` and its root.
fn committed<L: Layout>(model: &Model) -> (MemoryNodeSource, H256) {
    let mut t: Trie<MemoryNodeSource, L> = Trie::new(MemoryNodeSource::new());
    for (k, v) in model {
        t.insert(k, v).unwrap();
    }
    let u = t.commit().unwrap();
    let root = u.root;
    let mut src = t.into_source();
    src.apply(u);
    (src, root)
}

/// Nodes a key-range verification reports, by path.
#[derive(Default)]
struct Reported(BTreeMap<Vec<u8>, Vec<u8>>);

impl NodeSink for Reported {
    fn node(
        &mut self,
        _: trie::EmittedKind,
        path: NibbleSlice<'_>,
        enc: &[u8],
        _: &trie::ChildRef,
    ) {
        self.0.insert(path.to_nibbles().0, enc.to_vec());
    }
}

/// Range proofs (`prove_range`) and key-range proofs over a tiling of the keys verify; a
/// changed entry value is refused by both.
fn check_ranges<L: Layout>(
    model: &Model,
    cuts: &[prop::sample::Index],
    flip: prop::sample::Index,
) -> Result<(), TestCaseError> {
    let (src, root) = committed::<L>(model);
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut cut_at: Vec<usize> = cuts.iter().map(|i| i.index(keys.len())).collect();
    cut_at.sort_unstable();
    cut_at.dedup();
    let mut start: Vec<u8> = Vec::new();
    let mut bounds = Vec::new();
    for &c in &cut_at {
        bounds.push((start.clone(), Some(keys[c].clone())));
        start = [keys[c].as_slice(), &[0]].concat();
    }
    bounds.push((start, None));
    let mut t: Trie<MemoryNodeSource, L> = Trie::from_root(src.clone(), root);
    for (start, last) in &bounds {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter(|(k, _)| **k >= *start && last.as_ref().is_none_or(|l| *k <= l))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let proof = prove_key_range::<L, _>(&src, &root, start, last.as_deref()).unwrap();
        let mut seen = Reported::default();
        let last = last.as_deref();
        verify_key_range::<L, _, _, _>(&root, start, last, &entries, &proof, &mut seen).unwrap();
        if let Some(bad) = changed(&entries, flip) {
            let r = verify_key_range::<L, _, _, _>(&root, start, last, &bad, &proof, &mut ());
            prop_assert!(r.is_err(), "a changed entry accepted by verify_key_range");
            if let Some(last) = last {
                let rp = t.prove_range(start, last).unwrap();
                prop_assert_eq!(&rp.entries, &entries);
                verify_range_proof::<L>(&root, start, &rp.entries, &rp.proof).unwrap();
                let r = verify_range_proof::<L>(&root, start, &bad, &rp.proof);
                prop_assert!(r.is_err(), "a changed entry accepted by verify_range_proof");
            }
        }
    }
    Ok(())
}

/// `entries` with one value changed (`None` when there are none).
fn changed(
    entries: &[(Vec<u8>, Vec<u8>)],
    pick: prop::sample::Index,
) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if entries.is_empty() {
        return None;
    }
    let mut bad = entries.to_vec();
    let i = pick.index(bad.len());
    bad[i].1.push(0x77);
    Some(bad)
}

/// The cumulus proof-size vector through the recorder over a mutable trie loaded from
/// committed nodes: a V1 trie with `key1` and `key2` holding 64-byte values; reading `key1`
/// records 175 bytes (root branch, leaf, value node), then reading `key2` 275 in all.
#[test]
fn v1_proof_size_vector_through_the_mutable_trie() {
    let model: Model =
        [(b"key1".to_vec(), vec![1u8; 64]), (b"key2".to_vec(), vec![2u8; 64])].into();
    let (src, root) = committed::<SubstrateV1>(&model);
    assert_eq!(root, oracle::<OracleV1>(&model).1);
    let mut t: Trie<MemoryNodeSource, SubstrateV1> = Trie::from_root(src, root);
    t.start_recording();
    for (key, total) in [(b"key1", 175), (b"key2", 275)] {
        assert_eq!(t.get(key).unwrap(), model.get(&key[..]).cloned());
        assert_eq!(t.recorder().unwrap().encoded_bytes(), total, "after reading {key:?}");
    }
    // Reading again adds nothing; a rolled-back scope forgets what it first recorded.
    let mut fresh: Trie<MemoryNodeSource, SubstrateV1> = Trie::from_root(t.source().clone(), root);
    fresh.set_recorder(Recorder::for_layout::<SubstrateV1>());
    fresh.get(b"key1").unwrap();
    fresh.recorder_mut().unwrap().start();
    fresh.get(b"key2").unwrap();
    assert_eq!(fresh.recorder().unwrap().encoded_bytes(), 275);
    fresh.recorder_mut().unwrap().rollback();
    assert_eq!(fresh.recorder().unwrap().encoded_bytes(), 175);
}

/// A leaf split, a move and a re-encoding of a V1 leaf need its value node's hash only: a
/// trie loaded from a witness without the value node still computes the new root.
#[test]
fn value_nodes_are_fetched_only_when_read() {
    let model: Model = [(b"key1".to_vec(), vec![1u8; 64])].into();
    let (src, root) = committed::<SubstrateV1>(&model);
    let leaf = src.clone();
    let value_hash = SubstrateV1::hash(&[1u8; 64]);
    let mut t: Trie<MemoryNodeSource, SubstrateV1> = Trie::from_root(src, root);
    t.start_recording();
    t.insert(b"key2", &[2u8; 40]).unwrap();
    t.insert(b"key", b"").unwrap();
    let mut after = model.clone();
    after.insert(b"key2".to_vec(), vec![2u8; 40]);
    after.insert(b"key".to_vec(), Vec::new());
    assert_eq!(t.root().unwrap(), oracle::<OracleV1>(&after).1);
    let rec = t.take_recorder().unwrap();
    assert!(!rec.contains(&value_hash), "the value node was recorded without a read");
    assert_eq!(rec.len(), 1);
    // The witness (the root leaf alone) suffices for the same changes.
    let mut witness = MemoryNodeSource::new();
    for (h, n) in rec.nodes() {
        witness.insert_hashed(*h, n.to_vec());
    }
    assert!(leaf.len() > witness.len());
    let mut w: Trie<MemoryNodeSource, SubstrateV1> = Trie::from_root(witness, root);
    w.insert(b"key2", &[2u8; 40]).unwrap();
    w.insert(b"key", b"").unwrap();
    assert_eq!(w.root().unwrap(), oracle::<OracleV1>(&after).1);
    assert_eq!(w.get(b"key").unwrap(), Some(Vec::new()));
    assert!(w.get(b"key1").is_err(), "the value node is not in the witness");
}
