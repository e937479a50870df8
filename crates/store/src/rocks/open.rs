//! Opening a database: the durable record checked before RocksDB's writable open, the schema
//! and layout records read, a read-only open that retries files a writer's compaction
//! removed under it; creation itself is `create.rs`.

use std::path::Path;

use rocksdb::{Options, DB};

use trie::LayoutName;

use crate::config::StoreConfig;
use crate::durable::{self, Head};
use crate::error::{Corruption, OpenError};
use crate::keys::{
    decode_head, CF_META, COLUMN_FAMILIES, LATER_FAMILIES, META_HEAD, META_LAYOUT, META_SCHEMA,
    SCHEMA_VERSION,
};

use super::create::{
    create_db, creation_unfinished, every_family_empty, unborn, write_birth_records,
};
use super::{base_options, block_cache, family_descriptors, memtable_manager};

/// Open (or create, born with the unfinished bulk load `bulk` if given) the database at
/// `path` for writing.
pub(crate) fn open_db(
    path: &Path,
    config: &StoreConfig,
    bulk: Option<&str>,
) -> Result<(DB, Option<Head>), OpenError> {
    config.validate()?;
    let recorded = check_durable(path)?;
    if recorded.is_none() {
        check_orphaned_tables(path)?;
    }
    if no_database(path) {
        create_db(path, config, bulk)?;
    }
    // RocksDB tells a second open in this process by comparing its lock file's path as a
    // string: `db`, `db/` and a symlink to it would each get a handle on the same files
    // (two writers, a forked chain, a corrupted MANIFEST). The resolved path is one string.
    let real = std::fs::canonicalize(path)
        .map_err(|source| OpenError::CreateDir { path: path.to_path_buf(), source })?;
    let cache = block_cache(config);
    let mut opts = base_options(config, cache.as_ref());
    opts.set_write_buffer_manager(&memtable_manager(config));
    let present = DB::list_cf(&opts, &real)?;
    let required = COLUMN_FAMILIES.into_iter().filter(|n| !LATER_FAMILIES.contains(n));
    if let Some(name) = required.into_iter().find(|n| !present.iter().any(|p| p == n)) {
        if !unborn(&real, &present)? {
            return Err(OpenError::MissingColumnFamily { path: path.to_path_buf(), name });
        }
    }
    opts.create_missing_column_families(true);
    let db = DB::open_cf_descriptors(&opts, &real, family_descriptors(config, cache.as_ref()))?;
    let meta = meta_family(&db, path)?;
    match has_schema(&db, meta)? {
        true => {}
        false if every_family_empty(&db)? => {
            write_birth_records(&db, meta, config.layout.unwrap_or_default(), bulk)?
        }
        false => return Err(OpenError::NotArbor { path: path.to_path_buf() }),
    }
    Ok((db, recorded))
}

/// True when the directory `path` holds no database to open: no RocksDB `CURRENT` file, or
/// the marker of an unfinished creation.
fn no_database(path: &Path) -> bool {
    !path.join("CURRENT").exists() || creation_unfinished(path)
}

/// Check the database at `path` against its durable record, if it has one, before the
/// writable open: the head is read by a read-only open (nothing is written). A directory
/// with a record but no database is one whose database was lost, never a new one.
fn check_durable(path: &Path) -> Result<Option<Head>, OpenError> {
    let Some(recorded) = durable::read(path)? else { return Ok(None) };
    let head = match no_database(path) {
        true => None,
        false => head_read_only(path)?,
    };
    durable::check(path, recorded, head)
}

/// Refuse a database without a durable record whose table files hold no Arbor schema as
/// its MANIFEST reads: a new database has no table file, and an interrupted creation none
/// either (its records stay in the WAL), so these are tables the MANIFEST lost (or a foreign
/// database). Checked by a read-only open before the writable one, which would delete them
/// and create the database again.
fn check_orphaned_tables(path: &Path) -> Result<(), OpenError> {
    if no_database(path) {
        return Ok(());
    }
    let tables = std::fs::read_dir(path)
        .map_err(|source| OpenError::CreateDir { path: path.to_path_buf(), source })?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .count();
    if tables == 0 || head_read_only(path)?.is_some() {
        return Ok(());
    }
    Err(OpenError::OrphanedTables { path: path.to_path_buf(), tables })
}

/// The head of the database at `path`, read through a read-only open that opens no table
/// file ahead and gathers no statistics (only `meta` is read).
fn head_read_only(path: &Path) -> Result<Option<Head>, OpenError> {
    let mut opts = Options::default();
    opts.set_max_open_files(64);
    opts.set_skip_stats_update_on_db_open(true);
    let families = DB::list_cf(&opts, path)?;
    let db = retry_vanished(|| DB::open_cf_for_read_only(&opts, path, &families, false))?;
    stored_head(&db)
}

/// The head record of `db` (`None` when it has no `meta` family or no schema record).
fn stored_head(db: &DB) -> Result<Option<Head>, OpenError> {
    let Some(meta) = db.cf_handle(CF_META) else { return Ok(None) };
    if !has_schema(db, meta)? {
        return Ok(None);
    }
    match db.get_cf(meta, META_HEAD)? {
        Some(v) => Ok(Some(decode_head(&v)?)),
        None => Err(Corruption::NoHead.into()),
    }
}

