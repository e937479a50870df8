//! RocksDB as the store uses it: the configured options of every column family (block
//! cache, bloom and prefix filters, memtable hints, compression, background priority), the
//! iterators over `flat`, and the fault injector. Opening with the schema and durability
//! checks is `open`, creating a database crash-safely is `create`.

pub(crate) mod create;
pub(crate) mod open;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering};

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType,
    DBRawIterator, IteratorMode, Options, ReadOptions, SliceTransform, WriteBufferManager, DB,
};

use state::TrieId;

use crate::config::{Compression, StoreConfig};
use crate::error::StoreError;
use crate::keys::{cf, CF_FLAT, CF_NODES, COLUMN_FAMILIES};

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
pub(crate) fn family_descriptors(
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
