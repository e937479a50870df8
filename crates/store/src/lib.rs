//! Arbor's persistent state store on RocksDB.
//!
//! - Column families `flat` (latest values), `nodes` (path-keyed branch and extension
//!   nodes stored with their hash; leaves are rebuilt from `flat`), `history` (per-block
//!   reverse diffs) and `meta` (schema, head, per-trie roots). Byte layout:
//!   `docs/design.md`.
//! - [`StateDb::commit`] applies a block through the mutable trie (only dirty paths are
//!   hashed), turns it into an in-memory diff layer and returns; a background writer
//!   persists layers in order, one atomic batch per block, with bounded unpersisted bytes.
//! - Reads go layers → byte-bounded caches (which never admit fresh writes) → RocksDB.
//! - [`StateDb::revert`] undoes blocks from reverse diffs; `verify` and bulk loads rebuild
//!   roots bottom-up from `flat` in parallel.

#![forbid(unsafe_code)]

pub mod bulk;
pub mod cache;
pub mod config;
pub mod db;
pub mod error;
pub mod history;
pub mod keys;
pub mod layer;
pub mod rebuild;
pub mod state;
mod view;

pub use bulk::VerifyReport;
pub use config::StoreConfig;
pub use error::StoreError;
pub use state::{ChangeSet, CommitInfo, CommitTimings, StateDb, StoreStats};
pub use view::StoreSource;

impl trie::StateReader for StateDb {
    type Error = StoreError;
    fn get(&self, trie: &trie::TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        StateDb::get(self, trie, key)
    }
}
