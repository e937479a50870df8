//! Substrate-layout databases (`SubstrateV0`, `SubstrateV1`) against an independent oracle:
//! `trie-db` with `reference-trie`'s Substrate layouts over a Blake2-256 hasher from the
//! RustCrypto `blake2` crate (`test_support::substrate_oracle`; Arbor hashes with
//! `blake2b_simd`).
//!
//! - A differential property test per layout: random blocks (keys that are prefixes of
//!   each other, the empty key, 40- to 127-byte keys under long shared prefixes, values
//!   around V1's 33-byte threshold, deletions, tries emptied), refused empty values,
//!   reverts, flushes and reopens (closed, dropped, or with the nodes behind the head;
//!   without a layout or naming the recorded one). After every step the head's roots are
//!   the oracle's, values are the model's, and proofs of present and absent keys verify
//!   with trie-db against the oracle's root and hold the nodes trie-db records for the
//!   same reads; so do those at the block below the head.
//! - Reads and proofs at recent blocks, live, after a revert and after reopens.
//! - Bulk loads: the oracle's roots, `verify`, a block on top; an empty value is refused.
//! - The recorded layout: another one is refused at open, the empty root, empty values.
//! - A one-key trie whose root leaf holds a 40-byte value (a value node in V1).
//!
//! Cases: `ARBOR_PROPTEST_CASES` (default 24); `ARBOR_SEED` replays the seeded tests.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use rand::seq::{IteratorRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, TrieId, H256};
use store::{BulkError, CommitError, OpenError, StateDb, StoreConfig};
use test_support::substrate_oracle::{
    oracle_get, oracle_proof, oracle_trie, proof_db, Blake2Hasher, Db, OracleV0, OracleV1,
};
use trie::{LayoutName, SUBSTRATE_EMPTY_ROOT};
use trie_db::TrieLayout;

use crate::common::{
    apply, commit_alternating, env_number, model_get, open, small_config, test_seed, Model, State,
    TrieState, STORAGE_A, STORAGE_B,
};

// ---------------------------------------------------------------------------------------
// The oracle.

/// Run a function generic over the oracle's layout in the oracle layout of `$layout`.
macro_rules! in_oracle {
    ($layout:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $layout {
            LayoutName::SubstrateV0 => $f::<OracleV0>($($arg),*),
            LayoutName::SubstrateV1 => $f::<OracleV1>($($arg),*),
            other => panic!("no oracle for {other}"),
        }
    };
}

/// trie-db's trie of one trie of the model: its nodes and its root.
struct Oracle {
    layout: LayoutName,
    db: Db,
    root: H256,
}

fn build<O: TrieLayout<Hash = Blake2Hasher>>(model: &TrieState) -> (Db, H256) {
    let (db, root) = oracle_trie::<O>(model.iter());
    (db, H256(root))
}

impl Oracle {
    fn new(layout: LayoutName, model: &TrieState) -> Oracle {
        let (db, root) = in_oracle!(layout, build(model));
        Oracle { layout, db, root }
    }

    /// The oracle of `trie` in `state`.
    fn of(layout: LayoutName, state: &State, trie: &TrieId) -> Oracle {
        Oracle::new(layout, state.get(trie).unwrap_or(&TrieState::new()))
    }

