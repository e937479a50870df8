//! Checkpoint tests: round trips (restore equals source), determinism across thread
//! counts, mutations, resume, sources, and many parallel restores (staging races).

#![allow(clippy::unwrap_used)]

mod code;
mod common;
mod determinism;
mod fields;
mod hostile;
mod limits;
mod mutations;
mod parallel;
mod roundtrip;
mod sources;
mod substrate;

/// Property-test case count: `ARBOR_PROPTEST_CASES` (default small enough for CI).
pub fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
