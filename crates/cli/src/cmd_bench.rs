//! `arbor bench …`: thin front ends over the benchmark programs of the `bench` crate.
//!
//! `arbor bench trie` maps its flags onto [`bench::TrieBenchOpts`], `arbor bench store`
//! onto [`bench::StoreBenchOpts`], `arbor bench history` onto [`bench::HistoryBenchOpts`],
//! `arbor bench evm` onto [`bench::EvmBenchOpts`], and so on; each draws progress bars on stderr unless `--json` is
//! given, and print the human report or the JSON report (optionally also written to
//! `--out`). Timings are only meaningful in a release build. Every numeric flag is
//! bounded by [`crate::limits`] (a usage error outside its bounds).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use crate::limits::{self, Counts};

/// Keys in the incremental phase's trie when `--incremental-keys` is not given: the
/// issue's 1M-key trie, or fewer when `--keys` asks for a smaller (smoke-test) run.
const INCREMENTAL_KEYS_DEFAULT_MAX: usize = 1_000_000;

/// `bench history --recent-blocks` at most: the window is held in memory (about 11 MiB
/// per block of the default workload at 1M keys), and every block of it is committed
/// twice before the reads start; the issue asks for 128.
const HISTORY_RECENT_BLOCKS_MAX: u64 = 1_024;
/// `bench history --recent-bytes` bounds: 1 MiB to the store's largest size (1 PiB).
const HISTORY_RECENT_BYTES_MIN: u64 = 1 << 20;
/// See [`HISTORY_RECENT_BYTES_MIN`].
const HISTORY_RECENT_BYTES_MAX: u64 = 1 << 50;
/// `bench history --reads-per-block` at most (rounds of 4 views, gets and proofs each).
const HISTORY_READS_PER_BLOCK_MAX: u64 = 100_000;

