//! The state a store's handles and its background writer share: the reader (caches,
//! layer stack, RocksDB), the writer's [`Progress`] under one lock with a condition
//! variable that signals each change of it, and the session's counters.
//!
//! Invariant: once [`Progress::poisoned`] is set it stays set until the store is reopened;
//! the writer writes nothing after it, and commits and flushes report it (see `writer.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::config::StoreConfig;
use crate::durable::DurableRecord;
use crate::error::StoreError;
use crate::keys::{cf, COLUMN_FAMILIES};
use crate::rocks::FaultInjector;
use crate::tiers::cache::CacheTotals;
use crate::tiers::reader::Reader;
use crate::tiers::recent::Recent;

/// The first failed write.
#[derive(Debug, Clone)]
pub(crate) struct Poison {
    pub(crate) number: u64,
    pub(crate) error: Arc<StoreError>,
}

impl Poison {
    pub(crate) fn poisoned(&self) -> StoreError {
        StoreError::Poisoned { number: self.number, source: self.error.clone() }
    }
}

/// How far the writer got: what waits, what is on disk, and the first failure.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Bytes in layers not yet persisted.
    pub(crate) pending_bytes: u64,
    /// Highest block number persisted.
    pub(crate) persisted: u64,
    /// Set when a write failed: the block and the error.
    pub(crate) poisoned: Option<Poison>,
    /// The node watermark while the node buffer holds newer nodes (`nodes` on disk is at
    /// this block); `None` when the nodes on disk are at the persisted block.
    pub(crate) nodes_at: Option<u64>,
    /// Bytes held by the node buffer.
    pub(crate) buffer_bytes: u64,
}

/// What the store's handles ([`crate::StateDb`], its read handles) and the writer thread
/// share.
pub(crate) struct Shared {
    pub(crate) reader: Reader,
    pub(crate) config: StoreConfig,
    pub(crate) progress: Mutex<Progress>,
    pub(crate) changed: Condvar,
    pub(crate) faults: FaultInjector,
    pub(crate) layers_persisted: AtomicU64,
    /// Bytes of the write batches the writer wrote (keys, values, batch framing).
    pub(crate) bytes_written: AtomicU64,
    pub(crate) commit_waits: AtomicU64,
    /// The most bytes of unpersisted layers held at once this session.
    pub(crate) peak_unpersisted_bytes: AtomicU64,
    /// The most bytes the node buffer held at once this session.
    pub(crate) peak_buffer_bytes: AtomicU64,
    /// Node write-backs this session (the node buffer written to disk).
    pub(crate) write_backs: AtomicU64,
    /// Cache counters of the sessions closed before this one.
    pub(crate) totals_at_open: CacheTotals,
    /// Opened read-only: nothing is ever written.
    pub(crate) read_only: bool,
    /// `flat` entries read by rebuilds, verifies and repairs this session (progress).
    pub(crate) scanned: AtomicU64,
    /// The writer wrote layers (without the WAL) that no memtable flush has made durable
    /// yet (see `writer.rs`, "Durability").
    pub(crate) unflushed: AtomicBool,
    /// The recent blocks' old values (see `tiers/recent/`); lock order: before the layers.
    pub(crate) recent: RwLock<Recent>,
    /// The durable record (see `durable.rs`).
    pub(crate) durable: DurableRecord,
}

impl Shared {
    /// Make every layer the writer wrote durable: one atomic flush of every column
    /// family's memtables, when any layer was written since the last. Called before any
    /// write that goes through the WAL, so that replaying the WAL after a crash never
    /// applies a write on top of a state missing earlier layers.
    pub(crate) fn make_durable(&self) -> Result<(), StoreError> {
        if !self.unflushed.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let db = &self.reader.db;
        let families = COLUMN_FAMILIES.iter().map(|c| cf(db, c)).collect::<Result<Vec<_>, _>>()?;
        let mut opts = rocksdb::FlushOptions::default();
        opts.set_wait(true);
        db.flush_cfs_opt(&families, &opts).inspect_err(|_| {
            self.unflushed.store(true, Ordering::Release);
        })?;
        Ok(())
    }
}
