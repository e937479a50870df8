//! [`StateDb`]: open/create, read, commit blocks (async persistence with back-pressure),
//! flush, revert, stats.
//!
//! A commit (`commit.rs`) runs on the caller's thread and the rayon pool: it updates the
//! touched tries in one sorted pass each over the resident trie, and turns the result into
//! an immutable [`Layer`] (flat, nodes, meta change maps plus the encoded reverse diff). It
//! returns once the layer is on the stack; a background writer persists layers in order,
//! one atomic write batch each, built straight from the maps. Unpersisted bytes are bounded: a commit waits while the bound is
//! exceeded. A failed write poisons the store until it is reopened; what is on disk is
//! always a whole block.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use rocksdb::{WriteBatch, WriteOptions, DB};
use state::{ChangeSet, TrieId, H256};
use trie::{LayoutName, TrieUpdates};

use crate::layout::Keys;

use crate::cache::{ByteCache, CacheTotals};
use crate::config::StoreConfig;
use crate::db::{open_db, FaultInjector};
use crate::durable::{self, DurableRecord};
use crate::error::{CommitError, Corruption, OpenError, RevertError, StoreError};
use crate::history::{parent_root, ReverseDiff, ReverseEntry};
use crate::keys::{
    cf, decode_head, decode_root, encode_node_value, history_key, node_key, root_key,
    split_trie_prefix, Column, CF_HISTORY, CF_META, CF_NODES, COLUMN_FAMILIES, KEY_BYTES_MAX,
    META_BULK, META_CACHE_TOTALS, META_HEAD, META_ROOT,
};
use crate::layer::{block_layers, node_buffer_of, Layer};
use crate::recent::{Recent, RecentStats};
use crate::resident::{Resident, ResidentStats};
use crate::shared::{Progress, Shared};
use crate::view::{Reader, StoreSource};
use crate::writer::{stage_write, writer_loop, ToWriter};

/// What a commit produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The new head number.
    pub number: u64,
    /// The new main-trie root.
    pub root: H256,
    /// The new root of every touched trie.
    pub roots: Vec<(TrieId, H256)>,
    /// Keccak calls spent on the roots.
    pub hashes: u64,
    /// Leaves read by a prefix scan of `flat` (an insert beside another key's leaf, a branch
    /// collapsing onto a leaf it did not change).
    pub leaf_scans: u64,
    /// Where the commit's time went.
    pub timings: CommitTimings,
}

/// Wall time of a commit's phases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitTimings {
    /// The batched read of the changed keys' old values.
    pub read_old_values: Duration,
    /// The tries' update pass (walk, encode, hash), in parallel.
    pub trie_updates: Duration,
    /// Assembling the layer: sorting the node writes, the reverse diff.
    pub assemble: Duration,
    /// Publishing the layer (including any wait for the writer: back-pressure) and
    /// updating the resident trie.
    pub publish: Duration,
}

/// A shareable read handle on a store ([`StateDb::read_handle`]): the seam's
/// [`state::StateReader`] for threads other than the committer's. Reads are consistent per
/// key; a caller that needs one state across several reads while blocks commit keeps the
/// changes of the blocks in flight above it (as `chain::import` does).
#[derive(Clone)]
pub struct ReadHandle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for ReadHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadHandle").finish_non_exhaustive()
    }
}

impl ReadHandle {
    pub(crate) fn db(&self) -> &DB {
        &self.shared.reader.db
    }

    /// The trie layout of every trie in the database.
    pub fn layout(&self) -> LayoutName {
        self.shared.reader.layout
    }

    /// The values of many keys of one trie at once (`None`: absent), in the order given:
    /// the layers answer what they hold, the rest comes from batched RocksDB MultiGets
    /// spread over the rayon pool. Nothing is admitted to the caches. Each value is the
    /// key's value in some state between the call's start and its end.
    pub fn get_many(
        &self,
        trie: &TrieId,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let flat: Vec<Vec<u8>> =
            keys.iter().map(|k| crate::keys::flat_key(trie, k)).collect::<Result<_, _>>()?;
        let values = self.shared.reader.read_batch(Column::Flat, &flat)?;
        Ok(values.into_iter().map(|v| v.map(|v| v.to_vec())).collect())
    }

