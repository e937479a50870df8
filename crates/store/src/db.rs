//! Opening RocksDB with the configured options, schema checks, and the fault injector.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType,
    DBRawIterator, IteratorMode, Options, ReadOptions, SliceTransform, WriteBatch,
    WriteBufferManager, WriteOptions, DB,
};

use state::TrieId;
use trie::LayoutName;

use crate::config::{Compression, StoreConfig};
use crate::durable::{self, Head};
use crate::error::{Corruption, OpenError, StoreError};
use crate::keys::{
    cf, decode_head, encode_head, CF_FLAT, CF_META, CF_NODES, COLUMN_FAMILIES, META_HEAD,
    META_LAYOUT, META_SCHEMA, SCHEMA_VERSION,
};

/// The configured LRU block cache, or `None` when `block_cache_bytes` is 0.
pub(crate) fn block_cache(config: &StoreConfig) -> Option<Cache> {
    let bytes = config.rocksdb.block_cache_bytes;
    (bytes > 0).then(|| Cache::new_lru_cache(usize::try_from(bytes).unwrap_or(usize::MAX)))
}

/// RocksDB options from `config` (table format, bloom filters, files, memtables, WAL,
/// compression, background threads), with `cache` as the block cache or none. Used for
/// the store's database and column families, and by the benchmark's plain baseline so
/// that both run on the same settings.
pub(crate) fn base_options(config: &StoreConfig, cache: Option<&Cache>) -> Options {
    let r = &config.rocksdb;
    let mut table = BlockBasedOptions::default();
    match cache {
        Some(c) => {
            table.set_block_cache(c);
            // Index and filter blocks count against the cache budget (RocksDB refuses this
            // without a cache: they then live in the table readers).
            table.set_cache_index_and_filter_blocks(true);
            table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        }
        None => table.disable_cache(),
    }
    table.set_bloom_filter(r.bloom_bits_per_key, false);
    table.set_format_version(5);
    let mut o = Options::default();
    o.set_block_based_table_factory(&table);
    o.set_max_open_files(r.max_open_files);
    o.set_target_file_size_base(r.target_file_size_bytes);
    o.set_write_buffer_size(r.write_buffer_bytes as usize);
    o.set_max_total_wal_size(r.max_total_wal_bytes);
    o.set_compression_type(compression(r.compression));
    o.set_level_compaction_dynamic_level_bytes(true);
    o.increase_parallelism(2);
    // The store writes its layers without the WAL: memtables must reach disk for every
    // column family at once (see `writer.rs`, "Durability").
    o.set_atomic_flush(true);
    if r.low_priority_background {
        lower_background_priority(&mut o);
    }
    with_string_options(o, cache.is_some())
}

/// Lower the CPU priority of RocksDB's background threads (flushes and compactions) and
/// make `o` use them. They belong to RocksDB's default environment, which every database
/// of the process shares; setting it twice is harmless. Measured: commit p50 −7%, blocks/s
/// +6% at 1M keys on 2 cores (docs/benchmarks.md, "Background priority").
fn lower_background_priority(o: &mut Options) {
    // Creating the default environment fails only if RocksDB cannot allocate its wrapper;
    // the database then runs at normal priority.
    if let Ok(mut env) = rocksdb::Env::new() {
        env.lower_thread_pool_cpu_priority();
        env.lower_high_priority_thread_pool_cpu_priority();
        o.set_env(&env);
    }
}

/// `o` with two options RocksDB's C API lacks, set through an options string (a copy of
/// `o` with them set; the copy shares `o`'s block cache, and its table factory is a clone
/// of `o`'s with the one field changed):
/// - memtable insert hints: the memtable keeps the position of the last insert (per first
///   key byte) and starts the next insert's search there instead of at the top of the skip
///   list. Batches here are sorted, so consecutive inserts land close together.
/// - with a block cache, the data blocks of every file a flush writes go into the cache as
///   the file is written (`prepopulate_block_cache`), so that reads of recent writes do not
///   first read them back from the file. The commit's leaf scans seek in every level-0
///   file, so each new file's blocks were cache misses until read once; measured at 1M
///   keys (docs/benchmarks.md, "Where a 1M-key block's CPU goes, again").
fn with_string_options(mut o: Options, cached: bool) -> Options {
    let text = match cached {
        true => format!("{INSERT_HINTS};{PREPOPULATE_ON_FLUSH}"),
        false => INSERT_HINTS.to_string(),
    };
    o.get_options_from_string(&text).unwrap_or(o)
}

