//! Bad databases and bad input: another schema version, missing column families, garbage
//! in `meta`, corrupt history, a file or garbage where the database should be, a second
//! opener, tampered flat state, over-long keys. Each gives a typed [`StoreError`] with a
//! message (or a failing `verify`), never a panic.

use std::path::Path;

use rocksdb::{Options, DB};
use state::{ChangeSet, TrieId};
use store::{CommitError, Corruption, OpenError, RevertError, StateDb, StoreError};
use test_support::dir_snapshot;

use crate::common::{open, random_block, small_config};

fn raw_options(create: bool) -> Options {
    let mut o = Options::default();
    o.create_if_missing(create);
    o.create_missing_column_families(create);
    o
}

/// Open `path` with raw RocksDB and the given column families.
fn raw(path: &Path, families: &[&str]) -> DB {
    DB::open_cf(&raw_options(true), path, families).unwrap()
}

/// A healthy store with a few blocks, closed.
fn healthy(path: &Path) {
    let mut db = open(path, &small_config());
    for b in 1..=3 {
        db.commit(&random_block(7, b, 500, 50)).unwrap();
    }
    db.close().unwrap();
}

/// A healthy database whose first `flat` value was then overwritten behind the store's back.
fn healthy_with_tampered_flat(path: &Path) {
    healthy(path);
    let db = raw(path, &FAMILIES);
    let flat = db.cf_handle("flat").unwrap();
    let (key, _) = db.iterator_cf(flat, rocksdb::IteratorMode::Start).next().unwrap().unwrap();
    db.put_cf(flat, &key, b"tampered").unwrap();
}

fn open_err(path: &Path) -> OpenError {
    match StateDb::open(path, small_config()) {
        Ok(db) => panic!("opened {} at head {}", path.display(), db.head_number()),
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{e:?} has an empty message");
            e
        }
    }
}

const FAMILIES: [&str; 5] = ["flat", "nodes", "history", "meta", "code"];

/// Put `value` under `key` in column family `family` of a closed store.
fn put_raw(path: &Path, family: &str, key: &[u8], value: &[u8]) {
    let db = raw(path, &FAMILIES);
    db.put_cf(db.cf_handle(family).unwrap(), key, value).unwrap();
}

/// Put `value` (or delete, if `None`) under `key` in `meta` of a closed store.
fn poke_meta(path: &Path, key: &[u8], value: Option<&[u8]>) {
    let db = raw(path, &FAMILIES);
    let meta = db.cf_handle("meta").unwrap();
    match value {
        Some(v) => db.put_cf(meta, key, v).unwrap(),
        None => db.delete_cf(meta, key).unwrap(),
    }
}

#[test]
fn other_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    poke_meta(dir.path(), b"schema", Some(&2u32.to_be_bytes()));
    match open_err(dir.path()) {
        OpenError::SchemaMismatch { found: 2, expected: 1 } => {}
        e => panic!("expected SchemaMismatch, got {e:?}"),
    }

    // A database made by raw RocksDB with every family but a future schema.
    let dir = tempfile::tempdir().unwrap();
    let db = raw(dir.path(), &FAMILIES);
    db.put_cf(db.cf_handle("meta").unwrap(), b"schema", 9u32.to_be_bytes()).unwrap();
    drop(db);
    assert!(matches!(open_err(dir.path()), OpenError::SchemaMismatch { found: 9, .. }));
}