    /// The state root of block `number` as the store holds it: the head's, an unpersisted
    /// block's, or the one block `number + 1`'s reverse diff restores. `None` when it holds
    /// none: `number` is above the head, its history was pruned (`layers.history_depth`),
    /// or the state was bulk-loaded or restored at a later block.
    pub fn recorded_root(&self, number: u64) -> Result<Option<H256>, StoreError> {
        let Some(next) = number.checked_add(1) else { return Ok(None) };
        let history = {
            let layers = self.shared.reader.layers.read();
            // Block layers only: the node buffer holds no history.
            let mut blocks = block_layers(&layers);
            if let Some(l) = blocks.clone().find(|l| l.number == number) {
                return Ok(Some(l.root));
            }
            blocks.find(|l| l.number == next).map(|l| l.history.clone())
        };
        let db = self.db();
        let raw = match history {
            Some(h) => h,
            // A layer leaves the stack only once its block is on disk.
            None => {
                let head = db.get_pinned_cf(cf(db, CF_META)?, META_HEAD)?;
                match head.as_deref().map(decode_head).transpose()? {
                    Some((n, root)) if n == number => return Ok(Some(root)),
                    Some((n, _)) if n < number => return Ok(None),
                    _ => {}
                }
                match db.get_pinned_cf(cf(db, CF_HISTORY)?, history_key(next))? {
                    Some(v) => v.to_vec(),
                    None => return Ok(None),
                }
            }
        };
        let entries = ReverseDiff::decode(&raw)
            .map_err(|source| Corruption::History { number: next, source })?;
        Ok(Some(parent_root(next, &entries)?))
    }
}

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
    pub node_cache: crate::cache::CacheStats,
    /// Flat cache counters.
    pub flat_cache: crate::cache::CacheStats,
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

impl state::StateReader for ReadHandle {
    type Error = StoreError;
    type Range<'a> = crate::FlatRange<'a>;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.shared.reader.get(trie, key)?.map(|v| v.to_vec()))
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<crate::FlatRange<'a>, StoreError> {
        self.shared.reader.flat_range(trie, start, end)
    }
}

/// The persistent state. See the module docs.
pub struct StateDb {
    shared: Arc<Shared>,
    head: (u64, H256),
    /// The label of an unfinished bulk load (its marker is on disk; see `bulk.rs`).
    pub(crate) bulk: Option<String>,
    /// The committer's upper trie nodes (see `resident.rs`).
    pub(crate) resident: Resident,
    tx: Option<SyncSender<ToWriter>>,
    writer: Option<JoinHandle<()>>,
    /// What this open's catch-up of lagging nodes did (see `lag.rs`).
    caught_up: Option<CatchUpReport>,
}

impl StateDb {
    /// Open (or create) the database at `path`.
    ///
    /// A database holding an unfinished bulk load opens (so that it can be inspected, and
    /// the load finished); [`StateDb::unfinished_bulk_load`] names it, and reads, commits
    /// and reverts refuse it with [`StoreError::UnfinishedBulkLoad`].
    pub fn open(path: &Path, config: StoreConfig) -> Result<StateDb, OpenError> {
        let (db, recorded) = open_db(path, &config).map_err(|e| in_use(path, e))?;
        Self::with_db(db, recorded, config, false)
    }

    /// Open the existing database at `path` read-only, for inspection while a writer may
    /// run in another process: no lock is taken, nothing is written (not even the cache
    /// counters at close), and the state is the one persisted when it opened. Commits,
    /// reverts, bulk loads, restores and repairs are refused ([`StoreError::ReadOnly`]).
    pub fn open_read_only(path: &Path, config: StoreConfig) -> Result<StateDb, OpenError> {
        let db = crate::db::open_db_read_only(path, &config)?;
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
        let layout = crate::db::read_layout(&db, config.layout)?;
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
        let mut state =
            StateDb { shared, head, bulk, resident, tx: None, writer: None, caught_up: None };
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

    /// The node buffer, while nodes on disk lag the head (see `lag.rs`).
    pub(crate) fn node_buffer(&self) -> Option<Arc<Layer>> {
        node_buffer_of(&self.shared.reader.layers.read()).cloned()
    }

    /// Record the node buffer the catch-up left (the writer takes it over).
    pub(crate) fn note_buffer(&self, nodes_at: u64, bytes: u64) {
        let mut p = self.shared.progress.lock();
        p.nodes_at = Some(nodes_at);
        p.buffer_bytes = bytes;
        self.shared.peak_buffer_bytes.fetch_max(bytes, Ordering::Relaxed);
    }

    /// `flat` entries read so far by this session's bulk-load rebuilds, verifies and
    /// repairs: a progress counter another thread may poll while one runs.
    pub fn scanned_entries(&self) -> u64 {
        self.shared.scanned.load(Ordering::Relaxed)
    }

    pub(crate) fn scanned(&self) -> &AtomicU64 {
        &self.shared.scanned
    }

    /// True when opened with [`StateDb::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.shared.read_only
    }

