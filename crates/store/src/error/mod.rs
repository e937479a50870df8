//! Store errors, one enum per operation family: [`OpenError`] (opening a database),
//! [`CommitError`], [`RevertError`], [`BulkError`] (bulk loads), [`HistoryError`]
//! (decoding a reverse diff), and [`StoreError`], what every operation can meet below
//! them (RocksDB, corruption, poisoning). Records that contradict themselves are a typed
//! [`Corruption`]; sources are carried, never flattened into strings. RocksDB's own errors
//! travel as the opaque [`RocksError`], so that callers need not link RocksDB to tell
//! damage from I/O ([`StoreError::is_corruption`], [`OpenError::is_corruption`]).

mod corruption;

use std::path::PathBuf;
use std::sync::Arc;

use state::{TrieId, H256};
use trie::TrieError;

pub use corruption::{Corruption, DurableRecordError, HistoryError};

/// An error RocksDB reported. Its `Display` is RocksDB's message, which starts with the
/// status kind (`Corruption: …`, `IO error: …`); [`RocksError::is_corruption`] tells the
/// kind that matters to callers without naming RocksDB's types.
pub struct RocksError(rocksdb::Error);

impl RocksError {
    /// RocksDB found its own files damaged (a checksum mismatch, a truncated or malformed
    /// file).
    pub fn is_corruption(&self) -> bool {
        self.0.kind() == rocksdb::ErrorKind::Corruption
    }

    /// RocksDB could not take the database's lock file: another handle holds it.
    pub(crate) fn is_lock_held(&self) -> bool {
        self.0.kind() == rocksdb::ErrorKind::IOError && self.0.to_string().contains("lock")
    }
}

// As RocksDB's own error, so that messages and `{:?}` read as they did before the wrapper.
impl std::fmt::Debug for RocksError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl std::fmt::Display for RocksError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

// RocksDB's error carries no source of its own; its message is this error's `Display`.
impl std::error::Error for RocksError {}

/// Why a store operation failed below its own rules: I/O, corruption, or an earlier
/// write failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store was opened read-only ([`crate::StateDb::open_read_only`]).
    #[error("the database is open read-only")]
    ReadOnly,
    /// RocksDB reported an error.
    #[error("rocksdb: {0}")]
    Rocks(#[source] RocksError),
    /// What the database holds is inconsistent.
    #[error("corrupt store: {0}")]
    Corrupt(#[source] Box<Corruption>),
    /// A write failed earlier; the store refuses writes until it is reopened. What is on
    /// disk is the last block written before it, whole.
    #[error("store is poisoned: writing block {number} failed ({source}); reopen the database")]
    Poisoned {
        /// The block whose write failed.
        number: u64,
        /// Why.
        source: Arc<StoreError>,
    },
    /// A write failed because a test asked it to ([`crate::StateDb`]'s fault injector).
    #[error("injected write failure at block {number}")]
    Injected {
        /// The block whose write failed.
        number: u64,
    },
    /// A column family the open database should have is not there.
    #[error("column family {name:?} is missing from the open database")]
    MissingColumnFamily {
        /// The family.
        name: &'static str,
    },
    /// The writer thread is gone (it panicked).
    #[error("the store's writer thread has stopped")]
    WriterStopped,
    /// A key longer than the layout allows.
    #[error("key of {len} bytes exceeds the {max}-byte limit")]
    KeyTooLong {
        /// Key length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The database holds an interrupted bulk load: its state is partial.
    #[error(
        "the database holds an unfinished bulk load ({label}): its state is partial; \
         run the same load again to finish it, or start from a new directory"
    )]
    UnfinishedBulkLoad {
        /// What was being loaded (the label given to [`crate::StateDb::begin_bulk_load`]).
        label: String,
    },
    /// A trie operation over the store failed; a store failure inside it is its source.
    #[error("trie: {0}")]
    Trie(#[source] Box<TrieError>),
    /// The durable-block record could not be written (see `docs/design.md`, "The durable
    /// record"); the database itself is as the operation left it.
    #[error("cannot write {}: {source}", path.display())]
    DurableRecord {
        /// The record's path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl StoreError {
    /// The corruption this error reports, if it is one.
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            StoreError::Corrupt(c) => Some(c),
            _ => None,
        }
    }

    /// The database is damaged: records that contradict the store's invariants
    /// ([`StoreError::Corrupt`]) or RocksDB files that fail their checks. An earlier
    /// failure behind [`StoreError::Poisoned`] does not count (the store is poisoned).
    pub fn is_corruption(&self) -> bool {
        match self {
            StoreError::Corrupt(_) => true,
            StoreError::Rocks(r) => r.is_corruption(),
            _ => false,
        }
    }
}