#[test]
fn missing_column_family() {
    // A database with data that lacks some of the families is refused.
    for present in [&["flat", "meta"][..], &["flat", "nodes", "history"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let db = raw(dir.path(), present);
        db.put_cf(db.cf_handle("flat").unwrap(), b"\x00key", b"value").unwrap();
        drop(db);
        match open_err(dir.path()) {
            OpenError::MissingColumnFamily { name, .. } => {
                assert!(!present.contains(&name), "{name} is present")
            }
            e => panic!("{present:?}: expected MissingColumnFamily, got {e:?}"),
        }
    }
    // So is a foreign database (a family Arbor does not know), even empty.
    let dir = tempfile::tempdir().unwrap();
    drop(raw(dir.path(), &["flat", "blobs"]));
    assert!(matches!(open_err(dir.path()), OpenError::MissingColumnFamily { .. }));

    // A store that lost a family after it was written.
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    let mut db = raw(dir.path(), &FAMILIES);
    db.drop_cf("history").unwrap();
    drop(db);
    assert!(matches!(open_err(dir.path()), OpenError::MissingColumnFamily { name: "history", .. }));
}

#[test]
fn interrupted_creation_is_finished() {
    // What a kill during creation leaves: some or all of Arbor's families, all empty, no
    // schema record. Opening finishes the creation.
    for present in [&[][..], &["flat", "meta"][..], &FAMILIES[..]] {
        let dir = tempfile::tempdir().unwrap();
        drop(raw(dir.path(), present));
        let mut db = open(dir.path(), &small_config());
        assert!(db.is_empty().unwrap(), "{present:?}");
        db.commit(&random_block(7, 1, 100, 10)).unwrap();
        db.close().unwrap();
        assert_eq!(open(dir.path(), &small_config()).head_number(), 1);
    }
    // Data without a schema record is not an Arbor database.
    let dir = tempfile::tempdir().unwrap();
    let db = raw(dir.path(), &FAMILIES);
    db.put(b"someone else's", b"data").unwrap();
    drop(db);
    assert!(matches!(open_err(dir.path()), OpenError::NotArbor { .. }));
}

#[test]
fn garbage_in_meta() {
    let cases: [(&[u8], Option<&[u8]>); 6] = [
        (b"head", Some(&[1, 2, 3])),
        (b"head", Some(&[0; 41])),
        (b"head", None),
        (b"schema", Some(&[0, 1])),
        (b"schema", Some(&[0, 0, 0, 1, 0])),
        (b"schema", None),
    ];
    for (key, value) in cases {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        poke_meta(dir.path(), key, value);
        let e = open_err(dir.path());
        let expected = match (key, value) {
            (b"head", Some(v)) => {
                matches!(e.corruption(), Some(Corruption::HeadRecord { len }) if *len == v.len())
            }
            (b"head", None) => matches!(e.corruption(), Some(Corruption::NoHead)),
            (_, Some(v)) => {
                matches!(e.corruption(), Some(Corruption::SchemaRecord { len }) if *len == v.len())
            }
            // Without its schema record the database has no head, below the block its
            // durable record names.
            (_, None) => {
                matches!(e.corruption(), Some(Corruption::RolledBack { head: None, number: 3, .. }))
            }
        };
        assert!(expected, "{key:?} = {value:?}: got {e:?}");
    }

    // A storage-trie root of the wrong length is reported when that root is read.
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    let mut root_key = b"root".to_vec();
    crate::common::STORAGE_A.write_prefix(&mut root_key);
    poke_meta(dir.path(), &root_key, Some(&[7; 5]));
    let db = open(dir.path(), &small_config());
    let e = db.trie_root(&crate::common::STORAGE_A).unwrap_err();
    assert!(matches!(e.corruption(), Some(Corruption::RootRecord { len: 5, .. })), "{e:?}");
    assert!(db.verify().is_err(), "verify with a corrupt root record");
}

#[test]
fn head_number_at_the_limit_is_corruption_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    let root = open(dir.path(), &small_config()).head_root();
    let mut head = u64::MAX.to_be_bytes().to_vec();
    head.extend_from_slice(&root.0);
    poke_meta(dir.path(), b"head", Some(&head));
    let mut db = open(dir.path(), &small_config());
    assert_eq!(db.head_number(), u64::MAX);
    let e = db.commit(&random_block(7, 4, 500, 5)).unwrap_err();
    assert!(
        matches!(&e, CommitError::Store(s)
            if matches!(s.corruption(), Some(Corruption::HeadNumber { number: u64::MAX }))),
        "{e:?}"
    );
    for n in [1, u64::MAX] {
        let e = db.revert(n).unwrap_err();
        assert!(matches!(e, RevertError::Pruned { .. }), "{n}: {e:?}");
    }
    assert_eq!(db.head_number(), u64::MAX);
}

