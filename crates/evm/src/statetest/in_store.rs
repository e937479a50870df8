//! [`InStore`]: the state tests on a RocksDB store, the real commit path
//! (`arbor statetest --db`).
//!
//! One database per file, created in a directory the caller owns and removed when the
//! file ends. A test's `pre` is committed as block 1 through the store's account-model
//! commit ([`store::StateDb::commit_nested`] with [`AccountModel`]) and its root checked
//! against the allocation's in-memory root ([`eth::genesis_state_root`]); every post entry
//! then reads through the store ([`StoreWorld`] over a [`store::ReadHandle`]: revm never
//! sees an in-memory copy), its changes are committed as block 2, and at the entry's end
//! the store reverts to block 1 and must have the pre-state's root again (a revert across
//! the entry's storage wipes and re-creations). A file's next test reverts to block 0 (the
//! empty state) first. At the file's end the store is flushed and [`store::StateDb::verify`]
//! must find it consistent. Block hashes are the runner's (the state tests' convention);
//! the store keeps none. Cost per entry: one commit, one flush, one revert (a synced
//! batch): about 17 fsyncs, 47 ms of wall time and 8 ms of CPU here (an in-memory entry
//! takes under 1 ms); per file a database's creation, verify and removal.

use std::path::PathBuf;

use eth::{genesis_state_root, AccountModel, EthChanges, Genesis};
use state::H256;
use store::{CommitError, OpenError, RevertError, StateDb, StoreConfig, StoreError, VerifyReport};
use trie::EMPTY_ROOT;

use super::run::TestBackend;
use crate::stored::{NoBlockHashes, StoreWorld};

/// Why the store back-end failed (an entry or a file fails with it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InStoreError {
    /// A file's database directory could not be created.
    #[error("cannot create the database directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file's database directory could not be removed.
    #[error("cannot remove the database directory {}: {source}", path.display())]
    RemoveDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file's database did not open.
    #[error("cannot open the database {}: {source}", path.display())]
    Open {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: OpenError,
    },
    /// A commit failed.
    #[error("commit failed: {0}")]
    Commit(#[from] CommitError),
    /// A revert failed.
    #[error("revert failed: {0}")]
    Revert(#[from] RevertError),
    /// The store failed otherwise (a read handle, a flush, verify, close).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The pre-state committed as block 1 does not have the allocation's root.
    #[error("the pre-state committed as block 1 has root {got}, its in-memory root is {want}")]
    PreStateRoot {
        /// The store's root.
        got: H256,
        /// The in-memory root.
        want: H256,
    },
    /// A revert did not give back the state it reverted to.
    #[error("the revert to block {block} left root {got}, expected {want}")]
    RevertedRoot {
        /// The block reverted to.
        block: u64,
        /// The root after the revert.
        got: H256,
        /// The root block `block` had.
        want: H256,
    },
    /// `verify` found the database inconsistent at the end of a file.
    #[error("verify found the database inconsistent: {0}")]
    Verify(String),
    /// A state was asked of a file whose database holds no pre-state.
    #[error("no pre-state is loaded")]
    NotLoaded,
}

/// States in RocksDB stores (see the module docs).
pub struct InStore {
    /// Where the files' databases are created.
    dir: PathBuf,
    config: StoreConfig,
    /// Databases created so far (their directories' names).
    created: u64,
    open: Option<Open>,
}

impl std::fmt::Debug for InStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InStore")
            .field("dir", &self.dir)
            .field("created", &self.created)
            .field("open", &self.open.as_ref().map(|o| &o.path))
            .finish_non_exhaustive()
    }
}

/// The current file's database.
struct Open {
    db: StateDb,
    path: PathBuf,
    /// The pre-state block 1 holds, with its root.
    pre: Option<(Genesis, H256)>,
}

impl InStore {
    /// A back-end creating its databases in `dir`, which must exist and which it does not
    /// remove (each database is removed when its file ends, or when the back-end drops).
    pub fn new(dir: PathBuf) -> InStore {
        InStore { dir, config: store_config(), created: 0, open: None }
    }

    /// The current file's database, created when it has none.
    fn open(&mut self) -> Result<&mut Open, InStoreError> {
        let open = match self.open.take() {
            Some(open) => open,
            None => self.create()?,
        };
        Ok(self.open.insert(open))
    }

    /// A new database for a file.
    fn create(&mut self) -> Result<Open, InStoreError> {
        let path = self.dir.join(format!("file-{}", self.created));
        self.created += 1;
        std::fs::create_dir(&path)
            .map_err(|source| InStoreError::CreateDir { path: path.clone(), source })?;
        match StateDb::open(&path, self.config.clone()) {
            Ok(db) => Ok(Open { db, path, pre: None }),
            Err(source) => {
                // Best effort: the directory is ours and holds nothing of use.
                let _ = std::fs::remove_dir_all(&path);
                Err(InStoreError::Open { path, source })
            }
        }
    }

