//! Trie nodes behind the block: a database left with its nodes at an older block than its
//! head (the node watermark) catches up on open, read-only or not, to the head's recorded
//! roots; a reverse diff altered or missing in the lag window fails the open as
//! corruption; a write-back that fails poisons the store and leaves a committed block.

use std::path::Path;
use std::time::{Duration, Instant};

use rocksdb::{Options, DB};
use state::TrieId;
use store::test_hooks::{Column, ReverseDiff};
use store::{StateDb, StoreConfig, StoreError};
use trie::{verify_proof, EthLayout};

use crate::common::{
    apply, indexed_key, model_get, model_root, open, random_block, small_config, State, STORAGE_A,
};

const KEYS: u32 = 3_000;
const UPDATES: usize = 150;
const FAMILIES: [&str; 5] = ["flat", "nodes", "history", "meta", "code"];

/// Groups of two blocks, a node buffer that never fills: nodes lag until a flush.
fn lag_config() -> StoreConfig {
    let mut c = small_config();
    c.layers.persist_blocks = 2;
    c.layers.node_buffer_bytes = 64 << 20;
    c
}

/// Commit blocks `from..=to` of `seed` to `db` and the model.
fn commit(db: &mut StateDb, model: &mut State, seed: u64, from: u64, to: u64) {
    for b in from..=to {
        let block = random_block(seed, b, KEYS, UPDATES);
        db.commit(&block).unwrap();
        apply(model, &block);
    }
}

/// A database at head `blocks` whose nodes on disk lag it; returns the model and the
/// watermark.
fn lagging(path: &Path, seed: u64, blocks: u64) -> (State, u64) {
    let mut db = open(path, &lag_config());
    let mut model = State::new();
    commit(&mut db, &mut model, seed, 1, blocks);
    db.close_with_nodes_behind().unwrap();
    let base = nodes_at(path).expect("the nodes lag the head");
    assert!(base < blocks, "watermark {base} at head {blocks}");
    (model, base)
}

fn raw(path: &Path) -> DB {
    let mut o = Options::default();
    o.create_if_missing(false);
    DB::open_cf(&o, path, FAMILIES).unwrap()
}

/// The node watermark record of a closed database.
fn nodes_at(path: &Path) -> Option<u64> {
    let db = raw(path);
    let v = db.get_cf(db.cf_handle("meta").unwrap(), b"nodes_at").unwrap()?;
    Some(u64::from_be_bytes(v.as_slice().try_into().unwrap()))
}

/// The state, proofs and verification of `db` against the model.
fn check(db: &StateDb, model: &State, ctx: &str) {
    assert_eq!(db.head_root(), model_root(model, &TrieId::Main), "{ctx}: head root");
    assert_eq!(db.trie_root(&STORAGE_A).unwrap(), model_root(model, &STORAGE_A), "{ctx}");
    let root = db.head_root();
    for i in (0..KEYS).step_by(61) {
        let k = indexed_key(i);
        assert_eq!(
            db.get(&TrieId::Main, &k).unwrap().as_ref(),
            model_get(model, &TrieId::Main, &k)
        );
        let proof = db.prove(TrieId::Main, &k).unwrap();
        let proven = verify_proof::<EthLayout>(&root, &k, &proof).unwrap();
        assert_eq!(proven.as_ref(), model_get(model, &TrieId::Main, &k), "{ctx}: proof of {i}");
    }
    let deep = db.verify_deep().unwrap();
    assert!(deep.ok(), "{ctx}: {deep:?}");
}

#[test]
fn lagging_nodes_catch_up_on_open_read_only_and_writable() {
    let dir = tempfile::tempdir().unwrap();
    let (mut model, base) = lagging(dir.path(), 11, 30);

    let ro = StateDb::open_read_only(dir.path(), lag_config()).unwrap();
    let c = ro.stats().catch_up.expect("a read-only open catches up");
    assert_eq!((c.from_block, c.to_block), (base, 30));
    assert!(c.keys > 0);
    assert_eq!(ro.stats().nodes_at, base, "a read-only handle writes nothing");
    check(&ro, &model, "read-only");
    drop(ro);
    assert_eq!(nodes_at(dir.path()), Some(base), "the read-only open wrote nothing");

    let mut db = open(dir.path(), &lag_config());
    assert_eq!(db.stats().catch_up.map(|c| c.to_block), Some(30));
    check(&db, &model, "writable");
    // The catch-up's buffer carries on under new blocks until a write-back.
    commit(&mut db, &mut model, 11, 31, 40);
    check(&db, &model, "after more blocks");
    assert_eq!(db.stats().nodes_at, 40, "verify flushed: nodes at the head");
    db.close().unwrap();
    assert_eq!(nodes_at(dir.path()), None, "a close writes the nodes back");
    let db = open(dir.path(), &lag_config());
    assert!(db.stats().catch_up.is_none());
    check(&db, &model, "reopened");
}