    /// Head block number.
    pub fn head_number(&self) -> u64 {
        self.head.0
    }

    /// Head (main-trie) root.
    pub fn head_root(&self) -> H256 {
        self.head.1
    }

    /// The configuration in force.
    pub fn config(&self) -> &StoreConfig {
        &self.shared.config
    }

    /// Fault injection for tests: make writes fail from a given block on.
    #[cfg(feature = "test-hooks")]
    pub fn faults(&self) -> &FaultInjector {
        &self.shared.faults
    }

    /// The label of the bulk load this database holds unfinished, if any: its state is
    /// partial until the same load runs again to its end.
    pub fn unfinished_bulk_load(&self) -> Option<&str> {
        self.bulk.as_deref()
    }

    /// Refuse to serve partial state.
    pub(crate) fn check_complete(&self) -> Result<(), StoreError> {
        match &self.bulk {
            Some(label) => Err(StoreError::UnfinishedBulkLoad { label: label.clone() }),
            None => Ok(()),
        }
    }

    /// A read handle on the latest published state, for other threads (an executor
    /// running beside the committer): each read sees the state as of the newest block
    /// published when it runs. Refused while a bulk load is unfinished.
    pub fn read_handle(&self) -> Result<ReadHandle, StoreError> {
        self.check_complete()?;
        Ok(ReadHandle { shared: self.shared.clone() })
    }

