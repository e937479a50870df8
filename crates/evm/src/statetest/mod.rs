//! The Ethereum state tests (`GeneralStateTests`) on Arbor: parse a fixture file
//! ([`parse_file`], typed [`crate::FixtureError`]s, never a panic), then run it
//! ([`run_file`]): every test, every fork revm supports ([`spec_of`]), every post entry, on
//! a [`TestBackend`]: in memory ([`InMemory`]) or in RocksDB stores ([`InStore`]). The
//! results ([`FileReport`]) name each failing entry by test, fork and indexes, count the
//! skipped entries per unsupported fork, and carry each transaction's reads and writes
//! ([`crate::PovNeeds`]).
//!
//! Parts: `fixture` (the JSON format), `fork` (fork names), `tx` (one entry's transaction),
//! `logs` (the logs hash), `run` (execution, verdicts, the in-memory back-end), `in_store`
//! (the store back-end). A back-end's reads go through [`crate::WorldReader`], its commit
//! takes [`eth::EthChanges`].

mod fixture;
mod fork;
mod in_store;
mod logs;
mod run;
mod tx;

pub use fixture::{
    parse_file, AccessListEntry, AuthorizationEntry, Env, Indexes, PostEntry, StateTest,
    StateTestFile, TxNumber, TxTemplate,
};
pub use fork::spec_of;
pub use in_store::InStore;
pub use logs::logs_hash;
pub use run::{run_entry, run_file, EntryReport, Failure, FileReport, InMemory, TestBackend};
pub use tx::{build_tx, TxBuildError};
