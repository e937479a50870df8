//! [`StoreTip`]: a blockchain test's state on a RocksDB store (`arbor blocktest --db`), the
//! real commit path, and [`InStoreChain`], the chain over it.
//!
//! One database per test, in a directory the caller names (it must not exist; it is
//! created at the genesis and removed when the tip drops). The genesis allocation is the
//! store's block 1 and every block applied one more, through the account-model commit
//! ([`store::StateDb::commit_nested_expecting`] with [`AccountModel`]: a block whose
//! changes give another root than its header's is never published). Undoing blocks (a
//! side chain's branch point) is [`store::StateDb::revert`], each block one synced batch
//! from its reverse diff, as far back as `history_depth` (1,024 blocks here). revm reads
//! the store through [`StoreWorld`] over the committing handle; block hashes come from the
//! chain. At the end of a test the store is flushed and [`store::StateDb::verify`] must
//! find it consistent. Cost per block: one commit (and its flush in the background); per
//! test a database's creation, a verify and its removal.

use std::path::PathBuf;

use eth::{AccountModel, EthChanges};
use state::H256;
use store::{CommitError, OpenError, RevertError, StateDb, StoreConfig, StoreError};
use trie::EMPTY_ROOT;

use super::chain::{Chain, ChainTip};
use crate::stored::{NoBlockHashes, StoreWorld};

/// A blockchain test's chain on a RocksDB store.
pub type InStoreChain = Chain<StoreTip>;

impl InStoreChain {
    /// An empty chain whose database will be created at `dir` (which must not exist) when
    /// [`super::BlockBackend::start`] gives it a genesis; removed when the chain drops.
    pub fn in_dir(dir: PathBuf) -> Self {
        Chain::with_tip(StoreTip { dir, db: None, held: Vec::new() })
    }
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreTipError {
    /// The database directory could not be created.
    #[error("cannot create the database directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The database did not open.
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
    /// The store failed otherwise (a flush, verify).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `verify` found the database inconsistent at the end of a test.
    #[error("verify found the database inconsistent: block {number}: stored root {stored}, recomputed {computed}")]
    Verify {
        /// The head block.
        number: u64,
        /// The root the store holds.
        stored: H256,
        /// The root recomputed from its flat state.
        computed: H256,
    },
}

/// The state on a store (see the module docs).
pub struct StoreTip {
    dir: PathBuf,
    db: Option<StateDb>,
    held: Vec<H256>,
}

impl std::fmt::Debug for StoreTip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreTip").field("dir", &self.dir).field("held", &self.held.len()).finish()
    }
}

impl StoreTip {
    /// The database, created at the first block.
    fn db(&mut self) -> Result<&mut StateDb, StoreTipError> {
        let db = match self.db.take() {
            Some(db) => db,
            None => {
                let path = self.dir.clone();
                std::fs::create_dir(&path)
                    .map_err(|source| StoreTipError::CreateDir { path: path.clone(), source })?;
                StateDb::open(&path, store_config())
                    .map_err(|source| StoreTipError::Open { path, source })?
            }
        };
        Ok(self.db.insert(db))
    }
}

/// Small budgets: a test's state is a few accounts; reverts reach 1,024 blocks back.
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
    c.layers.history_depth = 1024;
    c.history.recent_blocks = 8;
    c.history.recent_bytes = 4 * MIB;
    c
}

impl ChainTip for StoreTip {
    type Reader<'a> = StoreWorld<&'a StateDb, NoBlockHashes>;
    type Error = StoreTipError;

    fn holds(&self) -> &[H256] {
        &self.held
    }

    fn undo(&mut self, n: usize) -> Result<(), StoreTipError> {
        if n == 0 {
            return Ok(());
        }
        self.db()?.revert(n as u64)?;
        self.held.truncate(self.held.len().saturating_sub(n));
        Ok(())
    }

    fn apply(
        &mut self,
        hash: H256,
        changes: &EthChanges,
        expected: Option<H256>,
    ) -> Result<Result<H256, H256>, StoreTipError> {
        let nested = changes.to_nested();
        let db = self.db()?;
        let committed = match expected {
            Some(want) => db.commit_nested_expecting(&nested, &AccountModel, want),
            None => db.commit_nested(&nested, &AccountModel),
        };
        match committed {
            Ok(info) => {
                self.held.push(hash);
                Ok(Ok(info.root))
            }
            Err(CommitError::RootMismatch { computed, .. }) => Ok(Err(computed)),
            Err(e) => Err(e.into()),
        }
    }

    fn reader(&self) -> StoreWorld<&StateDb, NoBlockHashes> {
        // Invariant: the chain reads only after a genesis, which opened the database.
        let db = self.db.as_ref().expect("a chain reads its state only after its genesis");
        StoreWorld::new(db, NoBlockHashes)
    }

    fn root(&self) -> H256 {
        self.db.as_ref().map_or(EMPTY_ROOT, StateDb::head_root)
    }

    fn finish(&mut self) -> Result<(), StoreTipError> {
        let Some(db) = self.db.as_ref() else { return Ok(()) };
        db.flush()?;
        let report = db.verify()?;
        if !report.ok() {
            let (number, stored, computed) =
                (report.number, report.stored_root, report.computed_root);
            return Err(StoreTipError::Verify { number, stored, computed });
        }
        Ok(())
    }
}

impl Drop for StoreTip {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            // Best effort: a drop has nowhere to report to (`finish` reports).
            let _ = db.close();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