#[test]
fn corrupt_history_fails_revert() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    {
        let db = raw(dir.path(), &FAMILIES);
        let h = db.cf_handle("history").unwrap();
        db.put_cf(h, 3u64.to_be_bytes(), [1, 0, 0, 0, 9, 0]).unwrap();
    }
    let mut db = open(dir.path(), &small_config());
    let root = db.head_root();
    let e = db.revert(1).unwrap_err();
    assert!(
        matches!(&e, RevertError::Store(s)
            if matches!(s.corruption(), Some(Corruption::History { number: 3, .. }))),
        "{e:?}"
    );
    assert!(!e.to_string().is_empty());
    assert_eq!((db.head_number(), db.head_root()), (3, root));
    assert!(db.verify().unwrap().ok());
}

/// `verify --deep` reads every reverse diff (the sweep found a damaged one passed it, to
/// fail only at a revert): one that does not decode, one without its parent's head record,
/// and a key that is not a block number are each reported, where `verify` stays ok.
#[test]
fn deep_verify_reads_every_reverse_diff() {
    let head_record_only = {
        let mut d = store::test_hooks::ReverseDiff::new();
        d.record(store::test_hooks::Column::Flat, vec![1], None);
        d.encode()
    };
    let cases: [(&[u8], Vec<u8>); 3] = [
        (&2u64.to_be_bytes(), vec![1, 0, 0, 0, 9, 0]),
        (&1u64.to_be_bytes(), head_record_only),
        (&[0u8], vec![]),
    ];
    for (i, (key, value)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        {
            let db = raw(dir.path(), &FAMILIES);
            db.put_cf(db.cf_handle("history").unwrap(), key, value).unwrap();
        }
        let db = open(dir.path(), &small_config());
        assert!(db.verify().unwrap().ok());
        let e = db.verify_deep().unwrap_err();
        let found = e.corruption();
        let expected = match i {
            0 => matches!(found, Some(Corruption::History { number: 2, .. })),
            1 => matches!(found, Some(Corruption::HistoryHead { number: 1 })),
            _ => matches!(found, Some(Corruption::HistoryKey { .. })),
        };
        assert!(expected, "case {i}: {e:?}");
    }
}

#[test]
fn not_a_database() {
    // A plain file where the directory should be.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a database").unwrap();
    let e = open_err(&file);
    assert!(matches!(e, OpenError::CreateDir { .. } | OpenError::Rocks(_)), "{e:?}");

    // A directory whose CURRENT file is garbage.
    let garbage = dir.path().join("garbage");
    std::fs::create_dir(&garbage).unwrap();
    std::fs::write(garbage.join("CURRENT"), b"\x00\xffMANIFEST-garbage").unwrap();
    std::fs::write(garbage.join("MANIFEST-000001"), [0xa5; 300]).unwrap();
    assert!(matches!(open_err(&garbage), OpenError::Rocks(_)));

    // A healthy store whose manifest was overwritten: RocksDB may fail, or list only the
    // default family.
    let damaged = dir.path().join("damaged");
    healthy(&damaged);
    for entry in std::fs::read_dir(&damaged).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("MANIFEST-") {
            std::fs::write(&path, [0x5a; 100]).unwrap();
        }
    }
    let e = open_err(&damaged);
    assert!(matches!(e, OpenError::Rocks(_) | OpenError::MissingColumnFamily { .. }), "{e:?}");

    // A path inside a file.
    let e = open_err(&file.join("db"));
    assert!(matches!(e, OpenError::CreateDir { .. } | OpenError::Rocks(_)), "{e:?}");
}

