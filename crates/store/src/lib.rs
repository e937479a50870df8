//! Arbor's persistent state store on RocksDB.
//!
//! Column families `flat` (latest values), `nodes` (path-keyed branch and extension nodes
//! stored with their hash; leaves are rebuilt from `flat`), `history` (per-block reverse
//! diffs) and `meta` (schema, head, per-trie roots, markers); byte layouts, invariants and
//! the commit path in `docs/design.md`, "Store". A commit computes the new roots with one
//! sorted update pass per touched trie, turns the block into an in-memory layer and
//! returns; a background writer persists layers in groups, with bounded unpersisted bytes.
//! A failed write poisons the store until reopened; what is on disk is always whole blocks.
//!
//! Where things live. [`StateDb`] and [`ReadHandle`] are defined in `statedb`; each
//! operation family has its own module, with its `impl StateDb` block and the types it
//! returns:
//!
//! | module | family | returns |
//! |---|---|---|
//! | `open` | [`StateDb::open`], [`StateDb::open_read_only`], [`StateDb::close`] | |
//! | `commit/` | [`StateDb::commit`] and its forms (`pass`: the update pass over the store's pre-state; `assemble`: the layer) | [`CommitInfo`], [`CommitTimings`] |
//! | `persist` | [`StateDb::flush`], publishing a layer to the writer (`writer`: the background writer) | |
//! | `revert` | [`StateDb::revert`] | |
//! | `read/` | reads at the head ([`StateDb::get`], ranges, proofs, [`ReadHandle`]); `at`: [`StateDb::at`], a recent block; `range`: [`FlatRange`]; `snapshot`: [`ReadHandle::persisted`] | [`BlockView`], [`FlatRange`], [`PersistedState`] |
//! | `bulk/` | [`StateDb::begin_bulk_load`] (`rebuild`: the bottom-up rebuild from `flat`) | [`BulkLoad`], [`BulkSummary`] |
//! | `verify` | [`StateDb::verify`], [`StateDb::verify_deep`], [`StateDb::repair`] | [`VerifyReport`], [`DeepReport`] |
//! | `restore` | [`StateDb::begin_restore`] (a verified state piece by piece) | [`Restore`] |
//! | `catch_up` | the open's catch-up of nodes lagging the head | [`CatchUpReport`] (kept with the node buffer, `tiers/buffer`) |
//! | `stats` | [`StateDb::stats`], [`ReadHandle::metrics`] | [`StoreStats`], [`StoreMetrics`] |
//!
//! Below the families: `tiers/` holds everything kept in memory (caches, block layers and
//! the node buffer, the recent window, the resident trie), its module doc the map of them
//! in the order a read consults them; `rocks/` opens and creates RocksDB (options, the
//! creation marker); `keys` (byte layouts of keys and records), `history` (the reverse
//! diff), `durable` (the `ARBOR-DURABLE` record: a database that opens below it is refused,
//! [`Corruption::RolledBack`]), `config`, `error` (one enum per operation family over
//! [`StoreError`] and its typed [`Corruption`]), `shared` (what the handles share),
//! `layout` (calls into layout-generic trie code, dispatched by the recorded layout).
//!
//! The feature `test-hooks` exposes what tests and fuzzers need and users do not: the
//! write-fault injector (`StateDb::faults`) and the reverse-diff codec.

#![forbid(unsafe_code)]

mod bulk;
mod capped;
mod catch_up;
mod commit;
mod config;
mod durable;
mod error;
mod history;
mod kept;
mod keys;
mod layout;
mod open;
mod persist;
mod read;
mod restore;
mod revert;
mod rocks;
mod shared;
mod statedb;
mod stats;
mod tiers;
mod verify;
mod writer;

pub use bulk::{BulkLoad, BulkSummary, BULK_LABEL_BYTES_MAX};
pub use capped::read_capped;
pub use commit::{CommitInfo, CommitTimings};
pub use config::{
    parse_size, CacheConfig, CheckpointConfig, Compression, ConfigError, HistoryConfig,
    LayerConfig, RocksConfig, StoreConfig, DEFAULT_CONFIG_TOML,
};
pub use error::{
    AtError, BulkError, CommitError, Corruption, DurableRecordError, HistoryError, OpenError,
    RevertError, RocksError, StoreError,
};
pub use history::ReverseDiff;
pub use keys::{Column, KEY_BYTES_MAX};
pub use read::at::{AtSource, BlockView};
pub use read::range::FlatRange;
pub use read::snapshot::{FlatCursor, PersistedSource, PersistedState};
pub use restore::{NodeBatch, ProgressRecord, Restore, RestoreBatch, RestoreWriter};
pub use rocks::create::creation_unfinished;
pub use rocks::rocksdb_options;
pub use statedb::{ReadHandle, StateDb};
pub use stats::{ColumnFamilyStats, StoreMetrics, StoreStats};
pub use tiers::buffer::CatchUpReport;
pub use tiers::cache::{CacheStats, CacheTotals};
pub use tiers::reader::StoreSource;
pub use tiers::recent::RecentStats;
pub use tiers::resident::ResidentStats;
pub use verify::{DeepReport, NodeReport, TrieMismatch, VerifyReport};

/// The README's code (its "Use it as a library" example), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// What tests and fuzz targets reach inside the store (feature `test-hooks`); not a
/// stable interface.
#[cfg(feature = "test-hooks")]
pub mod test_hooks {
    pub use crate::history::{ReverseDiff, ReverseEntry};
    pub use crate::keys::Column;
    pub use crate::rocks::FaultInjector;
}