    /// Check `proof` of `keys` (from the store) against this trie: trie-db, reading each
    /// key through a database of the proof's nodes only, finds the oracle's value (a
    /// missing node is an error), and the proof's nodes are those trie-db records for the
    /// same reads (the empty node of an empty trie aside).
    fn check_proof(&self, keys: &[Vec<u8>], proof: &[Vec<u8>]) -> Result<(), String> {
        let from_proof = proof_db(proof);
        for k in keys {
            let want = in_oracle!(self.layout, oracle_get(&self.db, &self.root.0, k))?;
            let got = in_oracle!(self.layout, oracle_get(&from_proof, &self.root.0, k))
                .map_err(|e| format!("key {}: the proof does not verify: {e}", hex::encode(k)))?;
            if got != want {
                return Err(format!(
                    "key {}: the proof gives {:?}, the oracle {:?}",
                    hex::encode(k),
                    got.map(hex::encode),
                    want.map(hex::encode)
                ));
            }
        }
        let recorded = in_oracle!(self.layout, oracle_proof(&self.db, &self.root.0, keys));
        let mut recorded: HashSet<Vec<u8>> = recorded.into_iter().collect();
        recorded.remove(&vec![0u8]);
        let ours: HashSet<Vec<u8>> = proof.iter().cloned().collect();
        if ours != recorded {
            let hexes = |s: &HashSet<Vec<u8>>| {
                let mut v: Vec<String> = s.iter().map(hex::encode).collect();
                v.sort();
                v
            };
            return Err(format!(
                "the proof's nodes {:?} are not those trie-db records {:?}",
                hexes(&ours),
                hexes(&recorded)
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Shared pieces.

const LAYOUTS: [LayoutName; 2] = [LayoutName::SubstrateV0, LayoutName::SubstrateV1];
const TRIES: [TrieId; 3] = [TrieId::Main, STORAGE_A, STORAGE_B];
/// Bytes of the short keys: keys of different lengths are prefixes of each other.
const ALPHABET: [u8; 5] = [0x00, 0x01, 0x10, 0x11, 0xab];
/// Value lengths around V1's threshold (values of 33 bytes or more are value nodes).
const VALUE_LENS: [usize; 8] = [1, 2, 31, 32, 33, 34, 40, 100];

/// A long shared prefix: 40 bytes (more nibbles than a header holds), 64 bytes (sharing the
/// first 40), or 125 bytes (so that key + tail reaches `KEY_BYTES_MAX`).
fn long_prefix(n: u8) -> Vec<u8> {
    match n % 3 {
        0 => vec![0x5c; 40],
        1 => vec![0x5c; 64],
        _ => vec![0xcd; store::KEY_BYTES_MAX - 2],
    }
}

/// A config creating (or requiring) `layout`.
fn config_in(layout: Option<LayoutName>) -> StoreConfig {
    let mut c = small_config();
    c.layout = layout;
    c
}

/// One write of a block: (trie, key, value; `None` deletes).
type TrieWrite = (TrieId, Vec<u8>, Option<Vec<u8>>);

fn changes_of(writes: &[TrieWrite]) -> ChangeSet {
    let mut changes = ChangeSet::new();
    for (t, k, v) in writes {
        changes.entry(*t).or_default().insert(k.clone(), v.clone());
    }
    changes
}

/// Check the store's roots of every trie of [`TRIES`] against the oracle's, and values and
/// proofs of `probes` (and one multiproof of them all) against the model.
fn check_head(
    db: &StateDb,
    layout: LayoutName,
    state: &State,
    probes: &BTreeMap<TrieId, BTreeSet<Vec<u8>>>,
) -> Result<(), String> {
    for t in TRIES {
        let oracle = Oracle::of(layout, state, &t);
        let root = db.trie_root(&t).map_err(|e| format!("root of {t:?}: {e}"))?;
        if root != oracle.root {
            return Err(format!("root of {t:?}: {root:?}, the oracle's {:?}", oracle.root));
        }
        if t == TrieId::Main && db.head_root() != oracle.root {
            return Err(format!("head root {:?}, the oracle's {:?}", db.head_root(), oracle.root));
        }
        let keys: Vec<Vec<u8>> = probes.get(&t).into_iter().flatten().cloned().collect();
        for k in &keys {
            let got = db.get(&t, k).map_err(|e| format!("get: {e}"))?;
            if got.as_ref() != model_get(state, &t, k) {
                return Err(format!("{t:?} get {}: {:?}", hex::encode(k), got.map(hex::encode)));
            }
            let proof = db.prove(t, k).map_err(|e| format!("prove: {e}"))?;
            oracle
                .check_proof(std::slice::from_ref(k), &proof)
                .map_err(|e| format!("{t:?} proof of {}: {e}", hex::encode(k)))?;
        }
        let many = db.prove_many(t, &keys).map_err(|e| format!("prove_many: {e}"))?;
        oracle.check_proof(&keys, &many).map_err(|e| format!("{t:?} multiproof: {e}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 1. The differential property test.

const HISTORY_DEPTH: u64 = 4;

/// One write: (trie index, key, value; `None` deletes).
type Write = (usize, Vec<u8>, Option<Vec<u8>>);

/// How a reopen closes the database.
#[derive(Clone, Copy, Debug)]
enum Shutdown {
    /// `close`: everything persisted.
    Close,
    /// Dropped: no close.
    Drop,
    /// `close_with_nodes_behind`: the next open brings the nodes to the head.
    NodesBehind,
}

#[derive(Clone)]
enum Op {
    /// One block of explicit changes.
    Commit(Vec<Write>),
    /// One block deleting every key of a trie (back to the empty trie), with other writes.
    Clear { trie: usize, also: Vec<Write> },
    /// A block with an empty value among other writes: refused, nothing changes.
    EmptyValue { trie: usize, key: Vec<u8>, also: Vec<Write> },
    /// Undo up to `n` blocks (more than the history holds must fail cleanly).
    Revert(u64),
    /// Close, drop, or close with the nodes behind the head, and open again without a
    /// layout (or naming the recorded one).
    Reopen { how: Shutdown, name_layout: bool },
    /// Wait for persistence.
    Flush,
}

fn fmt_writes(writes: &[Write]) -> String {
    let w: Vec<String> = writes
        .iter()
        .map(|(t, k, v)| {
            format!("{t}:{}={}", hex::encode(k), v.as_ref().map_or("-".into(), hex::encode))
        })
        .collect();
    w.join(" ")
}

/// Keys and values in hex, so that a shrunk failing case is readable.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Commit(w) => write!(f, "Commit[{}]", fmt_writes(w)),
            Op::Clear { trie, also } => {
                write!(f, "Clear {{ trie: {trie}, also: [{}] }}", fmt_writes(also))
            }
            Op::EmptyValue { trie, key, also } => write!(
                f,
                "EmptyValue {{ trie: {trie}, key: {}, also: [{}] }}",
                hex::encode(key),
                fmt_writes(also)
            ),
            Op::Revert(n) => write!(f, "Revert({n})"),
            Op::Reopen { how, name_layout } => {
                write!(f, "Reopen {{ how: {how:?}, name_layout: {name_layout} }}")
            }
            Op::Flush => write!(f, "Flush"),
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Short keys, prefixes of each other (the empty key among them).
        4 => vec(select(ALPHABET.to_vec()), 0..=3),
        // Keys under long shared prefixes, the prefix itself among them.
        3 => (any::<u8>(), vec(select(ALPHABET.to_vec()), 0..=2))
            .prop_map(|(n, tail)| [long_prefix(n), tail].concat()),
        1 => any::<[u8; 32]>().prop_map(|k| k.to_vec()),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    select(VALUE_LENS.to_vec()).prop_flat_map(|n| vec(any::<u8>(), n))
}

fn write() -> impl Strategy<Value = Write> {
    let trie = prop_oneof![3 => Just(0usize), 1 => Just(1), 1 => Just(2)];
    (trie, key(), prop_oneof![3 => value().prop_map(Some), 1 => Just(None)])
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => vec(write(), 0..16).prop_map(Op::Commit),
        2 => (0..TRIES.len(), vec(write(), 0..4)).prop_map(|(trie, also)| Op::Clear { trie, also }),
        1 => (0..TRIES.len(), key(), vec(write(), 0..4))
            .prop_map(|(trie, key, also)| Op::EmptyValue { trie, key, also }),
        3 => (1..6u64).prop_map(Op::Revert),
        2 => (select(vec![Shutdown::Close, Shutdown::Drop, Shutdown::NodesBehind]), any::<bool>())
            .prop_map(|(how, name_layout)| Op::Reopen { how, name_layout }),
        1 => Just(Op::Flush),
    ]
}

fn writes_in(writes: &[Write]) -> Vec<TrieWrite> {
    writes.iter().map(|(t, k, v)| (TRIES[*t], k.clone(), v.clone())).collect()
}

/// Keys to check after a step: every key of at most one alphabet byte, a long-prefix key,
/// and samples of the keys present now and two blocks ago (deleted or reverted since).
fn probe_keys(model: &Model, step: usize) -> BTreeMap<TrieId, BTreeSet<Vec<u8>>> {
    let mut rng = ChaCha8Rng::seed_from_u64(step as u64);
    let mut out: BTreeMap<TrieId, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for t in TRIES {
        let keys = out.entry(t).or_default();
        keys.insert(Vec::new());
        keys.extend(ALPHABET.map(|a| vec![a]));
        keys.insert([long_prefix(0), vec![0x10]].concat());
        for state in [Some(model.state()), model.states.iter().rev().nth(2)].into_iter().flatten() {
            let present = state.get(&t).into_iter().flat_map(|m| m.keys());
            keys.extend(present.choose_multiple(&mut rng, 6).into_iter().cloned());
        }
    }
    out
}

fn run(layout: LayoutName, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(Some(layout));
    config.layers.history_depth = HISTORY_DEPTH;
    let reopen_config = StoreConfig { layout: None, ..config.clone() };
    let mut db = open(dir.path(), &config);
    prop_assert_eq!(db.layout(), layout);
    let mut model = Model::new(HISTORY_DEPTH);
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Commit(writes) => {
                let changes = changes_of(&writes_in(writes));
                let info = commit_alternating(&mut db, model.state(), &changes, step);
                let info = info.map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
                model.commit(&changes);
                prop_assert_eq!(info.number, model.head());
                let want = Oracle::of(layout, model.state(), &TrieId::Main).root;
                prop_assert_eq!(info.root, want, "step {}: commit's root", step);
            }
            Op::Clear { trie, also } => {
                let t = TRIES[*trie];
                let mut changes = changes_of(&writes_in(also));
                let all = model.state().get(&t).into_iter().flat_map(|m| m.keys());
                let deletes = changes.entry(t).or_default();
                // Every key of the trie, and the writes `also` made to it (absent keys).
                for v in deletes.values_mut() {
                    *v = None;
                }
                for k in all {
                    deletes.insert(k.clone(), None);
                }
                let info = commit_alternating(&mut db, model.state(), &changes, step);
                info.map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
                model.commit(&changes);
                prop_assert!(!model.state().contains_key(&t), "step {}: {:?} emptied", step, t);
            }
            Op::EmptyValue { trie, key, also } => {
                let t = TRIES[*trie];
                let mut changes = changes_of(&writes_in(also));
                changes.entry(t).or_default().insert(key.clone(), Some(Vec::new()));
                let before = (db.head_number(), db.head_root());
                match commit_alternating(&mut db, model.state(), &changes, step) {
                    Err(CommitError::EmptyValue { trie: et, key: ek, layout: el }) => {
                        prop_assert_eq!((et, &ek, el), (t, key, layout), "step {}", step);
                    }
                    other => {
                        return Err(TestCaseError::fail(format!(
                            "step {step}: an empty value gave {other:?}"
                        )))
                    }
                }
                prop_assert_eq!((db.head_number(), db.head_root()), before, "step {}", step);
            }
            Op::Revert(n) => model.revert_db(&mut db, *n, step)?,
            Op::Reopen { how, name_layout } => {
                match how {
                    Shutdown::Close => db.close().unwrap(),
                    Shutdown::Drop => drop(db),
                    Shutdown::NodesBehind => db.close_with_nodes_behind().unwrap(),
                }
                db = open(dir.path(), if *name_layout { &config } else { &reopen_config });
                prop_assert_eq!(db.layout(), layout, "step {}: reopened", step);
            }
            Op::Flush => db.flush().unwrap(),
        }
        prop_assert_eq!(db.head_number(), model.head(), "step {}: head", step);
        let probes = probe_keys(&model, step);
        check_head(&db, layout, model.state(), &probes)
            .map_err(|e| TestCaseError::fail(format!("step {step} ({op:?}): {e}")))?;
        // The block below the head, while its history is on disk.
        if model.history.contains(&model.head()) {
            check_below_head(&db, layout, &model, &probes)
                .map_err(|e| TestCaseError::fail(format!("step {step} ({op:?}): {e}")))?;
        }
        // The whole range of each trie.
        for t in TRIES {
            let all: Vec<(Vec<u8>, Vec<u8>)> =
                db.range(&t, &[], None).unwrap().map(Result::unwrap).collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> =
                model.state().get(&t).map(|m| m.clone().into_iter().collect()).unwrap_or_default();
            prop_assert_eq!(all, want, "step {}: range of {:?}", step, t);
        }
    }
    let report = db.verify_deep().unwrap();
    prop_assert!(report.ok(), "verify_deep: {:?}", report);
    db.close().unwrap();
    Ok(())
}

/// Roots, values and proofs of `probes` at the block below the head.
fn check_below_head(
    db: &StateDb,
    layout: LayoutName,
    model: &Model,
    probes: &BTreeMap<TrieId, BTreeSet<Vec<u8>>>,
) -> Result<(), String> {
    let b = model.head() - 1;
    let state = &model.states[b as usize];
    let view = db.at(b).map_err(|e| format!("at({b}): {e}"))?;
    for t in TRIES {
        let oracle = Oracle::of(layout, state, &t);
        let root = view.trie_root(&t).map_err(|e| format!("at({b}): {e}"))?;
        if root != oracle.root {
            return Err(format!("at({b}): root of {t:?} {root:?}, the oracle's {:?}", oracle.root));
        }
        let keys: Vec<Vec<u8>> = probes.get(&t).into_iter().flatten().cloned().collect();
        for k in &keys {
            let got = view.get(&t, k).map_err(|e| format!("at({b}): {e}"))?;
            if got.as_ref() != model_get(state, &t, k) {
                return Err(format!("at({b}): {t:?} get {}: {:?}", hex::encode(k), got));
            }
        }
        let many = view.prove_many(t, &keys).map_err(|e| format!("at({b}): {e}"))?;
        oracle.check_proof(&keys, &many).map_err(|e| format!("at({b}): {t:?} multiproof: {e}"))?;
    }
    Ok(())
}

fn property(layout: LayoutName) {
    let config = ProptestConfig {
        cases: env_number("ARBOR_PROPTEST_CASES", 24) as u32,
        failure_persistence: None,
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in vec(op(), 1..30))| {
        run(layout, &ops)?;
    });
}

#[test]
fn substrate_v0_store_matches_trie_db() {
    property(LayoutName::SubstrateV0);
}

#[test]
fn substrate_v1_store_matches_trie_db() {
    property(LayoutName::SubstrateV1);
}

// ---------------------------------------------------------------------------------------
// 2. Recent blocks.

/// Block `number`'s changes for `seed`: writes over a small key space (short keys, keys
/// under a long prefix, 32-byte keys) in the main trie and [`STORAGE_A`], a fifth of them
/// deletions, values of [`VALUE_LENS`].
fn random_block(seed: u64, number: u64, updates: usize) -> ChangeSet {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ number.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut changes = ChangeSet::new();
    for _ in 0..updates {
        let trie = if rng.gen_bool(0.7) { TrieId::Main } else { STORAGE_A };
        let key = random_key(&mut rng);
        let value = rng.gen_bool(0.8).then(|| {
            let len = *VALUE_LENS.choose(&mut rng).unwrap();
            (0..len).map(|_| rng.gen()).collect()
        });
        changes.entry(trie).or_default().insert(key, value);
    }
    changes
}

/// `n` bytes of [`ALPHABET`].
fn alphabet_bytes(rng: &mut impl Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| *ALPHABET.choose(rng).unwrap()).collect()
}

/// A key like the property test's: short, under a long prefix, or 32 bytes.
fn random_key(rng: &mut impl Rng) -> Vec<u8> {
    match rng.gen_range(0..4) {
        0 => {
            let n = rng.gen_range(1..=3);
            alphabet_bytes(rng, n)
        }
        1 => {
            let (prefix, n) = (long_prefix(rng.gen()), rng.gen_range(0..=2));
            [prefix, alphabet_bytes(rng, n)].concat()
        }
        _ => {
            let mut k = [0u8; 32];
            k[0] = rng.gen_range(0..16);
            k[31] = rng.gen();
            k.to_vec()
        }
    }
}

/// Keys to probe at a block: every key present at some block, and two never written.
fn written_keys(states: &[State]) -> BTreeMap<TrieId, BTreeSet<Vec<u8>>> {
    let mut out: BTreeMap<TrieId, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for state in states {
        for (t, m) in state {
            out.entry(*t).or_default().extend(m.keys().cloned());
        }
    }
    for t in [TrieId::Main, STORAGE_A] {
        let keys = out.entry(t).or_default();
        keys.insert(vec![0x42]);
        keys.insert([long_prefix(0), vec![0xee]].concat());
    }
    out
}

/// Check the view of every block from `lo` to the head against the oracle.
fn check_window(
    db: &StateDb,
    layout: LayoutName,
    states: &[State],
    lo: u64,
    ctx: &str,
) -> Result<(), String> {
    let head = states.len() as u64 - 1;
    assert_eq!(db.head_number(), head, "{ctx}");
    let probes = written_keys(states);
    for b in (lo..=head).rev() {
        let state = &states[b as usize];
        let view = db.at(b).map_err(|e| format!("{ctx}: at({b}): {e}"))?;
        for t in [TrieId::Main, STORAGE_A] {
            let oracle = Oracle::of(layout, state, &t);
            let root = view.trie_root(&t).map_err(|e| format!("{ctx}: {e}"))?;
            if root != oracle.root {
                return Err(format!(
                    "{ctx}: block {b}: root of {t:?} {root:?}, oracle {:?}",
                    oracle.root
                ));
            }
            if t == TrieId::Main && view.root() != oracle.root {
                return Err(format!("{ctx}: block {b}: view root {:?}", view.root()));
            }
            let keys: Vec<Vec<u8>> = probes[&t].iter().cloned().collect();
            for k in keys.iter().step_by(3) {
                let got = view.get(&t, k).map_err(|e| format!("{ctx}: {e}"))?;
                if got.as_ref() != model_get(state, &t, k) {
                    return Err(format!("{ctx}: block {b}: {t:?} get {}", hex::encode(k)));
                }
                let proof = view.prove(t, k).map_err(|e| format!("{ctx}: {e}"))?;
                oracle.check_proof(std::slice::from_ref(k), &proof).map_err(|e| {
                    format!("{ctx}: block {b}: {t:?} proof of {}: {e}", hex::encode(k))
                })?;
            }
            let many = view.prove_many(t, &keys).map_err(|e| format!("{ctx}: {e}"))?;
            oracle
                .check_proof(&keys, &many)
                .map_err(|e| format!("{ctx}: block {b}: {t:?} multiproof: {e}"))?;
        }
    }
    Ok(())
}

fn recent_blocks_in(layout: LayoutName) {
    let seed = test_seed(&format!("recent_blocks_verify_with_trie_db {layout}"));
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(Some(layout));
    config.history.recent_blocks = 6;
    let mut db = open(dir.path(), &config);
    let mut states = vec![State::new()];
    for n in 1..=12 {
        let changes = random_block(seed, n, 24);
        let info = db.commit(&changes).unwrap();
        let mut next = states.last().unwrap().clone();
        apply(&mut next, &changes);
        assert_eq!(info.root, Oracle::of(layout, &next, &TrieId::Main).root, "block {n}");
        states.push(next);
    }
    check_window(&db, layout, &states, 6, "live").unwrap();
    db.revert(2).unwrap();
    states.truncate(11);
    check_window(&db, layout, &states, 4, "reverted").unwrap();
    // One more block on the reverted head, then reopened: the window is read back from the
    // reverse diffs and its nodes recomputed by undoing blocks.
    let changes = random_block(seed ^ 1, 11, 24);
    db.commit(&changes).unwrap();
    let mut next = states.last().unwrap().clone();
    apply(&mut next, &changes);
    states.push(next);
    db.close().unwrap();
    let mut reopen = config_in(None);
    reopen.history.recent_blocks = 6;
    let db = open(dir.path(), &reopen);
    assert_eq!(db.layout(), layout);
    check_window(&db, layout, &states, 5, "reopened").unwrap();
    // Dropped without a close, reopened.
    drop(db);
    let db = open(dir.path(), &reopen);
    check_window(&db, layout, &states, 5, "reopened after a drop").unwrap();
}

#[test]
fn recent_blocks_verify_with_trie_db() {
    for layout in LAYOUTS {
        recent_blocks_in(layout);
    }
}

// ---------------------------------------------------------------------------------------
// 3. Bulk loads.

type Entries = Vec<(TrieId, Vec<u8>, Vec<u8>)>;

/// `n` entries over three tries (keys under long prefixes among them), and the model.
fn bulk_entries(seed: u64, n: usize) -> (Entries, State) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut state = State::new();
    for i in 0..n {
        let t = TRIES[i % 3];
        let key = if i % 4 == 0 { random_key(&mut rng) } else { rng.gen::<[u8; 32]>().to_vec() };
        let len = VALUE_LENS[i % VALUE_LENS.len()];
        let value: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        state.entry(t).or_default().insert(key, value);
    }
    let entries =
        state.iter().flat_map(|(t, m)| m.iter().map(|(k, v)| (*t, k.clone(), v.clone()))).collect();
    (entries, state)
}

fn bulk_load_in(layout: LayoutName) {
    let seed = test_seed(&format!("bulk_load_agrees_with_trie_db {layout}"));
    let dir = tempfile::tempdir().unwrap();
    let (mut entries, mut state) = bulk_entries(seed, 3_000);
    // Any order.
    entries.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut db = open(dir.path(), &config_in(Some(layout)));
    let summary = db.bulk_load("substrate genesis", entries.clone()).unwrap();
    assert_eq!(summary.root, Oracle::of(layout, &state, &TrieId::Main).root, "{layout}");
    assert_eq!(summary.entries, entries.len() as u64);
    for t in [STORAGE_A, STORAGE_B] {
        let want = Oracle::of(layout, &state, &t).root;
        assert!(summary.roots.contains(&(t, want)), "{layout} {t:?}: {:?}", summary.roots);
    }
    let report = db.verify().unwrap();
    assert!(report.ok() && report.tries_checked == 2, "{layout}: {report:?}");
    let deep = db.verify_deep().unwrap();
    assert!(deep.ok(), "{layout}: {deep:?}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 7);
    let probes = |state: &State, rng: &mut ChaCha8Rng| {
        let mut out: BTreeMap<TrieId, BTreeSet<Vec<u8>>> = BTreeMap::new();
        for t in TRIES {
            let keys = out.entry(t).or_default();
            let present = state.get(&t).into_iter().flat_map(|m| m.keys());
            keys.extend(present.choose_multiple(rng, 8).into_iter().cloned());
            keys.insert(vec![0x42]);
            keys.insert(random_key(rng));
        }
        out
    };
    check_head(&db, layout, &state, &probes(&state, &mut rng)).unwrap();

    // A block on top: updates across the value-node threshold, deletions, new keys.
    let mut changes = random_block(seed, 1, 200);
    for (t, m) in &state {
        for (i, (k, v)) in m.iter().enumerate().filter(|(i, _)| i % 37 == 0) {
            let new = match i % 3 {
                0 => None,
                1 => Some(vec![0x33; 65 - v.len().min(64)]),
                _ => Some(v[..1].to_vec()),
            };
            changes.entry(*t).or_default().insert(k.clone(), new);
        }
    }
    let info = db.commit(&changes).unwrap();
    apply(&mut state, &changes);
    assert_eq!(info.root, Oracle::of(layout, &state, &TrieId::Main).root, "{layout}: block 1");
    let mut touched = probes(&state, &mut rng);
    for (t, m) in &changes {
        touched.entry(*t).or_default().extend(m.keys().take(20).cloned());
    }
    check_head(&db, layout, &state, &touched).unwrap();
    db.close().unwrap();
    let db = open(dir.path(), &config_in(None));
    check_head(&db, layout, &state, &touched).unwrap();
    assert!(db.verify().unwrap().ok());
}

#[test]
fn bulk_load_agrees_with_trie_db() {
    for layout in LAYOUTS {
        bulk_load_in(layout);
    }
}

#[test]
fn bulk_load_refuses_an_empty_value() {
    for layout in LAYOUTS {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(dir.path(), &config_in(Some(layout)));
        let (mut entries, _) = bulk_entries(5, 30);
        entries.insert(10, (STORAGE_A, vec![0x77; 3], Vec::new()));
        match db.bulk_load("with an empty value", entries) {
            Err(BulkError::EmptyValue { trie, key, layout: l }) => {
                assert_eq!((trie, key, l), (STORAGE_A, vec![0x77; 3], layout));
            }
            other => panic!("{layout}: {other:?}"),
        }
        // Entry by entry: the empty value is refused, others are taken.
        let mut load = db.begin_bulk_load("with an empty value").unwrap();
        load.put(&TrieId::Main, &[1], &[2]).unwrap();
        assert!(matches!(
            load.put(&TrieId::Main, &[3], &[]),
            Err(BulkError::EmptyValue { trie: TrieId::Main, .. })
        ));
        let summary = load.finish().unwrap();
        let state: State = [(TrieId::Main, [(vec![1u8], vec![2u8])].into())].into();
        assert_eq!(summary.root, Oracle::of(layout, &state, &TrieId::Main).root);
    }
}

// ---------------------------------------------------------------------------------------
// 4. The recorded layout, the empty root, empty values.

fn open_err(dir: &Path, layout: Option<LayoutName>) -> OpenError {
    match StateDb::open(dir, config_in(layout)) {
        Ok(_) => panic!("opened {} with {layout:?}", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn layout_is_recorded_and_empty_values_are_refused() {
    for layout in LAYOUTS {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(dir.path(), &config_in(Some(layout)));
        assert_eq!(db.layout(), layout);
        assert_eq!(db.head_root(), SUBSTRATE_EMPTY_ROOT);
        assert_eq!(Oracle::new(layout, &TrieState::new()).root, SUBSTRATE_EMPTY_ROOT);
        assert_eq!(db.trie_root(&STORAGE_A).unwrap(), SUBSTRATE_EMPTY_ROOT);
        // An absent key of the empty trie: an empty proof, which trie-db reads.
        let proof = db.prove(TrieId::Main, &[1, 2]).unwrap();
        Oracle::new(layout, &TrieState::new()).check_proof(&[vec![1, 2]], &proof).unwrap();

        // One block, then an empty value (alone, or with other writes, in any trie).
        let first: ChangeSet = [(TrieId::Main, [(vec![1u8], Some(vec![9u8; 40]))].into())].into();
        let info = db.commit(&first).unwrap();
        let head = (db.head_number(), db.head_root());
        assert_eq!(head, (1, info.root));
        for (trie, others) in [(TrieId::Main, false), (TrieId::Main, true), (STORAGE_B, true)] {
            let mut changes = ChangeSet::new();
            if others {
                changes.entry(TrieId::Main).or_default().insert(vec![2], Some(vec![3]));
                changes.entry(STORAGE_A).or_default().insert(vec![2], Some(vec![3]));
            }
            changes.entry(trie).or_default().insert(vec![5], Some(Vec::new()));
            match db.commit(&changes) {
                Err(CommitError::EmptyValue { trie: t, key, layout: l }) => {
                    assert_eq!((t, key, l), (trie, vec![5], layout))
                }
                other => panic!("{layout}: {other:?}"),
            }
            assert_eq!((db.head_number(), db.head_root()), head, "{layout}: head unchanged");
            assert_eq!(db.get(&TrieId::Main, &[2]).unwrap(), None);
            assert_eq!(db.trie_root(&STORAGE_A).unwrap(), SUBSTRATE_EMPTY_ROOT);
        }
        db.close().unwrap();

        // Reopen: without a layout it is the recorded one; another is refused.
        for other in LayoutName::ALL.into_iter().filter(|l| *l != layout) {
            match open_err(dir.path(), Some(other)) {
                OpenError::LayoutMismatch { recorded, requested } => {
                    assert_eq!((recorded, requested), (layout, other))
                }
                e => panic!("{layout} opened as {other}: {e}"),
            }
        }
        let db = open(dir.path(), &config_in(None));
        assert_eq!(db.layout(), layout);
        assert_eq!((db.head_number(), db.head_root()), head);
        db.close().unwrap();
        let db = open(dir.path(), &config_in(Some(layout)));
        assert_eq!(db.layout(), layout);
    }
    // An Ethereum database refuses the Substrate layouts.
    let dir = tempfile::tempdir().unwrap();
    open(dir.path(), &config_in(None)).close().unwrap();
    for other in LAYOUTS {
        assert!(matches!(
            open_err(dir.path(), Some(other)),
            OpenError::LayoutMismatch { recorded: LayoutName::Ethereum, requested } if requested == other
        ));
    }
}

// ---------------------------------------------------------------------------------------
// 5. A one-key trie with a 40-byte value.

fn single_key_in(layout: LayoutName) {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(Some(layout));
    let mut db = open(dir.path(), &config);
    let key = b"\x3a\x63\x6f\x64\x65".to_vec(); // ":code"
    let absent = [b"\x3a\x63\x6f".to_vec(), b"\x3a\x63\x6f\x64\x65\x00".to_vec(), vec![0x42]];
    let mut state = State::new();
    let mut states = vec![state.clone()];
    let steps: [Option<Vec<u8>>; 8] = [
        Some(vec![0xa1; 40]),
        Some(vec![0xa2; 40]),
        Some(vec![0xa3; 32]),
        Some(vec![0xa4; 33]),
        None,
        Some(vec![0xa5; 40]),
        Some(vec![0xa5; 40]),
        Some(vec![0xa6; 1]),
    ];
    let check = |db: &StateDb, state: &State, ctx: &str| {
        let oracle = Oracle::of(layout, state, &TrieId::Main);
        assert_eq!(db.head_root(), oracle.root, "{layout} {ctx}: root");
        let value = model_get(state, &TrieId::Main, &key);
        assert_eq!(db.get(&TrieId::Main, &key).unwrap().as_ref(), value, "{layout} {ctx}");
        let proof = db.prove(TrieId::Main, &key).unwrap();
        oracle.check_proof(std::slice::from_ref(&key), &proof).unwrap_or_else(|e| {
            panic!("{layout} {ctx}: {e}");
        });
        // The root leaf alone, and its value node in V1 for a value of 33 bytes or more.
        let nodes = match value {
            None => 0,
            Some(v) if layout == LayoutName::SubstrateV1 && v.len() >= 33 => 2,
            Some(_) => 1,
        };
        assert_eq!(proof.len(), nodes, "{layout} {ctx}: proof nodes");
        for k in &absent {
            let proof = db.prove(TrieId::Main, k).unwrap();
            oracle.check_proof(std::slice::from_ref(k), &proof).unwrap_or_else(|e| {
                panic!("{layout} {ctx}: absent {}: {e}", hex::encode(k));
            });
        }
        let all: Vec<Vec<u8>> = absent.iter().cloned().chain([key.clone()]).collect();
        let many = db.prove_many(TrieId::Main, &all).unwrap();
        oracle.check_proof(&all, &many).unwrap_or_else(|e| panic!("{layout} {ctx}: {e}"));
    };
    for (i, value) in steps.iter().enumerate() {
        let changes: ChangeSet = [(TrieId::Main, [(key.clone(), value.clone())].into())].into();
        let info = db.commit(&changes).unwrap();
        apply(&mut state, &changes);
        states.push(state.clone());
        assert_eq!(info.root, Oracle::of(layout, &state, &TrieId::Main).root, "{layout} step {i}");
        check(&db, &state, &format!("step {i}"));
    }
    db.flush().unwrap();
    db.close().unwrap();
    let mut db = open(dir.path(), &config_in(None));
    check(&db, &state, "reopened");
    // Revert through the value changes (each rewrites the root leaf), then on again.
    for back in 1..=4 {
        db.revert(1).unwrap();
        let state = &states[states.len() - 1 - back];
        check(&db, state, &format!("reverted {back}"));
    }
    let state = states[states.len() - 5].clone();
    let mut state2 = state.clone();
    let changes: ChangeSet = [(TrieId::Main, [(key.clone(), Some(vec![0xa7; 40]))].into())].into();
    db.commit(&changes).unwrap();
    apply(&mut state2, &changes);
    check(&db, &state2, "after the reverts");
    drop(db);
    let db = open(dir.path(), &config_in(None));
    check(&db, &state2, "reopened after a drop");
    let report = db.verify_deep().unwrap();
    assert!(report.ok(), "{layout}: {report:?}");
}

#[test]
fn single_key_with_a_40_byte_value() {
    for layout in LAYOUTS {
        single_key_in(layout);
    }
}
