//! The durable record `ARBOR-DURABLE`: a database RocksDB reopens at an older state (a
//! truncated MANIFEST) is refused with a typed error, for writing and read-only, and left
//! untouched; reverts lower the record first, so reverted databases open; the record lags
//! the head harmlessly after a crash, also a SIGKILL in the middle of reverts; a garbled
//! record is corruption, never a panic or a hang.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use state::{TrieId, H256};
use store::{Corruption, DurableRecordError, OpenError, StateDb};
use test_support::{copy_tree, dir_snapshot};

use crate::common::{
    env_number, indexed_key, open, random_block, small_config, spawn_child, test_seed,
};

const RECORD: &str = "ARBOR-DURABLE";
const KEYS: u32 = 2_000;

/// A closed database: a bulk load of `KEYS` keys, then `blocks` blocks.
fn build(path: &Path, blocks: u64) -> (u64, H256) {
    let mut db = open(path, &small_config());
    let entries = (0..KEYS).map(|i| (TrieId::Main, indexed_key(i), i.to_be_bytes().to_vec()));
    db.bulk_load("keys", entries).unwrap();
    for b in 1..=blocks {
        db.commit(&random_block(11, b, KEYS, 200)).unwrap();
    }
    let head = (db.head_number(), db.head_root());
    db.close().unwrap();
    head
}

/// The block the record names (bytes 12..20 of its documented layout).
fn recorded_block(path: &Path) -> u64 {
    let bytes = std::fs::read(path.join(RECORD)).unwrap();
    u64::from_be_bytes(bytes[12..20].try_into().unwrap())
}

/// The current MANIFEST, as `CURRENT` names it.
fn current_manifest(path: &Path) -> PathBuf {
    let name = std::fs::read_to_string(path.join("CURRENT")).unwrap();
    path.join(name.trim())
}

/// Each cut of `source`'s MANIFEST (every 24 bytes), in a copy under `tmp`: how many of
/// them `refused(len, copy)` says were refused.
fn refusals_over_cuts(
    tmp: &Path,
    source: &Path,
    mut refused: impl FnMut(usize, &Path) -> bool,
) -> usize {
    let manifest_bytes = std::fs::read(current_manifest(source)).unwrap();
    let mut count = 0;
    for len in (0..manifest_bytes.len()).step_by(24) {
        let dir = tmp.join(format!("cut-{len}"));
        copy_tree(source, &dir);
        std::fs::write(current_manifest(&dir), &manifest_bytes[..len]).unwrap();
        count += usize::from(refused(len, &dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
    count
}

/// What both opens of the database at `path` give: `Ok(head)` or the error.
fn open_both(path: &Path) -> [Result<(u64, H256), OpenError>; 2] {
    let head = |db: StateDb| (db.head_number(), db.head_root());
    [
        StateDb::open_read_only(path, small_config()).map(head),
        StateDb::open(path, small_config()).map(head),
    ]
}

/// The hostile sweep's finding: a MANIFEST cut short makes RocksDB open an older state
/// (an empty database when the cut falls before the first table file). Every cut is tried:
/// each open either fails or gives the real head, never an older one; where RocksDB would
/// have served an older state, both opens report `RolledBack` naming the record, and the
/// directory is left untouched (the table files RocksDB's writable open would delete are
/// still there, and the whole MANIFEST brings the database back).
#[test]
fn a_truncated_manifest_is_refused_not_served_older() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("source");
    let head = build(&source, 5);
    assert_eq!(recorded_block(&source), 5);
    let manifest_bytes = std::fs::read(current_manifest(&source)).unwrap();
    let refused = refusals_over_cuts(tmp.path(), &source, |len, dir| {
        let manifest = current_manifest(dir);
        let before = dir_snapshot(dir);
        let [read_only, writable] = open_both(dir);
        let rolled_back = |r: &Result<(u64, H256), OpenError>| match r {
            Ok(found) => {
                assert_eq!(*found, head, "cut at {len}: opened an older state");
                false
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                let Some(Corruption::RolledBack { path, number, root, .. }) = e.corruption() else {
                    return false;
                };
                assert_eq!((*number, *root, path), (head.0, head.1, &dir.join(RECORD)));
                let text = e.to_string();
                assert!(e.is_corruption() && text.contains("MANIFEST"), "{text}");
                true
            }
        };
        let refused_here = rolled_back(&read_only);
        assert_eq!(rolled_back(&writable), refused_here, "cut at {len}: {writable:?}");
        if refused_here {
            assert!(dir_snapshot(dir) == before, "cut at {len}: the refusal changed files");
            // The refused database is whole again with its MANIFEST back.
            std::fs::write(&manifest, &manifest_bytes).unwrap();
            let db = open(dir, &small_config());
            assert_eq!((db.head_number(), db.head_root()), head);
        }
        refused_here
    });
    assert!(refused >= 2, "no cut of the MANIFEST made RocksDB open an older state");
}

/// Without the record (a database of an older build, or the record deleted), a MANIFEST
/// cut before Arbor's schema leaves table files RocksDB no longer names: the writable open
/// refuses them as `OrphanedTables` instead of taking the directory for an unfinished
/// creation (which deleted them and bulk-loaded anew), and changes nothing. (A cut after
/// the schema opens an older state that only the record can tell.)
#[test]
fn orphaned_table_files_without_a_record_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("source");
    build(&source, 5);
    std::fs::remove_file(source.join(RECORD)).unwrap();
    let refused = refusals_over_cuts(tmp.path(), &source, |len, dir| {
        // A cut that keeps the schema but loses later tables opens an older state: only the
        // record catches that. A cut before the schema reads as no Arbor database at all.
        if StateDb::open_read_only(dir, small_config()).is_ok() {
            return false;
        }
        let before = dir_snapshot(dir);
        let refused = match StateDb::open(dir, small_config()) {
            Err(OpenError::OrphanedTables { tables, .. }) => tables > 0,
            // RocksDB itself finds the cut.
            Err(_) => false,
            Ok(_) => panic!("cut at {len}: opened as a new database"),
        };
        assert!(dir_snapshot(dir) == before, "cut at {len}: the refusal changed files");
        refused
    });
    assert!(refused >= 1, "no cut of the MANIFEST lost Arbor's schema");
}

/// A database with no head at all beside a record (every family empty, or no `CURRENT`) is
/// not an unfinished creation to finish: no birth records are written, nothing is deleted.
#[test]
fn a_lost_database_beside_its_record_is_not_created_again() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("source");
    build(&source, 2);
    let record = std::fs::read(source.join(RECORD)).unwrap();
    // An empty RocksDB database (what a MANIFEST cut before Arbor's families gives).
    let empty = tmp.path().join("empty");
    drop(rocksdb::DB::open_default(&empty).unwrap());
    std::fs::write(empty.join(RECORD), &record).unwrap();
    // Only the record (the database's files lost).
    let bare = tmp.path().join("bare");
    std::fs::create_dir(&bare).unwrap();
    std::fs::write(bare.join(RECORD), &record).unwrap();
    // A creation marker beside a complete database and its record.
    let marked = tmp.path().join("marked");
    copy_tree(&source, &marked);
    std::fs::write(marked.join("ARBOR-CREATING"), b"").unwrap();
    for dir in [empty, bare, marked] {
        let before = dir_snapshot(&dir);
        for result in open_both(&dir) {
            let e = result.expect_err(&dir.display().to_string());
            let rolled = matches!(e.corruption(), Some(Corruption::RolledBack { head: None, .. }));
            assert!(rolled, "{}: {e:?}", dir.display());
        }
        assert_eq!(dir_snapshot(&dir), before, "{}", dir.display());
    }
}

