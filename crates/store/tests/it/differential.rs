//! Differential property test: random blocks, reverts, flushes and reopens applied to the
//! RocksDB store and to an in-memory model (a `BTreeMap` per trie and its naive root) give
//! the same head, the same roots, the same values and valid proofs.
//!
//! Cases: `ARBOR_PROPTEST_CASES` (default 24). History depth is 4, so reverts regularly
//! run into pruned history and must fail without corrupting anything.

use std::collections::{BTreeMap, BTreeSet};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, TrieId};
use store::{StateDb, StoreConfig};
use trie::{verify_proof, EthLayout};

use crate::common::{
    apply, commit_alternating, env_number, model_get, model_root, open, small_config, Model, State,
    STORAGE_A, STORAGE_B,
};

const TRIES: [TrieId; 3] = [TrieId::Main, STORAGE_A, STORAGE_B];
/// Bytes of the short keys: several share nibbles, and keys of different lengths are
/// prefixes of each other (so branches carry values).
const ALPHABET: [u8; 5] = [0x00, 0x01, 0x10, 0x12, 0xab];
const HISTORY_DEPTH: u64 = 4;

/// One write of a block: (trie index, key, value; `None`/empty = delete).
type Write = (usize, Vec<u8>, Option<Vec<u8>>);

#[derive(Clone)]
enum Op {
    /// One block of explicit changes: (trie index, key, value; `None`/empty = delete).
    Commit(Vec<Write>),
    /// One large block derived from the model: updates and deletions of existing keys
    /// and fresh 32-byte keys.
    Churn { seed: u64, updates: usize },
    /// Undo up to `n` blocks (more than the history holds must fail cleanly).
    Revert(u64),
    /// Close (or drop) and open the same directory.
    Reopen { clean: bool },
    /// Wait for persistence.
    Flush,
}

/// Keys and values in hex, so that a shrunk failing case is readable.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Commit(block) => {
                let changes: Vec<String> = block
                    .iter()
                    .map(|(t, k, v)| {
                        format!(
                            "{t}:{}={}",
                            hex::encode(k),
                            v.as_ref().map_or("-".into(), hex::encode)
                        )
                    })
                    .collect();
                write!(f, "Commit[{}]", changes.join(" "))
            }
            Op::Churn { seed, updates } => {
                write!(f, "Churn {{ seed: {seed}, updates: {updates} }}")
            }
            Op::Revert(n) => write!(f, "Revert({n})"),
            Op::Reopen { clean } => write!(f, "Reopen {{ clean: {clean} }}"),
            Op::Flush => write!(f, "Flush"),
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => vec(select(ALPHABET.to_vec()), 1..=3),
        2 => (0u32..24).prop_map(crate::common::indexed_key),
        1 => any::<[u8; 32]>().prop_map(|k| k.to_vec()),
        // A long shared prefix: extensions that split and merge.
        2 => vec(select(ALPHABET.to_vec()), 1..=2).prop_map(|tail| {
            let mut k = vec![0x5c; 24];
            k.extend(tail);
            k
        }),
    ]
}

fn value() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        6 => vec(any::<u8>(), 1..80).prop_map(Some),
        2 => Just(None),
        1 => Just(Some(Vec::new())),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => vec((0..TRIES.len(), key(), value()), 0..24).prop_map(Op::Commit),
        2 => (any::<u64>(), 50..300usize).prop_map(|(seed, updates)| Op::Churn { seed, updates }),
        3 => (1..7u64).prop_map(Op::Revert),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
        1 => Just(Op::Flush),
    ]
}

fn changes_of(block: &[Write]) -> ChangeSet {
    let mut changes = ChangeSet::new();
    for (t, k, v) in block {
        changes.entry(TRIES[*t]).or_default().insert(k.clone(), v.clone());
    }
    changes
}

fn churn(state: &State, seed: u64, updates: usize) -> ChangeSet {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut changes = ChangeSet::new();
    for _ in 0..updates {
        let t = *TRIES.choose(&mut rng).unwrap();
        let existing: Vec<&Vec<u8>> = state.get(&t).map(|m| m.keys().collect()).unwrap_or_default();
        let key = match existing.choose(&mut rng) {
            Some(k) if rng.gen_bool(0.5) => (*k).clone(),
            _ => rng.gen::<[u8; 32]>().to_vec(),
        };
        let value = rng.gen_bool(0.75).then(|| {
            let len = rng.gen_range(1..80);
            (0..len).map(|_| rng.gen()).collect()
        });
        changes.entry(t).or_default().insert(key, value);
    }
    changes
}

/// Keys to compare after a step: every short key of one or two bytes, the indexed keys,
/// and a sample of the model's keys (present) and of keys it no longer holds.
fn probe_keys(model: &Model, step: usize) -> BTreeMap<TrieId, BTreeSet<Vec<u8>>> {
    let mut rng = ChaCha8Rng::seed_from_u64(step as u64);
    let mut out: BTreeMap<TrieId, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for t in TRIES {
        let keys = out.entry(t).or_default();
        for a in ALPHABET {
            keys.insert(vec![a]);
            for b in ALPHABET {
                keys.insert(vec![a, b]);
            }
        }
        keys.extend((0u32..24).map(crate::common::indexed_key));
        // Current keys and keys of earlier states (deleted or reverted since).
        for state in [Some(model.state()), model.states.iter().rev().nth(2)].into_iter().flatten() {
            let present: Vec<&Vec<u8>> =
                state.get(&t).map(|m| m.keys().collect()).unwrap_or_default();
            keys.extend(present.choose_multiple(&mut rng, 24).map(|k| (*k).clone()));
        }
    }
    out
}

