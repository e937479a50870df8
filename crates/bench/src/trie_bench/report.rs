//! The report of [`crate::trie_bench`]: plain data, serialisable to JSON, rendered for
//! people by [`TrieBenchReport::render`].

use serde::Serialize;

use crate::common::machine::MachineInfo;
use crate::common::timing::Timing;
use crate::trie_bench::opts::TrieBenchOpts;

/// Everything one `trie_bench` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct TrieBenchReport {
    /// Machine and build.
    pub machine: MachineInfo,
    /// The options used.
    pub options: TrieBenchOpts,
    /// The full-root input.
    pub input: InputReport,
    /// Full-root builds: Arbor serial and parallel against alloy-trie (Ethereum's layout)
    /// or trie-db (Substrate's).
    pub root: RootReport,
    /// The keccak bound of the serial build; `null` in Substrate's layouts (it replays
    /// keccak over the lengths of Ethereum's node encodings).
    pub bound: Option<BoundReport>,
    /// Incremental roots after small batches of updates.
    pub incremental: IncrementalReport,
    /// Proof generation and verification.
    pub proofs: ProofReport,
}

/// The sorted input of the full-root builds.
#[derive(Debug, Clone, Serialize)]
pub struct InputReport {
    /// Distinct keys built over.
    pub keys: usize,
    /// Bytes per key (random, seeded ChaCha8).
    pub key_bytes: usize,
    /// Bytes per value (random).
    pub value_bytes: usize,
    /// Random keys dropped as duplicates (almost surely 0).
    pub duplicates_dropped: usize,
    /// Time to sort the input once, before any timing; excluded from every timing.
    pub sort_seconds: f64,
}

/// Full-root builds over the same sorted input, interleaved run by run.
#[derive(Debug, Clone, Serialize)]
pub struct RootReport {
    /// The root all three builders agreed on, `0x` hex.
    pub root: String,
    /// Always true in a returned report: a mismatch fails the benchmark.
    pub roots_equal: bool,
    /// `trie::root_from_sorted` (one thread).
    pub arbor_serial: Timing,
    /// `trie::parallel_root` (rayon, 16 first-nibble subtrees).
    pub arbor_parallel: Timing,
    /// Threads in the rayon pool of the parallel build.
    pub parallel_threads: usize,
    /// The other engine on the same input: alloy-trie in Ethereum's layout, trie-db in
    /// Substrate's (its fields sit beside these in the JSON form).
    #[serde(flatten)]
    pub reference: RootReference,
    /// Arbor serial median / Arbor parallel median (the parallel speed-up).
    pub serial_over_parallel: f64,
}

/// The engine Arbor's root builders are compared with, by layout.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RootReference {
    /// Ethereum's layout: alloy-trie's `HashBuilder`.
    Alloy(AlloyFigures),
    /// Substrate's layouts: trie-db's root computation with reference-trie's layouts.
    Oracle(OracleFigures),
}

/// alloy-trie's `HashBuilder` on the full-root input (Ethereum's layout).
#[derive(Debug, Clone, Serialize)]
pub struct AlloyFigures {
    /// `alloy_trie::HashBuilder` (one thread).
    pub alloy: Timing,
    /// alloy median / Arbor serial median (> 1: Arbor faster).
    pub alloy_over_serial: f64,
    /// alloy median / Arbor parallel median (> 1: Arbor faster).
    pub alloy_over_parallel: f64,
    /// alloy fastest run / Arbor serial fastest run (less sensitive to a noisy machine).
    pub alloy_over_serial_fastest: f64,
    /// alloy fastest run / Arbor parallel fastest run.
    pub alloy_over_parallel_fastest: f64,
}

/// The oracle's root on the full-root input (Substrate's layouts): trie-db with
/// reference-trie's `SubstrateV0`/`SubstrateV1` over Blake2-256.
#[derive(Debug, Clone, Serialize)]
pub struct OracleFigures {
    /// The oracle's engine and call.
    pub oracle_engine: String,
    /// The oracle's root computation (one thread).
    pub oracle: Timing,
    /// oracle median / Arbor serial median (> 1: Arbor faster).
    pub oracle_over_serial: f64,
    /// oracle median / Arbor parallel median (> 1: Arbor faster).
    pub oracle_over_parallel: f64,
    /// oracle fastest run / Arbor serial fastest run.
    pub oracle_over_serial_fastest: f64,
    /// oracle fastest run / Arbor parallel fastest run.
    pub oracle_over_parallel_fastest: f64,
    /// Keys built into a root per second (keys / median seconds), per engine.
    pub keys_per_s: KeysPerSecond,
}

