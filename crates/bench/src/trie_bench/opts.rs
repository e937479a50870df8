//! The options of [`crate::trie_bench`]: the driver reads them, the report records them,
//! so they belong to neither.

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
