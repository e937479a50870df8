//! `arbor statetest PATH… [--db [--db-dir DIR]] [--json]`: the Ethereum state tests
//! (`GeneralStateTests` JSON) through revm and Arbor's account-model commit.
//!
//! PATHs are files or directories (searched recursively for `*.json`, in path order).
//! Every file is read and parsed before any runs, so a malformed one is a usage error
//! naming the file (exit 2) and nothing else is printed; a path that cannot be read is
//! exit 3. Then every test, every fork revm supports, every post entry runs (the
//! `evm::statetest` runner): one line per failing entry (`FAIL file test fork d=… g=… v=…:
//! reason`), a line naming the forks revm does not support when their entries were
//! skipped, and last `N passed, M failed, K skipped` (post entries); exit 1 when any
//! failed. `--json` prints the same summary as one document, with the transactions'
//! reads and writes summed (what a per-transaction proof will need). A progress bar on
//! stderr counts files.
//!
//! Back-ends: the states are in memory (`evm::statetest::InMemory`) by default; with `--db`
//! they are RocksDB stores (`evm::statetest::InStore`: one database per file, the
//! pre-state and each transaction committed through the store's account-model commit and
//! reverted after each entry, `verify` at the file's end; a failure there fails the file's
//! entries). The databases go in a temporary directory made under the system's temporary
//! directory, or under `--db-dir DIR` (which must exist), and removed at the end; Ctrl-C
//! or SIGTERM stops after the file under way, removes them and exits 3.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use evm::statetest::{
    parse_file, run_file, EntryReport, FileReport, InMemory, InStore, StateTestFile, TestBackend,
};
use evm::PovNeeds;

use crate::input::{display_name, file_usage, read_text_bytes, utf8_text};

