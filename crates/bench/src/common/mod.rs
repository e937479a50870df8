//! What the benchmarks share, none of it specific to one:
//! - `machine`: the machine and build a report was measured on;
//! - `timing`: medians with min and max over repeated runs, nearest-rank percentiles,
//!   ratios;
//! - `rss`: this process's peak and current resident memory, CPU time, disk writes and the
//!   load average, from `/proc`;
//! - `progress`: the progress bars of long phases (stderr, hidden for `--json`);
//! - `table` and `text`: the human reports' tables, grouped digits and hex;
//! - `html`: the self-contained HTML pages (`--html FILE`), their bar and line charts;
//! - `workload`: the deterministic block workload of `arbor load`, `bench store` and
//!   `bench history`;
//! - `temp`: the temporary directories the benchmarks' databases live in;
//! - `plain_db`: plain RocksDB with and without undo records, the physical baseline of
//!   `bench store` and `bench evm`;
//! - `worker`: engines as worker processes whose rounds of blocks interleave.

pub mod html;
pub(crate) mod machine;
pub(crate) mod plain_db;
pub(crate) mod progress;
pub(crate) mod rss;
pub(crate) mod table;
pub(crate) mod temp;
pub(crate) mod text;
pub(crate) mod timing;
pub(crate) mod worker;
pub mod workload;
