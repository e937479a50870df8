//! Arbor's benchmark programs (the library behind `arbor bench …`), one module folder per
//! benchmark and one for what they share:
//!
//! - [`trie_bench`] (`trie_bench/`) measures, in one run on one seeded input, the
//!   streaming root builder (serial and parallel) against alloy-trie's `HashBuilder`, the
//!   keccak bound of that build, incremental `root()` after small batches of updates, and
//!   proof generation and verification. In Substrate's layouts the reference engine is
//!   trie-db's root computation with reference-trie's layouts (the oracle of the trie
//!   crate's tests), and there is no keccak bound. The criterion kernels live in
//!   `benches/trie_kernels.rs`.
//! - [`store_bench`] (`store_bench/`) runs the deterministic block [`workload`] through
//!   the Arbor store and its baselines (plain RocksDB with and without undo records,
//!   NOMT), each in its own worker process, rounds interleaved, and reports time, size and
//!   memory ratios between them.
//! - [`history_bench`] (`history_bench/`) reads and proves at recent blocks (head down to
//!   head - K + 1) on a read handle while blocks commit, and compares commit throughput
//!   with and without the recent window on the same blocks.
//! - [`pov_bench`] (`pov_bench/`): block production with proof-of-validity recording.
//! - [`blockstm_bench`] (`blockstm_bench/`): Block-STM against the sequential executor.
//! - [`import_bench`] (`import_bench/`): the import road pipelined against unpipelined.
//! - [`checkpoint_bench`] (`checkpoint_bench/`): checkpoint creation, verified restore.
//! - [`evm_bench`] (`evm_bench/`): blocks of real contract calls (ETH and ERC-20
//!   transfers, a storage-heavy contract) executed by revm and committed by Arbor, beside
//!   revm's in-memory database and plain RocksDB with undo records, rounds interleaved.
//! - `common/`: machine info, timings, memory and CPU readings, progress bars, tables,
//!   the HTML pages ([`html`]), the block [`workload`], temporary directories, the plain
//!   RocksDB baseline, and the worker processes whose rounds interleave.
//!
//! Every comparison is a ratio from the same run; every timing is a median over repeated
//! runs (or a percentile over blocks) with the machine beside it. Comparison engines are
//! dependencies of this crate only, never of a library crate.

#![forbid(unsafe_code)]

mod blockstm_bench;
mod checkpoint_bench;
mod common;
mod evm_bench;
mod history_bench;
mod import_bench;
mod pov_bench;
mod store_bench;
mod trie_bench;

pub use blockstm_bench::report::{BlockStmReport, BlockStmRow};
pub use blockstm_bench::{blockstm_bench, blockstm_workload_names, AllocCounter, BlockStmOpts};
pub use checkpoint_bench::report::{CheckpointBenchReport, Target};
pub use checkpoint_bench::{checkpoint_bench, CheckpointBenchOpts};
pub use common::machine::MachineInfo;
pub use common::progress::bar as progress_bar;
pub use common::rss::{cpu_seconds, peak_rss_bytes};
pub use common::table::{table, text as table_text};
pub use common::timing::Timing;
pub use common::{html, workload};
pub use evm_bench::opts::EvmBenchOpts;
pub use evm_bench::report::{
    EvmBenchReport, EvmEngineReport, EvmLoadReport, EvmRoots, EvmWorkloadReport,
};
pub use evm_bench::worker::{evm_worker, EvmWorkerBounds};
pub use evm_bench::{evm_bench, ACCOUNTS_MIN as EVM_ACCOUNTS_MIN};
pub use history_bench::history_bench;
pub use history_bench::report::{
    BulkReport, CommitReport, CommitSeries, DepthReport, HistoryBenchOpts, HistoryBenchReport,
    LatencyReport, ReadReport, TargetReport, WindowReport,
};
pub use import_bench::report::{ImportBenchReport, ImportRow};
pub use import_bench::{import_bench, Executor, ImportBenchOpts};
pub use pov_bench::{pov_bench, ModeReport, PovBenchOpts, PovBenchReport, WorkloadReport};
pub use store_bench::catch_up::CatchUpReport;
pub use store_bench::opts::StoreBenchOpts;
pub use store_bench::report::{CacheReport, EngineReport, RatioReport, StoreBenchReport};
pub use store_bench::store_bench;
pub use store_bench::worker::{store_worker, WorkerBounds};
pub use trie_bench::opts::TrieBenchOpts;
pub use trie_bench::report::{
    AlloyFigures, BoundReport, HashClass, IncrementalReport, InputReport, KeysPerSecond,
    OracleFigures, ProofReport, RootReference, RootReport, TrieBenchReport,
};
pub use trie_bench::trie_bench;
