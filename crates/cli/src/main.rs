//! `arbor`: the command-line face of the engine.
//!
//! Each command family lives in its own module (`cmd_*`); this file only parses the
//! arguments and turns failures into the one contract every command keeps (README,
//! "Command-line conventions"): a single `error: <what is wrong>` line on stderr and an
//! exit code of its class — [`EXIT_NEGATIVE`] (1) for a negative verdict (a proof, block,
//! chain, checkpoint or database found invalid; the checking commands print theirs on
//! stdout and return it, decoders mark theirs [`Rejected`]), [`EXIT_USAGE`] (2) for
//! unusable arguments (clap's errors, numbers outside the bounds of [`limits`], a
//! command's own [`UsageError`]) and [`EXIT_COULD_NOT_RUN`] (3) for everything else (a
//! missing file, a database in use or unfinished, an I/O error). Nothing here panics on
//! user input.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `println!` that returns a failed write (stdout closed or full) as an error instead of
/// panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err(crate::stdout_failed)
    }};
}

/// `print!` that returns a failed write as an error instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err(crate::stdout_failed)
    }};
}

/// `eprintln!` that drops a failed write (stderr closed or full: nowhere left to report it)
/// instead of panicking.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod auto_checkpoint;
mod cmd_bench;
mod cmd_block;
mod cmd_blocktest;
mod cmd_chain;
mod cmd_checkpoint;
mod cmd_db;
mod cmd_demo;
mod cmd_eth_chain;
mod cmd_eth_import;
mod cmd_import;
mod cmd_load;
mod cmd_proof;
mod cmd_root;
mod cmd_statetest;
mod db_args;
mod demo_chain;
mod demo_store;
mod genesis_load;
mod input;
mod layout_arg;
mod limits;
mod metrics;
mod output;
mod progress;
mod signals;
mod suite;

