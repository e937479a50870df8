//! [`TestDb`]: the RocksDB database a test-suite runner's store back-end commits to (the
//! state tests' [`crate::statetest::InStore`], one per file; the blockchain tests'
//! [`crate::blocktest::StoreTip`], one per test), and [`TestDbError`], the one error both
//! back-ends fail with.
//!
//! A database is created in a directory that must not exist yet (removed again when the
//! open fails), with small budgets (a test's state is a few accounts) and as many blocks
//! of history as its back-end reverts. At a test's or a file's end [`TestDb::check`]
//! flushes it and [`store::StateDb::verify`] must find it consistent; [`TestDb::end`] then
//! also closes it and removes its directory, reporting either's failure. A database
//! dropped without `end` is closed and removed on a best-effort basis (a drop has nowhere
//! to report to). Cost: a database's creation, a flush, a verify (one scan of its flat
//! state) and its removal.

use std::path::{Path, PathBuf};

use state::H256;
use store::{CommitError, OpenError, RevertError, StateDb, StoreConfig, StoreError, VerifyReport};

/// Why a test-suite back-end's store failed (an entry, a file or a test fails with it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestDbError {
    /// The database directory could not be created.
    #[error("cannot create the database directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The database directory could not be removed.
    #[error("cannot remove the database directory {}: {source}", path.display())]
    RemoveDir {
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
    /// `verify` found the database inconsistent at the end of a file or a test.
    #[error("verify found the database inconsistent: {}", describe(.0))]
    Verify(Box<VerifyReport>),
    /// A state was asked of a back-end whose database holds no pre-state.
    #[error("no pre-state is loaded")]
    NotLoaded,
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

/// One test-suite database (see the module docs).
pub(crate) struct TestDb {
    path: PathBuf,
    /// Invariant: `Some` from [`TestDb::create`] until [`TestDb::end`] or the drop takes it.
    db: Option<StateDb>,
}

impl std::fmt::Debug for TestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDb").field("path", &self.path).finish_non_exhaustive()
    }
}

impl TestDb {
    /// A new database at `path` (which must not exist; its parent must), keeping
    /// `history_depth` blocks of reverse diffs.
    pub(crate) fn create(path: PathBuf, history_depth: u64) -> Result<TestDb, TestDbError> {
        std::fs::create_dir(&path)
            .map_err(|source| TestDbError::CreateDir { path: path.clone(), source })?;
        match StateDb::open(&path, store_config(history_depth)) {
            Ok(mut db) => {
                // Execution reads what it writes: the commits take those old values (and
                // the fixtures check the roots and reverts that follow).
                db.keep_reads(true);
                Ok(TestDb { path, db: Some(db) })
            }
            Err(source) => {
                // Best effort: the directory is ours and holds nothing of use.
                let _ = std::fs::remove_dir_all(&path);
                Err(TestDbError::Open { path, source })
            }
        }
    }

    /// Its directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The database.
    pub(crate) fn db(&self) -> &StateDb {
        self.db.as_ref().expect("a test database is open until it ends or drops")
    }

    /// The database, to commit and revert.
    pub(crate) fn db_mut(&mut self) -> &mut StateDb {
        self.db.as_mut().expect("a test database is open until it ends or drops")
    }

    /// Flush, then `verify`: an inconsistency is [`TestDbError::Verify`].
    pub(crate) fn check(&self) -> Result<(), TestDbError> {
        consistent(verified(self.db())?)
    }

    /// [`TestDb::check`] and close the database, then remove its directory (whatever the
    /// check found; a failure to remove it is the one reported).
    pub(crate) fn end(mut self) -> Result<(), TestDbError> {
        let db = self.db.take().expect("a test database is open until it ends or drops");
        let checked = match verified(&db) {
            Ok(report) => db.close().map_err(TestDbError::from).and_then(|()| consistent(report)),
            Err(e) => Err(e),
        };
        std::fs::remove_dir_all(&self.path)
            .map_err(|source| TestDbError::RemoveDir { path: self.path.clone(), source })?;
        checked
    }
}

/// Flush `db`, then verify it.
fn verified(db: &StateDb) -> Result<VerifyReport, TestDbError> {
    db.flush()?;
    Ok(db.verify()?)
}

/// `Ok` when `verify` found every root as stored.
fn consistent(report: VerifyReport) -> Result<(), TestDbError> {
    match report.ok() {
        true => Ok(()),
        false => Err(TestDbError::Verify(Box::new(report))),
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            // Best effort: a drop has nowhere to report to (`end` reports).
            let _ = db.close();
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Small budgets: a test's state is a few accounts.
fn store_config(history_depth: u64) -> StoreConfig {
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
    c.layers.history_depth = history_depth;
    c.history.recent_blocks = 8;
    c.history.recent_bytes = 4 * MIB;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_removed_when_it_ends_or_drops_and_never_made_over_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let ended = TestDb::create(dir.path().join("ended"), 8).unwrap();
        assert!(ended.path().is_dir());
        ended.end().unwrap();
        assert!(!dir.path().join("ended").exists(), "end removes the directory");

        let dropped = TestDb::create(dir.path().join("dropped"), 8).unwrap();
        dropped.check().unwrap();
        assert!(dropped.path().is_dir(), "check leaves it");
        drop(dropped);
        assert!(!dir.path().join("dropped").exists(), "a drop removes it");

        let taken = dir.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("keep"), b"x").unwrap();
        let refused = TestDb::create(taken.clone(), 8);
        assert!(matches!(refused, Err(TestDbError::CreateDir { .. })), "{refused:?}");
        assert!(taken.join("keep").exists(), "an existing directory is left as it was");
        let refused = TestDb::create(dir.path().join("absent/db"), 8);
        assert!(matches!(refused, Err(TestDbError::CreateDir { .. })), "{refused:?}");
    }
}
