//! Store errors: one enum, messages a person can act on.

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// RocksDB reported an error.
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// A column family the schema needs is missing.
    #[error("database at {path} lacks column family {name:?}; it was not created by Arbor or is damaged")]
    MissingColumnFamily {
        /// Database directory.
        path: String,
        /// The missing family.
        name: &'static str,
    },
    /// The database has another schema version.
    #[error("database schema version {found}, this build reads version {expected}; use a matching arbor build")]
    SchemaMismatch {
        /// Version on disk.
        found: u32,
        /// Version this build supports.
        expected: u32,
    },
    /// The meta column holds something unreadable.
    #[error("corrupt meta record: {0}")]
    CorruptMeta(String),
    /// A reverse diff does not decode.
    #[error("corrupt history record for block {number}: {reason}")]
    CorruptHistory {
        /// Block whose record is bad.
        number: u64,
        /// What is wrong.
        reason: String,
    },
    /// A stored node is inconsistent with its parent's reference.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// A write failed earlier; the store refuses writes until reopened.
    #[error("store is poisoned by an earlier write failure ({0}); reopen the database")]
    Poisoned(String),
    /// A key longer than the layout allows.
    #[error("key of {len} bytes exceeds the {max}-byte limit")]
    KeyTooLong {
        /// Key length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Reverting past the available history.
    #[error("cannot revert block {number}: {reason}")]
    Revert {
        /// The block.
        number: u64,
        /// Why.
        reason: String,
    },
    /// An operation that needs an empty database.
    #[error("database is not empty (head block {0}); bulk loads need a fresh database")]
    NotEmpty(u64),
    /// Trie-level failure (missing node etc.).
    #[error("trie: {0}")]
    Trie(#[from] trie::TrieError),
    /// Bad configuration.
    #[error("config: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// Filesystem error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

impl From<StoreError> for trie::SourceError {
    fn from(e: StoreError) -> Self {
        trie::SourceError(e.to_string())
    }
}