const INSERT_HINTS: &str = "memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.1";
const PREPOPULATE_ON_FLUSH: &str = "block_based_table_factory={prepopulate_block_cache=kFlushOnly}";

/// The column families with their options. `nodes` is never compressed: a node's bytes
/// are mostly 32-byte hashes, which no compressor shrinks, so compressing them would only
/// spend CPU in every flush and compaction.
fn family_descriptors(
    config: &StoreConfig,
    cache: Option<&Cache>,
) -> impl Iterator<Item = ColumnFamilyDescriptor> {
    let mut descriptors = Vec::with_capacity(COLUMN_FAMILIES.len());
    for name in COLUMN_FAMILIES {
        let mut o = base_options(config, cache);
        if name == CF_NODES {
            o.set_compression_type(DBCompressionType::None);
        }
        if name == CF_FLAT {
            o.set_prefix_extractor(SliceTransform::create_fixed_prefix(FLAT_PREFIX_BYTES));
        }
        descriptors.push(ColumnFamilyDescriptor::new(name, o));
    }
    descriptors.into_iter()
}

/// Bytes of a `flat` key its prefix filter covers: the trie's tag and, in the main trie,
/// the key's first three bytes (six nibbles of its path). Table files of `flat` keep these
/// prefixes in their bloom filters besides the whole keys, so that a leaf scan seeking a
/// path of six nibbles or more skips the files that hold nothing under it
/// (docs/design.md, "Commit path").
///
/// Every other iterator over `flat` must be made with [`flat_total_order`]: with a prefix
/// extractor set, RocksDB's default iterator may skip keys outside the sought prefix.
pub(crate) const FLAT_PREFIX_BYTES: usize = 4;

/// Read options for an iterator that sees every key in order: needed on `flat`, whose
/// prefix extractor would otherwise put a default iterator in prefix mode; harmless on the
/// other families.
pub(crate) fn flat_total_order() -> ReadOptions {
    let mut o = ReadOptions::default();
    o.set_total_order_seek(true);
    o
}

/// The first entry of family `h` in key order (`None`: the family is empty).
pub(crate) fn first_entry(db: &DB, h: &ColumnFamily) -> Result<Option<KvPair>, rocksdb::Error> {
    db.iterator_cf_opt(h, flat_total_order(), IteratorMode::Start).next().transpose()
}

/// A key and value as RocksDB's iterator yields them.
pub(crate) type KvPair = (Box<[u8]>, Box<[u8]>);

/// A raw iterator over `flat` in total order.
pub(crate) fn flat_iter(db: &DB) -> Result<DBRawIterator<'_>, StoreError> {
    Ok(db.raw_iterator_cf_opt(cf(db, CF_FLAT)?, flat_total_order()))
}

/// True when a scan of the `flat` keys under `path` of `trie` stays within one prefix of
/// the prefix filter (its range's first [`FLAT_PREFIX_BYTES`] bytes are whole bytes of
/// the path), so that it may seek in prefix mode ([`leaf_scan_iter`]).
pub(crate) fn scans_one_prefix(trie: &TrieId, path: &[u8]) -> bool {
    trie.prefix_len() + path.len() / 2 >= FLAT_PREFIX_BYTES
}

/// A `flat` iterator for leaf scans: in prefix mode (each seek consults the files' prefix
/// filters and the iterator ends at the sought key's prefix) when `by_prefix`, which only
/// a scan that [`scans_one_prefix`] may ask for; in total order otherwise.
pub(crate) fn leaf_scan_iter(db: &DB, by_prefix: bool) -> Result<DBRawIterator<'_>, StoreError> {
    let mut opts = ReadOptions::default();
    match by_prefix {
        true => opts.set_prefix_same_as_start(true),
        false => opts.set_total_order_seek(true),
    }
    Ok(db.raw_iterator_cf_opt(cf(db, CF_FLAT)?, opts))
}

/// The shared bound on all memtables of a database ([`RocksConfig::memtable_budget_bytes`]).
///
/// [`RocksConfig::memtable_budget_bytes`]: crate::config::RocksConfig::memtable_budget_bytes
pub(crate) fn memtable_manager(config: &StoreConfig) -> WriteBufferManager {
    let bytes = usize::try_from(config.rocksdb.memtable_budget_bytes()).unwrap_or(usize::MAX);
    WriteBufferManager::new_write_buffer_manager(bytes, false)
}