fn check(db: &StateDb, model: &Model, step: usize) -> Result<(), TestCaseError> {
    let state = model.state();
    prop_assert_eq!(db.head_number(), model.head(), "step {}: head", step);
    prop_assert_eq!(db.head_root(), model_root(state, &TrieId::Main), "step {}: head root", step);
    for (t, keys) in probe_keys(model, step) {
        // Ranges: the whole trie, and between probe keys (layers merged over `flat`).
        let all: Vec<(Vec<u8>, Vec<u8>)> =
            db.range(&t, &[], None).unwrap().map(Result::unwrap).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            state.get(&t).map(|m| m.clone().into_iter().collect()).unwrap_or_default();
        prop_assert_eq!(all, want, "step {}: range of {:?}", step, t);
        let probes: Vec<&Vec<u8>> = keys.iter().step_by(7).collect();
        for w in probes.windows(2) {
            let got: Vec<Vec<u8>> =
                db.range(&t, w[0], Some(w[1])).unwrap().map(|e| e.unwrap().0).collect();
            let want: Vec<Vec<u8>> = state
                .get(&t)
                .map(|m| m.range(w[0].clone()..w[1].clone()).map(|(k, _)| k.clone()).collect())
                .unwrap_or_default();
            prop_assert_eq!(got, want, "step {}: range {:?}", step, w);
        }
        let root = model_root(state, &t);
        prop_assert_eq!(db.trie_root(&t).unwrap(), root, "step {}: root of {:?}", step, t);
        for (i, k) in keys.iter().enumerate() {
            let want = model_get(state, &t, k);
            let got = db.get(&t, k).unwrap();
            prop_assert_eq!(got.as_ref(), want, "step {}: {:?} {}", step, t, hex::encode(k));
            // A proof for every fourth key, checked against the model's root.
            if i % 4 == 0 {
                let proof = db.prove(t, k).unwrap();
                let proven = verify_proof::<EthLayout>(&root, k, &proof).unwrap();
                prop_assert_eq!(
                    proven.as_ref(),
                    want,
                    "step {}: proof of {:?} {}",
                    step,
                    t,
                    hex::encode(k)
                );
            }
        }
    }
    Ok(())
}

fn config() -> StoreConfig {
    let mut c = small_config();
    c.layers.history_depth = HISTORY_DEPTH;
    c
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let config = config();
    let mut db = open(dir.path(), &config);
    let mut model = Model::new(HISTORY_DEPTH);
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Commit(block) => {
                let changes = changes_of(block);
                let info = commit_alternating(&mut db, model.state(), &changes, step).unwrap();
                model.commit(&changes);
                prop_assert_eq!(info.number, model.head());
                prop_assert_eq!(info.root, model_root(model.state(), &TrieId::Main));
            }
            Op::Churn { seed, updates } => {
                let changes = churn(model.state(), *seed, *updates);
                commit_alternating(&mut db, model.state(), &changes, step).unwrap();
                model.commit(&changes);
            }
            Op::Revert(n) => model.revert_db(&mut db, *n, step)?,
            Op::Reopen { clean } => {
                if *clean {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                db = open(dir.path(), &config);
            }
            Op::Flush => db.flush().unwrap(),
        }
        check(&db, &model, step)?;
    }
    let report = db.verify().unwrap();
    prop_assert!(report.ok(), "verify: {:?}", report);
    let storage_tries = model.state().keys().filter(|t| **t != TrieId::Main).count();
    prop_assert_eq!(report.tries_checked, storage_tries);
    db.close().unwrap();
    Ok(())
}

#[test]
fn store_matches_model() {
    let cases = env_number("ARBOR_PROPTEST_CASES", 24) as u32;
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in vec(op(), 1..40))| {
        run(&ops)?;
    });
}

/// Found by this file's property test at 1,000 cases: a one-key trie's root is a leaf, which
/// the store keeps (every root is stored), so reverting a change to it must rewrite that
/// node; it used to leave the newer leaf at the root path, under the older root record.
#[test]
fn revert_rewrites_a_root_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &config());
    let mut state = State::new();
    let block = |v: u8| -> ChangeSet {
        let mut c = ChangeSet::new();
        for t in [TrieId::Main, STORAGE_A] {
            c.entry(t).or_default().insert(vec![0], Some(vec![v]));
        }
        c
    };
    db.commit(&block(0)).unwrap();
    apply(&mut state, &block(0));
    db.commit(&block(1)).unwrap();
    db.revert(1).unwrap();
    db.commit(&ChangeSet::new()).unwrap();
    for t in [TrieId::Main, STORAGE_A] {
        assert_eq!(db.trie_root(&t).unwrap(), model_root(&state, &t), "{t:?}");
        let proof = db.prove(t, &[0]).unwrap();
        let root = model_root(&state, &t);
        let proven = verify_proof::<EthLayout>(&root, &[0], &proof).unwrap();
        assert_eq!(proven, Some(vec![0]), "{t:?} proof");
    }
    let report = db.verify_deep().unwrap();
    assert!(report.ok(), "every stored node checks out: {report:?}");
}