/// What every benchmark prints and writes.
#[derive(Debug, Args)]
struct ReportArgs {
    /// Print the JSON report instead of the table (and draw no progress bars).
    #[arg(long)]
    json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write the report as an HTML page with SVG charts (the machine and the targets
    /// on the page) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

impl ReportArgs {
    /// Refuse unusable output paths before any work (both may be overwritten).
    fn check(&self) -> Result<()> {
        let mut outputs = Vec::new();
        if let Some(p) = &self.out {
            outputs.push(crate::output::Output { flag: "--out", path: p });
        }
        if let Some(p) = &self.html {
            outputs.push(crate::output::Output { flag: "--html", path: p });
        }
        crate::output::check(&outputs, true).map(|_| ())
    }

    /// Print the human or JSON report; write the JSON to `--out` and the page to `--html`.
    fn emit<R: serde::Serialize>(
        &self,
        report: &R,
        human: impl FnOnce(&R) -> String,
        html: impl FnOnce(&R) -> String,
    ) -> Result<ExitCode> {
        let json = serde_json::to_string_pretty(report)?;
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
        };
        if let Some(path) = &self.out {
            write(path, &format!("{json}\n"))?;
        }
        if let Some(path) = &self.html {
            write(path, &html(report))?;
        }
        if self.json {
            outln!("{json}")?;
            return Ok(ExitCode::SUCCESS);
        }
        out!("{}", human(report))?;
        for (what, path) in [("JSON report", &self.out), ("HTML report", &self.html)] {
            if let Some(path) = path {
                outln!("{what} written to {}", path.display())?;
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Arguments of `arbor bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    which: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Root builders vs alloy-trie (trie-db in Substrate's layouts), the keccak bound,
    /// incremental roots, proofs.
    Trie(TrieArgs),
    /// The RocksDB store vs plain RocksDB on the same blocks: time, size, memory, caches.
    Store(StoreArgs),
    /// Reads and proofs at recent blocks with commits running, and the recent window's
    /// cost to commit throughput.
    History(HistoryArgs),
    /// Block production with proof recording: exact per-transaction proof size and root.
    Pov(PovArgs),
    /// Block-STM vs the sequential executor on the Cosmos SDK workloads.
    Blockstm(BlockStmArgs),
    /// The import road: pipelined vs unpipelined on the same blocks (blocks/s, stages, RSS).
    Import(ImportArgs),
    /// Checkpoints: create vs a scan of flat, restore vs a bulk load, 3 HTTP sources vs local, bytes.
    Checkpoint(CheckpointArgs),
    /// Ethereum blocks (ETH and ERC-20 transfers, a storage-heavy contract): revm + Arbor
    /// vs revm in memory and vs plain RocksDB with undo records (Mgas/s, tx/s, commit).
    Evm(EvmArgs),
    /// One engine of `bench store` as a worker process, driven over stdin and stdout by
    /// `bench store` itself (not meant to be run by hand).
    #[command(hide = true)]
    StoreWorker(WorkerArgs),
    /// One engine of `bench evm` as a worker process, driven over stdin and stdout by
    /// `bench evm` itself (not meant to be run by hand).
    #[command(hide = true)]
    EvmWorker(WorkerArgs),
}

/// Arguments of the hidden `arbor bench store-worker` and `evm-worker`.
#[derive(Debug, Args)]
struct WorkerArgs {
    /// The worker's spec (JSON, written by `bench store` or `bench evm`).
    #[arg(long, value_name = "FILE")]
    spec: PathBuf,
}

/// Arguments of `arbor bench evm`.
#[derive(Debug, Args)]
struct EvmArgs {
    /// Accounts of the genesis state (the first 65,536 send; each holds the token, and the
    /// storage-heavy contract has as many slots); 16 to 10,000,000.
    #[arg(
        long,
        default_value_t = 1_000_000,
        value_parser = limits::u64_in(bench::EVM_ACCOUNTS_MIN, limits::EVM_ACCOUNTS_MAX)
    )]
    accounts: u64,
    /// Blocks per workload (eth-transfer, erc20-transfer, storage-heavy); 1 to 10,000.
    #[arg(long, default_value_t = 200, value_parser = limits::u64_in(1, limits::EVM_BLOCKS_MAX))]
    blocks: u64,
    /// Each block's gas limit (filled by its transactions' gas limits); 1,000,000 to
    /// 1,000,000,000.
    #[arg(
        long,
        default_value_t = 36_000_000,
        value_parser = limits::u64_in(limits::EVM_GAS_LIMIT_MIN, limits::EVM_GAS_LIMIT_MAX)
    )]
    gas_limit: u64,
    /// Seed of the state and the blocks (any 64-bit unsigned integer).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Create the temporary databases and block files under DIR [default: the system
    /// temp directory].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Store configuration file (TOML) used by Arbor and, for `[rocksdb]`, by the plain
    /// baseline (its layout must be ethereum).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    report: ReportArgs,
}

impl BenchCommand {
    /// The report flags every bench shares (none for a store worker).
    fn report(&self) -> Option<&ReportArgs> {
        Some(match self {
            BenchCommand::Trie(a) => &a.report,
            BenchCommand::Store(a) => &a.report,
            BenchCommand::History(a) => &a.report,
            BenchCommand::Pov(a) => &a.report,
            BenchCommand::Blockstm(a) => &a.report,
            BenchCommand::Import(a) => &a.report,
            BenchCommand::Checkpoint(a) => &a.report,
            BenchCommand::Evm(a) => &a.report,
            BenchCommand::StoreWorker(_) | BenchCommand::EvmWorker(_) => return None,
        })
    }
}

/// Arguments of `arbor bench checkpoint`.
#[derive(Debug, Args)]
struct CheckpointArgs {
    /// Entries of the state (80% accounts, 20% storage slots); 1,000 to 100,000,000.
    #[arg(long, default_value_t = 1_000_000, value_parser = limits::u64_in(1_000, limits::STORE_KEYS_MAX))]
    keys: u64,
    /// Creation threads; 1 to 256.
    #[arg(long, default_value_t = 2, value_parser = limits::usize_in(1, checkpoint::THREADS_MAX))]
    threads: usize,
    /// Seed of the state.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rounds (every measurement once per round; medians reported); 1 to 1,000.
    #[arg(long, default_value_t = 3, value_parser = limits::usize_in(1, limits::RUNS_MAX))]
    runs: usize,
    #[command(flatten)]
    report: ReportArgs,
}

/// Arguments of `arbor bench import`.
#[derive(Debug, Args)]
struct ImportArgs {
    /// Genesis accounts; 2 to 10,000,000.
    #[arg(long, default_value_t = 100_000, value_parser = limits::u64_in(2, limits::CHAIN_ACCOUNTS_MAX))]
    accounts: u64,
    /// Blocks; 1 to 100,000.
    #[arg(long, default_value_t = 200, value_parser = limits::u64_in(1, limits::CHAIN_BLOCKS_MAX))]
    blocks: u64,
    /// Transfers per block (with --evm: transactions per block, at most 10,000); 1 to
    /// 100,000.
    #[arg(long, default_value_t = 2_000, value_parser = limits::u64_in(1, limits::CHAIN_TRANSFERS_MAX))]
    transfers: u64,
    /// Import a chain of real Ethereum blocks through the EVM (`gen-chain --evm`'s: ETH
    /// and ERC-20 transfers, some contract work) instead of transfer blocks; reports
    /// Mgas/s. --accounts at most 2,000,000.
    #[arg(long)]
    evm: bool,
    /// Seed of the chain.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Execution worker counts, comma-separated: 1 to 16 entries, each 1 to 64 [default:
    /// 1,2; with --evm 1, the only count: an Ethereum block executes in order].
    #[arg(long, value_name = "N,…", value_parser = limits::counts(1, 64, limits::LIST_LEN_MAX))]
    workers: Option<Counts>,
    /// Rounds (every variant once per round; medians reported); 1 to 1,000.
    #[arg(long, default_value_t = 3, value_parser = limits::usize_in(1, limits::RUNS_MAX))]
    runs: usize,
    #[command(flatten)]
    report: ReportArgs,
}

/// Arguments of `arbor bench blockstm`.
#[derive(Debug, Args)]
struct BlockStmArgs {
    /// Worker counts, comma-separated: 1 to 16 entries, each 1 to 256.
    #[arg(
        long,
        value_name = "N,…",
        default_value = "1,2,4,8",
        value_parser = limits::counts(1, limits::WORKERS_MAX, limits::LIST_LEN_MAX)
    )]
    workers: Counts,
    /// Skip the secp256k1 signature check (the engine's own overhead).
    #[arg(long)]
    no_sig: bool,
    /// Timed runs per workload and worker count (the median is reported); 1 to 1,000.
    #[arg(long, default_value_t = 5, value_parser = limits::usize_in(1, limits::RUNS_MAX))]
    runs: usize,
    /// Transactions per block; 1 to 1,000,000.
    #[arg(
        long,
        default_value_t = 10_000,
        value_parser = limits::usize_in(1, limits::BLOCKSTM_TXS_MAX)
    )]
    txs: usize,
    /// Run only the workloads whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    #[command(flatten)]
    report: ReportArgs,
}

/// Arguments of `arbor bench pov`.
#[derive(Debug, Args)]
struct PovArgs {
    /// Funded accounts (half send, half receive); 2 to 10,000,000.
    #[arg(
        long,
        default_value_t = 10_000,
        value_parser = limits::u64_in(2, limits::POV_ACCOUNTS_MAX)
    )]
    accounts: u64,
    /// Timed builds per mode and workload (the median is reported); 1 to 1,000.
    #[arg(long, default_value_t = 5, value_parser = limits::usize_in(1, limits::RUNS_MAX))]
    runs: usize,
    /// Block sizes in transactions, comma-separated: 1 to 16 entries, each 1 to 10,000.
    #[arg(
        long,
        value_name = "N,…",
        default_value = "544,1500",
        value_parser = limits::counts(1, limits::BLOCK_TXS_MAX, limits::LIST_LEN_MAX)
    )]
    sizes: Counts,
    /// Create the temporary database under DIR [default: the system temp directory].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Trie layout of the parent state and the blocks: ethereum, substrate-v0 or
    /// substrate-v1 (the RocksDB store is created in it).
    #[arg(
        long,
        value_name = "LAYOUT",
        default_value = "ethereum",
        value_parser = crate::layout_arg::parser()
    )]
    layout: trie::LayoutName,
    /// Hold the parent state in memory (a map of the entries and a hash-keyed map of the
    /// trie's nodes) instead of a RocksDB store.
    #[arg(long)]
    memory: bool,
    #[command(flatten)]
    report: ReportArgs,
}

/// Arguments of `arbor bench store`.
#[derive(Debug, Args)]
struct StoreArgs {
    /// Initial keys (32-byte keys, 100-byte values), bulk-loaded; 1 to 100,000,000.
    #[arg(
        long,
        default_value_t = 1_000_000,
        value_parser = limits::u64_in(1, limits::STORE_KEYS_MAX)
    )]
    keys: u64,
    /// Blocks committed after the bulk load; 1 to 1,000,000.
    #[arg(long, default_value_t = 100, value_parser = limits::u64_in(1, limits::BLOCKS_MAX))]
    blocks: u64,
    /// Operations per block (80% updates, 20% deletions); 1 to 1,000,000.
    #[arg(
        long,
        default_value_t = 10_000,
        value_parser = limits::u64_in(1, limits::UPDATES_PER_BLOCK_MAX)
    )]
    updates_per_block: u64,
    /// Seed of the workload (any 64-bit unsigned integer).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Create the temporary databases under DIR [default: the system temp directory].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Skip the run of Arbor reading each block's old values itself (by default it runs
    /// beside Arbor given them by the caller, as an executor gives them).
    #[arg(long)]
    skip_arbor_reading: bool,
    /// Skip the NOMT run (by default NOMT commits the same blocks).
    #[arg(long)]
    skip_nomt: bool,
    /// Store configuration file (TOML) used by Arbor and, for `[rocksdb]`, by the baseline.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Arbor's trie layout: ethereum (the default), substrate-v0 or substrate-v1 (the
    /// baselines store no trie).
    #[arg(long, value_name = "LAYOUT", value_parser = crate::layout_arg::parser())]
    layout: Option<trie::LayoutName>,
    #[command(flatten)]
    report: ReportArgs,
}

/// Arguments of `arbor bench history`.
#[derive(Debug, Args)]
struct HistoryArgs {
    /// Initial keys (32-byte keys, 100-byte values), bulk-loaded into both databases; 1 to
    /// 100,000,000.
    #[arg(
        long,
        default_value_t = 1_000_000,
        value_parser = limits::u64_in(1, limits::STORE_KEYS_MAX)
    )]
    keys: u64,
    /// Blocks committed to both databases (with and without the window), more than
    /// --recent-blocks: the first --recent-blocks fill the window; 3 to 1,000,000.
    #[arg(long, default_value_t = 400, value_parser = limits::u64_in(3, limits::BLOCKS_MAX))]
    blocks: u64,
    /// Blocks then committed to the windowed database while the reader samples; 1 to
    /// 1,000,000.
    #[arg(long, default_value_t = 200, value_parser = limits::u64_in(1, limits::BLOCKS_MAX))]
    read_blocks: u64,
    /// Operations per block (80% updates, 20% deletions); 1 to 1,000,000.
    #[arg(
        long,
        default_value_t = 10_000,
        value_parser = limits::u64_in(1, limits::UPDATES_PER_BLOCK_MAX)
    )]
    updates_per_block: u64,
    /// Seed of the workload and of the reader's choices (any 64-bit unsigned integer).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The window (history.recent_blocks, K); reads at head, head-1, head-K/2 and
    /// head-(K-1); 2 to 1,024.
    #[arg(
        long,
        default_value_t = 128,
        value_parser = limits::u64_in(2, HISTORY_RECENT_BLOCKS_MAX)
    )]
    recent_blocks: u64,
    /// The window's byte bound (history.recent_bytes), enough for --recent-blocks blocks of
    /// the workload; 1MiB to 1PiB.
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "4GiB",
        value_parser = limits::size_in(HISTORY_RECENT_BYTES_MIN, HISTORY_RECENT_BYTES_MAX)
    )]
    recent_bytes: u64,
    /// Reader rounds at most per committed block (a round: a view, a get and a proof at
    /// each depth); 1 to 100,000.
    #[arg(
        long,
        default_value_t = 50,
        value_parser = limits::u64_in(1, HISTORY_READS_PER_BLOCK_MAX)
    )]
    reads_per_block: u64,
    /// Create the temporary databases under DIR [default: the system temp directory].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Store configuration file (TOML) of both databases; its [history] section is
    /// replaced by --recent-blocks and --recent-bytes.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    report: ReportArgs,
}

/// Arguments of `arbor bench trie`.
#[derive(Debug, Args)]
struct TrieArgs {
    /// Random 32-byte keys (100-byte values) in the full-root input; 1 to 50,000,000.
    #[arg(
        long,
        default_value_t = 1_000_000,
        value_parser = limits::usize_in(1, limits::TRIE_KEYS_MAX)
    )]
    keys: usize,
    /// Timed runs of each full-root builder; medians are reported; 1 to 1,000.
    #[arg(long, default_value_t = 5, value_parser = limits::usize_in(1, limits::RUNS_MAX))]
    runs: usize,
    /// Incremental rounds (each: a batch of updates, then `root()`); 1 to 1,000,000.
    #[arg(long, default_value_t = 1000, value_parser = limits::usize_in(1, limits::ROUNDS_MAX))]
    rounds: usize,
    /// Keys in the incremental trie; 1 to 10,000,000 [default: --keys, at most 1,000,000].
    #[arg(long, value_parser = limits::usize_in(1, limits::INCREMENTAL_KEYS_MAX))]
    incremental_keys: Option<usize>,
    /// Proofs generated and verified; 1 to 1,000,000.
    #[arg(long, default_value_t = 10_000, value_parser = limits::usize_in(1, limits::PROOFS_MAX))]
    proofs: usize,
    /// Seed of every random choice (any 64-bit unsigned integer).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Trie layout of every phase: ethereum (against alloy-trie, with the keccak bound),
    /// substrate-v0 or substrate-v1 (against trie-db's root with reference-trie's layout,
    /// no keccak bound).
    #[arg(
        long,
        value_name = "LAYOUT",
        default_value = "ethereum",
        value_parser = crate::layout_arg::parser()
    )]
    layout: trie::LayoutName,
    #[command(flatten)]
    report: ReportArgs,
}

/// Run `arbor bench …`.
pub(crate) fn run(args: &BenchArgs) -> Result<ExitCode> {
    let Some(report) = args.which.report() else {
        worker(&args.which)?;
        return Ok(ExitCode::SUCCESS);
    };
    // Output paths are refused before any work.
    report.check()?;
    warn_if_debug();
    match &args.which {
        BenchCommand::Trie(t) => trie(t),
        BenchCommand::Store(s) => store(s),
        BenchCommand::History(h) => history(h),
        BenchCommand::Pov(p) => pov(p),
        BenchCommand::Blockstm(b) => blockstm(b),
        BenchCommand::Import(i) => import(i),
        BenchCommand::Checkpoint(c) => checkpoint_bench(c),
        BenchCommand::Evm(e) => evm(e),
        BenchCommand::StoreWorker(_) | BenchCommand::EvmWorker(_) => {
            unreachable!("handled above")
        }
    }
}

/// A hidden worker of `bench store` or `bench evm`, bounded by the flags' limits.
fn worker(which: &BenchCommand) -> Result<()> {
    match which {
        BenchCommand::StoreWorker(w) => {
            let bounds = bench::WorkerBounds {
                keys_max: limits::STORE_KEYS_MAX,
                blocks_max: limits::BLOCKS_MAX,
                updates_per_block_max: limits::UPDATES_PER_BLOCK_MAX,
            };
            bench::store_worker(&w.spec, &bounds)
        }
        BenchCommand::EvmWorker(w) => {
            let bounds = bench::EvmWorkerBounds {
                accounts_max: limits::EVM_ACCOUNTS_MAX,
                blocks_max: limits::EVM_BLOCKS_MAX,
                gas_limit_min: limits::EVM_GAS_LIMIT_MIN,
                gas_limit_max: limits::EVM_GAS_LIMIT_MAX,
            };
            bench::evm_worker(&w.spec, &bounds)
        }
        _ => unreachable!("only workers have no report flags"),
    }
}

fn evm(args: &EvmArgs) -> Result<ExitCode> {
    let config = crate::db_args::load_config(args.config.as_deref())?;
    if let Some(layout) = config.layout.filter(|l| *l != trie::LayoutName::Ethereum) {
        return Err(crate::usage(format!(
            "--config names layout {layout}: bench evm stores the account model, in the ethereum layout"
        )));
    }
    let opts = bench::EvmBenchOpts {
        accounts: args.accounts,
        blocks: args.blocks,
        gas_limit: args.gas_limit,
        seed: args.seed,
        dir: args.dir.clone(),
        worker: None,
    };
    let report =
        bench::evm_bench(&opts, &config, !args.report.json).context("evm benchmark failed")?;
    args.report.emit(&report, |r| r.render(), |r| r.html())
}

fn checkpoint_bench(args: &CheckpointArgs) -> Result<ExitCode> {
    let opts = bench::CheckpointBenchOpts {
        keys: args.keys,
        runs: args.runs,
        threads: args.threads,
        seed: args.seed,
    };
    let pb =
        bench::progress_bar(!args.report.json, (args.runs * 5) as u64, "checkpoint measurements");
    let report =
        bench::checkpoint_bench(&opts, &|| pb.inc(1)).context("checkpoint benchmark failed")?;
    pb.finish_and_clear();
    args.report.emit(&report, |r| r.render(), |r| r.html())
}

fn blockstm(args: &BlockStmArgs) -> Result<ExitCode> {
    let names = bench::blockstm_workload_names();
    if let Some(o) =
        args.only.iter().find(|o| o.is_empty() || !names.iter().any(|n| n.contains(o.as_str())))
    {
        return Err(crate::usage(format!(
            "--only {o:?} names no workload (the workloads: {})",
            names.join(", ")
        )));
    }
    let opts = bench::BlockStmOpts {
        workers: args.workers.0.clone(),
        no_sig: args.no_sig,
        runs: args.runs,
        txs: args.txs,
        only: args.only.clone(),
    };
    let report = bench::blockstm_bench(&opts, crate::alloc_totals, !args.report.json)
        .context("blockstm benchmark failed")?;
    args.report.emit(&report, |r| r.render(), |r| r.html())
}

fn import(args: &ImportArgs) -> Result<ExitCode> {
    if args.evm && args.accounts > limits::EVM_CHAIN_ACCOUNTS_MAX {
        return Err(crate::usage(format!(
            "--accounts {} with --evm: at most {}",
            args.accounts,
            limits::EVM_CHAIN_ACCOUNTS_MAX
        )));
    }
    if args.evm && args.transfers > limits::EVM_CHAIN_TXS_MAX {
        return Err(crate::usage(format!(
            "--transfers {} with --evm: at most {} transactions per block",
            args.transfers,
            limits::EVM_CHAIN_TXS_MAX
        )));
    }
    let workers = match (&args.workers, args.evm) {
        (Some(w), true) if w.0 != [1] => {
            return Err(crate::usage(
                "--workers with --evm: an Ethereum block's transactions execute in order, 1",
            ))
        }
        (Some(w), _) => w.0.clone(),
        (None, true) => vec![1],
        (None, false) => vec![1, 2],
    };
    let opts = bench::ImportBenchOpts {
        executor: if args.evm { bench::Executor::Evm } else { bench::Executor::Transfer },
        accounts: args.accounts,
        blocks: args.blocks,
        transfers: args.transfers,
        seed: args.seed,
        runs: args.runs,
        workers,
    };
    let runs = (args.runs * opts.workers.len() * 2) as u64;
    let pb = bench::progress_bar(!args.report.json, runs, "import runs");
    let program = std::env::current_exe().context("cannot find the arbor binary")?;
    let report =
        bench::import_bench(&opts, &program, &|| pb.inc(1)).context("import benchmark failed")?;
    pb.finish_and_clear();
    args.report.emit(&report, |r| r.render(), |r| r.html())
}

fn pov(args: &PovArgs) -> Result<ExitCode> {
    let opts = bench::PovBenchOpts {
        accounts: args.accounts,
        runs: args.runs,
        sizes: args.sizes.0.clone(),
        dir: args.dir.clone(),
        layout: args.layout,
        memory: args.memory,
    };
    let report = bench::pov_bench(&opts, !args.report.json).context("pov benchmark failed")?;
    args.report.emit(&report, |r| r.render(), |r| r.html())
}

fn store(args: &StoreArgs) -> Result<ExitCode> {
    let mut config = crate::db_args::load_config(args.config.as_deref())?;
    if args.layout.is_some() {
        config.layout = args.layout;
    }
    let opts = bench::StoreBenchOpts {
        keys: args.keys,
        blocks: args.blocks,
        updates_per_block: args.updates_per_block,
        seed: args.seed,
        dir: args.dir.clone(),
        arbor_reading: !args.skip_arbor_reading,
        nomt: !args.skip_nomt,
        worker: None,
    };
    let report =
        bench::store_bench(&opts, &config, !args.report.json).context("store benchmark failed")?;
    args.report.emit(&report, |r| r.render(), |r| r.html())
}

fn history(args: &HistoryArgs) -> Result<ExitCode> {
    if args.blocks <= args.recent_blocks {
        return Err(crate::usage(format!(
            "--blocks {} must exceed --recent-blocks {}: the first {} blocks fill the window",
            args.blocks, args.recent_blocks, args.recent_blocks
        )));
    }
    let config = crate::db_args::load_config(args.config.as_deref())?;
    let opts = bench::HistoryBenchOpts {
        keys: args.keys,
        blocks: args.blocks,
        read_blocks: args.read_blocks,
        updates_per_block: args.updates_per_block,
        seed: args.seed,
        recent_blocks: args.recent_blocks,
        recent_bytes: args.recent_bytes,
        reads_per_block: args.reads_per_block,
        dir: args.dir.clone(),
    };
    let report = bench::history_bench(&opts, &config, !args.report.json)
        .context("history benchmark failed")?;
    args.report.emit(&report, |r| r.render(), |r| r.html())
}

fn warn_if_debug() {
    if cfg!(debug_assertions) {
        errln!("warning: this is a debug build; use `cargo run --release` for real timings");
    }
}

fn trie(args: &TrieArgs) -> Result<ExitCode> {
    let opts = bench::TrieBenchOpts {
        keys: args.keys,
        runs: args.runs,
        incremental_rounds: args.rounds,
        incremental_keys: args
            .incremental_keys
            .unwrap_or_else(|| args.keys.min(INCREMENTAL_KEYS_DEFAULT_MAX)),
        proofs: args.proofs,
        seed: args.seed,
        layout: args.layout,
        ..bench::TrieBenchOpts::default()
    };
    let report = bench::trie_bench(&opts, !args.report.json).context("trie benchmark failed")?;
    args.report.emit(&report, |r| r.render(), |r| r.html())
}