fn compression(c: Compression) -> DBCompressionType {
    match c {
        Compression::None => DBCompressionType::None,
        Compression::Lz4 => DBCompressionType::Lz4,
        Compression::Zstd => DBCompressionType::Zstd,
    }
}

/// Open the database at `path`, creating it (with schema and an empty head) if absent.
///
/// Creation is crash-safe and happens inside `path` (an absent path or an empty directory,
/// which may be a mount point: nothing is renamed onto it); see [`create_db`]. Databases
/// created otherwise (by older builds) may still lack the schema record after a kill: one
/// whose every column family is empty is an interrupted creation and is finished here,
/// while one that holds any data without it is refused.
///
/// Returns the durable record the database was checked against (`None`: it has none; see
/// `durable.rs`). The check runs before anything is created, cleared or opened for writing:
/// RocksDB's writable open deletes every table file its MANIFEST does not name, which would
/// destroy what a rolled-back MANIFEST left behind.
pub(crate) fn open_db(path: &Path, config: &StoreConfig) -> Result<(DB, Option<Head>), OpenError> {
    config.validate()?;
    let recorded = check_durable(path)?;
    if recorded.is_none() {
        check_orphaned_tables(path)?;
    }
    if no_database(path) {
        create_db(path, config)?;
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
    if let Some(name) = COLUMN_FAMILIES.into_iter().find(|n| !present.iter().any(|p| p == n)) {
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
            write_birth_records(&db, meta, config.layout.unwrap_or_default())?
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
    let opened = retry_vanished(|| {
        let families = family_descriptors(config, cache.as_ref());
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

/// The schema version, the layout and the empty head of a new database, in one synced
/// batch.
fn write_birth_records(
    db: &DB,
    meta: &rocksdb::ColumnFamily,
    layout: LayoutName,
) -> Result<(), rocksdb::Error> {
    let mut batch = WriteBatch::default();
    batch.put_cf(meta, META_SCHEMA, SCHEMA_VERSION.to_be_bytes());
    batch.put_cf(meta, META_LAYOUT, layout.as_str());
    batch.put_cf(meta, META_HEAD, encode_head(0, &layout.empty_root()));
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    db.write_opt(batch, &sync)
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
fn create_db(path: &Path, config: &StoreConfig) -> Result<(), OpenError> {
    create_dir_synced(path).map_err(create_error(path))?;
    // Resolved, as `open_db` opens it: RocksDB's in-process lock compares path strings.
    let real = std::fs::canonicalize(path).map_err(create_error(path))?;
    let Some(marker) = claim_creation(&real, path)? else {
        // Another opener completed the database meanwhile.
        return Ok(());
    };
    let created = create_in(&real, path, config).and_then(|()| {
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
fn create_in(dir: &Path, shown: &Path, config: &StoreConfig) -> Result<(), OpenError> {
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
    Ok(write_birth_records(&db, meta, config.layout.unwrap_or_default())?)
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
fn unborn(path: &Path, present: &[String]) -> Result<bool, OpenError> {
    let ours = |name: &String| name == "default" || COLUMN_FAMILIES.contains(&name.as_str());
    if !present.iter().all(ours) {
        return Ok(false);
    }
    let db = DB::open_cf_for_read_only(&Options::default(), path, present, false)?;
    Ok(every_family_empty(&db)?)
}

/// True when no column family of `db` (Arbor's and `default`) holds a key.
fn every_family_empty(db: &DB) -> Result<bool, rocksdb::Error> {
    let mut empty = db.iterator(IteratorMode::Start).next().transpose()?.is_none();
    for name in COLUMN_FAMILIES {
        if let Some(h) = db.cf_handle(name) {
            empty &= first_entry(db, h)?.is_none();
        }
    }
    Ok(empty)
}

/// The RocksDB options the store opens its database with (table format, block cache,
/// bloom filters, files, memtables and their shared budget, WAL, compression), for a
/// comparison database that should run on the same settings as the store.
pub fn rocksdb_options(config: &StoreConfig) -> Options {
    let mut o = base_options(config, block_cache(config).as_ref());
    o.set_write_buffer_manager(&memtable_manager(config));
    o
}

/// Makes writes fail on command (tests of the failure path).
#[derive(Debug, Default)]
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub, dead_code))]
pub struct FaultInjector {
    /// Fail the write of this block number and later ones (0 = never).
    fail_from: AtomicU64,
    /// Sleep this long (µs) before each write: a slow disk.
    delay_us: AtomicU64,
}

#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub, dead_code))]
impl FaultInjector {
    /// Make every write of block `number` or later fail.
    pub fn fail_writes_from(&self, number: u64) {
        self.fail_from.store(number.max(1), Ordering::SeqCst);
    }

    /// Make every write wait `delay` first (a slow disk), until [`FaultInjector::clear`].
    pub fn slow_writes(&self, delay: std::time::Duration) {
        self.delay_us.store(delay.as_micros().min(u128::from(u64::MAX)) as u64, Ordering::SeqCst);
    }

    /// Stop failing and delaying.
    pub fn clear(&self) {
        self.fail_from.store(0, Ordering::SeqCst);
        self.delay_us.store(0, Ordering::SeqCst);
    }

    pub(crate) fn check(&self, number: u64) -> Result<(), StoreError> {
        let delay = self.delay_us.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay));
        }
        let from = self.fail_from.load(Ordering::SeqCst);
        if from != 0 && number >= from {
            return Err(StoreError::Injected { number });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options string took: the OPTIONS file names the hint extractor and the cache's
    /// prepopulation on flush for every column family the store uses (not `default`, which
    /// it never writes), and the block cache and bloom filters of the base options survived
    /// the copy.
    #[test]
    fn string_options_are_set_on_every_family() {
        let text = options_file_of(&StoreConfig::default());
        let hinted =
            text.matches("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.1");
        assert_eq!(hinted.count(), COLUMN_FAMILIES.len(), "{text}");
        let warmed = text.matches("prepopulate_block_cache=kFlushOnly").count();
        assert_eq!(warmed, COLUMN_FAMILIES.len(), "{text}");
        assert!(text.contains("bloomfilter"), "{text}");
        // Set only with a block cache (see `base_options`).
        let cached = text.matches("cache_index_and_filter_blocks=true").count();
        assert_eq!(cached, COLUMN_FAMILIES.len(), "{text}");
        // Without a block cache there is nothing to prepopulate; the hints still take.
        let mut uncached = StoreConfig::default();
        uncached.rocksdb.block_cache_bytes = 0;
        let text = options_file_of(&uncached);
        assert!(!text.contains("kFlushOnly"), "{text}");
        let hinted =
            text.matches("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.1");
        assert_eq!(hinted.count(), COLUMN_FAMILIES.len(), "{text}");
    }

    /// The OPTIONS file RocksDB writes for a new store with `config`.
    fn options_file_of(config: &StoreConfig) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        drop(open_db(&path, config).unwrap().0);
        let options = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("OPTIONS-"))
            .unwrap();
        std::fs::read_to_string(options).unwrap()
    }

    /// `flat`, and only `flat`, has the prefix extractor its leaf scans' prefix mode needs.
    #[test]
    fn only_flat_has_a_prefix_filter() {
        let text = options_file_of(&StoreConfig::default());
        let ours = format!("\n  prefix_extractor=rocksdb.FixedPrefix.{FLAT_PREFIX_BYTES}\n");
        assert_eq!(text.matches(&ours).count(), 1, "{text}");
        let flat = text.find(&format!("[CFOptions \"{CF_FLAT}\"]")).unwrap();
        let next = text[flat + 1..].find("[CFOptions").map_or(text.len(), |i| flat + 1 + i);
        assert!(text[flat..next].contains(&ours), "{text}");
    }

    /// A scan may seek in prefix mode exactly when its range lies within one prefix.
    #[test]
    fn scans_one_prefix_when_the_range_shares_its_prefix() {
        let storage = TrieId::Storage(state::H256([0xab; 32]));
        for trie in [TrieId::Main, storage] {
            for len in 0..12 {
                let path: Vec<u8> = (0..len).map(|i| (i as u8 * 7 + 3) & 0x0f).collect();
                let (lo, hi) = crate::keys::flat_range_for_path(&trie, &path);
                let one = lo.len() >= FLAT_PREFIX_BYTES
                    && lo[..FLAT_PREFIX_BYTES] == hi[..FLAT_PREFIX_BYTES];
                assert_eq!(scans_one_prefix(&trie, &path), one, "{trie:?} {path:?}");
            }
        }
    }

    /// Leaf scans in either mode, and the total-order iterator, see every key wherever it
    /// lies: in the memtable or in table files written before and after, some holding no
    /// key under the scanned path (the files their prefix filters skip).
    #[test]
    fn flat_iterators_see_every_key_in_every_mode() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = open_db(&dir.path().join("db"), &StoreConfig::default()).unwrap();
        let mut model = Model::new();
        for round in 0..4 {
            put_keys(&db, &mut model, round, round < 3);
        }
        check_every_mode(&db, &model);
    }

    /// A database whose `flat` files were written without the prefix extractor (by a build
    /// before it) is read right by one with it: its old files carry no prefixes in their
    /// filters, its new ones do.
    #[test]
    fn files_written_before_the_prefix_filter_are_read_right() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let families = |with_prefix: bool| {
            let mut o = Options::default();
            if with_prefix {
                o.set_prefix_extractor(SliceTransform::create_fixed_prefix(FLAT_PREFIX_BYTES));
            }
            vec![ColumnFamilyDescriptor::new(CF_FLAT, o)]
        };
        let mut o = Options::default();
        o.create_if_missing(true);
        o.create_missing_column_families(true);
        let mut model = Model::new();
        {
            let db = DB::open_cf_descriptors(&o, &path, families(false)).unwrap();
            put_keys(&db, &mut model, 0, true);
            put_keys(&db, &mut model, 1, true);
        }
        let db = DB::open_cf_descriptors(&o, &path, families(true)).unwrap();
        put_keys(&db, &mut model, 2, true);
        put_keys(&db, &mut model, 3, false);
        check_every_mode(&db, &model);
    }

    /// Full `flat` keys and their tries.
    type Model = std::collections::BTreeMap<Vec<u8>, TrieId>;

    /// 300 random keys of the main trie and one storage trie, with few distinct first bytes
    /// (so that scans of short paths find keys), written to `flat` and `model`; flushed to a
    /// table file when `flush`.
    fn put_keys(db: &DB, model: &mut Model, round: u8, flush: bool) {
        use rand::{Rng, SeedableRng};
        let flat = cf(db, CF_FLAT).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7 + u64::from(round));
        let storage = TrieId::Storage(state::H256([0x5a; 32]));
        for _ in 0..300 {
            let trie = if rng.gen_bool(0.3) { storage } else { TrieId::Main };
            let mut key = [0u8; 32];
            rng.fill(&mut key[..]);
            key[0] &= 0x13;
            let full = crate::keys::flat_key(&trie, &key).unwrap();
            db.put_cf(flat, &full, [round]).unwrap();
            model.insert(full, trie);
        }
        if flush {
            db.flush_cf(flat).unwrap();
        }
    }

    /// `flat_iter` sees `model`'s keys in order and seeks from keys of every length (as the
    /// scans across tries make) land where the model says; leaf scans in both modes find
    /// the model's first key under paths of 0 to 10 nibbles.
    fn check_every_mode(db: &DB, model: &Model) {
        let mut all = flat_iter(db).unwrap();
        all.seek_to_first();
        let mut seen = Vec::new();
        while let Some(k) = all.key() {
            seen.push(k.to_vec());
            all.next();
        }
        assert_eq!(seen, model.keys().cloned().collect::<Vec<_>>());
        for full in model.keys().step_by(11) {
            for len in 1..full.len() {
                let mut from = full[..len].to_vec();
                *from.last_mut().unwrap() ^= 0x01;
                all.seek(&from);
                let next = model.range(from..).next().map(|(k, _)| k.as_slice());
                assert_eq!(all.key(), next);
            }
        }
        for (full, trie) in model.iter().step_by(7) {
            let nibbles = trie::Nibbles::from_bytes(&full[trie.prefix_len()..]).0;
            for len in 0..=10 {
                let path = &nibbles[..len];
                let (lo, hi) = crate::keys::flat_range_for_path(trie, path);
                let first = model.range(lo..=hi).next().map(|(k, _)| k.clone());
                for prefix_mode in [false, scans_one_prefix(trie, path)] {
                    let mut iter = leaf_scan_iter(db, prefix_mode).unwrap();
                    let found = crate::view::leaf_under_in(&[], &mut iter, trie, path).unwrap();
                    assert_eq!(found.map(|(k, _)| k), first, "{path:?} {prefix_mode}");
                }
            }
        }
    }
}
