//! Creating a database: into an absent path, into an existing empty directory (which stays
//! the database's directory: it is not replaced), onto a mount point (a tmpfs, when the
//! tests run as root); what a kill during creation leaves (the `ARBOR-CREATING` marker and
//! whatever RocksDB had written beside it) is refused read-only and finished by the next
//! open for writing; a creation under way makes the directory in use; a non-empty directory
//! that holds no database is refused untouched; and SIGKILL at random moments of creations
//! run back to back (`ARBOR_CRASH_ITERATIONS` kills, default 3) never leaves a directory
//! that opens as anything but an empty database or an unfinished creation.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rocksdb::{Options, DB};
use store::{OpenError, StateDb};
use test_support::Mount;
use trie::EMPTY_ROOT;

use crate::common::{env_number, open, random_block, small_config, spawn_child, test_seed};

/// The marker a creation keeps in the directory until it is complete.
const MARKER: &str = "ARBOR-CREATING";

/// Every entry of a directory, recursively, with the bytes of its files.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            for (sub, bytes) in snapshot(&e.path()) {
                out.push((format!("{name}/{sub}"), bytes));
            }
            out.push((format!("{name}/"), Vec::new()));
        } else {
            out.push((name, std::fs::read(e.path()).unwrap()));
        }
    }
    out.sort();
    out
}

/// `dir` holds a working empty database: read-only and writable opens see block 0 with
/// the empty root and pass `verify`; a block commits and survives a reopen.
fn assert_new_database(dir: &Path) {
    assert!(!store::creation_unfinished(dir), "{}: the marker is left", dir.display());
    let ro = StateDb::open_read_only(dir, small_config()).unwrap();
    assert_eq!((ro.head_number(), ro.head_root()), (0, EMPTY_ROOT));
    drop(ro);
    let mut db = open(dir, &small_config());
    assert!(db.is_empty().unwrap());
    assert!(db.verify().unwrap().ok());
    db.commit(&random_block(3, 1, 100, 10)).unwrap();
    let root = db.head_root();
    db.close().unwrap();
    let db = open(dir, &small_config());
    assert_eq!((db.head_number(), db.head_root()), (1, root));
    assert!(db.verify().unwrap().ok());
    db.close().unwrap();
}

#[test]
fn creates_at_an_absent_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/db");
    drop(open(&dir, &small_config()));
    assert_new_database(&dir);
    // Nothing beside it.
    let beside: Vec<_> = std::fs::read_dir(dir.parent().unwrap()).unwrap().collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
}

/// The directory given is the database's: created in place, not replaced by a renamed
/// one (which a mount point refuses with EBUSY).
#[test]
fn creates_in_an_existing_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    std::fs::create_dir(&dir).unwrap();
    let inode = std::fs::metadata(&dir).unwrap().ino();
    drop(open(&dir, &small_config()));
    assert_eq!(std::fs::metadata(&dir).unwrap().ino(), inode, "the directory was replaced");
    assert!(dir.join("CURRENT").is_file());
    assert_new_database(&dir);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "something left beside it");
}

/// `init` on a dedicated volume: a tmpfs mounted at the database path.
#[test]
fn creates_on_a_mount_point() {
    let tmp = tempfile::tempdir().unwrap();
    let at = tmp.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let Some(_mount) = Mount::tmpfs(&at, "creates_on_a_mount_point") else { return };
    let db = match StateDb::open(&at, small_config()) {
        Ok(db) => db,
        Err(e) => panic!("creating on the mount point {}: {e}", at.display()),
    };
    db.close().unwrap();
    assert_new_database(&at);
}

/// Raw RocksDB with the given column families at `dir`, no records.
fn raw_families(dir: &Path, families: &[&str]) {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.create_missing_column_families(true);
    drop(DB::open_cf(&o, dir, families).unwrap());
}

#[test]
fn interrupted_creation_is_refused_read_only_and_finished_for_writing() {
    // What a kill can leave: the marker alone (before RocksDB wrote anything); RocksDB's
    // first files without CURRENT; a RocksDB database with some families and no records;
    // a complete new database (killed before the marker was deleted). Junk of any kind
    // beside the marker goes too: the marker says everything there is the creation's.
    type Leftovers = fn(&Path);
    let cases: [(&str, Leftovers); 4] = [
        ("marker alone", |_| {}),
        ("no CURRENT", |d| {
            for (name, bytes) in [("LOCK", &b""[..]), ("IDENTITY", b"1234"), ("000004.log", b"x")] {
                std::fs::write(d.join(name), bytes).unwrap();
            }
            std::fs::write(d.join("MANIFEST-000001"), [0xa5; 64]).unwrap();
            std::fs::create_dir(d.join("stray")).unwrap();
            std::fs::write(d.join("stray/file"), b"junk").unwrap();
        }),
        ("some families", |d| raw_families(d, &["flat", "meta"])),
        ("complete", |d| {
            let tmp = d.with_extension("src");
            drop(open(&tmp, &small_config()));
            // Not the durable record: it is written only after the creation finished (and
            // a marker beside one is refused, see durable.rs).
            for e in std::fs::read_dir(&tmp).unwrap() {
                let e = e.unwrap();
                if e.file_name() != "ARBOR-DURABLE" {
                    std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
                }
            }
            std::fs::remove_dir_all(&tmp).unwrap();
        }),
    ];
    for (name, leave) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(MARKER), b"").unwrap();
        leave(&dir);
        assert!(store::creation_unfinished(&dir), "{name}");
        let before = snapshot(&dir);
        // Read-only: refused, nothing touched.
        match StateDb::open_read_only(&dir, small_config()) {
            Ok(_) => panic!("{name}: an unfinished creation opened read-only"),
            Err(OpenError::CreationUnfinished { .. }) => {
                assert!(dir.join("CURRENT").exists(), "{name}")
            }
            Err(OpenError::NotArbor { .. }) => assert!(!dir.join("CURRENT").exists(), "{name}"),
            Err(e) => panic!("{name}: {e:?}"),
        }
        let e = StateDb::open_read_only(&dir, small_config()).err().unwrap();
        assert!(!e.to_string().is_empty());
        assert_eq!(snapshot(&dir), before, "{name}: a read-only open changed the directory");
        // For writing: finished, a new empty database, the leftovers gone.
        let db = open(&dir, &small_config());
        assert_eq!((db.head_number(), db.head_root()), (0, EMPTY_ROOT), "{name}");
        db.close().unwrap();
        assert!(!dir.join("stray").exists() && !dir.join("000004.log").exists(), "{name}");
        assert_new_database(&dir);
    }
}

