//! Creating a database crash-safely inside its directory: the creation marker
//! (`ARBOR-CREATING`), locked and synced, then RocksDB's files, the birth records in one
//! synced batch, and last the marker's deletion (see `docs/design.md`, "Store").

use std::path::Path;

use rocksdb::{IteratorMode, Options, WriteBatch, WriteOptions, DB};

use trie::LayoutName;

use crate::config::StoreConfig;
use crate::error::OpenError;
use crate::keys::{
    encode_head, CF_META, COLUMN_FAMILIES, META_BULK, META_HEAD, META_LAYOUT, META_SCHEMA,
    SCHEMA_VERSION,
};

use super::{base_options, block_cache, family_descriptors, first_entry};

/// The file that marks a database directory whose creation has not finished.
pub(crate) const CREATING: &str = "ARBOR-CREATING";

/// What the marker says to someone who finds it.
const CREATING_TEXT: &[u8] = b"Arbor is creating a database in this directory. If no Arbor \
process is running, the creation was interrupted: opening the database for writing (arbor \
init, load, checkpoint restore) deletes what it left and creates it again.\n";

/// Attempts to take or give up a creation that other openers race for (see
/// [`claim_creation`]) before reporting the directory in use.
const CLAIM_ATTEMPTS: usize = 8;

/// True when the directory `path` holds the marker of a database creation that has not
/// finished: one under way in another opener, or one a crash interrupted. What such a
/// directory holds is not a database yet: read-only opens refuse it
/// ([`OpenError::CreationUnfinished`]); opening it for writing finishes the creation.
pub fn creation_unfinished(path: &Path) -> bool {
    path.join(CREATING).symlink_metadata().is_ok()
}

/// Create a new, empty database at `path`: absent, or an existing empty directory (a mount
/// point, say). The directory itself is never replaced, so nothing is renamed onto it.
///
/// Crash safety rests on a marker file, [`CREATING`]: it is created (and synced into the
/// directory) in the empty directory before RocksDB writes anything there, and deleted
/// (synced) only after the schema and head records are synced. So whatever a kill leaves,
/// either the marker is there, and everything beside it is leftovers of the creation, or
/// the database is complete. The next opener for writing that finds the marker deletes
/// everything else in the directory and creates the database again; read-only opens refuse
/// it. The marker is locked (`flock`) by the opener creating, so two openers never create
/// (or clean up) at once: the second is told the database is in use.
///
/// With `bulk`, the birth records carry that unfinished bulk load's marker: the database is
/// never seen finished and empty (see [`crate::StateDb::open_for_load`]).
pub(super) fn create_db(
    path: &Path,
    config: &StoreConfig,
    bulk: Option<&str>,
) -> Result<(), OpenError> {
    create_dir_synced(path).map_err(create_error(path))?;
    // Resolved, as `open_db` opens it: RocksDB's in-process lock compares path strings.
    let real = std::fs::canonicalize(path).map_err(create_error(path))?;
    let Some(marker) = claim_creation(&real, path)? else {
        // Another opener completed the database meanwhile.
        return Ok(());
    };
    let created = create_in(&real, path, config, bulk).and_then(|()| {
        std::fs::remove_file(real.join(CREATING)).map_err(create_error(path))?;
        sync_dir(&real).map_err(create_error(path))
    });
    if created.is_err() && real.join(CREATING).exists() {
        // Leave the directory empty, as found, if we can; else the marker stays and the
        // next opener cleans up.
        if clear_dir_except(&real, CREATING).is_ok() {
            let _ = std::fs::remove_file(real.join(CREATING));
        }
    }
    // The lock goes with the file, after the marker.
    drop(marker);
    created
}

/// The RocksDB database with Arbor's column families and birth records, in the claimed
/// directory `dir` (`shown` as the caller named it).
fn create_in(
    dir: &Path,
    shown: &Path,
    config: &StoreConfig,
    bulk: Option<&str>,
) -> Result<(), OpenError> {
    let cache = block_cache(config);
    let mut opts = base_options(config, cache.as_ref());
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    let db = DB::open_cf_descriptors(&opts, dir, family_descriptors(config, cache.as_ref()))?;
    let meta = db.cf_handle(CF_META).ok_or_else(|| OpenError::MissingColumnFamily {
        path: shown.to_path_buf(),
        name: CF_META,
    })?;
    // Synced: the records are durable before the marker goes.
    Ok(write_birth_records(&db, meta, config.layout.unwrap_or_default(), bulk)?)
}

