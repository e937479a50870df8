//! The option structs of the benchmarks whose reports carry them: the driver reads them,
//! the report records them, so they belong to neither.

use std::path::PathBuf;

use serde::{Serialize, Serializer};
use trie::LayoutName;

/// Options of [`crate::trie_bench`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrieBenchOpts {
    /// Keys of the full-root input.
    pub keys: usize,
    /// Timed runs of each full-root builder (and of the bound replay).
    pub runs: usize,
    /// Incremental rounds.
    pub incremental_rounds: usize,
    /// Writes per incremental round.
    pub updates_per_round: usize,
    /// Keys in the trie before the incremental rounds.
    pub incremental_keys: usize,
    /// Proofs generated and verified.
    pub proofs: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Trie layout of every phase. Ethereum's compares with alloy-trie and replays the
    /// keccak bound; Substrate's compare with trie-db (reference-trie's layouts) and have
    /// no bound.
    #[serde(serialize_with = "layout_name")]
    pub layout: LayoutName,
}

/// A layout as `--layout` spells it.
fn layout_name<S: Serializer>(layout: &LayoutName, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(layout.as_str())
}

impl Default for TrieBenchOpts {
    fn default() -> Self {
        TrieBenchOpts {
            keys: 1_000_000,
            runs: 5,
            incremental_rounds: 1000,
            updates_per_round: 10,
            incremental_keys: 1_000_000,
            proofs: 10_000,
            seed: 1,
            layout: LayoutName::Ethereum,
        }
    }
}

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
