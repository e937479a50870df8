//! `arbor blocktest PATH… [--db [--db-dir DIR]] [--json]`: the Ethereum blockchain tests
//! (`BlockchainTests` JSON) through the block executor (decode, validate, execute through
//! revm, commit).
//!
//! The files are found, parsed first and run by the suites' shared runner
//! ([`crate::suite`]: exit codes, the temporary directory of `--db`, Ctrl-C), in parallel
//! on all cores. Every test runs (the `evm::blocktest` runner): one line per failing test
//! (`FAIL file test network: reason`), a line naming the networks the executor does not
//! run when tests were skipped for them (forks before Paris, after Prague), and last
//! `N passed, M failed, K skipped` (tests); exit 1 when any failed. `--json` prints the
//! same summary as one document.
//!
//! Back-ends: the chain's state is in memory (`evm::blocktest::InMemoryChain`) by default;
//! with `--db` it is a RocksDB store per test (`evm::blocktest::InStoreChain`: every block
//! through the store's account-model commit, side chains by reverts, flush and `verify` at
//! the test's end; a failure there fails the test).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use evm::blocktest::{
    parse_file, run_file, BlockTestFile, InMemoryChain, InStoreChain, Outcome, TestReport,
};
use evm::FixtureError;
use serde_json::{Map, Value};

use crate::input::display_name;
use crate::suite::{Failure, Skipped, Suite, Summary};

/// The blockchain tests, as `arbor blocktest` runs them.
#[derive(Debug, Default)]
pub(crate) struct BlockTests {
    /// Databases made so far (their directories' names, unique across threads).
    made: AtomicUsize,
}

impl Suite for BlockTests {
    type File = BlockTestFile;
    type Report = Vec<TestReport>;
    /// The directory the tests' databases are made in (`None`: in memory).
    type Worker = Option<PathBuf>;
    type Extra = ();

    const NAME: &'static str = "blocktest";
    const PATHS_HELP: &'static str =
        "Blockchain-test files, or directories searched recursively for *.json";
    const DB_HELP: &'static str = "Run on temporary RocksDB stores (one per test: the store's \
                                   commit, reverts and a verify) instead of in memory";
    const SKIPPED: Skipped = Skipped {
        line: "skipped networks the block executor does not run",
        unit: "tests",
        key: "skipped_networks",
        name: "network",
    };

    fn parse(text: &str) -> Result<BlockTestFile, FixtureError> {
        parse_file(text)
    }

    fn threads(&self) -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    fn worker(&self, db_dir: Option<&Path>) -> Option<PathBuf> {
        db_dir.map(PathBuf::from)
    }

    fn run(&self, file: &BlockTestFile, db_dir: &mut Option<PathBuf>) -> Vec<TestReport> {
        match db_dir {
            None => run_file(file, InMemoryChain::new),
            Some(dir) => run_file(file, || {
                let n = self.made.fetch_add(1, Ordering::Relaxed);
                InStoreChain::in_dir(dir.join(format!("test-{n}")))
            }),
        }
    }

    fn add(summary: &mut Summary<()>, file: &Path, reports: Vec<TestReport>) {
        for r in reports {
            match r.outcome {
                Outcome::Passed => summary.pass(1),
                Outcome::Skipped => summary.skip(&r.network, 1),
                Outcome::Failed(reason) => {
                    let name = display_name(file);
                    summary.fail(Failure {
                        line: format!("{name} {} {}: {reason}", r.test, r.network),
                        json: serde_json::json!({
                            "file": name,
                            "test": r.test,
                            "network": r.network,
                            "reason": reason,
                        }),
                    });
                }
            }
        }
    }

    fn extra_json(_: &(), _: &mut Map<String, Value>) {}
}
