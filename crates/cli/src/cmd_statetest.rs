//! `arbor statetest PATH… [--db [--db-dir DIR]] [--json]`: the Ethereum state tests
//! (`GeneralStateTests` JSON) through revm and Arbor's account-model commit.
//!
//! The files are found, parsed first and run by the suites' shared runner
//! ([`crate::suite`]: exit codes, the temporary directory of `--db`, Ctrl-C), one file at a
//! time. Every test, every fork revm supports, every post entry runs (the
//! `evm::statetest` runner): one line per failing entry (`FAIL file test fork d=… g=… v=…:
//! reason`), a line naming the forks revm does not support when their entries were
//! skipped, and last `N passed, M failed, K skipped` (post entries); exit 1 when any
//! failed. `--json` prints the same summary as one document, with the transactions'
//! reads and writes summed (what a per-transaction proof will need).
//!
//! Back-ends: the states are in memory (`evm::statetest::InMemory`) by default; with `--db`
//! they are RocksDB stores (`evm::statetest::InStore`: one database per file, the
//! pre-state and each transaction committed through the store's account-model commit and
//! reverted after each entry, `verify` at the file's end; a failure there fails the file's
//! entries).

use std::path::{Path, PathBuf};

use evm::statetest::{parse_file, run_file, FileReport, InMemory, InStore, StateTestFile};
use evm::{FixtureError, PovNeeds};
use serde_json::{Map, Value};

use crate::input::display_name;
use crate::suite::{Failure, Skipped, Suite, Summary};

/// The state tests, as `arbor statetest` runs them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StateTests;

/// Where a file's states live.
pub(crate) enum Backend {
    /// In memory.
    Memory(InMemory),
    /// On RocksDB stores (`--db`; boxed: it is large).
    Store(Box<InStore>),
}

/// The transactions' reads and writes, summed and at most.
#[derive(Default)]
pub(crate) struct PovSums {
    transactions: usize,
    total: PovNeeds,
    max: PovNeeds,
}

impl Suite for StateTests {
    type File = StateTestFile;
    type Report = FileReport;
    type Worker = Backend;
    type Extra = PovSums;

    const NAME: &'static str = "statetest";
    const PATHS_HELP: &'static str =
        "State-test files, or directories searched recursively for *.json";
    const DB_HELP: &'static str = "Run on temporary RocksDB stores (one per file; the store's \
                                   commit, reverts and a verify) instead of in memory";
    const SKIPPED: Skipped = Skipped {
        line: "skipped forks revm does not support",
        unit: "entries",
        key: "skipped_forks",
        name: "fork",
    };

    fn parse(text: &str) -> Result<StateTestFile, FixtureError> {
        parse_file(text)
    }

    /// One: a store back-end holds one file's database at a time, in one directory.
    fn threads(&self) -> usize {
        1
    }

    fn worker(&self, db_dir: Option<&Path>) -> Backend {
        match db_dir {
            None => Backend::Memory(InMemory),
            Some(dir) => Backend::Store(Box::new(InStore::new(PathBuf::from(dir)))),
        }
    }

    fn run(&self, file: &StateTestFile, worker: &mut Backend) -> FileReport {
        match worker {
            Backend::Memory(backend) => run_file(file, backend),
            Backend::Store(backend) => run_file(file, &mut **backend),
        }
    }

    fn add(summary: &mut Summary<PovSums>, file: &Path, report: FileReport) {
        summary.pass(report.passed());
        for (fork, n) in &report.skipped {
            summary.skip(fork, *n);
        }
        for entry in report.entries {
            if let Some(pov) = &entry.pov {
                let sums = &mut summary.extra;
                sums.transactions += 1;
                pov_fold(&mut sums.total, pov, |a, b| a + b);
                pov_fold(&mut sums.max, pov, usize::max);
            }
            let Some(failure) = &entry.failure else { continue };
            let (name, reason, i) = (display_name(file), failure.to_string(), entry.indexes);
            summary.fail(Failure {
                line: format!(
                    "{name} {} {} d={} g={} v={}: {reason}",
                    entry.test, entry.fork, i.data, i.gas, i.value
                ),
                json: serde_json::json!({
                    "file": name,
                    "test": entry.test,
                    "fork": entry.fork,
                    "d": i.data,
                    "g": i.gas,
                    "v": i.value,
                    "reason": reason,
                }),
            });
        }
    }

    fn extra_json(sums: &PovSums, doc: &mut Map<String, Value>) {
        doc.insert("transactions".into(), Value::from(sums.transactions));
        doc.insert("pov_total".into(), pov_json(&sums.total));
        doc.insert("pov_max".into(), pov_json(&sums.max));
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

fn pov_json(p: &PovNeeds) -> Value {
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