#[test]
fn second_opener_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    db.commit(&random_block(5, 1, 200, 20)).unwrap();
    db.flush().unwrap();
    let e = open_err(dir.path());
    assert!(matches!(e, OpenError::InUse { .. }), "{e:?}");
    assert!(e.to_string().contains("is in use: another open handle"), "{e}");
    // Other spellings of the same directory are the same database.
    let link = dir.path().with_extension("link");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    for alias in [dir.path().join(""), dir.path().join("."), link.clone()] {
        let e = open_err(&alias);
        assert!(matches!(e, OpenError::InUse { .. }), "{}: {e:?}", alias.display());
    }
    std::fs::remove_file(&link).unwrap();
    // A read-only opener is not refused: it sees the persisted state and writes nothing.
    let ro = StateDb::open_read_only(dir.path(), small_config()).unwrap();
    assert_eq!(ro.head_root(), db.head_root());
    assert!(ro.is_read_only());
    assert!(ro.verify().unwrap().ok());
    drop(ro);
    drop(db);
    open(dir.path(), &small_config());
}

#[test]
fn read_only_opening_writes_nothing_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    let before = dir_snapshot(dir.path());
    let mut ro = StateDb::open_read_only(dir.path(), small_config()).unwrap();
    assert!(ro.verify_deep().unwrap().ok());
    assert!(ro.get(&TrieId::Main, &[1, 2, 3]).unwrap().is_none());
    assert!(matches!(
        ro.commit(&random_block(7, 4, 10, 5)),
        Err(CommitError::Store(StoreError::ReadOnly))
    ));
    assert!(matches!(ro.revert(1), Err(RevertError::Store(StoreError::ReadOnly))));
    assert!(matches!(ro.repair(), Err(StoreError::ReadOnly)));
    ro.close().unwrap();
    assert_eq!(dir_snapshot(dir.path()), before, "a read-only opening changed the directory");
    // A directory without a database is not created.
    let empty = tempfile::tempdir().unwrap();
    assert!(StateDb::open_read_only(&empty.path().join("none"), small_config()).is_err());
    assert!(!empty.path().join("none").exists());
}

#[test]
fn invalid_config_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config();
    config.layers.history_depth = 0;
    let e = StateDb::open(dir.path(), config).err().unwrap();
    assert!(matches!(e, OpenError::Config(_)), "{e:?}");
    assert!(e.to_string().contains("history_depth"), "{e}");
}

#[test]
fn zero_block_cache_is_allowed() {
    // `block_cache_bytes = 0` disables the cache, as the config documents.
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config();
    config.rocksdb.block_cache_bytes = 0;
    let mut db = StateDb::open(dir.path(), config.clone()).unwrap();
    db.commit(&random_block(9, 1, 200, 20)).unwrap();
    db.close().unwrap();
    assert!(StateDb::open(dir.path(), config).unwrap().verify().unwrap().ok());
}

#[test]
fn tampered_flat_state_fails_verify() {
    let dir = tempfile::tempdir().unwrap();
    healthy_with_tampered_flat(dir.path());
    let db = open(dir.path(), &small_config());
    let report = db.verify().unwrap();
    assert!(!report.ok(), "{report:?}");
}

/// Records outside every trie (a flat key before the main trie's or after the storage
/// tries', a node key of no trie or of a trie the state does not hold) and a head moved
/// past its history: `verify` (and `verify_deep` for nodes) reports each as corruption.
#[test]
fn stray_records_and_a_moved_head_fail_verify() {
    let corruption = |e: StoreError| e.corruption().cloned().unwrap_or_else(|| panic!("{e:?}"));
    for key in [&b""[..], b"\x07abc", b"\xff"] {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        put_raw(dir.path(), "flat", key, b"v");
        let e = open(dir.path(), &small_config()).verify().unwrap_err();
        assert!(matches!(corruption(e), Corruption::FlatKey { .. }), "{key:?}");
    }
    let mut storage = vec![0x01];
    storage.extend_from_slice(&[0x22; 32]);
    storage.push(0);
    for key in [&b""[..], b"\x01\x22", b"\x05", &storage] {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        put_raw(dir.path(), "nodes", key, &[0u8; 40]);
        let db = open(dir.path(), &small_config());
        assert!(db.verify().unwrap().ok(), "{key:?}: nodes are not part of the roots");
        let e = db.verify_deep().unwrap_err();
        assert!(matches!(corruption(e), Corruption::NodeKey { .. }), "{key:?}");
    }
    for number in [2u64, 8, u64::MAX - 1] {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        let root = open(dir.path(), &small_config()).head_root();
        let mut head = number.to_be_bytes().to_vec();
        head.extend_from_slice(&root.0);
        poke_meta(dir.path(), b"head", Some(&head));
        if number < 3 {
            // Below the durable record: refused at open. Without the record (a database of
            // an older build), `verify` still finds the moved head.
            let e = open_err(dir.path());
            let found = e.corruption();
            let rolled = matches!(found, Some(Corruption::RolledBack { number: 3, root: r, .. }) if *r == root);
            assert!(rolled, "{e:?}");
            std::fs::remove_file(dir.path().join("ARBOR-DURABLE")).unwrap();
        }
        let e = open(dir.path(), &small_config()).verify().unwrap_err();
        let want = Corruption::HistoryNewest { head: number, newest: 3 };
        assert_eq!(corruption(e).to_string(), want.to_string());
    }
}

