//! The Ethereum blockchain tests (`BlockchainTests`) on Arbor: parse a fixture file
//! ([`parse_file`], typed [`crate::FixtureError`]s naming the field, never a panic), then
//! run it ([`run_file`]): every test whose network the block executor runs (Paris on, with
//! the transition networks between them), on a [`BlockBackend`]; a test of any other
//! network is reported skipped with its network's name.
//!
//! Parts: `fixture` (the JSON format), `chain` (the backend seam and [`Chain`], its one
//! implementation over a [`ChainTip`]), `memory` ([`InMemoryChain`]: the state in memory),
//! `store` ([`InStoreChain`]: the state on a RocksDB store, `arbor blocktest --db`), `run`
//! (the checks and verdicts).

mod chain;
mod fixture;
mod memory;
mod run;
mod store;

pub use chain::{BlockBackend, Chain, ChainError, ChainTip, Rejection, Verdict};
pub use fixture::{parse_file, BlockRlp, BlockTest, BlockTestFile, PostState, TestBlock};
pub use memory::{InMemoryChain, MemoryTip};
pub use run::{run_file, run_test, Outcome, TestReport};
pub use store::{InStoreChain, StoreTip};
