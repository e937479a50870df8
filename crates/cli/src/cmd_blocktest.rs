//! `arbor blocktest PATH… [--db [--db-dir DIR]] [--json]`: the Ethereum blockchain tests
//! (`BlockchainTests` JSON) through the block executor (decode, validate, execute through
//! revm, commit).
//!
//! PATHs are files or directories (searched recursively for `*.json`, in path order).
//! Every file is read and parsed before any runs, so a malformed one is a usage error
//! naming the file (exit 2) and nothing else is printed; a path that cannot be read is
//! exit 3. Then every test runs (the `evm::blocktest` runner), files in parallel on all
//! cores: one line per failing test (`FAIL file test network: reason`), a line naming the
//! networks the executor does not run when tests were skipped for them (forks before
//! Paris, after Prague), and last `N passed, M failed, K skipped` (tests); exit 1 when any
//! failed. `--json` prints the same summary as one document. A progress bar on stderr
//! counts files.
//!
//! Back-ends: the chain's state is in memory (`evm::blocktest::InMemoryChain`) by default;
//! with `--db` it is a RocksDB store per test (`evm::blocktest::InStoreChain`: every block
//! through the store's account-model commit, side chains by reverts, flush and `verify` at
//! the test's end; a failure there fails the test), in a temporary directory made under
//! the system's temporary directory, or under `--db-dir DIR` (which must exist), and
//! removed at the end; Ctrl-C or SIGTERM stops after the files under way, removes it and
//! exits 3.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use evm::blocktest::{
    parse_file, run_file, BlockBackend, BlockTestFile, InMemoryChain, InStoreChain, Outcome,
    TestReport,
};

use crate::cmd_statetest::collect_files;
use crate::input::{display_name, file_usage, read_text_bytes, utf8_text};

/// Arguments of `arbor blocktest`.
#[derive(Debug, Args)]
pub(crate) struct BlocktestArgs {
    /// Blockchain-test files, or directories searched recursively for *.json.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Run on temporary RocksDB stores (one per test: the store's commit, reverts and a
    /// verify) instead of in memory.
    #[arg(long)]
    db: bool,
    /// Where --db makes its temporary directory [default: the system's temporary
    /// directory].
    #[arg(long, value_name = "DIR", requires = "db")]
    db_dir: Option<PathBuf>,
    /// Print one JSON summary instead of the text lines.
    #[arg(long)]
    json: bool,
}

/// Run `arbor blocktest`.
pub(crate) fn run(args: &BlocktestArgs) -> Result<ExitCode> {
    let files = collect_files(&args.paths)?;
    // Every file parses before any runs: a malformed one stops the command before output.
    for file in &files {
        parse(file)?;
    }
    let started = Instant::now();
    let summary = if args.db {
        let base = args.db_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("arbor-blocktest-")
            .tempdir_in(&base)
            .with_context(|| format!("cannot make a temporary directory in {}", base.display()))?;
        let stop = crate::signals::stop_flag()?;
        let made = AtomicUsize::new(0);
        let backend = || {
            let n = made.fetch_add(1, Ordering::Relaxed);
            InStoreChain::in_dir(dir.path().join(format!("test-{n}")))
        };
        let summary = run_files(&files, backend, args.json, Some(&stop));
        let path = dir.path().display().to_string();
        dir.close().with_context(|| format!("cannot remove the temporary databases at {path}"))?;
        summary?
    } else {
        run_files(&files, InMemoryChain::new, args.json, None)?
    };
    let elapsed_s = started.elapsed().as_secs_f64();
    if args.json {
        let backend = if args.db { "db" } else { "memory" };
        outln!("{}", summary.json(files.len(), elapsed_s, backend))?;
    } else {
        summary.print()?;
    }
    Ok(if summary.failures.is_empty() { ExitCode::SUCCESS } else { crate::negative() })
}

