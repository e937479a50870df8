//! Bulk loads: the result equals the model, an interrupted load is reported as unfinished
//! (reads, commits, reverts and verify refuse it; another load is refused; the same load
//! finishes it), loads need an empty database, and `verify` checks every storage trie
//! that has flat entries, with or without a root record.

use std::path::Path;

use state::TrieId;
use store::{BulkError, CommitError, RevertError, StateDb, StoreError};
use trie::EMPTY_ROOT;

use crate::common::{
    indexed_key, model_root, open, random_block, small_config, State, STORAGE_A, STORAGE_B,
};

/// Bulk-load entries: `(trie, key, value)`.
type Entries = Vec<(TrieId, Vec<u8>, Vec<u8>)>;

/// `n` entries spread over the main trie and two storage tries, and the model's state.
fn entries(n: u32) -> (Entries, State) {
    let mut out = Vec::new();
    let mut state = State::new();
    for i in 0..n {
        let trie = [TrieId::Main, STORAGE_A, STORAGE_B][(i % 3) as usize];
        let (k, v) = (indexed_key(i), i.to_be_bytes().repeat(1 + (i % 5) as usize));
        state.entry(trie).or_default().insert(k.clone(), v.clone());
        out.push((trie, k, v));
    }
    (out, state)
}

fn unfinished(e: &StoreError, want: &str) -> bool {
    matches!(e, StoreError::UnfinishedBulkLoad { label } if label == want)
}

#[test]
fn bulk_load_equals_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (entries, state) = entries(3_000);
    let mut db = open(dir.path(), &small_config());
    assert!(db.is_empty().unwrap());
    let summary = db.bulk_load("three tries", entries).unwrap();
    assert_eq!(summary.root, model_root(&state, &TrieId::Main));
    assert_eq!(summary.entries, 3_000);
    for t in [STORAGE_A, STORAGE_B] {
        assert!(summary.roots.contains(&(t, model_root(&state, &t))), "{t:?}");
        assert_eq!(db.trie_root(&t).unwrap(), model_root(&state, &t));
    }
    assert_eq!((db.head_number(), db.unfinished_bulk_load()), (0, None));
    let report = db.verify().unwrap();
    assert!(report.ok() && report.tries_checked == 2, "{report:?}");
    db.close().unwrap();

    // A second load, of anything, is refused: the database is not empty.
    let mut db = open(dir.path(), &small_config());
    let e = db.bulk_load("three tries", entries_small()).unwrap_err();
    assert!(matches!(e, BulkError::NotEmpty { head: 0 }), "{e:?}");
    db.commit(&random_block(1, 1, 3_000, 50)).unwrap();
    assert!(matches!(
        db.bulk_load("other", entries_small()).unwrap_err(),
        BulkError::NotEmpty { head: 1 }
    ));
}

fn entries_small() -> Entries {
    entries(10).0
}

/// Begin a load, write half of `entries`, and drop it (as a kill would leave it, minus
/// the unsynced tail).
fn interrupt(dir: &Path, label: &str, entries: &[(TrieId, Vec<u8>, Vec<u8>)]) {
    let mut db = open(dir, &small_config());
    let mut load = db.begin_bulk_load(label).unwrap();
    for (t, k, v) in &entries[..entries.len() / 2] {
        load.put(t, k, v).unwrap();
    }
    drop(load);
    db.close().unwrap();
}

#[test]
fn interrupted_load_is_reported_and_finished_only_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (entries, state) = entries(2_000);
    interrupt(dir.path(), "genesis A", &entries);

    let mut db = open(dir.path(), &small_config());
    assert_eq!(db.unfinished_bulk_load(), Some("genesis A"));
    assert!(!db.is_empty().unwrap());
    assert_eq!(db.stats().unfinished_bulk_load.as_deref(), Some("genesis A"));
    assert!(unfinished(&db.verify().unwrap_err(), "genesis A"));
    assert!(unfinished(&db.get(&TrieId::Main, &indexed_key(0)).unwrap_err(), "genesis A"));
    assert!(unfinished(&db.trie_root(&STORAGE_A).unwrap_err(), "genesis A"));
    match db.commit(&random_block(1, 1, 100, 10)).unwrap_err() {
        CommitError::Store(e) => assert!(unfinished(&e, "genesis A")),
        e => panic!("{e:?}"),
    }
    match db.revert(0).unwrap_err() {
        RevertError::Store(e) => assert!(unfinished(&e, "genesis A")),
        e => panic!("{e:?}"),
    }
    match db.begin_bulk_load("genesis B").err().unwrap() {
        BulkError::OtherUnfinished { found, requested } => {
            assert_eq!((found.as_str(), requested.as_str()), ("genesis A", "genesis B"))
        }
        e => panic!("{e:?}"),
    }
    db.close().unwrap();

    // The same load, started over on the partial state, gives the full state.
    let mut db = open(dir.path(), &small_config());
    let summary = db.bulk_load("genesis A", entries).unwrap();
    assert_eq!(summary.root, model_root(&state, &TrieId::Main));
    assert!(db.verify().unwrap().ok());
    db.close().unwrap();
    let db = open(dir.path(), &small_config());
    assert_eq!(db.unfinished_bulk_load(), None);
    assert_eq!(db.head_root(), model_root(&state, &TrieId::Main));
    assert_eq!(db.trie_root(&STORAGE_B).unwrap(), model_root(&state, &STORAGE_B));
}