/// A creation under way (another opener holds the marker's lock) makes the directory in
/// use: nothing of it is deleted. Once the lock goes, the next opener finishes it.
#[test]
fn a_creation_under_way_is_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    std::fs::create_dir(&dir).unwrap();
    let marker = std::fs::File::create(dir.join(MARKER)).unwrap();
    marker.try_lock().unwrap();
    std::fs::write(dir.join("LOG"), b"being written").unwrap();
    let before = snapshot(&dir);
    match StateDb::open(&dir, small_config()) {
        Err(e @ OpenError::InUse { .. }) => assert!(e.to_string().contains("in use"), "{e}"),
        Err(e) => panic!("expected InUse, got {e:?}"),
        Ok(_) => panic!("opened a database being created"),
    }
    assert_eq!(snapshot(&dir), before);
    drop(marker);
    open(&dir, &small_config()).close().unwrap();
    assert_new_database(&dir);
}

#[test]
fn a_non_empty_directory_without_a_database_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), b"hello").unwrap();
    std::fs::write(dir.join("000007.sst"), b"\x00\x01not a table").unwrap();
    std::fs::write(dir.join("LOCK"), b"").unwrap();
    let before = snapshot(&dir);
    match StateDb::open(&dir, small_config()) {
        Err(OpenError::CreateDir { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::DirectoryNotEmpty, "{source}")
        }
        Err(e) => panic!("expected CreateDir, got {e:?}"),
        Ok(_) => panic!("opened a directory of something else"),
    }
    assert_eq!(snapshot(&dir), before);
    assert!(!store::creation_unfinished(&dir));
}

const CHILD_DIR_ENV: &str = "ARBOR_CREATE_CHILD_DIR";

/// The child's body: does nothing unless [`CHILD_DIR_ENV`] is set; then creates databases
/// `0`, `1`, … in that directory until killed, printing `created <i>` after each.
#[test]
fn create_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else { return };
    for i in 0u64.. {
        let db = open(&Path::new(&dir).join(i.to_string()), &small_config());
        db.close().unwrap();
        println!("created {i}");
    }
}

#[test]
fn creation_killed_at_random_moments() {
    let seed = test_seed("creation_killed_at_random_moments");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut states = [0usize; 3];
    for iteration in 0..env_number("ARBOR_CRASH_ITERATIONS", 3) {
        let tmp = tempfile::tempdir().unwrap();
        let mut child =
            spawn_child("create::create_child", &[(CHILD_DIR_ENV, tmp.path().as_os_str())]);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| l.strip_prefix("created ")?.parse::<u64>().ok())
                .collect::<Vec<u64>>()
        });
        let delay = Duration::from_millis(rng.gen_range(50..=600));
        std::thread::sleep(delay);
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "the child ended before it was killed: {status}");
        let created = reader.join().unwrap();
        let ctx = format!("seed {seed}, iteration {iteration}, killed after {delay:?}");
        let mut dirs: Vec<u64> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap())
            .collect();
        dirs.sort_unstable();
        for i in dirs {
            let dir = tmp.path().join(i.to_string());
            // Complete (reported or not), or refused as unfinished: never anything else.
            match StateDb::open_read_only(&dir, small_config()) {
                Ok(db) => {
                    assert_eq!((db.head_number(), db.head_root()), (0, EMPTY_ROOT), "{ctx}: {i}");
                    assert!(db.verify().unwrap().ok(), "{ctx}: {i}");
                    states[0] += 1;
                }
                Err(OpenError::CreationUnfinished { .. }) => states[1] += 1,
                // Killed before RocksDB wrote CURRENT.
                Err(OpenError::NotArbor { .. }) if !dir.join("CURRENT").exists() => states[2] += 1,
                Err(e) => panic!("{ctx}: database {i}: {e}"),
            }
            if created.contains(&i) {
                assert!(!store::creation_unfinished(&dir), "{ctx}: {i} was reported created");
            }
            // Opening for writing finishes what is unfinished.
            open(&dir, &small_config()).close().unwrap();
            assert_new_database(&dir);
        }
    }
    eprintln!("complete, unfinished with CURRENT, unfinished without: {states:?}");
}