/// Arguments of `arbor statetest`.
#[derive(Debug, Args)]
pub(crate) struct StatetestArgs {
    /// State-test files, or directories searched recursively for *.json.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Run on temporary RocksDB stores (one per file; the store's commit, reverts and a
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

/// Run `arbor statetest`.
pub(crate) fn run(args: &StatetestArgs) -> Result<ExitCode> {
    let files = collect_files(&args.paths)?;
    // Every file parses before any runs: a malformed one stops the command before output.
    for file in &files {
        parse(file)?;
    }
    let started = Instant::now();
    let summary = if args.db {
        let base = args.db_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("arbor-statetest-")
            .tempdir_in(&base)
            .with_context(|| format!("cannot make a temporary directory in {}", base.display()))?;
        let stop = crate::signals::stop_flag()?;
        let mut backend = InStore::new(dir.path().to_path_buf());
        let summary = run_files(&files, &mut backend, args.json, Some(&stop));
        drop(backend);
        let path = dir.path().display().to_string();
        dir.close().with_context(|| format!("cannot remove the temporary databases at {path}"))?;
        summary?
    } else {
        run_files(&files, &mut InMemory, args.json, None)?
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

/// Run every file on `backend` (each parsed again: only one is held at a time), stopping
/// between files when `stop` is set.
fn run_files<B: TestBackend>(
    files: &[PathBuf],
    backend: &mut B,
    json: bool,
    stop: Option<&Arc<AtomicBool>>,
) -> Result<Summary> {
    let pb = crate::progress::counter(!json, Some(files.len() as u64), "running", "files");
    let mut summary = Summary::default();
    for (done, file) in files.iter().enumerate() {
        if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            pb.finish_and_clear();
            bail!("stopped by a signal after {done} of {} files", files.len());
        }
        let parsed: StateTestFile = parse(file)?;
        let report = run_file(&parsed, backend);
        summary.add(file, &report);
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(summary)
}

/// Parse one state-test file: its content's problems are usage errors naming it.
fn parse(path: &Path) -> Result<evm::statetest::StateTestFile> {
    let bytes = read_text_bytes(path)?;
    let text = utf8_text(path, bytes).map_err(|e| crate::usage(crate::error_line(&e)))?;
    parse_file(&text).map_err(|e| file_usage(path, &anyhow::Error::new(e)))
}

/// The files the paths name: files as given, directories searched recursively for
/// `*.json`, each sorted by path. A directory without one is a usage error.
pub(crate) fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path)
            .with_context(|| format!("cannot read {}", display_name(path)))?;
        if meta.is_dir() {
            let before = files.len();
            walk(path, &mut files)?;
            if files.len() == before {
                return Err(crate::usage(format!(
                    "{}: no *.json test files in this directory",
                    path.display()
                )));
            }
            files[before..].sort();
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let path = entry.path();
        let kind = entry.file_type().with_context(|| format!("cannot read {}", path.display()))?;
        if kind.is_dir() {
            walk(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        }
    }
    Ok(())
}

/// One failing entry, for the lines and the JSON.
struct FailureLine {
    file: String,
    entry: EntryReport,
}

/// The counts over all files.
#[derive(Default)]
struct Summary {
    passed: usize,
    failures: Vec<FailureLine>,
    skipped: BTreeMap<String, usize>,
    transactions: usize,
    pov_total: PovNeeds,
    pov_max: PovNeeds,
}

impl Summary {
    fn add(&mut self, file: &Path, report: &FileReport) {
        self.passed += report.passed();
        for (fork, n) in &report.skipped {
            *self.skipped.entry(fork.clone()).or_default() += n;
        }
        for entry in &report.entries {
            if let Some(pov) = &entry.pov {
                self.transactions += 1;
                pov_fold(&mut self.pov_total, pov, |a, b| a + b);
                pov_fold(&mut self.pov_max, pov, usize::max);
            }
            if entry.failure.is_some() {
                self.failures.push(FailureLine { file: display_name(file), entry: entry.clone() });
            }
        }
    }

    fn skipped_entries(&self) -> usize {
        self.skipped.values().sum()
    }

    fn print(&self) -> Result<()> {
        for f in &self.failures {
            let e = &f.entry;
            let reason = e.failure.as_ref().map(ToString::to_string).unwrap_or_default();
            let i = e.indexes;
            outln!(
                "FAIL {} {} {} d={} g={} v={}: {reason}",
                f.file,
                e.test,
                e.fork,
                i.data,
                i.gas,
                i.value
            )?;
        }
        if !self.skipped.is_empty() {
            let forks: Vec<String> =
                self.skipped.iter().map(|(fork, n)| format!("{fork} ({n} entries)")).collect();
            outln!("skipped forks revm does not support: {}", forks.join(", "))?;
        }
        outln!(
            "{} passed, {} failed, {} skipped",
            self.passed,
            self.failures.len(),
            self.skipped_entries()
        )
    }

    fn json(&self, files: usize, elapsed_s: f64, backend: &str) -> serde_json::Value {
        let failures: Vec<serde_json::Value> = self
            .failures
            .iter()
            .map(|f| {
                let e = &f.entry;
                serde_json::json!({
                    "file": f.file,
                    "test": e.test,
                    "fork": e.fork,
                    "d": e.indexes.data,
                    "g": e.indexes.gas,
                    "v": e.indexes.value,
                    "reason": e.failure.as_ref().map(ToString::to_string),
                })
            })
            .collect();
        serde_json::json!({
            "files": files,
            "passed": self.passed,
            "failed": self.failures.len(),
            "skipped": self.skipped_entries(),
            "skipped_forks": self
                .skipped
                .iter()
                .map(|(fork, n)| serde_json::json!({ "fork": fork, "entries": n }))
                .collect::<Vec<_>>(),
            "failures": failures,
            "transactions": self.transactions,
            "pov_total": pov_json(&self.pov_total),
            "pov_max": pov_json(&self.pov_max),
            "elapsed_s": elapsed_s,
            "backend": backend,
        })
    }
}

/// `acc = f(acc, x)` field by field.
fn pov_fold(acc: &mut PovNeeds, x: &PovNeeds, f: impl Fn(usize, usize) -> usize) {
    acc.accounts_read = f(acc.accounts_read, x.accounts_read);
    acc.slots_read = f(acc.slots_read, x.slots_read);
    acc.storage_tries_read = f(acc.storage_tries_read, x.storage_tries_read);
    acc.code_read = f(acc.code_read, x.code_read);
    acc.accounts_written = f(acc.accounts_written, x.accounts_written);
    acc.accounts_removed = f(acc.accounts_removed, x.accounts_removed);
    acc.slots_written = f(acc.slots_written, x.slots_written);
    acc.storage_clears = f(acc.storage_clears, x.storage_clears);
    acc.storage_tries_written = f(acc.storage_tries_written, x.storage_tries_written);
    acc.code_written = f(acc.code_written, x.code_written);
}

fn pov_json(p: &PovNeeds) -> serde_json::Value {
    serde_json::json!({
        "accounts_read": p.accounts_read,
        "slots_read": p.slots_read,
        "storage_tries_read": p.storage_tries_read,
        "code_read": p.code_read,
        "accounts_written": p.accounts_written,
        "accounts_removed": p.accounts_removed,
        "slots_written": p.slots_written,
        "storage_clears": p.storage_clears,
        "storage_tries_written": p.storage_tries_written,
        "code_written": p.code_written,
    })
}