/// A revert lowers the record before it moves the head, and records the new head after:
/// the reverted database opens, for writing and read-only. A revert that fails after the
/// record was lowered leaves it below the head, which opens too.
#[test]
fn reverted_databases_open() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 6);
    let mut db = open(dir.path(), &small_config());
    db.revert(2).unwrap();
    assert_eq!(recorded_block(dir.path()), 4);
    let head = (db.head_number(), db.head_root());
    db.close().unwrap();
    for found in open_both(dir.path()) {
        assert_eq!(found.unwrap(), head);
    }
    // Blocks again above the reverted ones, then a revert whose second block fails.
    let mut db = open(dir.path(), &small_config());
    for b in 5..=8 {
        db.commit(&random_block(12, b, KEYS, 200)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(recorded_block(dir.path()), 8);
    // A revert whose first block fails: the record was lowered, the head stays.
    db.faults().fail_writes_from(8);
    assert!(db.revert(3).is_err());
    assert_eq!((db.head_number(), recorded_block(dir.path())), (8, 5));
    let reader = StateDb::open_read_only(dir.path(), small_config()).unwrap();
    assert_eq!(reader.head_number(), 8);
    drop(reader);
    db.faults().clear();
    drop(db);
    let mut db = open(dir.path(), &small_config());
    assert_eq!((db.head_number(), recorded_block(dir.path())), (8, 8));
    // Stopped by its caller after one block: the record follows the head.
    let undone = db.revert_with_progress(3, &mut |_| false).unwrap();
    assert_eq!((undone, db.head_number(), recorded_block(dir.path())), (1, 7, 7));
    assert!(db.verify().unwrap().ok());
}

/// What crashes leave: a record behind the head (the blocks flushed after it was written),
/// a torn temporary file from a write a crash cut, and nodes behind the block. Each opens,
/// and the next flush brings the record to the head.
#[test]
fn records_behind_the_head_open() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 3);
    let old = std::fs::read(dir.path().join(RECORD)).unwrap();
    let mut db = open(dir.path(), &small_config());
    for b in 4..=7 {
        db.commit(&random_block(11, b, KEYS, 200)).unwrap();
    }
    let head = (db.head_number(), db.head_root());
    db.close_with_nodes_behind().unwrap();
    assert_eq!(recorded_block(dir.path()), 7);
    std::fs::write(dir.path().join(RECORD), &old).unwrap();
    std::fs::write(dir.path().join(format!("{RECORD}.tmp")), [0xa5; 13]).unwrap();
    for found in open_both(dir.path()) {
        assert_eq!(found.unwrap(), head);
    }
    assert_eq!(recorded_block(dir.path()), 7, "the writable open's close records the head");
    // A database of an older build has none: it opens, and gets one at its close.
    std::fs::remove_file(dir.path().join(RECORD)).unwrap();
    let db = open(dir.path(), &small_config());
    assert!(db.verify().unwrap().ok());
    db.close().unwrap();
    assert_eq!(recorded_block(dir.path()), 7);
}

