//! The runner the Ethereum test-suite commands share (`arbor statetest`, `arbor blocktest`),
//! generic over a [`Suite`]: its fixture file, its back-ends and its report.
//!
//! `PATH…` are files or directories (searched recursively for `*.json`, in path order).
//! Every file is read and parsed before any runs, so a malformed one is a usage error
//! naming the file (exit 2) and nothing else is printed; a path that cannot be read is
//! exit 3. Then the files run, [`Suite::threads`] at a time (each thread with its own
//! [`Suite::Worker`], each file parsed again: a thread holds one at a time), and their
//! reports are summed in path order: one `FAIL …` line per failure, a line naming what was
//! skipped, and last `N passed, M failed, K skipped`; exit 1 when anything failed.
//! `--json` prints the same summary as one document. A progress bar on stderr counts
//! files.
//!
//! With `--db` the back-ends are RocksDB stores in a temporary directory made under the
//! system's temporary directory, or under `--db-dir DIR` (which must exist), and removed
//! at the end; Ctrl-C or SIGTERM stops after the files under way, removes it and exits 3.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use evm::FixtureError;
use serde_json::{Map, Value};

use crate::input::{display_name, file_usage, read_text_bytes, utf8_text};

/// One Ethereum test suite as a command runs it.
pub(crate) trait Suite: Sync {
    /// A parsed fixture file.
    type File;
    /// One file's results.
    type Report: Send;
    /// What one thread runs its files on: a back-end, or what makes them.
    type Worker;
    /// What the summary counts beyond passed, failed and skipped (`()` for nothing).
    type Extra: Default;

    /// The command (`statetest`): its temporary directory is `arbor-<NAME>-…`.
    const NAME: &'static str;
    /// The help of `PATH…`.
    const PATHS_HELP: &'static str;
    /// The help of `--db`.
    const DB_HELP: &'static str;
    /// How skipped tests are named.
    const SKIPPED: Skipped;

    /// Parse a fixture file's text.
    fn parse(text: &str) -> Result<Self::File, FixtureError>;

    /// How many files run at once.
    fn threads(&self) -> usize;

    /// A thread's worker: in memory, or (`--db`) on stores made under `db_dir`.
    fn worker(&self, db_dir: Option<&Path>) -> Self::Worker;

    /// Run every test of `file` on `worker`.
    fn run(&self, file: &Self::File, worker: &mut Self::Worker) -> Self::Report;

    /// Count `report`, the results of `file`.
    fn add(summary: &mut Summary<Self::Extra>, file: &Path, report: Self::Report);

    /// The JSON fields of `extra`, which follow the failures.
    fn extra_json(extra: &Self::Extra, doc: &mut Map<String, Value>);
}

/// How a suite names what it skipped.
pub(crate) struct Skipped {
    /// The text line's start: `skipped forks revm does not support`.
    pub(crate) line: &'static str,
    /// What is counted: `entries`, `tests`.
    pub(crate) unit: &'static str,
    /// The JSON list's key: `skipped_forks`.
    pub(crate) key: &'static str,
    /// The key of a name in the list's items: `fork`.
    pub(crate) name: &'static str,
}

/// The arguments of a suite's command.
#[derive(Debug, Args)]
pub(crate) struct SuiteArgs<S: Suite> {
    // The help is the suite's: the files it reads.
    #[arg(required = true, value_name = "PATH", help = S::PATHS_HELP)]
    paths: Vec<PathBuf>,
    // The help is the suite's: how many databases it makes.
    #[arg(long, help = S::DB_HELP)]
    db: bool,
    /// Where --db makes its temporary directory [default: the system's temporary
    /// directory].
    #[arg(long, value_name = "DIR", requires = "db")]
    db_dir: Option<PathBuf>,
    /// Print one JSON summary instead of the text lines.
    #[arg(long)]
    json: bool,
    #[arg(skip)]
    suite: PhantomData<S>,
}

/// Run a suite's command.
pub(crate) fn run<S: Suite>(suite: &S, args: &SuiteArgs<S>) -> Result<ExitCode> {
    let files = collect_files(&args.paths)?;
    // Every file parses before any runs: a malformed one stops the command before output.
    for file in &files {
        parse::<S>(file)?;
    }
    let started = Instant::now();
    let summary = if args.db {
        let base = args.db_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix(&format!("arbor-{}-", S::NAME))
            .tempdir_in(&base)
            .with_context(|| format!("cannot make a temporary directory in {}", base.display()))?;
        let stop = crate::signals::stop_flag()?;
        let summary = run_files(suite, &files, Some(dir.path()), args.json, Some(&stop));
        let path = dir.path().display().to_string();
        dir.close().with_context(|| format!("cannot remove the temporary databases at {path}"))?;
        summary?
    } else {
        run_files(suite, &files, None, args.json, None)?
    };
    let elapsed_s = started.elapsed().as_secs_f64();
    if args.json {
        let backend = if args.db { "db" } else { "memory" };
        outln!("{}", summary.json::<S>(files.len(), elapsed_s, backend))?;
    } else {
        summary.print(&S::SKIPPED)?;
    }
    Ok(if summary.failures.is_empty() { ExitCode::SUCCESS } else { crate::negative() })
}