/// Open the existing database at `path` read-only: no lock is taken (a writer may run in
/// another process; this instance sees the state as of its opening), nothing is written,
/// and a missing database is an error rather than a new one.
///
/// A database with a durable record is checked against it (see `durable.rs`); the record is
/// read before the database is opened, since a writer may advance it after.
pub(crate) fn open_db_read_only(path: &Path, config: &StoreConfig) -> Result<DB, OpenError> {
    config.validate()?;
    let recorded = durable::read(path)?;
    if let Some(recorded) = recorded.filter(|_| no_database(path)) {
        durable::check(path, recorded, None)?;
    }
    if !path.join("CURRENT").exists() {
        return Err(OpenError::NotArbor { path: path.to_path_buf() });
    }
    if creation_unfinished(path) {
        return Err(OpenError::CreationUnfinished { path: path.to_path_buf() });
    }
    let cache = block_cache(config);
    let mut opts = base_options(config, cache.as_ref());
    // Every table file is opened now: a writer's flushes and compactions delete files, and
    // an instance that holds them open keeps reading its state.
    opts.set_max_open_files(-1);
    // A database written before a later family was added lacks it (and holds nothing
    // there); a read-only open cannot create it, so it opens without.
    let present = DB::list_cf(&opts, path).unwrap_or_default();
    let opened = retry_vanished(|| {
        let families = family_descriptors(config, cache.as_ref()).filter(|d| {
            !LATER_FAMILIES.contains(&d.name()) || present.iter().any(|p| p == d.name())
        });
        DB::open_cf_descriptors_read_only(&opts, path, families, false)
    });
    let db = match (opened, recorded) {
        (Ok(db), _) => db,
        // Arbor's families are missing (a MANIFEST cut before them, say): with a record,
        // that is a database rolled back, and said so.
        (Err(e), Some(recorded)) => {
            durable::check(path, recorded, head_read_only(path)?)?;
            return Err(e.into());
        }
        (Err(e), None) => return Err(e.into()),
    };
    if let Some(recorded) = recorded {
        durable::check(path, recorded, stored_head(&db)?)?;
    }
    let meta = meta_family(&db, path)?;
    match has_schema(&db, meta)? {
        true => Ok(db),
        false => Err(OpenError::NotArbor { path: path.to_path_buf() }),
    }
}

/// `open`, a read-only open, retried while it fails on a table file that vanished: a writer
/// in another process deleted it between our reading of the MANIFEST and opening it, and
/// the next MANIFEST names its replacement.
fn retry_vanished(open: impl Fn() -> Result<DB, rocksdb::Error>) -> Result<DB, rocksdb::Error> {
    let mut attempt = 0;
    loop {
        match open() {
            Err(e) if attempt < READ_ONLY_OPEN_ATTEMPTS && vanished_file(&e) => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(10 * attempt));
            }
            result => return result,
        }
    }
}

/// Read-only opens retried after losing a race with a writer's file deletion.
const READ_ONLY_OPEN_ATTEMPTS: u64 = 20;

/// True for an open that failed on a table file that no longer exists.
fn vanished_file(e: &rocksdb::Error) -> bool {
    e.to_string().contains("No such file or directory")
}

fn meta_family<'a>(db: &'a DB, path: &Path) -> Result<&'a rocksdb::ColumnFamily, OpenError> {
    db.cf_handle(CF_META)
        .ok_or_else(|| OpenError::MissingColumnFamily { path: path.to_path_buf(), name: CF_META })
}

/// Check the schema record: true when it is this build's, false when absent; another
/// version is an error.
fn has_schema(db: &DB, meta: &rocksdb::ColumnFamily) -> Result<bool, OpenError> {
    let Some(v) = db.get_cf(meta, META_SCHEMA)? else { return Ok(false) };
    let bytes: [u8; 4] =
        v.as_slice().try_into().map_err(|_| Corruption::SchemaRecord { len: v.len() })?;
    let found = u32::from_be_bytes(bytes);
    if found != SCHEMA_VERSION {
        return Err(OpenError::SchemaMismatch { found, expected: SCHEMA_VERSION });
    }
    Ok(true)
}

/// The layout `db` recorded at its creation (Ethereum when it predates the record), which
/// must be `requested` when one is.
pub(crate) fn read_layout(db: &DB, requested: Option<LayoutName>) -> Result<LayoutName, OpenError> {
    let meta = db
        .cf_handle(CF_META)
        .ok_or(OpenError::MissingColumnFamily { path: db.path().to_path_buf(), name: CF_META })?;
    let recorded = match db.get_cf(meta, META_LAYOUT)? {
        None => LayoutName::Ethereum,
        Some(v) => std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()).ok_or_else(|| {
            Corruption::LayoutRecord { found: String::from_utf8_lossy(&v).into_owned() }
        })?,
    };
    match requested {
        Some(requested) if requested != recorded => {
            Err(OpenError::LayoutMismatch { recorded, requested })
        }
        _ => Ok(recorded),
    }
}
