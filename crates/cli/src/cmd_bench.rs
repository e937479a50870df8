//! `arbor bench …`: thin front ends over the benchmark programs of the `bench` crate.
//!
//! `arbor bench trie` maps its flags onto [`bench::TrieBenchOpts`], draws progress bars
//! on stderr unless `--json` is given, and prints the human report or the JSON report
//! (optionally also written to `--out`). Timings are only meaningful in a release build.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

/// Keys in the incremental phase's trie when `--incremental-keys` is not given: the
/// issue's 1M-key trie, or fewer when `--keys` asks for a smaller (smoke-test) run.
const INCREMENTAL_KEYS_DEFAULT_MAX: usize = 1_000_000;

/// Arguments of `arbor bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    which: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Root builders vs alloy-trie, the keccak bound, incremental roots, proofs.
    Trie(TrieArgs),
}

/// Arguments of `arbor bench trie`.
#[derive(Debug, Args)]
struct TrieArgs {
    /// Random 32-byte keys (100-byte values) in the full-root input.
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Timed runs of each full-root builder; medians are reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Incremental rounds (each: a batch of updates, then `root()`).
    #[arg(long, default_value_t = 1000)]
    rounds: usize,
    /// Keys in the incremental trie [default: --keys, at most 1,000,000].
    #[arg(long)]
    incremental_keys: Option<usize>,
    /// Proofs generated and verified.
    #[arg(long, default_value_t = 10_000)]
    proofs: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the JSON report (and draw no progress bars).
    #[arg(long)]
    json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Run `arbor bench …`.
pub(crate) fn run(args: &BenchArgs) -> Result<ExitCode> {
    match &args.which {
        BenchCommand::Trie(t) => trie(t),
    }
}

fn trie(args: &TrieArgs) -> Result<ExitCode> {
    if args.keys == 0 {
        bail!("--keys must be at least 1");
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let opts = bench::TrieBenchOpts {
        keys: args.keys,
        runs: args.runs,
        incremental_rounds: args.rounds,
        incremental_keys: args
            .incremental_keys
            .unwrap_or_else(|| args.keys.min(INCREMENTAL_KEYS_DEFAULT_MAX)),
        proofs: args.proofs,
        seed: args.seed,
        ..bench::TrieBenchOpts::default()
    };
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; use `cargo run --release` for real timings");
    }
    let report = bench::trie_bench(&opts, !args.json).context("trie benchmark failed")?;
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(path) = &args.out {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{}", report.render());
        if let Some(path) = &args.out {
            println!("JSON report written to {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