    fn current(&self) -> Result<&Open, InStoreError> {
        self.open.as_ref().ok_or(InStoreError::NotLoaded)
    }
}

/// Small budgets: a state test's state is a few accounts.
fn store_config() -> StoreConfig {
    const MIB: u64 = 1 << 20;
    let mut c = StoreConfig::default();
    c.rocksdb.block_cache_bytes = 4 * MIB;
    c.rocksdb.target_file_size_bytes = MIB;
    c.rocksdb.write_buffer_bytes = MIB;
    c.rocksdb.max_total_wal_bytes = 0;
    c.rocksdb.max_open_files = 64;
    c.cache.node_cache_bytes = 256 << 10;
    c.cache.flat_cache_bytes = 256 << 10;
    c.cache.resident_bytes = 256 << 10;
    c.layers.unpersisted_bytes_max = 4 * MIB;
    c.layers.node_buffer_bytes = MIB;
    c.layers.history_depth = 8;
    c.history.recent_blocks = 8;
    c.history.recent_bytes = 4 * MIB;
    c
}

impl Open {
    /// Revert to `block`, which must then have root `want`.
    fn revert_to(&mut self, block: u64, want: H256) -> Result<(), InStoreError> {
        let head = self.db.head_number();
        if head > block {
            self.db.revert(head - block)?;
        }
        let got = self.db.head_root();
        if self.db.head_number() != block || got != want {
            return Err(InStoreError::RevertedRoot { block, got, want });
        }
        Ok(())
    }

    /// Make block 1 hold `pre`: back to the empty block 0 first when it holds anything.
    fn load_pre(&mut self, pre: &Genesis) -> Result<(), InStoreError> {
        self.pre = None;
        self.revert_to(0, EMPTY_ROOT)?;
        let want = genesis_state_root(pre);
        let block = EthChanges::from_genesis(pre).to_nested();
        let got = self.db.commit_nested(&block, &AccountModel)?.root;
        if got != want {
            return Err(InStoreError::PreStateRoot { got, want });
        }
        self.pre = Some((pre.clone(), want));
        Ok(())
    }

    /// Whether block 1, the head, holds `pre`.
    fn holds(&self, pre: &Genesis) -> bool {
        matches!(&self.pre, Some((p, root))
            if p == pre && self.db.head_number() == 1 && self.db.head_root() == *root)
    }
}

impl TestBackend for InStore {
    type State = StoreWorld<store::ReadHandle, NoBlockHashes>;
    type Error = InStoreError;

    fn load(&mut self, pre: &Genesis) -> Result<Self::State, InStoreError> {
        let open = self.open()?;
        if !open.holds(pre) {
            open.load_pre(pre)?;
        }
        Ok(StoreWorld::new(open.db.read_handle()?, NoBlockHashes))
    }

    fn commit(
        &mut self,
        _state: &mut Self::State,
        changes: &EthChanges,
    ) -> Result<H256, InStoreError> {
        let open = self.open.as_mut().ok_or(InStoreError::NotLoaded)?;
        Ok(open.db.commit_nested(&changes.to_nested(), &AccountModel)?.root)
    }

    fn root(&self, _state: &Self::State) -> Result<H256, InStoreError> {
        Ok(self.current()?.db.head_root())
    }

    fn end_entry(&mut self, state: Self::State) -> Result<(), InStoreError> {
        drop(state);
        let open = self.open.as_mut().ok_or(InStoreError::NotLoaded)?;
        let (_, root) = open.pre.as_ref().ok_or(InStoreError::NotLoaded)?;
        let root = *root;
        open.revert_to(1, root)
    }

    fn end_file(&mut self) -> Result<(), InStoreError> {
        let Some(open) = self.open.take() else { return Ok(()) };
        let Open { db, path, .. } = open;
        let checked = check_and_close(db);
        std::fs::remove_dir_all(&path)
            .map_err(|source| InStoreError::RemoveDir { path: path.clone(), source })?;
        checked
    }
}

/// Flush, verify and close a file's database.
fn check_and_close(db: StateDb) -> Result<(), InStoreError> {
    db.flush()?;
    let report = db.verify()?;
    db.close()?;
    match report.ok() {
        true => Ok(()),
        false => Err(InStoreError::Verify(describe(&report))),
    }
}

/// What `verify` found wrong.
fn describe(report: &VerifyReport) -> String {
    let mut text = format!(
        "block {}: stored root {}, recomputed {}",
        report.number, report.stored_root, report.computed_root
    );
    for m in &report.trie_mismatches {
        text.push_str(&format!(
            "; trie {:?}: stored {}, recomputed {}",
            m.trie, m.stored, m.computed
        ));
    }
    text
}

impl Drop for InStore {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            let path = open.path.clone();
            drop(open);
            // Best effort: a drop has nowhere to report to (`end_file` reports).
            let _ = std::fs::remove_dir_all(path);
        }
    }
}
