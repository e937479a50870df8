//! Counters and sizes: [`StateDb::stats`] (what `arbor stats` prints: head, layers, the
//! node buffer, caches, the resident trie, the recent window, RocksDB's sizes per column
//! family) and [`ReadHandle::metrics`] (live counters any thread may read cheaply).

use std::sync::atomic::Ordering;

use crate::keys::COLUMN_FAMILIES;
use crate::statedb::{ReadHandle, StateDb};
use crate::tiers::buffer::CatchUpReport;
use crate::tiers::cache::CacheTotals;
use crate::tiers::layer::block_layers;
use crate::tiers::recent::RecentStats;
use crate::tiers::resident::ResidentStats;

/// Live counters a metrics endpoint reads from any thread ([`ReadHandle::metrics`]).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StoreMetrics {
    /// Highest block on disk.
    pub persisted_number: u64,
    /// Layers waiting for the writer.
    pub unpersisted_layers: usize,
    /// Bytes held by those layers.
    pub unpersisted_bytes: u64,
    /// Bytes the writer wrote since open.
    pub bytes_written: u64,
    /// Commits that waited for the writer.
    pub commit_waits: u64,
    /// Node cache counters.
    pub node_cache: crate::tiers::cache::CacheStats,
    /// Flat cache counters.
    pub flat_cache: crate::tiers::cache::CacheStats,
}

impl ReadHandle {
    /// The store's live counters (cheap: no RocksDB property is read).
    pub fn metrics(&self) -> StoreMetrics {
        let s = &self.shared;
        let p = s.progress.lock();
        StoreMetrics {
            persisted_number: p.persisted,
            unpersisted_layers: block_layers(&s.reader.layers.read()).count(),
            unpersisted_bytes: p.pending_bytes,
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            commit_waits: s.commit_waits.load(Ordering::Relaxed),
            node_cache: s.reader.node_cache.stats(),
            flat_cache: s.reader.flat_cache.stats(),
        }
    }
}

impl StateDb {
    /// Counters for `arbor stats`.
    pub fn stats(&self) -> StoreStats {
        // The window's lock comes before the layers' (the order every reader takes them).
        let recent = self.shared.recent.read().stats();
        let p = self.shared.progress.lock();
        let layers = self.shared.reader.layers.read();
        let db = &self.shared.reader.db;
        let prop = |name: &str| -> u64 {
            COLUMN_FAMILIES
                .iter()
                .filter_map(|c| db.cf_handle(c))
                .filter_map(|h| db.property_int_value_cf(h, name).ok().flatten())
                .sum()
        };
        StoreStats {
            unfinished_bulk_load: self.bulk.clone(),
            head_number: self.head.0,
            head_root: self.head.1.to_string(),
            persisted_number: p.persisted,
            unpersisted_layers: block_layers(&layers).count(),
            unpersisted_bytes: p.pending_bytes,
            nodes_at: p.nodes_at.unwrap_or(p.persisted),
            node_buffer_bytes: p.buffer_bytes,
            peak_node_buffer_bytes: self.shared.peak_buffer_bytes.load(Ordering::Relaxed),
            node_write_backs: self.shared.write_backs.load(Ordering::Relaxed),
            catch_up: self.caught_up,
            layers_persisted: self.shared.layers_persisted.load(Ordering::Relaxed),
            bytes_written: self.shared.bytes_written.load(Ordering::Relaxed),
            commit_waits: self.shared.commit_waits.load(Ordering::Relaxed),
            peak_unpersisted_bytes: self.shared.peak_unpersisted_bytes.load(Ordering::Relaxed),
            node_cache: self.shared.reader.node_cache.stats(),
            flat_cache: self.shared.reader.flat_cache.stats(),
            resident: self.resident.stats(),
            cache_totals: self.cache_totals(),
            sst_bytes: prop("rocksdb.total-sst-files-size"),
            live_data_bytes: prop("rocksdb.estimate-live-data-size"),
            estimated_keys: prop("rocksdb.estimate-num-keys"),
            column_families: COLUMN_FAMILIES
                .iter()
                .filter_map(|c| db.cf_handle(c).map(|h| (*c, h)))
                .map(|(name, h)| {
                    let p = |n: &str| db.property_int_value_cf(h, n).ok().flatten().unwrap_or(0);
                    ColumnFamilyStats {
                        name,
                        sst_bytes: p("rocksdb.total-sst-files-size"),
                        memtable_bytes: p("rocksdb.cur-size-all-mem-tables"),
                        estimated_keys: p("rocksdb.estimate-num-keys"),
                    }
                })
                .collect(),
            recent,
        }
    }

