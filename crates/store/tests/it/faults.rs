//! Injected write failures: a block whose write fails poisons the store (clear errors on
//! flush, commit, revert and close), the blocks before it stay intact on disk, and a
//! failed revert changes nothing.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, TrieId};
use store::{CommitError, RevertError, StoreError};
use trie::{verify_proof, EthLayout, EMPTY_ROOT};

use crate::common::{
    apply, assert_matches_model, indexed_key, model_get, model_root, open, random_block,
    small_config, test_seed, State, STORAGE_A,
};

const KEYS: u32 = 2_000;
const UPDATES: usize = 100;

/// Every key the random blocks can touch, in both tries they use.
fn all_keys() -> Vec<(TrieId, Vec<u8>)> {
    (0..KEYS)
        .step_by(7)
        .flat_map(|i| [(TrieId::Main, indexed_key(i)), (STORAGE_A, indexed_key(i))])
        .collect()
}

/// The store-level error inside an operation's error, if it is one.
trait AsStore: std::error::Error {
    fn store(&self) -> Option<&StoreError>;
}

impl AsStore for StoreError {
    fn store(&self) -> Option<&StoreError> {
        Some(self)
    }
}

impl AsStore for CommitError {
    fn store(&self) -> Option<&StoreError> {
        match self {
            CommitError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl AsStore for RevertError {
    fn store(&self) -> Option<&StoreError> {
        match self {
            RevertError::Store(e) => Some(e),
            _ => None,
        }
    }
}

fn poison_message_ok(e: &impl AsStore, block: u64) {
    let msg = e.to_string();
    assert!(
        matches!(e.store(), Some(StoreError::Poisoned { number, .. }) if *number == block),
        "expected Poisoned at block {block}, got {e:?}"
    );
    assert!(
        msg.contains("poisoned")
            && msg.contains(&format!("block {block}"))
            && msg.contains("injected"),
        "{msg}"
    );
}

#[test]
fn failed_write_poisons_until_reopen() {
    let seed = test_seed("failed_write_poisons_until_reopen");
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    let mut db = open(dir.path(), &config);
    let mut states = vec![State::new()];
    let commit = |db: &mut store::StateDb, states: &mut Vec<State>, number: u64| {
        let changes = random_block(seed, number, KEYS, UPDATES);
        let info = db.commit(&changes).unwrap();
        let mut next = states.last().unwrap().clone();
        apply(&mut next, &changes);
        assert_eq!(info.root, model_root(&next, &TrieId::Main), "block {number}");
        states.push(next);
    };
    for b in 1..=5 {
        commit(&mut db, &mut states, b);
    }
    db.flush().unwrap();
    let head = db.head_number();
    assert_eq!(head, 5);

    db.faults().fail_writes_from(head + 2);
    commit(&mut db, &mut states, head + 1);
    // The commit itself succeeds: the block is an in-memory layer; its write fails later.
    commit(&mut db, &mut states, head + 2);
    let e = db.flush().unwrap_err();
    poison_message_ok(&e, head + 2);
    let e = db.commit(&random_block(seed, head + 3, KEYS, UPDATES)).unwrap_err();
    poison_message_ok(&e, head + 2);
    let e = db.revert(1).unwrap_err();
    poison_message_ok(&e, head + 2);
    assert!(db.verify().is_err(), "verify on a poisoned store");
    // Reads still answer (from layers and disk) without panicking.
    for (t, k) in all_keys().iter().take(50) {
        db.get(t, k).unwrap();
    }
    let e = db.close().unwrap_err();
    poison_message_ok(&e, head + 2);

    // Reopened: the last block written is the head, intact.
    let mut db = open(dir.path(), &config);
    let state = &states[(head + 1) as usize];
    assert_matches_model(&db, state, head + 1, &all_keys(), "after reopen");
    let report = db.verify().unwrap();
    assert!(report.ok(), "{report:?}");

    // Writes work again; block head+2 is committed afresh.
    states.truncate((head + 2) as usize);
    commit(&mut db, &mut states, head + 2);
    db.flush().unwrap();
    assert_matches_model(&db, states.last().unwrap(), head + 2, &all_keys(), "after recommit");
    db.close().unwrap();
    let db = open(dir.path(), &config);
    assert_matches_model(&db, states.last().unwrap(), head + 2, &all_keys(), "after second reopen");
    assert!(db.verify().unwrap().ok());
}

#[test]
fn failed_first_block_leaves_empty_database() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    let mut db = open(dir.path(), &config);
    db.faults().fail_writes_from(0);
    db.commit(&random_block(1, 1, KEYS, UPDATES)).unwrap();
    poison_message_ok(&db.flush().unwrap_err(), 1);
    drop(db);
    let db = open(dir.path(), &config);
    assert_eq!(db.head_number(), 0);
    assert_eq!(db.head_root(), EMPTY_ROOT);
    assert_eq!(db.trie_root(&STORAGE_A).unwrap(), EMPTY_ROOT);
    assert!(db.verify().unwrap().ok());
}

#[test]
fn failed_revert_changes_nothing() {
    let seed = test_seed("failed_revert_changes_nothing");
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    let mut db = open(dir.path(), &config);
    let mut states = vec![State::new()];
    for b in 1..=6 {
        let changes = random_block(seed, b, KEYS, UPDATES);
        db.commit(&changes).unwrap();
        let mut next = states.last().unwrap().clone();
        apply(&mut next, &changes);
        states.push(next);
    }
    db.flush().unwrap();
    db.faults().fail_writes_from(db.head_number());
    let e = db.revert(2).unwrap_err();
    assert!(e.to_string().contains("injected"), "{e}");
    assert_matches_model(&db, &states[6], 6, &all_keys(), "after failed revert");
    db.close().unwrap();

    let mut db = open(dir.path(), &config);
    assert_matches_model(&db, &states[6], 6, &all_keys(), "reopened after failed revert");
    assert!(db.verify().unwrap().ok());
    db.revert(2).unwrap();
    assert_matches_model(&db, &states[4], 4, &all_keys(), "after revert");
    db.close().unwrap();
    let db = open(dir.path(), &config);
    assert_matches_model(&db, &states[4], 4, &all_keys(), "reopened after revert");
    assert!(db.verify().unwrap().ok());
}

/// A write failure freezes the failed block as an in-memory layer over a disk that does
/// not have it. That is the state every block is in between `commit` and its write, so
/// reads and proofs through it must match the model, deterministically.
///
/// The block deletes 100 keys that share a prefix with one survivor, so the survivor's
/// leaf moves up to a path under which the disk still holds the 100 stale keys.
#[test]
fn reads_through_an_unpersisted_layer() {
    let seed = test_seed("reads_through_an_unpersisted_layer");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    let mut db = open(dir.path(), &config);
    let mut value = || -> Vec<u8> { (0..rng.gen_range(40..80)).map(|_| rng.gen()).collect() };
    let stale: Vec<Vec<u8>> = (0..100u8).map(|i| vec![0x55, i, 0x01]).collect();
    let survivor = vec![0x55, 0xf0, 0x02];
    let others = [vec![0x10], vec![0x20, 0x01], vec![0x99; 32]];
    let mut first = ChangeSet::new();
    let main = first.entry(TrieId::Main).or_default();
    for k in stale.iter().chain([&survivor]).chain(others.iter()) {
        main.insert(k.clone(), Some(value()));
    }
    db.commit(&first).unwrap();
    db.flush().unwrap();
    let mut state = State::new();
    apply(&mut state, &first);

    db.faults().fail_writes_from(2);
    let mut second = ChangeSet::new();
    second.entry(TrieId::Main).or_default().extend(stale.iter().map(|k| (k.clone(), None)));
    db.commit(&second).unwrap();
    apply(&mut state, &second);
    poison_message_ok(&db.flush().unwrap_err(), 2);

    let root = model_root(&state, &TrieId::Main);
    assert_eq!(db.head_root(), root);
    for k in stale.iter().take(3).chain([&survivor]).chain(others.iter()) {
        assert_eq!(db.get(&TrieId::Main, k).unwrap().as_ref(), model_get(&state, &TrieId::Main, k));
        let proof =
            db.prove(TrieId::Main, k).unwrap_or_else(|e| panic!("prove {}: {e}", hex::encode(k)));
        let proven = verify_proof::<EthLayout>(&root, k, &proof).unwrap();
        assert_eq!(
            proven.as_ref(),
            model_get(&state, &TrieId::Main, k),
            "proof of {}",
            hex::encode(k)
        );
    }
}
