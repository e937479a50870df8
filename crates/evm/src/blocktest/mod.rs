//! The Ethereum blockchain tests (`BlockchainTests`) on Arbor: parse a fixture file
//! ([`parse_file`], typed [`FixtureError`]s naming the field, never a panic), then run it
//! ([`run_file`]): every test whose network the block executor runs (Paris on, with the
//! transition networks between them), on a [`BlockBackend`]; a test of any other network
//! is reported skipped with its network's name.
//!
//! Parts: `fixture` (the JSON format), `chain` (the backend seam and the in-memory chain,
//! [`InMemoryChain`]), `run` (the checks and verdicts). The import road over RocksDB
//! plugs in as a second [`BlockBackend`].

mod chain;
mod fixture;
mod run;

pub use chain::{BlockBackend, InMemoryChain, InMemoryError, Rejection, Verdict};
pub use fixture::{
    parse_file, BlockRlp, BlockTest, BlockTestFile, FixtureError, PostState, TestBlock,
};
pub use run::{run_file, run_test, Outcome, TestReport};
