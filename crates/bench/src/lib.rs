//! Arbor's benchmark programs (the library behind `arbor bench …`).
//!
//! [`trie_bench`] measures, in one run on one seeded input, the streaming root builder
//! (serial and parallel) against alloy-trie's `HashBuilder`, the keccak bound of that
//! build, incremental `root()` after small batches of updates, and proof generation and
//! verification. In Substrate's layouts the reference engine is trie-db's root computation
//! with reference-trie's layouts (the oracle of the trie crate's tests), and there is no
//! keccak bound. Every comparison is a ratio from the same run; every timing is a median
//! over repeated runs with min and max beside it. The criterion kernels live in
//! `benches/trie_kernels.rs`.
//!
//! [`store_bench`] runs the deterministic block [`workload`] through the Arbor store and,
//! in the same process, through a plain RocksDB database without Merkle work (the
//! physical baseline), and reports time, size and memory ratios between the two.
//!
//! [`history_bench`] reads and proves at recent blocks (head down to head - K + 1) on a
//! read handle while blocks commit, and compares commit throughput with and without the
//! recent window on the same blocks.
//!
//! Comparison engines are dependencies of this crate only, never of a library crate.

#![forbid(unsafe_code)]

mod blockstm_bench;
mod bound;
mod charts;
mod checkpoint_bench;
mod history_bench;
mod history_report;
pub mod html;
mod import_bench;
mod incremental;
mod input;
mod machine;
// Until `store_bench` drives it, only its tests use the NOMT engine.
mod nomt_engine;
mod opts;
mod oracle;
mod plain_db;
mod pov_bench;
mod progress;
mod proofs;
mod render;
mod report;
mod roots;
mod rss;
mod run;
mod store_bench;
mod store_catch_up;
mod store_engines;
mod store_report;
mod store_worker;
mod table;
mod timing;
pub mod workload;

pub use blockstm_bench::{
    blockstm_bench, blockstm_workload_names, AllocCounter, BlockStmOpts, BlockStmReport,
    BlockStmRow,
};
pub use checkpoint_bench::{checkpoint_bench, CheckpointBenchOpts, CheckpointBenchReport, Target};
pub use history_bench::history_bench;
pub use history_report::{
    BulkReport, CommitReport, CommitSeries, DepthReport, HistoryBenchOpts, HistoryBenchReport,
    LatencyReport, ReadReport, TargetReport, WindowReport,
};
pub use import_bench::{import_bench, ImportBenchOpts, ImportBenchReport, ImportRow};
pub use machine::MachineInfo;
pub use opts::{StoreBenchOpts, TrieBenchOpts};
pub use pov_bench::{pov_bench, ModeReport, PovBenchOpts, PovBenchReport, WorkloadReport};
pub use progress::bar as progress_bar;
pub use report::{
    AlloyFigures, BoundReport, HashClass, IncrementalReport, InputReport, KeysPerSecond,
    OracleFigures, ProofReport, RootReference, RootReport, TrieBenchReport,
};
pub use rss::{cpu_seconds, peak_rss_bytes};
pub use run::trie_bench;
pub use store_bench::store_bench;
pub use store_catch_up::CatchUpReport;
pub use store_report::{CacheReport, EngineReport, RatioReport, StoreBenchReport};
pub use store_worker::{store_worker, WorkerBounds};
pub use table::{table, text as table_text};
pub use timing::Timing;
