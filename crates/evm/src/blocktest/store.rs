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
//! test a database's creation, a verify and its removal (the test suites' one kind of
//! database, `crate::test_db`, whose error, [`TestDbError`], the tip fails with).

use std::path::PathBuf;

use eth::{AccountModel, EthChanges};
use state::H256;
use store::{CommitError, StateDb};
use trie::EMPTY_ROOT;

use super::chain::{Chain, ChainTip};
use crate::stored::{NoBlockHashes, StoreWorld};
use crate::test_db::{TestDb, TestDbError};

/// A blockchain test's chain on a RocksDB store.
pub type InStoreChain = Chain<StoreTip>;

impl InStoreChain {
    /// An empty chain whose database will be created at `dir` (which must not exist) when
    /// [`super::BlockBackend::start`] gives it a genesis; removed when the chain drops.
    pub fn in_dir(dir: PathBuf) -> Self {
        Chain::with_tip(StoreTip { dir, db: None, held: Vec::new() })
    }
}

/// The state on a store (see the module docs).
pub struct StoreTip {
    dir: PathBuf,
    /// Created at the genesis.
    db: Option<TestDb>,
    held: Vec<H256>,
}

impl std::fmt::Debug for StoreTip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreTip").field("dir", &self.dir).field("held", &self.held.len()).finish()
    }
}

impl StoreTip {
    /// The database, created at the first block.
    fn db(&mut self) -> Result<&mut StateDb, TestDbError> {
        let db = match self.db.take() {
            Some(db) => db,
            None => TestDb::create(self.dir.clone(), HISTORY_DEPTH)?,
        };
        Ok(self.db.insert(db).db_mut())
    }
}

/// Blocks of history a test's database keeps: a side chain's branch point is at most
/// this many blocks below the tip.
const HISTORY_DEPTH: u64 = 1024;

impl ChainTip for StoreTip {
    type Reader<'a> = StoreWorld<&'a StateDb, NoBlockHashes>;
    type Error = TestDbError;

    fn holds(&self) -> &[H256] {
        &self.held
    }

    fn undo(&mut self, n: usize) -> Result<(), TestDbError> {
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
    ) -> Result<Result<H256, H256>, TestDbError> {
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
        StoreWorld::new(db.db(), NoBlockHashes)
    }

    fn root(&self) -> H256 {
        self.db.as_ref().map_or(EMPTY_ROOT, |db| db.db().head_root())
    }

    fn finish(&mut self) -> Result<(), TestDbError> {
        self.db.as_ref().map_or(Ok(()), TestDb::check)
    }
}