/// Run every file, [`Suite::threads`] at a time (this thread one of them), each thread on
/// its own worker; stopping between files when `stop` is set or a file no longer reads.
fn run_files<S: Suite>(
    suite: &S,
    files: &[PathBuf],
    db_dir: Option<&Path>,
    json: bool,
    stop: Option<&AtomicBool>,
) -> Result<Summary<S::Extra>> {
    let pb = crate::progress::counter(!json, Some(files.len() as u64), "running", "files");
    let reports: Vec<Mutex<Option<S::Report>>> = files.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let failed_read: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let stopped = || stop.is_some_and(|s| s.load(Ordering::SeqCst));
    let work = || {
        let mut worker = suite.worker(db_dir);
        loop {
            if stopped() || lock(&failed_read).is_some() {
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(file) = files.get(i) else { break };
            match parse::<S>(file) {
                Ok(parsed) => *lock(&reports[i]) = Some(suite.run(&parsed, &mut worker)),
                Err(e) => *lock(&failed_read) = Some(e),
            }
            pb.inc(1);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..suite.threads() {
            s.spawn(work);
        }
        work();
    });
    pb.finish_and_clear();
    if let Some(e) = failed_read.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if stopped() {
        let done = reports.iter().filter(|r| lock(r).is_some()).count();
        bail!("stopped by a signal after {done} of {} files", files.len());
    }
    let mut summary = Summary::default();
    for (file, report) in files.iter().zip(reports) {
        if let Some(report) = report.into_inner().unwrap_or_else(|p| p.into_inner()) {
            S::add(&mut summary, file, report);
        }
    }
    Ok(summary)
}

/// A mutex's guard, also after a panic elsewhere (the data is a plain slot).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Parse one fixture file: its content's problems are usage errors naming it.
fn parse<S: Suite>(path: &Path) -> Result<S::File> {
    let bytes = read_text_bytes(path)?;
    let text = utf8_text(path, bytes).map_err(|e| crate::usage(crate::error_line(&e)))?;
    S::parse(&text).map_err(|e| file_usage(path, &anyhow::Error::new(e)))
}

/// The files the paths name: files as given, directories searched recursively for
/// `*.json`, each sorted by path. A directory without one is a usage error.
fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
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

/// One failure, for the lines and the JSON.
pub(crate) struct Failure {
    /// Its line after `FAIL `: the file, the test and what failed.
    pub(crate) line: String,
    /// Its object in the JSON's `failures`.
    pub(crate) json: Value,
}

/// The counts over all files.
pub(crate) struct Summary<X> {
    passed: usize,
    failures: Vec<Failure>,
    /// Skipped tests per name (a fork, a network).
    skipped: BTreeMap<String, usize>,
    /// The suite's own counts.
    pub(crate) extra: X,
}

impl<X: Default> Default for Summary<X> {
    fn default() -> Self {
        Summary { passed: 0, failures: Vec::new(), skipped: BTreeMap::new(), extra: X::default() }
    }
}

impl<X> Summary<X> {
    /// Count `n` passed.
    pub(crate) fn pass(&mut self, n: usize) {
        self.passed += n;
    }

    /// Count `n` skipped under `name`.
    pub(crate) fn skip(&mut self, name: &str, n: usize) {
        *self.skipped.entry(name.to_string()).or_default() += n;
    }

    /// Count one failure.
    pub(crate) fn fail(&mut self, failure: Failure) {
        self.failures.push(failure);
    }

    fn skipped_count(&self) -> usize {
        self.skipped.values().sum()
    }

    fn print(&self, skipped: &Skipped) -> Result<()> {
        for f in &self.failures {
            outln!("FAIL {}", f.line)?;
        }
        if !self.skipped.is_empty() {
            let names: Vec<String> = self
                .skipped
                .iter()
                .map(|(name, n)| format!("{name} ({n} {})", skipped.unit))
                .collect();
            outln!("{}: {}", skipped.line, names.join(", "))?;
        }
        outln!(
            "{} passed, {} failed, {} skipped",
            self.passed,
            self.failures.len(),
            self.skipped_count()
        )
    }

    fn json<S: Suite<Extra = X>>(&self, files: usize, elapsed_s: f64, backend: &str) -> Value {
        let skipped = &S::SKIPPED;
        let skipped_list: Vec<Value> = self
            .skipped
            .iter()
            .map(|(name, n)| {
                let mut item = Map::new();
                item.insert(skipped.name.to_string(), Value::from(name.as_str()));
                item.insert(skipped.unit.to_string(), Value::from(*n));
                Value::Object(item)
            })
            .collect();
        let mut doc = Map::new();
        doc.insert("files".into(), Value::from(files));
        doc.insert("passed".into(), Value::from(self.passed));
        doc.insert("failed".into(), Value::from(self.failures.len()));
        doc.insert("skipped".into(), Value::from(self.skipped_count()));
        doc.insert(skipped.key.into(), Value::Array(skipped_list));
        let failures = self.failures.iter().map(|f| f.json.clone()).collect();
        doc.insert("failures".into(), Value::Array(failures));
        S::extra_json(&self.extra, &mut doc);
        doc.insert("elapsed_s".into(), serde_json::json!(elapsed_s));
        doc.insert("backend".into(), Value::from(backend));
        Value::Object(doc)
    }
}