    /// Cache counters over every session of this database, this one included.
    pub fn cache_totals(&self) -> CacheTotals {
        let r = &self.shared.reader;
        self.shared.totals_at_open.plus(&r.node_cache.stats(), &r.flat_cache.stats())
    }
}

/// One column family's size (see `arbor stats`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ColumnFamilyStats {
    /// `flat`, `nodes`, `history` or `meta`.
    pub name: &'static str,
    /// Bytes in its SST files.
    pub sst_bytes: u64,
    /// Bytes in its memtables.
    pub memtable_bytes: u64,
    /// RocksDB's key-count estimate.
    pub estimated_keys: u64,
}

/// Store counters (see `arbor stats`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoreStats {
    /// The label of an unfinished bulk load, if the database holds one (its state is
    /// partial).
    pub unfinished_bulk_load: Option<String>,
    /// Head block (`block` in JSON, the CLI's name for it).
    #[serde(rename = "block")]
    pub head_number: u64,
    /// Head root (`root` in JSON).
    #[serde(rename = "root")]
    pub head_root: String,
    /// Highest block on disk (`persisted_block` in JSON).
    #[serde(rename = "persisted_block")]
    pub persisted_number: u64,
    /// Layers waiting for the writer.
    pub unpersisted_layers: usize,
    /// Bytes held by those layers.
    pub unpersisted_bytes: u64,
    /// The node watermark: the block whose trie nodes are on disk (below the persisted
    /// block while the node buffer holds newer ones; see `docs/design.md`, "Nodes behind
    /// the block").
    pub nodes_at: u64,
    /// Bytes held by the node buffer now.
    pub node_buffer_bytes: u64,
    /// The most bytes the node buffer held at once since open.
    pub peak_node_buffer_bytes: u64,
    /// Times the node buffer was written to disk since open.
    pub node_write_backs: u64,
    /// What the open's catch-up did, if the nodes lagged the head when it opened.
    pub catch_up: Option<CatchUpReport>,
    /// Layers written since open.
    pub layers_persisted: u64,
    /// Bytes the writer wrote since open (its write batches: keys, values, framing).
    pub bytes_written: u64,
    /// Commits that waited for the writer (back-pressure).
    pub commit_waits: u64,
    /// The most bytes of unpersisted layers held at once since the store was opened (at
    /// most `layers.unpersisted_bytes_max`, or one layer when a single layer is larger).
    pub peak_unpersisted_bytes: u64,
    /// Node cache counters.
    pub node_cache: crate::tiers::cache::CacheStats,
    /// Flat cache counters.
    pub flat_cache: crate::tiers::cache::CacheStats,
    /// The resident trie's counters (this session).
    pub resident: ResidentStats,
    /// Both caches' lookups and evictions over every session, this one included.
    pub cache_totals: CacheTotals,
    /// Total SST bytes.
    pub sst_bytes: u64,
    /// RocksDB's live-data estimate.
    pub live_data_bytes: u64,
    /// RocksDB's key-count estimate.
    pub estimated_keys: u64,
    /// Per column family.
    pub column_families: Vec<ColumnFamilyStats>,
    /// The recent window.
    pub recent: RecentStats,
}