#[test]
fn over_long_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    db.commit(&random_block(3, 1, 100, 20)).unwrap();
    let root = db.head_root();
    let long = vec![0x42; 128];
    let mut changes = ChangeSet::new();
    changes.entry(TrieId::Main).or_default().insert(vec![0x01], Some(vec![1]));
    changes.entry(TrieId::Main).or_default().insert(long.clone(), Some(vec![1]));
    let e = db.commit(&changes).unwrap_err();
    assert!(matches!(e, CommitError::KeyTooLong { len: 128, .. }), "{e:?}");
    assert!(matches!(db.get(&TrieId::Main, &long), Err(StoreError::KeyTooLong { .. })));
    // Nothing of the refused block is visible, and the store still commits.
    assert_eq!((db.head_number(), db.head_root()), (1, root));
    assert_eq!(db.get(&TrieId::Main, &[0x01]).unwrap(), None);
    changes.get_mut(&TrieId::Main).unwrap().remove(&long);
    changes.get_mut(&TrieId::Main).unwrap().insert(vec![0x42; 127], Some(vec![2]));
    db.commit(&changes).unwrap();
    assert_eq!(db.get(&TrieId::Main, &[0x42; 127]).unwrap(), Some(vec![2]));
    assert!(db.verify().unwrap().ok());
}

#[test]
fn forged_history_value_fails_revert_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut db = open(dir.path(), &small_config());
        db.commit(&random_block(5, 1, 300, 40)).unwrap();
        db.commit(&random_block(5, 2, 300, 40)).unwrap();
        db.close().unwrap();
    }
    {
        // A well-formed reverse diff whose first flat entry restores a value the block
        // never replaced: the recomputed root cannot match the recorded parent root.
        let db = raw(dir.path(), &FAMILIES);
        let h = db.cf_handle("history").unwrap();
        let raw_diff = db.get_cf(h, 2u64.to_be_bytes()).unwrap().unwrap();
        let mut forged = store::test_hooks::ReverseDiff::new();
        let mut done = false;
        for (col, key, old) in store::test_hooks::ReverseDiff::decode(&raw_diff).unwrap() {
            let old = if !done && col == store::test_hooks::Column::Flat {
                done = true;
                Some(b"forged".to_vec())
            } else {
                old
            };
            forged.record(col, key, old);
        }
        assert!(done, "block 2 changed flat state");
        db.put_cf(h, 2u64.to_be_bytes(), forged.encode()).unwrap();
    }
    let mut db = open(dir.path(), &small_config());
    let head = (db.head_number(), db.head_root());
    let e = db.revert(1).unwrap_err();
    assert!(
        matches!(&e, RevertError::Store(s)
            if matches!(s.corruption(), Some(Corruption::RevertRoot { number: 2, .. }))),
        "{e:?}"
    );
    assert_eq!((db.head_number(), db.head_root()), head);
    assert!(db.verify().unwrap().ok());
}

