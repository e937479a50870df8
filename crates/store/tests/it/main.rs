//! The store's integration tests, one binary: differential property test against an
//! in-memory model, commits below a filtered resident trie, injected write failures, bad
//! databases, SIGKILL crash tests (blocks, creation, nodes behind the block, the recent
//! window after a kill), creation into empty directories and mount points, back-pressure,
//! the catch-up of lagging nodes, and reads and proofs at recent blocks (a differential
//! property test of the window, concurrent readers while blocks commit and revert),
//! Substrate-layout databases against trie-db, and the durable record (a truncated
//! MANIFEST refused, reverts, records behind the head, garbled records).
//!
//! Environment: `ARBOR_PROPTEST_CASES` (default 24), `ARBOR_CRASH_ITERATIONS` (default 3),
//! `ARBOR_SEED` (replays a seeded test; each prints its seed).

#![allow(clippy::unwrap_used)]

mod backpressure;
mod bad_db;
mod bulk;
mod common;
mod crash;
mod create;
mod deep;
mod differential;
mod durable;
mod faults;
mod lag;
mod nested;
mod recent;
mod substrate;
