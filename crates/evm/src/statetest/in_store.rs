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
//! takes under 1 ms); per file a database's creation, verify and removal (the test suites'
//! one kind of database, `crate::test_db`, whose error, [`TestDbError`], this back-end
//! fails with).

use std::path::PathBuf;

use eth::{genesis_state_root, AccountModel, EthChanges, Genesis};
use state::H256;
use trie::EMPTY_ROOT;

use super::run::TestBackend;
use crate::stored::{NoBlockHashes, StoreWorld};
use crate::test_db::{TestDb, TestDbError};

/// States in RocksDB stores (see the module docs).
pub struct InStore {
    /// Where the files' databases are created.
    dir: PathBuf,
    /// Databases created so far (their directories' names).
    created: u64,
    open: Option<Open>,
}

impl std::fmt::Debug for InStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InStore")
            .field("dir", &self.dir)
            .field("created", &self.created)
            .field("open", &self.open.as_ref().map(|o| o.store.path()))
            .finish_non_exhaustive()
    }
}

/// The current file's database.
struct Open {
    store: TestDb,
    /// The pre-state block 1 holds, with its root.
    pre: Option<(Genesis, H256)>,
}

impl InStore {
    /// A back-end creating its databases in `dir`, which must exist and which it does not
    /// remove (each database is removed when its file ends, or when the back-end drops).
    pub fn new(dir: PathBuf) -> InStore {
        InStore { dir, created: 0, open: None }
    }

    /// The current file's database, created when it has none.
    fn open(&mut self) -> Result<&mut Open, TestDbError> {
        let open = match self.open.take() {
            Some(open) => open,
            None => self.create()?,
        };
        Ok(self.open.insert(open))
    }

    /// A new database for a file.
    fn create(&mut self) -> Result<Open, TestDbError> {
        let path = self.dir.join(format!("file-{}", self.created));
        self.created += 1;
        Ok(Open { store: TestDb::create(path, HISTORY_DEPTH)?, pre: None })
    }

    fn current(&self) -> Result<&Open, TestDbError> {
        self.open.as_ref().ok_or(TestDbError::NotLoaded)
    }
}

/// Blocks of history a file's database keeps (a revert goes back one block, or two).
const HISTORY_DEPTH: u64 = 8;

impl Open {
    /// Revert to `block`, which must then have root `want`.
    fn revert_to(&mut self, block: u64, want: H256) -> Result<(), TestDbError> {
        let db = self.store.db_mut();
        let head = db.head_number();
        if head > block {
            db.revert(head - block)?;
        }
        let got = db.head_root();
        if db.head_number() != block || got != want {
            return Err(TestDbError::RevertedRoot { block, got, want });
        }
        Ok(())
    }

    /// Make block 1 hold `pre`: back to the empty block 0 first when it holds anything.
    fn load_pre(&mut self, pre: &Genesis) -> Result<(), TestDbError> {
        self.pre = None;
        self.revert_to(0, EMPTY_ROOT)?;
        let want = genesis_state_root(pre);
        let block = EthChanges::from_genesis(pre).to_nested();
        let got = self.store.db_mut().commit_nested(&block, &AccountModel)?.root;
        if got != want {
            return Err(TestDbError::PreStateRoot { got, want });
        }
        self.pre = Some((pre.clone(), want));
        Ok(())
    }

    /// Whether block 1, the head, holds `pre`.
    fn holds(&self, pre: &Genesis) -> bool {
        let db = self.store.db();
        matches!(&self.pre, Some((p, root))
            if p == pre && db.head_number() == 1 && db.head_root() == *root)
    }
}

impl TestBackend for InStore {
    type State = StoreWorld<store::ReadHandle, NoBlockHashes>;
    type Error = TestDbError;

    fn load(&mut self, pre: &Genesis) -> Result<Self::State, TestDbError> {
        let open = self.open()?;
        if !open.holds(pre) {
            open.load_pre(pre)?;
        }
        Ok(StoreWorld::new(open.store.db().read_handle()?, NoBlockHashes))
    }

    fn commit(
        &mut self,
        _state: &mut Self::State,
        changes: &EthChanges,
    ) -> Result<H256, TestDbError> {
        let open = self.open.as_mut().ok_or(TestDbError::NotLoaded)?;
        Ok(open.store.db_mut().commit_nested(&changes.to_nested(), &AccountModel)?.root)
    }

    fn root(&self, _state: &Self::State) -> Result<H256, TestDbError> {
        Ok(self.current()?.store.db().head_root())
    }

    fn end_entry(&mut self, state: Self::State) -> Result<(), TestDbError> {
        drop(state);
        let open = self.open.as_mut().ok_or(TestDbError::NotLoaded)?;
        let (_, root) = open.pre.as_ref().ok_or(TestDbError::NotLoaded)?;
        let root = *root;
        open.revert_to(1, root)
    }

    fn end_file(&mut self) -> Result<(), TestDbError> {
        self.open.take().map_or(Ok(()), |open| open.store.end())
    }
}
