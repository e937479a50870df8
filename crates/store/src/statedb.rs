//! [`StateDb`] and [`ReadHandle`]: the store's two handles, what they hold, and the few
//! accessors every operation family shares (head, configuration, layout, the checks that
//! refuse work on a poisoned, read-only or partial store). Each operation family has its
//! own module with its `impl StateDb` block and the types it returns (the crate docs are
//! the map): `open`, `commit`, `persist`, `revert`, `read`, `bulk`, `verify`, `restore`,
//! `catch_up`, `stats`.
//!
//! A commit runs on the caller's thread and the rayon pool and returns once its block is an
//! immutable in-memory layer; a background writer persists layers in order. A failed write
//! poisons the store until it is reopened; what is on disk is always a whole block.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread::JoinHandle;

use rocksdb::DB;
use state::{TrieId, H256};
use trie::LayoutName;

use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::kept::KeptReads;
use crate::keys::{decode_root, root_key, Column};
#[cfg(feature = "test-hooks")]
use crate::rocks::FaultInjector;
use crate::shared::Shared;
use crate::tiers::buffer::CatchUpReport;
use crate::tiers::layer::{node_buffer_of, Layer};
use crate::tiers::reader::Reader;
use crate::tiers::resident::Resident;
use crate::writer::ToWriter;

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
}

/// The persistent state. See the module docs.
pub struct StateDb {
    pub(crate) shared: Arc<Shared>,
    pub(crate) head: (u64, H256),
    /// The label of an unfinished bulk load (its marker is on disk; see `bulk/`).
    pub(crate) bulk: Option<String>,
    /// The committer's upper trie nodes (see `tiers/resident/`).
    pub(crate) resident: Resident,
    pub(crate) tx: Option<SyncSender<ToWriter>>,
    pub(crate) writer: Option<JoinHandle<()>>,
    /// What this open's catch-up of lagging nodes did (see `catch_up.rs`).
    pub(crate) caught_up: Option<CatchUpReport>,
    /// Point reads kept for the next commit (see `kept.rs`).
    pub(crate) kept: KeptReads,
}

impl StateDb {
    /// The node buffer, while nodes on disk lag the head (see `catch_up.rs`).
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

    /// The trie layout of every trie in the database (recorded at its creation).
    pub fn layout(&self) -> LayoutName {
        self.shared.reader.layout
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

    pub(crate) fn check_poison(&self) -> Result<(), StoreError> {
        if self.shared.read_only {
            return Err(StoreError::ReadOnly);
        }
        match &self.shared.progress.lock().poisoned {
            Some(e) => Err(e.poisoned()),
            None => Ok(()),
        }
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
}