/// Take the creation of a database in the existing directory `dir` (resolved; `shown` is
/// the path as the caller named it): the marker file, created or found, locked, with
/// nothing else left in the directory. `None` when a database was completed there
/// meanwhile. A non-empty directory without the marker is refused, untouched; a marker
/// another opener holds locked means the database is in use.
fn claim_creation(dir: &Path, shown: &Path) -> Result<Option<std::fs::File>, OpenError> {
    let marker = dir.join(CREATING);
    let io = create_error(shown);
    for _ in 0..CLAIM_ATTEMPTS {
        if marker.symlink_metadata().is_ok() {
            // An unfinished creation: under way (its opener holds the lock) or interrupted.
            let file = match std::fs::OpenOptions::new().read(true).write(true).open(&marker) {
                Ok(f) => f,
                // Finished meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(e)),
            };
            lock(&file, shown)?;
            if !is_linked(&file, &marker).map_err(&io)? {
                // Finished between our open and our lock: the file we hold is gone.
                continue;
            }
            // Interrupted: everything beside the marker is what it left.
            clear_dir_except(dir, CREATING).map_err(&io)?;
            sync_dir(dir).map_err(&io)?;
            return Ok(Some(file));
        }
        if dir.join("CURRENT").exists() {
            return Ok(None);
        }
        if std::fs::read_dir(dir).map_err(&io)?.next().is_some() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::DirectoryNotEmpty,
                "the directory is not empty and holds no database",
            )));
        }
        let mut file =
            match std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&marker)
            {
                Ok(f) => f,
                // Another opener created it first: take the branch above.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(e)),
            };
        lock(&file, shown)?;
        // Found empty before the marker was created; anything else that arrived since is
        // not ours to delete: give the marker up and look again.
        let alone = std::fs::read_dir(dir)
            .map_err(&io)?
            .all(|e| e.is_ok_and(|e| e.file_name() == CREATING));
        if !is_linked(&file, &marker).map_err(&io)? {
            // Taken over as an interrupted creation and finished before our lock.
            continue;
        }
        if !alone {
            std::fs::remove_file(&marker).map_err(&io)?;
            continue;
        }
        std::io::Write::write_all(&mut file, CREATING_TEXT).map_err(&io)?;
        file.sync_all().map_err(&io)?;
        // The marker's name is durable before RocksDB creates any file beside it.
        sync_dir(dir).map_err(&io)?;
        return Ok(Some(file));
    }
    Err(OpenError::InUse { path: shown.to_path_buf() })
}

/// Lock the marker `file` (exclusive, without waiting): another opener holding it is
/// creating the database now.
fn lock(file: &std::fs::File, shown: &Path) -> Result<(), OpenError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(OpenError::InUse { path: shown.to_path_buf() })
        }
        Err(std::fs::TryLockError::Error(e)) => Err(create_error(shown)(e)),
    }
}

/// True when `file` is still the file named `path` (not deleted or replaced since opened).
fn is_linked(file: &std::fs::File, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let held = file.metadata()?;
    match path.symlink_metadata() {
        Ok(named) => Ok(named.dev() == held.dev() && named.ino() == held.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Delete everything in `dir` but the entry `keep` (directories with their contents;
/// symbolic links themselves, not what they name).
fn clear_dir_except(dir: &Path, keep: &str) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == keep {
            continue;
        }
        match entry.file_type()?.is_dir() {
            true => std::fs::remove_dir_all(entry.path())?,
            false => std::fs::remove_file(entry.path())?,
        }
    }
    Ok(())
}

/// Create the directory `path` and any missing ancestor, each made durable in its parent;
/// an existing directory is left as it is.
fn create_dir_synced(path: &Path) -> std::io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match std::fs::create_dir(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.parent().is_some() => {
            create_dir_synced(parent)?;
            match std::fs::create_dir(path) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        Err(e) => return Err(e),
    }
    sync_dir(parent)
}

/// Make the entries of directory `dir` durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// An I/O error creating the database at `path`, as [`OpenError::CreateDir`].
fn create_error(path: &Path) -> impl Fn(std::io::Error) -> OpenError {
    let path = path.to_path_buf();
    move |source| OpenError::CreateDir { path: path.clone(), source }
}

/// True when the database at `path`, which lacks some of Arbor's column families, is an
/// interrupted creation: only RocksDB's `default` family and Arbor's own exist, and all of
/// them are empty. Checked read-only, so that a foreign database is never modified.
pub(super) fn unborn(path: &Path, present: &[String]) -> Result<bool, OpenError> {
    let ours = |name: &String| name == "default" || COLUMN_FAMILIES.contains(&name.as_str());
    if !present.iter().all(ours) {
        return Ok(false);
    }
    let db = DB::open_cf_for_read_only(&Options::default(), path, present, false)?;
    Ok(every_family_empty(&db)?)
}

/// True when no column family of `db` (Arbor's and `default`) holds a key.
pub(super) fn every_family_empty(db: &DB) -> Result<bool, rocksdb::Error> {
    let mut empty = db.iterator(IteratorMode::Start).next().transpose()?.is_none();
    for name in COLUMN_FAMILIES {
        if let Some(h) = db.cf_handle(name) {
            empty &= first_entry(db, h)?.is_none();
        }
    }
    Ok(empty)
}

/// The schema version, the layout and the empty head of a new database, in one synced
/// batch.
pub(super) fn write_birth_records(
    db: &DB,
    meta: &rocksdb::ColumnFamily,
    layout: LayoutName,
    bulk: Option<&str>,
) -> Result<(), rocksdb::Error> {
    let mut batch = WriteBatch::default();
    batch.put_cf(meta, META_SCHEMA, SCHEMA_VERSION.to_be_bytes());
    batch.put_cf(meta, META_LAYOUT, layout.as_str());
    batch.put_cf(meta, META_HEAD, encode_head(0, &layout.empty_root()));
    if let Some(label) = bulk {
        batch.put_cf(meta, META_BULK, label.as_bytes());
    }
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    db.write_opt(batch, &sync)
}