/// Arbor: an authenticated state engine (Ethereum-compatible Merkle-Patricia trie).
#[derive(Debug, Parser)]
#[command(name = "arbor", version, about, propagate_version = true)]
struct Cli {
    /// Log to stderr in this format (`text` or `json`); the level comes from RUST_LOG
    /// (default `info` with this flag; without it and without RUST_LOG, nothing is logged).
    #[arg(long, global = true, value_name = "FORMAT", value_parser = ["text", "json"])]
    log_format: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// Install the log subscriber `--log-format` and RUST_LOG ask for (none by default).
fn init_logs(format: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let env = std::env::var("RUST_LOG").ok().filter(|s| !s.is_empty());
    if format.is_none() && env.is_none() {
        return;
    }
    let filter = EnvFilter::try_new(env.as_deref().unwrap_or("info"))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second subscriber cannot be installed; there is none before this one.
    let _ = match format {
        Some("json") => builder.json().try_init(),
        _ => builder.with_ansi(false).try_init(),
    };
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the state root of a genesis allocation, a key/value JSON object or a chain spec.
    Root(cmd_root::RootArgs),
    /// Prove an account (and slots) of a genesis or a database (eth_getProof JSON), or a key
    /// of a database.
    Prove(cmd_proof::ProveArgs),
    /// Check an eth_getProof result against a state root: prints `valid` or `invalid: …`.
    VerifyProof(cmd_proof::VerifyArgs),
    /// Compute known genesis roots, prove and verify accounts, reject a tampered proof.
    Demo(cmd_demo::DemoArgs),
    /// Run a benchmark program.
    Bench(cmd_bench::BenchArgs),
    /// Create a database from a genesis allocation and print its root.
    Init(cmd_db::InitArgs),
    /// Commit deterministic random blocks (bulk-loading initial keys into an empty database).
    Load(cmd_load::LoadArgs),
    /// Recompute the root from flat state: `ok <number> <root>` or `mismatch …` (exit 1);
    /// `--deep` also checks every stored node.
    Verify(cmd_db::VerifyArgs),
    /// Rebuild the stored nodes from flat state (when flat holds the recorded roots).
    Repair(cmd_db::RepairArgs),
    /// Print the commented default store configuration (TOML).
    Config(cmd_db::ConfigArgs),
    /// Print the value of a main-trie key (hex), or `absent`.
    Get(cmd_db::GetArgs),
    /// Undo the last N blocks and print the new head.
    Revert(cmd_db::RevertArgs),
    /// Print the store's head, layers, cache counters and sizes.
    Stats(cmd_db::StatsArgs),
    /// Build a transfer block with its witness (PoV-limited) on an in-memory chain genesis.
    BuildBlock(cmd_block::BuildArgs),
    /// Re-execute a block from its witness alone: `ok <root>` or `invalid: …` (exit 1).
    VerifyBlock(cmd_block::VerifyBlockArgs),
    /// Write a chain file: a genesis and random transfer blocks with their post-state roots
    /// (--evm: a geth genesis and real Ethereum blocks).
    GenChain(cmd_chain::GenChainArgs),
    /// Import a chain file into a database (pipelined; resumable; Ctrl-C stops cleanly).
    Import(cmd_chain::ImportArgs),
    /// Verifiable chunked checkpoints: create, verify, serve, push, list, restore.
    Checkpoint(cmd_checkpoint::CheckpointArgs),
    /// Run Ethereum state tests (GeneralStateTests JSON) through revm and Arbor's commit, in
    /// memory or (--db) on temporary RocksDB stores.
    Statetest(suite::SuiteArgs<cmd_statetest::StateTests>),
    /// Run Ethereum blockchain tests (BlockchainTests JSON) through the block executor.
    Blocktest(suite::SuiteArgs<cmd_blocktest::BlockTests>),
}

/// mimalloc (per-thread heaps: the parallel executor's workers allocate without meeting
/// on one arena lock, as they did under glibc's malloc), counting allocations for
/// `arbor bench blockstm` in per-thread slots.
#[global_allocator]
static ALLOC: alloc_count::Counting<mimalloc::MiMalloc> =
    alloc_count::Counting::new(mimalloc::MiMalloc);

/// (allocations including reallocations, bytes allocated) so far.
pub(crate) fn alloc_totals() -> (u64, u64) {
    alloc_count::totals()
}

fn main() -> ExitCode {
    // RocksDB's C++ allocates through glibc's malloc, whose default of up to 8 arenas per
    // core inflated the peak RSS (see `alloc_count::limit_glibc_arenas`). Before any
    // thread starts.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    alloc_count::limit_glibc_arenas(cores.max(2));
    // Short-lived per-block buffers must not fault in zeroed 2 MiB pages (see the function).
    alloc_count::disable_transparent_huge_pages();
    // Per-block buffers must not be given back to the system between blocks (see the
    // function).
    alloc_count::keep_freed_memory();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    init_logs(cli.log_format.as_deref());
    let command = std::env::args().skip(1).find(|a| !a.starts_with('-')).unwrap_or_default();
    tracing::info!(command, "arbor starting");
    let result = match cli.command {
        Command::Root(args) => cmd_root::run(&args),
        Command::Prove(args) => cmd_proof::prove(&args),
        Command::VerifyProof(args) => cmd_proof::verify(&args),
        Command::Demo(args) => cmd_demo::run(&args),
        Command::Bench(args) => cmd_bench::run(&args),
        Command::Init(args) => cmd_db::init(&args),
        Command::Load(args) => cmd_load::run(&args),
        Command::Verify(args) => cmd_db::verify(&args),
        Command::Repair(args) => cmd_db::repair(&args),
        Command::Config(args) => cmd_db::config(&args),
        Command::Get(args) => cmd_db::get(&args),
        Command::Revert(args) => cmd_db::revert(&args),
        Command::Stats(args) => cmd_db::stats(&args),
        Command::BuildBlock(args) => cmd_block::build(&args),
        Command::VerifyBlock(args) => cmd_block::verify(&args),
        Command::GenChain(args) => cmd_chain::gen_chain(&args),
        Command::Import(args) => cmd_import::import(&args),
        Command::Checkpoint(args) => cmd_checkpoint::run(&args),
        Command::Statetest(args) => suite::run(&cmd_statetest::StateTests, &args),
        Command::Blocktest(args) => suite::run(&cmd_blocktest::BlockTests::default(), &args),
    };
    match result {
        Ok(code) => {
            tracing::info!(success = code == ExitCode::SUCCESS, "arbor finished");
            code
        }
        Err(e) => {
            tracing::error!(error = %error_line(&e), "arbor failed");
            errln!("error: {}", error_line(&e));
            ExitCode::from(exit_class(&e))
        }
    }
}

/// Exit code of a negative verdict: the input was checked and found invalid.
pub(crate) const EXIT_NEGATIVE: u8 = 1;
/// Exit code of unusable arguments.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code of a command that could not do its work.
pub(crate) const EXIT_COULD_NOT_RUN: u8 = 3;

/// The exit code class of a failed command.
fn exit_class(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() {
        EXIT_USAGE
    } else if e.downcast_ref::<Rejected>().is_some() {
        EXIT_NEGATIVE
    } else {
        EXIT_COULD_NOT_RUN
    }
}

/// The exit code of a negative verdict a command prints itself.
pub(crate) fn negative() -> ExitCode {
    ExitCode::from(EXIT_NEGATIVE)
}

/// Input found invalid while a command checked or decoded it (a chain file that does not
/// decode, a chain another database holds): exit code 1, like a printed negative verdict.
#[derive(Debug)]
pub(crate) struct Rejected(pub(crate) String);

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Rejected {}

/// `e`, on one line, as a negative verdict.
pub(crate) fn rejected(e: &anyhow::Error) -> anyhow::Error {
    anyhow::Error::new(Rejected(error_line(e)))
}

/// Arguments that parse but cannot be used (an output path that exists or collides, a
/// limit the input makes impossible): exit code 2, like clap's own usage errors.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The error of a failed write to stdout: the command's result could not be printed.
pub(crate) fn stdout_failed(e: std::io::Error) -> anyhow::Error {
    anyhow::Error::new(e).context("cannot write to stdout")
}

/// A usage error with this message.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// Help and version go to stdout as clap renders them; a usage mistake becomes clap's
/// first line only (`error: …`), without the usage block, so that it stays one line.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || matches!(e.kind(), ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
    {
        // Printing help can only fail on a closed stdout, where there is nothing to report.
        let _ = e.print();
        return if e.use_stderr() { ExitCode::from(EXIT_USAGE) } else { ExitCode::SUCCESS };
    }
    // clap's message is its first paragraph (e.g. "required arguments were not
    // provided:" followed by the indented list of them); usage and tips follow a blank line.
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    errln!("error: {message} (see `arbor --help`)");
    ExitCode::from(EXIT_USAGE)
}

/// The error and its causes on one line, `outer: inner: …`. A cause whose text the
/// message so far already contains is skipped: typed errors often both print and
/// expose their source, which would otherwise appear twice.
pub(crate) fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    // Collapse embedded line breaks so that an error is always one line.
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}
