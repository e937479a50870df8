//! Integration tests for the trie crate: differential properties, proofs, witnesses and
//! hostile bytes. The JSON vectors (TrieTests, genesis roots, eth_getProof) run in the
//! `eth` crate's tests, which share `reference.rs`.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod garbage;
mod proofs;
mod props;
mod ranges;
mod reference;
mod substrate;
mod substrate_trie;
mod witness;

/// Property-test case count: `ARBOR_PROPTEST_CASES` (default small enough for CI).
pub fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
