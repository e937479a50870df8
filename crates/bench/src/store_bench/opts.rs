//! The options of [`crate::store_bench`]: the driver reads them, the report records them,
//! so they belong to neither.

use std::path::PathBuf;

use serde::Serialize;

/// Options of [`crate::store_bench`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreBenchOpts {
    /// Initial keys (`M`).
    pub keys: u64,
    /// Blocks committed (`N`).
    pub blocks: u64,
    /// Operations per block (`K`).
    pub updates_per_block: u64,
    /// Workload seed.
    pub seed: u64,
    /// Directory under which the temporary databases are created (default: the system's).
    pub dir: Option<PathBuf>,
    /// Also run Arbor reading the old values itself (`StateDb::commit`), beside Arbor
    /// given them by the caller (`StateDb::commit_with_prior`).
    pub arbor_reading: bool,
    /// Also run NOMT on the same blocks.
    pub nomt: bool,
    /// The executable that runs the engines' workers (`arbor bench store-worker`); `None`:
    /// this process's own executable.
    #[serde(skip)]
    pub worker: Option<PathBuf>,
}

impl Default for StoreBenchOpts {
    fn default() -> Self {
        StoreBenchOpts {
            keys: 1_000_000,
            blocks: 100,
            updates_per_block: 10_000,
            seed: 1,
            dir: None,
            arbor_reading: true,
            nomt: true,
            worker: None,
        }
    }
}
