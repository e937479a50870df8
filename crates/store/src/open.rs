//! Opening, creating and closing a store: [`StateDb::open`] (creating the database when
//! the directory is empty), [`StateDb::open_read_only`], [`StateDb::close`],
//! [`StateDb::close_with_nodes_behind`] and the clean shutdown a drop runs. An open reads
//! the head, the bulk-load marker and the cache totals, catches the nodes up to the head
//! (`catch_up.rs`) before anything is served, and starts the background writer.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};
use rocksdb::DB;
use state::H256;

use crate::config::StoreConfig;
use crate::durable::{self, DurableRecord};
use crate::error::{Corruption, OpenError, StoreError};
use crate::kept::KeptReads;
use crate::keys::{
    cf, decode_head, CF_META, COLUMN_FAMILIES, META_BULK, META_CACHE_TOTALS, META_HEAD,
};
use crate::rocks::open::open_db;
use crate::rocks::FaultInjector;
use crate::shared::{Progress, Shared};
use crate::statedb::StateDb;
use crate::tiers::cache::{ByteCache, CacheTotals};
use crate::tiers::reader::Reader;
use crate::tiers::recent::Recent;
use crate::tiers::resident::Resident;
use crate::writer::{writer_loop, ToWriter};

impl StateDb {
    /// Open (or create) the database at `path`.
    ///
    /// A database holding an unfinished bulk load opens (so that it can be inspected, and
    /// the load finished); [`StateDb::unfinished_bulk_load`] names it, and reads, commits
    /// and reverts refuse it with [`StoreError::UnfinishedBulkLoad`].
    pub fn open(path: &Path, config: StoreConfig) -> Result<StateDb, OpenError> {
        let (db, recorded) = open_db(path, &config, None).map_err(|e| in_use(path, e))?;
        Self::with_db(db, recorded, config, false)
    }

    /// [`StateDb::open`], except that a database this call creates is born holding an
    /// unfinished bulk load labelled `label` (the marker is in the birth records' synced
    /// batch): a process killed before its load finishes leaves no database, an unfinished
    /// creation or an unfinished load, never a finished empty database that a later
    /// opener would take for a chain's start. An existing database is opened as it is.
    pub fn open_for_load(
        path: &Path,
        config: StoreConfig,
        label: &str,
    ) -> Result<StateDb, OpenError> {
        if label.len() > crate::bulk::BULK_LABEL_BYTES_MAX {
            let max = crate::bulk::BULK_LABEL_BYTES_MAX;
            return Err(OpenError::LabelTooLong { len: label.len(), max });
        }
        let (db, recorded) = open_db(path, &config, Some(label)).map_err(|e| in_use(path, e))?;
        Self::with_db(db, recorded, config, false)
    }

    /// Open the existing database at `path` read-only, for inspection while a writer may
    /// run in another process: no lock is taken, nothing is written (not even the cache
    /// counters at close), and the state is the one persisted when it opened. Commits,
    /// reverts, bulk loads, restores and repairs are refused ([`StoreError::ReadOnly`]).
    pub fn open_read_only(path: &Path, config: StoreConfig) -> Result<StateDb, OpenError> {
        let db = crate::rocks::open::open_db_read_only(path, &config)?;
        Self::with_db(db, None, config, true)
    }

    /// The store over `db`, whose durable record holds `recorded` (read-only: never written).
    fn with_db(
        db: DB,
        recorded: Option<durable::Head>,
        config: StoreConfig,
        read_only: bool,
    ) -> Result<StateDb, OpenError> {
        let durable = DurableRecord::new(db.path().to_path_buf(), recorded);
        let db = Arc::new(db);
        let head = read_head(&db)?;
        let bulk = read_bulk_marker(&db)?;
        let totals_at_open = read_cache_totals(&db)?;
        let layout = crate::rocks::open::read_layout(&db, config.layout)?;
        let reader = Reader {
            db: db.clone(),
            layout,
            layers: RwLock::new(Vec::new()),
            node_cache: ByteCache::new(config.cache.node_cache_bytes),
            flat_cache: ByteCache::new(config.cache.flat_cache_bytes),
        };
        let recent = Recent::new(config.recent_blocks(), config.history.recent_bytes, head);
        let recent = RwLock::new(recent);
        let shared = Arc::new(Shared {
            reader,
            config,
            progress: Mutex::new(Progress { persisted: head.0, ..Progress::default() }),
            changed: Condvar::new(),
            faults: FaultInjector::default(),
            layers_persisted: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            commit_waits: AtomicU64::new(0),
            peak_unpersisted_bytes: AtomicU64::new(0),
            peak_buffer_bytes: AtomicU64::new(0),
            write_backs: AtomicU64::new(0),
            totals_at_open,
            read_only,
            scanned: AtomicU64::new(0),
            unflushed: AtomicBool::new(false),
            recent,
            durable,
        });
        let resident = Resident::new(shared.config.cache.resident_bytes);
        let mut state = StateDb {
            shared,
            head,
            bulk,
            resident,
            tx: None,
            writer: None,
            caught_up: None,
            kept: KeptReads::default(),
        };
        // Nodes lagging the head are brought to it before anything is served.
        state.caught_up = state.catch_up().map_err(OpenError::CatchUp)?;
        if read_only {
            return Ok(state);
        }
        // The channel only carries handles; memory is bounded by pending_bytes.
        let (tx, rx) = sync_channel::<ToWriter>(1024);
        let s = state.shared.clone();
        let writer = std::thread::Builder::new()
            .name("arbor-writer".into())
            .spawn(move || writer_loop(s, rx))
            .map_err(OpenError::SpawnWriter)?;
        state.tx = Some(tx);
        state.writer = Some(writer);
        Ok(state)
    }

