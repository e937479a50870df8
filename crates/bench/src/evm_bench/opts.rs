//! The options of [`crate::evm_bench`]: the driver reads them, the report records them, so
//! they belong to neither.

use std::path::PathBuf;

use serde::Serialize;

/// Options of [`crate::evm_bench`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvmBenchOpts {
    /// Accounts in the genesis state (each also holds the token; the storage-heavy
    /// contract has as many slots).
    pub accounts: u64,
    /// Blocks per workload.
    pub blocks: u64,
    /// Each block's gas limit (the blocks are filled up to it by their transactions' gas
    /// limits).
    pub gas_limit: u64,
    /// Seed of the state and the blocks.
    pub seed: u64,
    /// Directory under which the temporary databases and block files are created (default:
    /// the system's).
    pub dir: Option<PathBuf>,
    /// The executable that runs the engines' workers (`arbor bench evm-worker`); `None`:
    /// this process's own executable.
    #[serde(skip)]
    pub worker: Option<PathBuf>,
}

impl Default for EvmBenchOpts {
    fn default() -> Self {
        EvmBenchOpts {
            accounts: 1_000_000,
            blocks: 200,
            gas_limit: 36_000_000,
            seed: 1,
            dir: None,
            worker: None,
        }
    }
}
