//! Integration tests of the evm crate: the Ethereum state-test subset of `testdata/` run
//! in memory (every entry must pass) and, a file in nine of every category, on the RocksDB
//! store; the blockchain-test subset run in memory (every test must pass); the store's
//! reads against the in-memory world; hostile fixtures (never a panic, errors that name
//! the field), and execution rules checked directly (EIP-7610 collisions, EIP-161 and the
//! forks before it, read errors of the database adapter); the subset's linear chains
//! through the import road (`evm::road`) on stores, flipped bytes refused there.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod blockrun;
mod blocksuite;
mod execution;
mod fixture;
mod in_store;
mod road;
mod stored;
mod suite;

/// Property-test case count: `ARBOR_PROPTEST_CASES` (default small enough for CI).
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The text of one file of the state-test subset.
pub(crate) fn subset_file(name: &str) -> String {
    let files = test_support::statetests::read_archive(&test_support::statetests::archive_path());
    let (_, bytes) = files
        .into_iter()
        .find(|(path, _)| path.ends_with(name))
        .unwrap_or_else(|| panic!("{name} not in the subset"));
    String::from_utf8(bytes).unwrap()
}