    /// Latest value of `key` in `trie` (never walks a trie; the read order is in
    /// `docs/design.md`, "Store").
    pub fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_complete()?;
        Ok(self.shared.reader.get(trie, key)?.map(|v| v.to_vec()))
    }

    /// The entries of `trie` with `start <= key < end` (no upper bound when `end` is
    /// `None`), in ascending key order: the newest layers merged over `flat`.
    pub fn range(
        &self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<crate::FlatRange<'_>, StoreError> {
        self.check_complete()?;
        self.shared.reader.flat_range(trie, start, end)
    }

    /// Current root of `trie`.
    pub fn trie_root(&self, trie: &TrieId) -> Result<H256, StoreError> {
        self.check_complete()?;
        self.stored_root(trie)
    }

    pub(crate) fn stored_root(&self, trie: &TrieId) -> Result<H256, StoreError> {
        if *trie == TrieId::Main {
            return Ok(self.head.1);
        }
        match self.shared.reader.read(Column::Meta, &root_key(trie))? {
            None => Ok(self.layout().empty_root()),
            Some(v) => Ok(decode_root(trie, &v)?),
        }
    }

    /// The latest state of `trie` as a node source (nodes through the caches, leaves
    /// rebuilt from `flat`), for a trie the caller drives: a block builder recording a
    /// witness, say.
    pub fn node_source(&self, trie: TrieId) -> Result<StoreSource<'_>, StoreError> {
        self.check_complete()?;
        Ok(StoreSource { reader: &self.shared.reader, trie })
    }

    /// The trie layout of every trie in the database (recorded at its creation).
    pub fn layout(&self) -> LayoutName {
        self.shared.reader.layout
    }

    /// A proof of `key` in `trie`'s latest state: the nodes on its path, root first (and,
    /// in layouts with value nodes, the value node of a proven value last).
    pub fn prove(&self, trie: TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.prove_keys(trie, Keys::One(key))
    }

    /// One proof of every key of `keys` in `trie`'s latest state (the union of their
    /// paths).
    pub fn prove_many(&self, trie: TrieId, keys: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.prove_keys(trie, Keys::Many(keys))
    }

    fn prove_keys(&self, trie: TrieId, keys: Keys<'_>) -> Result<Vec<Vec<u8>>, StoreError> {
        let root = self.trie_root(&trie)?;
        let source = StoreSource { reader: &self.shared.reader, trie };
        Ok(crate::layout::prove(self.layout(), source, root, keys)?)
    }

    pub(crate) fn check_poison(&self) -> Result<(), StoreError> {
        if self.shared.read_only {
            return Err(StoreError::ReadOnly);
        }
        match &self.shared.progress.lock().poisoned {
            Some(e) => Err(e.poisoned()),
            None => Ok(()),
        }
    }

    /// Refuse a block with an over-long key, or an empty value where an empty value is a
    /// value, before any work is done.
    pub(crate) fn check_keys(&self, changes: &ChangeSet) -> Result<(), CommitError> {
        let layout = self.layout();
        for (trie, kv) in changes {
            if let Some(k) = kv.keys().find(|k| k.len() > KEY_BYTES_MAX) {
                return Err(CommitError::KeyTooLong {
                    trie: *trie,
                    len: k.len(),
                    max: KEY_BYTES_MAX,
                });
            }
            if !layout.allows_empty_value() {
                continue;
            }
            if let Some((k, _)) = kv.iter().find(|(_, v)| v.as_ref().is_some_and(|v| v.is_empty()))
            {
                return Err(CommitError::EmptyValue { trie: *trie, key: k.clone(), layout });
            }
        }
        Ok(())
    }

    /// The write batch that undoes block `number` (the head) from its reverse diff, and the
    /// head it restores. Flat and meta entries are restored as recorded; the nodes are
    /// recomputed by applying the old flat values to each touched trie, and each recomputed
    /// root must equal the root the diff restores, else nothing is written.
    fn revert_batch(
        &self,
        number: u64,
        entries: &[ReverseEntry],
    ) -> Result<(WriteBatch, (u64, H256)), StoreError> {
        let db = &self.shared.reader.db;
        let mut batch = WriteBatch::default();
        let mut head = None;
        let mut old_roots: BTreeMap<TrieId, H256> = BTreeMap::new();
        let mut changes: ChangeSet = BTreeMap::new();
        for (col, key, old) in entries {
            match col {
                Column::Flat => {
                    let (trie, k) = TrieId::split(key)
                        .ok_or_else(|| Corruption::FlatKey { key: key.clone() })?;
                    changes.entry(trie).or_default().insert(k.to_vec(), old.clone());
                }
                Column::Meta if key.as_slice() == META_HEAD => {
                    head = old.as_deref().map(decode_head).transpose()?;
                }
                Column::Meta => {
                    if let Some(trie) = key.strip_prefix(META_ROOT).and_then(split_trie_prefix) {
                        let root = match old {
                            None => self.layout().empty_root(),
                            Some(v) => decode_root(&trie, v)?,
                        };
                        old_roots.insert(trie, root);
                    }
                }
                // Written by earlier versions; the nodes are recomputed below instead.
                Column::Nodes => continue,
            }
            stage_write(&mut batch, cf(db, col.cf())?, key, old.as_deref());
        }
        let head = head.ok_or(Corruption::HistoryHead { number })?;
        old_roots.insert(TrieId::Main, head.1);
        let h = cf(db, CF_NODES)?;
        for (trie_id, kv) in &changes {
            let source = StoreSource { reader: &self.shared.reader, trie: *trie_id };
            let current = self.trie_root(trie_id)?;
            let writes = kv.iter().map(|(k, v)| (&k[..], v.as_deref().filter(|v| !v.is_empty())));
            let updates = crate::layout::rewrite(self.layout(), source, current, writes)?;
            // A storage trie whose root record the block did not change keeps its root.
            let expected = old_roots.get(trie_id).copied().unwrap_or(current);
            if updates.root != expected {
                return Err(Corruption::RevertRoot {
                    number,
                    trie: *trie_id,
                    computed: updates.root,
                    expected,
                }
                .into());
            }
            stage_nodes(&mut batch, h, trie_id, &updates);
        }
        batch.delete_cf(cf(db, CF_HISTORY)?, history_key(number));
        Ok((batch, head))
    }

    /// Wait for room (back-pressure), then publish the layer and hand it to the writer.
    pub(crate) fn push_layer(&mut self, layer: Layer) -> Result<Arc<Layer>, StoreError> {
        let max = self.shared.config.layers.unpersisted_bytes_max;
        {
            let mut p = self.shared.progress.lock();
            if p.pending_bytes > 0 && p.pending_bytes + layer.bytes > max {
                self.shared.commit_waits.fetch_add(1, Ordering::Relaxed);
            }
            while p.poisoned.is_none() && p.pending_bytes > 0 && p.pending_bytes + layer.bytes > max
            {
                self.shared.changed.wait(&mut p);
            }
            if let Some(e) = &p.poisoned {
                return Err(e.poisoned());
            }
            p.pending_bytes += layer.bytes;
            self.shared.peak_unpersisted_bytes.fetch_max(p.pending_bytes, Ordering::Relaxed);
        }
        let layer = Arc::new(layer);
        {
            // Invariant: invalidate under the exclusive layer lock (see view.rs).
            let reader = &self.shared.reader;
            let mut layers = reader.layers.write();
            reader.flat_cache.invalidate_all(layer.flat.iter().map(|(k, _)| k.as_slice()));
            reader.node_cache.invalidate_all(layer.nodes.iter().map(|(k, _)| k.as_slice()));
            layers.push(layer.clone());
        }
        let tx = self.tx.as_ref().ok_or(StoreError::WriterStopped)?;
        tx.send(ToWriter::Layer(layer.clone())).map_err(|_| StoreError::WriterStopped)?;
        Ok(layer)
    }

    /// Wait until every committed block is durable: written by the writer, the memtables
    /// flushed (all column families at once) and the WAL synced. After this returns, a
    /// crash reopens at this head or later (see `writer.rs`, "Durability").
    pub fn flush(&self) -> Result<(), StoreError> {
        // A read-only handle's node buffer (its catch-up) is never written.
        let behind = |p: &Progress| {
            p.persisted < self.head.0 || (!self.shared.read_only && p.nodes_at.is_some())
        };
        if behind(&self.shared.progress.lock()) {
            // The writer may be holding layers back to write them as one group, and it
            // holds node writes back longer (the node buffer, see `lag.rs`).
            if let Some(tx) = &self.tx {
                tx.send(ToWriter::Flush).map_err(|_| StoreError::WriterStopped)?;
            }
        }
        {
            let mut p = self.shared.progress.lock();
            while p.poisoned.is_none() && behind(&p) {
                self.shared.changed.wait(&mut p);
            }
            if let Some(e) = &p.poisoned {
                return Err(e.poisoned());
            }
        }
        if !self.shared.read_only {
            self.shared.make_durable()?;
            self.shared.reader.db.flush_wal(true)?;
            self.record_durable()?;
        }
        Ok(())
    }

    /// Record the head in the durable record (see `durable.rs`) once the caller has made
    /// it durable: nothing when the writer has not persisted it (a failed or stopped
    /// writer), or on a read-only handle.
    pub(crate) fn record_durable(&self) -> Result<(), StoreError> {
        if self.shared.read_only || self.shared.progress.lock().persisted != self.head.0 {
            return Ok(());
        }
        self.shared.durable.set(self.head)
    }

    /// Undo the last `n` blocks from their reverse diffs, restoring the exact earlier roots
    /// (each block one synced batch; the nodes are recomputed, see `revert_batch`). All or
    /// nothing: a missing reverse diff is refused before anything is written.
    pub fn revert(&mut self, n: u64) -> Result<(), RevertError> {
        self.revert_with_progress(n, &mut |_| true).map(|_| ())
    }

    /// [`revert`](Self::revert), calling `progress` with the number of blocks undone so
    /// far after each one (each block is its own synced batch); when it returns `false` the
    /// revert stops there, at that block (a signal handler's clean stop). Returns the
    /// blocks undone.
    pub fn revert_with_progress(
        &mut self,
        n: u64,
        progress: &mut dyn FnMut(u64) -> bool,
    ) -> Result<u64, RevertError> {
        self.check_poison()?;
        self.check_complete()?;
        self.flush()?;
        let head = self.head.0;
        if n > head {
            return Err(RevertError::TooFar { requested: n, head });
        }
        if n == 0 {
            return Ok(0);
        }
        let db = self.shared.reader.db.clone();
        let history = cf(&db, CF_HISTORY)?;
        // `1 <= n <= head`, so `head - n + 1` neither underflows nor overflows.
        for number in (head - n + 1)..=head {
            if db.get_pinned_cf(history, history_key(number)).map_err(StoreError::from)?.is_none() {
                return Err(RevertError::Pruned { number });
            }
        }
        // Invariant: the durable record is lowered to the target before the head moves, so
        // that a crash anywhere in between leaves it at or below the head (durable.rs).
        let target = head - n;
        let handle = ReadHandle { shared: self.shared.clone() };
        let root =
            handle.recorded_root(target)?.ok_or(RevertError::Pruned { number: target + 1 })?;
        self.shared.durable.set((target, root))?;
        let mut done = 0;
        while done < n {
            self.revert_head(&db)?;
            done += 1;
            if !progress(done) {
                break;
            }
        }
        // Each block's batch was synced.
        self.record_durable()?;
        Ok(done)
    }

    /// Undo the head block (which has a parent: the caller checked `n <= head`).
    fn revert_head(&mut self, db: &DB) -> Result<(), RevertError> {
        let number = self.head.0;
        let raw = db
            .get_cf(cf(db, CF_HISTORY)?, history_key(number))
            .map_err(StoreError::from)?
            .ok_or(RevertError::Pruned { number })?;
        let entries = ReverseDiff::decode(&raw)
            .map_err(|source| StoreError::from(Corruption::History { number, source }))?;
        let (batch, head) = self.revert_batch(number, &entries)?;
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.shared.faults.check(number)?;
        // Readers at recent blocks wait while the head moves (see `at.rs`).
        let shared = self.shared.clone();
        let mut recent = shared.recent.write();
        db.write_opt(batch, &opts).map_err(StoreError::from)?;
        // The batch went to disk behind the caches' and the resident trie's back.
        self.shared.reader.clear_caches();
        self.resident.clear();
        self.head = head;
        self.shared.progress.lock().persisted = head.0;
        recent.set_head(head);
        Ok(())
    }

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

    /// The shared reader (bulk loading and rebuilds).
    pub(crate) fn reader(&self) -> &Reader {
        &self.shared.reader
    }

    /// Adopt a head the caller has written to disk itself (a finished bulk load), which
    /// wrote nodes behind the resident trie's back.
    pub(crate) fn set_head(&mut self, number: u64, root: H256) {
        self.head = (number, root);
        // The state was replaced: no earlier block can be read from it.
        self.shared.recent.write().reset((number, root));
        self.shared.progress.lock().persisted = number;
        self.resident.clear();
    }

    /// Make a committed (not yet persisted) block the head.
    pub(crate) fn set_head_in_memory(&mut self, number: u64, root: H256) {
        self.head = (number, root);
        self.shared.recent.write().set_head((number, root));
    }

    /// What the store's handles share.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The resident trie and the shared state, borrowed apart.
    pub(crate) fn resident_and_shared(&mut self) -> (&mut Resident, &Shared) {
        (&mut self.resident, &self.shared)
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

/// Stage a trie commit's node deletions and writes (leaves are never stored) into `batch`.
fn stage_nodes(
    batch: &mut WriteBatch,
    h: &rocksdb::ColumnFamily,
    trie_id: &TrieId,
    u: &TrieUpdates,
) {
    // Leaves are rebuilt from `flat` and not stored, except at the root: the store keeps a
    // trie's root node whatever it is (see `trie::update_trie`), so a root leaf that a
    // revert replaces or removes must be rewritten or deleted like any stored node.
    let stored = |path: &[u8], is_leaf: bool| !is_leaf || path.is_empty();
    for r in u.removed.iter().filter(|r| stored(r.path.as_slice(), r.is_leaf)) {
        batch.delete_cf(h, node_key(trie_id, r.path.as_slice()));
    }
    for n in u.new.iter().filter(|n| stored(n.path.as_slice(), n.is_leaf)) {
        batch.put_cf(
            h,
            node_key(trie_id, n.path.as_slice()),
            encode_node_value(&n.hash, &n.encoded),
        );
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

/// What the catch-up of an open did (see `arbor stats`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CatchUpReport {
    /// The node watermark found: the block whose nodes were on disk.
    pub from_block: u64,
    /// The head the nodes were brought to.
    pub to_block: u64,
    /// Keys changed in between (each applied once).
    pub keys: u64,
    /// Wall time of the catch-up, reverse diffs read and update pass included (`seconds`
    /// in JSON).
    #[serde(rename = "seconds", serialize_with = "seconds")]
    pub time: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
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
    pub node_cache: crate::cache::CacheStats,
    /// Flat cache counters.
    pub flat_cache: crate::cache::CacheStats,
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