    /// Compact every column family (for size measurements).
    pub fn compact(&self) -> Result<(), StoreError> {
        self.flush()?;
        let db = &self.shared.reader.db;
        for c in COLUMN_FAMILIES {
            db.compact_range_cf(cf(db, c)?, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    /// Close without writing the node buffer back: the queued blocks are written (flat
    /// values, reverse diffs, head) and made durable, the trie nodes stay at the node
    /// watermark, and the next open brings them to the head from the reverse diffs (see
    /// `docs/design.md`, "Nodes behind the block"). A quick shutdown, and what a crash
    /// right after a group reached disk leaves, for measuring the catch-up.
    pub fn close_with_nodes_behind(mut self) -> Result<(), StoreError> {
        if let Some(tx) = self.tx.take() {
            tx.send(ToWriter::Abandon).map_err(|_| StoreError::WriterStopped)?;
        }
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        if let Some(e) = &self.shared.progress.lock().poisoned {
            return Err(e.poisoned());
        }
        self.shared.make_durable()?;
        self.record_durable()
    }

    /// Stop the writer after it persisted every queued layer (a clean shutdown).
    pub fn close(mut self) -> Result<(), StoreError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), StoreError> {
        // Drop after close(): the writer is gone and the totals are written already.
        if self.tx.is_none() && self.writer.is_none() {
            return Ok(());
        }
        drop(self.tx.take());
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        if let Some(e) = &self.shared.progress.lock().poisoned {
            return Err(e.poisoned());
        }
        self.shared.make_durable()?;
        let db = &self.shared.reader.db;
        db.put_cf(cf(db, CF_META)?, META_CACHE_TOTALS, self.cache_totals().encode())?;
        db.flush_wal(true)?;
        self.record_durable()
    }
}

impl Drop for StateDb {
    fn drop(&mut self) {
        // A clean shutdown persists all layers; errors surface through close().
        let _ = self.shutdown();
    }
}

/// The `meta` family of a database `open_db` opened (which checked that it exists).
fn meta_cf(db: &DB) -> Result<&rocksdb::ColumnFamily, OpenError> {
    db.cf_handle(CF_META).ok_or_else(|| OpenError::MissingColumnFamily {
        path: db.path().to_path_buf(),
        name: CF_META,
    })
}

/// A RocksDB lock held by another process becomes [`OpenError::InUse`].
fn in_use(path: &Path, e: OpenError) -> OpenError {
    match &e {
        OpenError::Rocks(r) if r.is_lock_held() => OpenError::InUse { path: path.to_path_buf() },
        _ => e,
    }
}

fn read_head(db: &DB) -> Result<(u64, H256), OpenError> {
    match db.get_cf(meta_cf(db)?, META_HEAD)? {
        Some(v) => Ok(decode_head(&v)?),
        None => Err(Corruption::NoHead.into()),
    }
}

fn read_bulk_marker(db: &DB) -> Result<Option<String>, OpenError> {
    match db.get_cf(meta_cf(db)?, META_BULK)? {
        None => Ok(None),
        Some(v) => {
            let len = v.len();
            Ok(Some(String::from_utf8(v).map_err(|_| Corruption::BulkMarker { len })?))
        }
    }
}

fn read_cache_totals(db: &DB) -> Result<CacheTotals, OpenError> {
    match db.get_cf(meta_cf(db)?, META_CACHE_TOTALS)? {
        None => Ok(CacheTotals::default()),
        Some(v) => Ok(CacheTotals::decode(&v).ok_or(Corruption::CacheTotals {
            len: v.len(),
            expected: CacheTotals::ENCODED_BYTES,
        })?),
    }
}