/// Keys per second of each full-root engine, from its median run.
#[derive(Debug, Clone, Serialize)]
pub struct KeysPerSecond {
    /// Arbor serial.
    pub arbor_serial: f64,
    /// Arbor parallel.
    pub arbor_parallel: f64,
    /// The oracle.
    pub oracle: f64,
}

impl RootReport {
    /// The alloy-trie figures (Ethereum's layout).
    pub fn alloy(&self) -> Option<&AlloyFigures> {
        match &self.reference {
            RootReference::Alloy(a) => Some(a),
            RootReference::Oracle(_) => None,
        }
    }

    /// The oracle's figures (Substrate's layouts).
    pub fn oracle(&self) -> Option<&OracleFigures> {
        match &self.reference {
            RootReference::Oracle(o) => Some(o),
            RootReference::Alloy(_) => None,
        }
    }
}

/// Hash inputs of one kind of node in a full build.
#[derive(Debug, Clone, Serialize)]
pub struct HashClass {
    /// Hash calls.
    pub calls: u64,
    /// Bytes hashed.
    pub bytes: u64,
    /// Mean input length.
    pub bytes_mean: f64,
    /// Calls with inputs of at most 135 bytes (one keccak permutation).
    pub single_block_calls: u64,
    /// Median replay cost per call, nanoseconds.
    pub ns_per_call: f64,
}

/// The keccak bound: hashing every node the serial build must hash, and nothing else.
#[derive(Debug, Clone, Serialize)]
pub struct BoundReport {
    /// Hash calls the serial builder counted (`HashStats::hashes`).
    pub builder_hashes: u64,
    /// Bytes the serial builder counted (`HashStats::bytes`).
    pub builder_bytes: u64,
    /// Nodes a build must hash: every leaf plus every branch/extension of 32+ bytes.
    pub nodes_hashed: u64,
    /// Bytes of those nodes.
    pub nodes_bytes: u64,
    /// Leaf encodings.
    pub leaf: HashClass,
    /// Branch and extension encodings.
    pub interior: HashClass,
    /// Replaying `keccak256` over those lengths, `runs` times, interleaved with the builds.
    pub bound: Timing,
    /// Arbor serial median / bound median (1.0 would be pure hashing).
    pub serial_over_bound: f64,
    /// Arbor serial fastest run / bound fastest run.
    pub serial_over_bound_fastest: f64,
    /// Arbor parallel median / (bound median / rayon threads).
    pub parallel_over_bound_per_thread: f64,
}

/// Incremental `root()` after batches of updates.
#[derive(Debug, Clone, Serialize)]
pub struct IncrementalReport {
    /// Keys inserted before the rounds.
    pub keys_initial: usize,
    /// Rounds run.
    pub rounds: usize,
    /// Writes per round: alternately an existing key (new value) and a new key.
    pub updates_per_round: usize,
    /// Median time of a round (inserts + `root()`), microseconds.
    pub round_us_p50: f64,
    /// 99th percentile of a round, microseconds.
    pub round_us_p99: f64,
    /// Slowest round, microseconds.
    pub round_us_max: f64,
    /// Median time of the `root()` part of a round, microseconds.
    pub root_us_p50: f64,
    /// 99th percentile of the `root()` part, microseconds.
    pub root_us_p99: f64,
    /// Median hash calls per round (`hash_stats` deltas; keccak, or Blake2-256 in
    /// Substrate's layouts).
    pub hashes_per_round_p50: f64,
    /// Mean hash calls per round.
    pub hashes_per_round_mean: f64,
    /// Mean bytes hashed per round.
    pub hashed_bytes_per_round_mean: f64,
    /// Always true in a returned report: the final root equals a streaming rebuild.
    pub root_matches_rebuild: bool,
}

/// Single-key proofs for random existing keys of the incremental trie.
#[derive(Debug, Clone, Serialize)]
pub struct ProofReport {
    /// Proofs generated and verified.
    pub proofs: usize,
    /// Time to generate them all.
    pub generate_seconds: f64,
    /// Time to verify them all.
    pub verify_seconds: f64,
    /// Proofs generated per second.
    pub generated_per_second: f64,
    /// Proofs verified per second.
    pub verified_per_second: f64,
    /// Mean nodes per proof.
    pub nodes_per_proof_mean: f64,
    /// Mean encoded bytes per proof.
    pub bytes_per_proof_mean: f64,
}
