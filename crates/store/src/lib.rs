//! Arbor's persistent state store on RocksDB.
//!
//! - Column families `flat` (latest values), `nodes` (path-keyed branch and extension
//!   nodes stored with their hash; leaves are rebuilt from `flat`), `history` (per-block
//!   reverse diffs) and `meta` (schema, head, per-trie roots, the bulk-load marker). Byte
//!   layout, the read order through caches, layers and RocksDB, and the commit path:
//!   `docs/design.md`, "Store".
//! - [`StateDb::commit`] applies a block by one sorted pass over its changed paths
//!   ([`trie::update_trie`]: only those are hashed), turns it into an in-memory diff layer
//!   and returns; a background writer persists layers in order, one atomic batch per
//!   block, with bounded unpersisted bytes.
//! - [`ReadHandle::persisted`] pins the persisted state (a RocksDB snapshot) for long
//!   reads such as checkpoint creation; [`StateDb::begin_restore`] writes a verified state
//!   piece by piece, crash-safe and resumable.
//! - [`StateDb::revert`] undoes blocks from reverse diffs; [`StateDb::verify`] and bulk
//!   loads ([`StateDb::begin_bulk_load`], crash-safe) rebuild roots bottom-up from `flat`
//!   in parallel.
//! - A file beside RocksDB's, `ARBOR-DURABLE`, names a block known durable; a database
//!   that opens below it (a MANIFEST cut short) is refused ([`Corruption::RolledBack`]).
//!
//! Errors come in one enum per operation family ([`OpenError`], [`CommitError`],
//! [`RevertError`], [`BulkError`]) over [`StoreError`] and its typed [`Corruption`].
//!
//! The feature `test-hooks` exposes what tests and fuzzers need and users do not: the
//! write-fault injector (`StateDb::faults`) and the reverse-diff codec.

#![forbid(unsafe_code)]

mod at;
mod bulk;
mod cache;
mod commit;
mod config;
mod db;
mod deep;
mod durable;
mod error;
mod history;
mod keys;
mod lag;
mod layer;
mod layout;
mod range;
mod read;
mod rebuild;
mod recent;
mod resident;
mod restore;
mod shared;
mod snapshot;
mod statedb;
mod view;
mod writer;

pub use at::{AtSource, BlockView};
pub use bulk::{
    BulkLoad, BulkSummary, DeepReport, NodeReport, TrieMismatch, VerifyReport, BULK_LABEL_BYTES_MAX,
};
pub use cache::{CacheStats, CacheTotals};
pub use config::{
    parse_size, CacheConfig, CheckpointConfig, Compression, ConfigError, HistoryConfig,
    LayerConfig, RocksConfig, StoreConfig, DEFAULT_CONFIG_TOML,
};
pub use db::{creation_unfinished, rocksdb_options};
pub use error::{
    AtError, BulkError, CommitError, Corruption, DurableRecordError, HistoryError, OpenError,
    RevertError, RocksError, StoreError,
};
pub use history::ReverseDiff;
pub use keys::{Column, KEY_BYTES_MAX};
pub use range::FlatRange;
pub use read::read_capped;
pub use recent::RecentStats;
pub use resident::ResidentStats;
pub use restore::{NodeBatch, ProgressRecord, Restore, RestoreBatch, RestoreWriter};
pub use snapshot::{FlatCursor, PersistedSource, PersistedState};
pub use statedb::{
    CatchUpReport, ColumnFamilyStats, CommitInfo, CommitTimings, ReadHandle, StateDb, StoreMetrics,
    StoreStats,
};
pub use view::StoreSource;

/// The README's code (its "Use it as a library" example), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// What tests and fuzz targets reach inside the store (feature `test-hooks`); not a
/// stable interface.
#[cfg(feature = "test-hooks")]
pub mod test_hooks {
    pub use crate::db::FaultInjector;
    pub use crate::history::{ReverseDiff, ReverseEntry};
    pub use crate::keys::Column;
}

/// The store is the state the import road executes against: point reads through the
/// caches and layers, ranges merged from the layers and `flat`.
impl state::StateReader for StateDb {
    type Error = StoreError;
    type Range<'a> = FlatRange<'a>;

    fn get(&self, trie: &state::TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        StateDb::get(self, trie, key)
    }

    fn range<'a>(
        &'a self,
        trie: &state::TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<FlatRange<'a>, StoreError> {
        StateDb::range(self, trie, start, end)
    }
}