const CHILD_DIR_ENV: &str = "ARBOR_DURABLE_CHILD_DIR";

/// The child of [`sigkill_during_reverts_then_reopen`]: does nothing unless
/// [`CHILD_DIR_ENV`] is set; then, until killed, commits three blocks (different ones each
/// round), flushes (the record follows) and reverts two (the record is lowered first).
#[test]
fn revert_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else { return };
    let mut db = open(Path::new(&dir), &small_config());
    for round in 0u64.. {
        let head = db.head_number();
        for b in head + 1..=head + 3 {
            db.commit(&random_block(round ^ (head << 20), b, KEYS, 100)).unwrap();
        }
        db.flush().unwrap();
        db.revert(2).unwrap();
    }
}

/// SIGKILL at random moments of flushes and reverts: every reopen, read-only and for
/// writing, finds the record at or below the head (a revert that lowered it after moving
/// the head would be refused here). `ARBOR_CRASH_ITERATIONS` kills (default 3).
#[test]
fn sigkill_during_reverts_then_reopen() {
    let seed = test_seed("sigkill_during_reverts_then_reopen");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 0);
    for iteration in 0..env_number("ARBOR_CRASH_ITERATIONS", 3) {
        let envs = [(CHILD_DIR_ENV, dir.path().as_os_str())];
        let mut child = spawn_child("durable::revert_child", &envs);
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..=700)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "the child ended before it was killed: {status}");
        for found in open_both(dir.path()) {
            let (head, _) = found.unwrap_or_else(|e| panic!("seed {seed}, kill {iteration}: {e}"));
            assert!(recorded_block(dir.path()) <= head, "seed {seed}, kill {iteration}");
        }
    }
    assert!(open(dir.path(), &small_config()).verify().unwrap().ok());
}

/// A garbled record (cut short, grown, a flipped bit, another magic, an empty file, a
/// directory or a FIFO in its place) is `Corruption::DurableRecord` for both opens, never a
/// panic or a hang, and nothing in the directory changes.
#[test]
fn a_garbled_record_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("source");
    build(&source, 2);
    let good = std::fs::read(source.join(RECORD)).unwrap();
    let flipped = |at: usize| {
        let mut b = good.clone();
        b[at] ^= 0x10;
        b
    };
    let cases: Vec<(&str, Vec<u8>, DurableRecordError)> = vec![
        ("cut", good[..40].to_vec(), DurableRecordError::Length { len: 40, expected: 84 }),
        ("grown", [&good[..], b"x"].concat(), DurableRecordError::Length { len: 85, expected: 84 }),
        ("empty", Vec::new(), DurableRecordError::Length { len: 0, expected: 84 }),
        ("magic", flipped(0), DurableRecordError::Magic),
        ("block", flipped(19), DurableRecordError::Checksum),
        ("root", flipped(40), DurableRecordError::Checksum),
        ("checksum", flipped(83), DurableRecordError::Checksum),
    ];
    for (name, bytes, want) in cases {
        let dir = tmp.path().join(name);
        copy_tree(&source, &dir);
        std::fs::write(dir.join(RECORD), bytes).unwrap();
        let before = dir_snapshot(&dir);
        for result in open_both(&dir) {
            assert_garbled(result, &dir, &want);
        }
        assert_eq!(dir_snapshot(&dir), before, "{name}");
    }
    for (name, make) in [("directory", make_dir as fn(&Path)), ("fifo", mkfifo)] {
        let dir = tmp.path().join(name);
        copy_tree(&source, &dir);
        std::fs::remove_file(dir.join(RECORD)).unwrap();
        make(&dir.join(RECORD));
        for result in open_both(&dir) {
            assert_garbled(result, &dir, &DurableRecordError::NotAFile);
        }
    }
}

fn assert_garbled(result: Result<(u64, H256), OpenError>, dir: &Path, want: &DurableRecordError) {
    let e = result.expect_err(&dir.display().to_string());
    match e.corruption() {
        Some(Corruption::DurableRecord { path, reason }) => {
            assert_eq!((path, reason), (&dir.join(RECORD), want), "{}", dir.display());
            assert!(e.to_string().contains(RECORD), "{e}");
        }
        _ => panic!("{}: {e:?}", dir.display()),
    }
}

fn make_dir(path: &Path) {
    std::fs::create_dir(path).unwrap();
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}