/// Rewrite block `number`'s reverse diff with `edit` applied to its entries.
fn edit_history(
    path: &Path,
    number: u64,
    edit: impl FnOnce(&mut Vec<store::test_hooks::ReverseEntry>),
) {
    let db = raw(path);
    let h = db.cf_handle("history").unwrap();
    let raw = db.get_cf(h, number.to_be_bytes()).unwrap().unwrap();
    let mut entries = ReverseDiff::decode(&raw).unwrap();
    edit(&mut entries);
    let mut diff = ReverseDiff::new();
    for (column, key, old) in entries {
        diff.record(column, key, old);
    }
    db.put_cf(h, number.to_be_bytes(), diff.encode()).unwrap();
}

fn refused(path: &Path, ctx: &str) {
    for read_only in [true, false] {
        let r = if read_only {
            StateDb::open_read_only(path, lag_config())
        } else {
            StateDb::open(path, lag_config())
        };
        match r {
            Ok(db) => panic!("{ctx}: opened at head {} (read-only {read_only})", db.head_number()),
            Err(e) => assert!(e.is_corruption(), "{ctx}: {e}"),
        }
    }
}

#[test]
fn an_altered_or_missing_reverse_diff_in_the_lag_window_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, base) = lagging(dir.path(), 12, 20);
    let history = |path: &Path, number: u64| -> Vec<u8> {
        let db = raw(path);
        db.get_cf(db.cf_handle("history").unwrap(), number.to_be_bytes()).unwrap().unwrap()
    };
    let original = history(dir.path(), base + 1);
    // A forged old value of a flat key: the trie at the watermark contradicts it.
    edit_history(dir.path(), base + 1, |entries| {
        let e = entries.iter_mut().find(|(c, _, _)| *c == Column::Flat).unwrap();
        e.2 = Some(b"forged".to_vec());
    });
    refused(dir.path(), "forged old value");
    // A flat entry dropped: the change is not replayed, the head's root is not reached.
    put_history(dir.path(), base + 1, &original);
    edit_history(dir.path(), base + 2, |entries| {
        let at = entries.iter().position(|(c, _, _)| *c == Column::Flat).unwrap();
        entries.remove(at);
    });
    refused(dir.path(), "dropped entry");
    // A missing diff.
    let db = raw(dir.path());
    db.delete_cf(db.cf_handle("history").unwrap(), (base + 2).to_be_bytes()).unwrap();
    drop(db);
    refused(dir.path(), "missing diff");
    // Garbage.
    put_history(dir.path(), base + 2, b"\x01garbage");
    refused(dir.path(), "garbage diff");
}

fn put_history(path: &Path, number: u64, bytes: &[u8]) {
    let db = raw(path);
    db.put_cf(db.cf_handle("history").unwrap(), number.to_be_bytes(), bytes).unwrap();
}

#[test]
fn an_untouched_lagging_database_opens_after_its_diffs_are_restored() {
    let dir = tempfile::tempdir().unwrap();
    let (model, base) = lagging(dir.path(), 13, 12);
    let db = raw(dir.path());
    let h = db.cf_handle("history").unwrap();
    let original = db.get_cf(h, (base + 1).to_be_bytes()).unwrap().unwrap();
    drop(db);
    put_history(dir.path(), base + 1, b"\x01garbage");
    refused(dir.path(), "garbage");
    put_history(dir.path(), base + 1, &original);
    let db = open(dir.path(), &lag_config());
    check(&db, &model, "restored diff");
}

#[test]
fn a_failed_write_back_poisons_and_a_committed_block_survives() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = lag_config();
    config.layers.persist_blocks = 1;
    let mut db = open(dir.path(), &config);
    let mut model = State::new();
    commit(&mut db, &mut model, 14, 1, 10);
    // Every block is its own group: wait until all are on disk, their nodes lagging.
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.stats().persisted_number < 10 {
        assert!(Instant::now() < deadline, "the writer did not persist the blocks");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(db.stats().nodes_at < 10, "{:?}", db.stats().nodes_at);
    db.faults().fail_writes_from(1);
    match db.flush() {
        Err(StoreError::Poisoned { .. }) => {}
        other => panic!("the write-back failure was not reported: {other:?}"),
    }
    assert!(db.commit(&random_block(14, 11, KEYS, UPDATES)).is_err(), "poisoned store committed");
    drop(db);
    let db = open(dir.path(), &config);
    assert_eq!(db.head_number(), 10);
    check(&db, &model, "after the failed write-back");
}
