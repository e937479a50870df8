//! The in-memory tiers: everything the store keeps in memory between RocksDB and its
//! callers, each bounded, in the order a read consults them ([`reader`], the one
//! statement of the read order in code; `docs/design.md`, "Store", in prose).
//!
//! | tier | holds | bound | written by | read by |
//! |---|---|---|---|---|
//! | [`cache`]: node cache, flat cache | nodes and flat values read from RocksDB (never freshly written ones), and paths known to hold no stored node | `cache.node_cache_bytes`, `cache.flat_cache_bytes` | a read that missed and went to disk (admission); a commit's publish invalidates its keys | every read at the head, first |
//! | [`layer`]: block layers | each committed block not yet on disk: its flat, nodes and meta changes as sorted vectors and its encoded reverse diff | `layers.unpersisted_bytes_max` (commits wait: back-pressure) | a commit's publish pushes one; the writer pops it once persisted | every read at the head, after the caches, newest first |
//! | [`layer`] + [`buffer`]: node buffer | the node writes of persisted blocks not yet written back (each path once, its newest version), at the bottom of the layer stack; its watermark `nodes_at` on disk | `layers.node_buffer_bytes` (written back past it) | the writer; the open's catch-up rebuilds it | node reads, after the block layers |
//! | [`recent`]: recent window | the old values (flat, meta) and old nodes of the last `history.recent_blocks` blocks, and a lazy index of them | `history.recent_bytes` (oldest blocks leave first) | each commit (from its reverse diff and the nodes its walk replaced); filled lazily after an open | reads and proofs at a recent block (`read/at.rs`), before the head's tiers |
//! | [`resident`]: resident trie (+ its filter of deeper keys) | the committer's copy of the upper stored nodes of every trie, complete above a depth limit | `cache.resident_bytes` (the limit drops a level when it is passed) | the committer only: each commit's node writes, after its publish; one fill before the first commit | the committer's update pass, before anything else |
//!
//! A read at the head asks the caches, then the block layers from the newest down, then
//! the node buffer, then RocksDB, all under the shared layer lock; only a value that came
//! from RocksDB is admitted to a cache. The committer's walk asks the resident trie first
//! and falls back on that same order. Reads at a recent block ask the recent window for
//! what changed after their block and the head's order for the rest.

pub(crate) mod blocked;
pub(crate) mod buffer;
pub(crate) mod cache;
pub(crate) mod layer;
pub(crate) mod reader;
pub(crate) mod recent;
pub(crate) mod resident;