#[test]
fn a_restart_forgets_entries_the_interrupted_load_wrote() {
    // The interrupted load wrote keys the restarted one does not: they must be gone.
    let dir = tempfile::tempdir().unwrap();
    let (entries, _) = entries(600);
    interrupt(dir.path(), "same label", &entries);
    let (fewer, state) = self::entries(90);
    let mut db = open(dir.path(), &small_config());
    let summary = db.bulk_load("same label", fewer).unwrap();
    assert_eq!(summary.root, model_root(&state, &TrieId::Main));
    assert!(db.verify().unwrap().ok());
    assert_eq!(db.get(&TrieId::Main, &indexed_key(150)).unwrap(), None);
}

#[test]
fn a_database_opened_for_a_load_is_born_with_it_unfinished() {
    // Created by open_for_load, the database holds the load unfinished from its birth: no
    // moment at which it is finished and empty.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = StateDb::open_for_load(&path, small_config(), "genesis A").unwrap();
    assert_eq!(db.unfinished_bulk_load(), Some("genesis A"));
    assert!(unfinished(&db.verify().unwrap_err(), "genesis A"));
    db.close().unwrap();
    let read_only = StateDb::open_read_only(&path, small_config()).unwrap();
    assert_eq!(read_only.unfinished_bulk_load(), Some("genesis A"));
    drop(read_only);
    // Another label does not touch an existing database; the load itself finishes it.
    let mut db = StateDb::open_for_load(&path, small_config(), "genesis B").unwrap();
    assert_eq!(db.unfinished_bulk_load(), Some("genesis A"));
    let (entries, state) = entries(300);
    assert!(matches!(
        db.bulk_load("genesis B", entries.clone()).unwrap_err(),
        BulkError::OtherUnfinished { .. }
    ));
    assert_eq!(db.bulk_load("genesis A", entries).unwrap().root, model_root(&state, &TrieId::Main));
    assert!(db.verify().unwrap().ok());
    // A label over the bound is refused before anything is created.
    let long = "x".repeat(store::BULK_LABEL_BYTES_MAX + 1);
    let other = dir.path().join("other");
    let e = StateDb::open_for_load(&other, small_config(), &long).err().unwrap();
    assert!(matches!(e, store::OpenError::LabelTooLong { .. }), "{e:?}");
    assert!(!other.exists());
}

#[test]
fn labels_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    let long = "x".repeat(store::BULK_LABEL_BYTES_MAX + 1);
    assert!(matches!(db.begin_bulk_load(&long).err().unwrap(), BulkError::LabelTooLong { .. }));
    assert!(db.is_empty().unwrap(), "a refused load writes nothing");
}

#[test]
fn verify_checks_storage_tries_without_root_records() {
    let dir = tempfile::tempdir().unwrap();
    let (entries, _) = entries(300);
    {
        let mut db = open(dir.path(), &small_config());
        db.bulk_load("with storage", entries).unwrap();
        db.close().unwrap();
    }
    let orphan = TrieId::Storage(state::H256([0x77; 32]));
    {
        // Flat entries of a trie that has no root record (nothing the store wrote).
        let raw = rocksdb::DB::open_cf(
            &rocksdb::Options::default(),
            dir.path(),
            ["flat", "nodes", "history", "meta", "code"],
        )
        .unwrap();
        let mut key = orphan.prefix();
        key.extend_from_slice(&[0x12; 32]);
        raw.put_cf(raw.cf_handle("flat").unwrap(), key, b"stray").unwrap();
    }
    let db = StateDb::open(dir.path(), small_config()).unwrap();
    let report = db.verify().unwrap();
    assert!(!report.ok(), "{report:?}");
    assert_eq!(report.tries_checked, 3);
    let m = &report.trie_mismatches;
    assert!(m.len() == 1 && m[0].trie == orphan && m[0].stored == EMPTY_ROOT, "{m:?}");
}

/// `abandon_restore` deletes an unfinished load of its label and its marker, leaving an
/// empty database another label may take; another label, or no unfinished load, is
/// refused and changes nothing.
#[test]
fn an_abandoned_load_leaves_an_empty_database() {
    let dir = tempfile::tempdir().unwrap();
    interrupt(dir.path(), "first", &entries_small());
    let mut db = open(dir.path(), &small_config());
    assert!(matches!(db.abandon_restore("other"), Err(BulkError::OtherUnfinished { .. })));
    assert_eq!(db.unfinished_bulk_load(), Some("first"));
    db.abandon_restore("first").unwrap();
    assert_eq!(db.unfinished_bulk_load(), None);
    assert!(db.is_empty().unwrap());
    assert!(matches!(db.abandon_restore("first"), Err(BulkError::NotEmpty { .. })));
    db.close().unwrap();
    let mut db = open(dir.path(), &small_config());
    assert!(db.is_empty().unwrap(), "the abandonment was not durable");
    db.bulk_load("second", entries_small()).unwrap();
    assert!(db.verify().unwrap().ok());
}