/// Run every file (parsed again: a thread holds one at a time), on all cores, each test on
/// a fresh backend from `backend`; stopping between files when `stop` is set.
fn run_files<B: BlockBackend>(
    files: &[PathBuf],
    backend: impl Fn() -> B + Sync,
    json: bool,
    stop: Option<&AtomicBool>,
) -> Result<Summary> {
    let pb = crate::progress::counter(!json, Some(files.len() as u64), "running", "files");
    let reports: Vec<Mutex<Option<Vec<TestReport>>>> =
        files.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let failed_read: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(file) = files.get(i) else { break };
                match parse(file) {
                    Ok(parsed) => *lock(&reports[i]) = Some(run_file(&parsed, &backend)),
                    Err(e) => *lock(&failed_read) = Some(e),
                }
                pb.inc(1);
            });
        }
    });
    pb.finish_and_clear();
    if let Some(e) = failed_read.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
        let done = reports.iter().filter(|r| lock(r).is_some()).count();
        bail!("stopped by a signal after {done} of {} files", files.len());
    }
    let mut summary = Summary::default();
    for (file, report) in files.iter().zip(reports) {
        let report = report.into_inner().unwrap_or_else(|p| p.into_inner()).unwrap_or_default();
        summary.add(file, report);
    }
    Ok(summary)
}

/// A mutex's guard, also after a panic elsewhere (the data is a plain slot).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Parse one blockchain-test file: its content's problems are usage errors naming it.
fn parse(path: &Path) -> Result<BlockTestFile> {
    let bytes = read_text_bytes(path)?;
    let text = utf8_text(path, bytes).map_err(|e| crate::usage(crate::error_line(&e)))?;
    parse_file(&text).map_err(|e| file_usage(path, &anyhow::Error::new(e)))
}

/// One failing test, for the lines and the JSON.
struct FailureLine {
    file: String,
    test: String,
    network: String,
    reason: String,
}

/// The counts over all files.
#[derive(Default)]
struct Summary {
    passed: usize,
    failures: Vec<FailureLine>,
    /// Skipped tests per network.
    skipped: BTreeMap<String, usize>,
}

impl Summary {
    fn add(&mut self, file: &Path, reports: Vec<TestReport>) {
        for r in reports {
            match r.outcome {
                Outcome::Passed => self.passed += 1,
                Outcome::Skipped => *self.skipped.entry(r.network).or_default() += 1,
                Outcome::Failed(reason) => self.failures.push(FailureLine {
                    file: display_name(file),
                    test: r.test,
                    network: r.network,
                    reason,
                }),
            }
        }
    }

    fn skipped_tests(&self) -> usize {
        self.skipped.values().sum()
    }

    fn print(&self) -> Result<()> {
        for f in &self.failures {
            outln!("FAIL {} {} {}: {}", f.file, f.test, f.network, f.reason)?;
        }
        if !self.skipped.is_empty() {
            let networks: Vec<String> =
                self.skipped.iter().map(|(net, n)| format!("{net} ({n} tests)")).collect();
            outln!("skipped networks the block executor does not run: {}", networks.join(", "))?;
        }
        outln!(
            "{} passed, {} failed, {} skipped",
            self.passed,
            self.failures.len(),
            self.skipped_tests()
        )
    }

    fn json(&self, files: usize, elapsed_s: f64, backend: &str) -> serde_json::Value {
        let failures: Vec<serde_json::Value> = self
            .failures
            .iter()
            .map(|f| {
                serde_json::json!({
                    "file": f.file,
                    "test": f.test,
                    "network": f.network,
                    "reason": f.reason,
                })
            })
            .collect();
        serde_json::json!({
            "files": files,
            "passed": self.passed,
            "failed": self.failures.len(),
            "skipped": self.skipped_tests(),
            "skipped_networks": self
                .skipped
                .iter()
                .map(|(network, n)| serde_json::json!({ "network": network, "tests": n }))
                .collect::<Vec<_>>(),
            "failures": failures,
            "elapsed_s": elapsed_s,
            "backend": backend,
        })
    }
}