#[test]
fn wrong_prior_values_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    let first = random_block(11, 1, 400, 300);
    db.commit(&first).unwrap();
    let head = (db.head_number(), db.head_root());
    // A key that exists, one that does not.
    let (t, kv) = first.iter().next().unwrap();
    let present = kv.iter().find(|(_, v)| v.is_some()).unwrap().0.clone();
    let absent = vec![0xfe; 32];
    let value = |b: u8| Some(vec![b; 40]);
    let block = |k: &Vec<u8>| ChangeSet::from([(*t, [(k.clone(), value(1))].into())]);
    let prior = |k: &Vec<u8>, v: Option<Vec<u8>>| ChangeSet::from([(*t, [(k.clone(), v)].into())]);
    let wrong = [
        (block(&present), prior(&present, None)),
        (block(&present), prior(&present, value(9))),
        (block(&absent), prior(&absent, value(7))),
    ];
    for (changes, prior) in &wrong {
        let e = db.commit_with_prior(changes, prior).unwrap_err();
        assert!(matches!(e, CommitError::PriorMismatch { .. }), "{e:?}");
        assert_eq!((db.head_number(), db.head_root()), head);
    }
    let e = db.commit_with_prior(&block(&absent), &ChangeSet::new()).unwrap_err();
    assert!(matches!(e, CommitError::MissingPrior { .. }), "{e:?}");
    // The right priors commit, to the root a plain commit gives.
    let good = prior(&absent, None);
    let info = db.commit_with_prior(&block(&absent), &good).unwrap();
    db.revert(1).unwrap();
    assert_eq!(db.commit(&block(&absent)).unwrap().root, info.root);
    assert!(db.verify().unwrap().ok());
}

/// Damage one stored node of a healthy store in `how` ("corrupt", "delete" or "stray").
fn damage_node(path: &Path, how: &str) {
    let db = raw(path, &FAMILIES);
    let nodes = db.cf_handle("nodes").unwrap();
    // A node below the root (the second key of the main trie's range).
    let mut it = db.iterator_cf(nodes, rocksdb::IteratorMode::Start);
    it.next();
    let (key, value) = it.next().unwrap().unwrap();
    match how {
        "corrupt" => {
            let mut v = value.to_vec();
            let last = v.len() - 1;
            v[last] ^= 0x5a;
            db.put_cf(nodes, &key, v).unwrap();
        }
        "delete" => db.delete_cf(nodes, &key).unwrap(),
        _ => {
            let mut k = key.to_vec();
            k.push(0x77);
            db.put_cf(nodes, k, value).unwrap();
        }
    }
}

#[test]
fn deep_verify_finds_damaged_nodes_and_repair_rebuilds_them() {
    for how in ["corrupt", "delete", "stray"] {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        let root = open(dir.path(), &small_config()).head_root();
        damage_node(dir.path(), how);
        let mut db = open(dir.path(), &small_config());
        // The roots still come out right from flat state; only the deep check sees it.
        assert!(db.verify().unwrap().ok(), "{how}");
        let deep = db.verify_deep().unwrap();
        assert!(!deep.ok(), "{how}: {deep:?}");
        let bad = &deep.bad_tries[0];
        assert_eq!(bad.trie, TrieId::Main);
        let expected = match how {
            "corrupt" => (1, 0, 0),
            "delete" => (0, 1, 0),
            _ => (0, 0, 1),
        };
        assert_eq!((bad.differing, bad.missing, bad.extra), expected, "{how}: {bad:?}");
        assert!(db.repair().unwrap() > 0);
        let deep = db.verify_deep().unwrap();
        assert!(deep.ok(), "{how} after repair: {deep:?}");
        assert_eq!(db.head_root(), root);
        // It commits on, and a reopened store agrees.
        let info = db.commit(&random_block(7, 4, 500, 50)).unwrap();
        db.close().unwrap();
        let db = open(dir.path(), &small_config());
        assert_eq!(db.head_root(), info.root);
        assert!(db.verify_deep().unwrap().ok());
    }
}

#[test]
fn repair_refuses_damaged_flat_state() {
    let dir = tempfile::tempdir().unwrap();
    healthy_with_tampered_flat(dir.path());
    let mut db = open(dir.path(), &small_config());
    let e = db.repair().unwrap_err();
    assert!(
        matches!(e, StoreError::Corrupt(ref c) if matches!(**c, Corruption::FlatRoot { .. })),
        "{e}"
    );
}
