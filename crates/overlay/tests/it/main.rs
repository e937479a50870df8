//! Integration tests for the overlay crate: a differential property test against a
//! deliberately simple model.
//!
//! Environment: `ARBOR_PROPTEST_CASES` (default 128).

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod differential;
mod pov;

/// Property-test case count: `ARBOR_PROPTEST_CASES` (default small enough for CI).
pub fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