impl From<rocksdb::Error> for StoreError {
    fn from(e: rocksdb::Error) -> Self {
        StoreError::Rocks(RocksError(e))
    }
}

impl From<Corruption> for StoreError {
    fn from(e: Corruption) -> Self {
        StoreError::Corrupt(Box::new(e))
    }
}

impl From<TrieError> for StoreError {
    fn from(e: TrieError) -> Self {
        StoreError::Trie(Box::new(e))
    }
}

impl From<StoreError> for trie::SourceError {
    fn from(e: StoreError) -> Self {
        trie::SourceError::new(e)
    }
}

/// Why [`crate::StateDb::open`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Another handle (in this process or another) has the database open for writing.
    #[error(
        "{} is in use: another open handle, in this process or another, holds its lock",
        path.display()
    )]
    InUse {
        /// The database directory.
        path: PathBuf,
    },
    /// The configuration is invalid.
    #[error("config: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// The directory could not be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// RocksDB refused to open the database.
    #[error("rocksdb: {0}")]
    Rocks(#[source] RocksError),
    /// A column family the schema needs is missing.
    #[error("database at {} lacks column family {name:?}; it was not created by Arbor or is damaged", path.display())]
    MissingColumnFamily {
        /// Database directory.
        path: PathBuf,
        /// The missing family.
        name: &'static str,
    },
    /// The directory holds a RocksDB database with data but no Arbor schema record.
    #[error("database at {} has no schema version record; it is not an Arbor database", path.display())]
    NotArbor {
        /// Database directory.
        path: PathBuf,
    },
    /// The directory holds table files but its MANIFEST names no Arbor schema (a MANIFEST
    /// cut short, say): refused before anything is written or deleted.
    #[error("database at {} holds {tables} table files but no Arbor schema record: its MANIFEST is damaged, or it is not an Arbor database; nothing was changed", path.display())]
    OrphanedTables {
        /// Database directory.
        path: PathBuf,
        /// The `*.sst` files in it.
        tables: usize,
    },
    /// The directory holds a database creation that has not finished: under way in another
    /// opener, or interrupted by a crash. Opening it for writing finishes it (read-only
    /// opens refuse it).
    #[error("the database at {} is being created or its creation was interrupted; opening it for writing finishes it", path.display())]
    CreationUnfinished {
        /// Database directory.
        path: PathBuf,
    },
    /// The database has another schema version.
    #[error("database schema version {found}, this build reads version {expected}; use a matching arbor build")]
    SchemaMismatch {
        /// Version on disk.
        found: u32,
        /// Version this build supports.
        expected: u32,
    },
    /// The database was created with another trie layout than the one asked for.
    #[error("the database holds {recorded} tries, not {requested}; open it without a layout or with --layout {recorded}")]
    LayoutMismatch {
        /// The layout the database recorded at its creation.
        recorded: trie::LayoutName,
        /// The layout asked for.
        requested: trie::LayoutName,
    },
    /// A bookkeeping record is unreadable.
    #[error("corrupt store: {0}")]
    Corrupt(#[source] Box<Corruption>),
    /// The background writer thread could not be started.
    #[error("cannot start the writer thread: {0}")]
    SpawnWriter(#[source] std::io::Error),
    /// The durable-block record could not be read (a decodable one that contradicts the
    /// database, or a garbled one, is [`OpenError::Corrupt`]).
    #[error("cannot read {}: {source}", path.display())]
    DurableRecord {
        /// The record's path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The trie nodes lag the head and could not be brought to it (see
    /// `docs/design.md`, "Nodes behind the block"): nothing is served.
    #[error("cannot bring the trie nodes to the head: {0}")]
    CatchUp(#[source] StoreError),
    /// The label of the bulk load a new database is born with is too long.
    #[error("a bulk-load label of {len} bytes is longer than the {max}-byte limit")]
    LabelTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl OpenError {
    /// The corruption this error reports, if it is one.
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            OpenError::Corrupt(c) => Some(c),
            OpenError::CatchUp(e) => e.corruption(),
            _ => None,
        }
    }

    /// The database is damaged: an unreadable bookkeeping record ([`OpenError::Corrupt`])
    /// or RocksDB files that fail their checks. A directory that holds no Arbor database,
    /// or another schema version, is told by its own variant.
    pub fn is_corruption(&self) -> bool {
        match self {
            OpenError::Corrupt(_) => true,
            OpenError::Rocks(r) => r.is_corruption(),
            OpenError::CatchUp(e) => e.is_corruption(),
            _ => false,
        }
    }
}

impl From<rocksdb::Error> for OpenError {
    fn from(e: rocksdb::Error) -> Self {
        OpenError::Rocks(RocksError(e))
    }
}

impl From<Corruption> for OpenError {
    fn from(e: Corruption) -> Self {
        OpenError::Corrupt(Box::new(e))
    }
}

/// Why [`crate::StateDb::commit`] refused or failed a block. Nothing of the block is
/// visible after an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// A key of the block is longer than the layout allows.
    #[error("key of {len} bytes in {trie:?} exceeds the {max}-byte limit")]
    KeyTooLong {
        /// The key's trie.
        trie: TrieId,
        /// Key length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An empty value in a layout where an empty value is a value (Substrate): the store
    /// keeps an empty value as "absent", so it refuses one rather than commit a root
    /// that differs from the chain's.
    #[error("empty value for key 0x{} of {trie:?}: this store cannot hold empty values in a {layout} trie", hex::encode(.key))]
    EmptyValue {
        /// The key's trie.
        trie: TrieId,
        /// The key.
        key: Vec<u8>,
        /// The database's layout.
        layout: trie::LayoutName,
    },
    /// `commit_with_prior` got no old value for a changed key.
    #[error("no prior value given for key 0x{} of {trie:?}", hex::encode(.key))]
    MissingPrior {
        /// The key's trie.
        trie: TrieId,
        /// The key.
        key: Vec<u8>,
    },
    /// `commit_with_prior` got an old value the state contradicts.
    #[error("the prior value given for key 0x{} of {trie:?} is not its value in the state", hex::encode(.key))]
    PriorMismatch {
        /// The key's trie.
        trie: TrieId,
        /// The key.
        key: Vec<u8>,
    },
    /// `commit_expecting`: the block's changes give another root than the expected one;
    /// nothing was committed.
    #[error("post-state root mismatch: expected {expected}, the changes give {computed}")]
    RootMismatch {
        /// The root the caller expected (a block header's).
        expected: H256,
        /// The root the changes give.
        computed: H256,
    },
    /// A nested commit changes (or clears) a child trie the model gives no parent key.
    #[error("{trie:?} is not a child trie of this state model")]
    NotAChild {
        /// The trie.
        trie: TrieId,
    },
    /// A nested commit leaves a child trie with entries under a parent leaf that does not
    /// exist after it (storage of an account that is absent or removed).
    #[error("{trie:?} keeps entries, but its parent leaf 0x{} does not exist after the commit", hex::encode(.parent))]
    ChildWithoutParent {
        /// The child trie.
        trie: TrieId,
        /// Its parent's main-trie key.
        parent: Vec<u8>,
    },
    /// The model could not set a child root in a main-trie leaf of the change set.
    #[error(transparent)]
    Leaf(#[from] state::LeafError),
    /// The store failed (I/O, corruption, poisoned, unfinished bulk load).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why [`crate::StateDb::revert`] refused or failed. A refused revert writes nothing; a
/// failed one leaves the store at a whole block (each reverted block is one batch).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RevertError {
    /// More blocks than there are above genesis.
    #[error("cannot revert {requested} blocks: the head is block {head}")]
    TooFar {
        /// Blocks asked for.
        requested: u64,
        /// The head block.
        head: u64,
    },
    /// A block's reverse diff is no longer kept.
    #[error("cannot revert block {number}: its history was pruned (raise layers.history_depth)")]
    Pruned {
        /// The block.
        number: u64,
    },
    /// The store failed (I/O, corruption, poisoned, unfinished bulk load).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a read or proof at a recent block ([`crate::StateDb::at`]) was refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AtError {
    /// The block is above the head or below the recent window.
    #[error(
        "block {block} is outside the readable window: blocks {oldest} to {head} \
         (history.recent_blocks = {recent})"
    )]
    Outside {
        /// The block asked for.
        block: u64,
        /// The oldest block readable now.
        oldest: u64,
        /// The head block.
        head: u64,
        /// The configured window (`history.recent_blocks`, capped by the history depth).
        recent: u64,
    },
    /// The block was reverted after the view was taken (another block has its number now).
    #[error("block {block} was reverted after this view of it was taken")]
    Reverted {
        /// The block.
        block: u64,
    },
    /// The store failed (I/O, corruption, unfinished bulk load).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<TrieError> for AtError {
    fn from(e: TrieError) -> Self {
        AtError::Store(e.into())
    }
}

/// Why a bulk load was refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BulkError {
    /// An empty value in a layout where an empty value is a value (see
    /// [`CommitError::EmptyValue`]).
    #[error("empty value for key 0x{} of {trie:?}: this store cannot hold empty values in a {layout} trie", hex::encode(.key))]
    EmptyValue {
        /// The key's trie.
        trie: TrieId,
        /// The key.
        key: Vec<u8>,
        /// The database's layout.
        layout: trie::LayoutName,
    },
    /// Bulk loads write into an empty database only.
    #[error("database is not empty (head block {head}); bulk loads need a new database")]
    NotEmpty {
        /// The head block.
        head: u64,
    },
    /// The database holds an unfinished bulk load of something else.
    #[error(
        "the database holds an unfinished bulk load of {found}, not {requested}; \
         finish that load or start from a new directory"
    )]
    OtherUnfinished {
        /// The label on disk.
        found: String,
        /// The label asked for.
        requested: String,
    },
    /// The label is longer than the marker allows.
    #[error("bulk-load label of {len} bytes exceeds the {max}-byte limit")]
    LabelTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A restore's nodes do not hold the root it was asked to finish at.
    #[error("restored state does not hold the root {expected}: {found}")]
    RestoredRoot {
        /// The root the restore was to reach.
        expected: H256,
        /// What the database holds instead.
        found: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests {
    use super::corruption::path_text;
    use super::*;

    #[test]
    fn errors_are_small() {
        // Results of these errors are returned on hot paths (every read).
        assert!(std::mem::size_of::<StoreError>() <= 40, "{}", std::mem::size_of::<StoreError>());
        assert!(std::mem::size_of::<BulkError>() <= 64, "{}", std::mem::size_of::<BulkError>());
    }

    #[test]
    fn store_errors_travel_through_the_trie_as_their_type() {
        let e = StoreError::KeyTooLong { len: 200, max: 127 };
        let source: trie::SourceError = e.into();
        let back = source.downcast_ref::<StoreError>();
        assert!(matches!(back, Some(StoreError::KeyTooLong { len: 200, .. })), "{back:?}");
        assert_eq!(path_text(&[0xa, 0x1]), "0xa1");
        assert_eq!(path_text(&[]), "root");
    }
}
