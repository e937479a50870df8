//! The state-test subset in `testdata/ethereum/state-tests/` (see its SOURCES.md), run
//! through revm and Arbor's commit: every post entry of every fork revm supports must pass,
//! in memory for every file, and on the RocksDB store (`InStore`: the pre-state and each
//! transaction committed through the store's account-model commit, reverted after each
//! entry, `verify` at each file's end) for a file in nine of every category folder: in each
//! folder's path order its 1st, 10th, 19th… file, a file of [`MEMORY_ONLY`] replaced by the
//! folder's next one (133 files, all 60 folders, 827 entries). Skipped forks are printed by
//! name. Files run on all cores, those whose transactions may burn the most
//! gas first (one file's 4.3 billion BLAKE2 rounds, some 38 s here, would otherwise start
//! last and set the wall time alone).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use alloy_primitives::U256;
use evm::statetest::{
    parse_file, run_file, InMemory, InStore, StateTestFile, TestBackend, TxNumber,
};
use test_support::statetests::{archive_path, read_archive};

/// Every how many files of a category folder the store runs one.
const STORE_EVERY: usize = 9;

/// Files the store run leaves to the in-memory run, whose cost is revm's alone:
/// `CALLBlake2f_MaxRounds` spends 4.3 billion BLAKE2 rounds (37 s of CPU here) over a state
/// of two accounts.
const MEMORY_ONLY: &[&str] = &["stTimeConsuming/CALLBlake2f_MaxRounds.json"];

#[derive(Default)]
struct Totals {
    files: usize,
    passed: usize,
    failures: Vec<String>,
    skipped: BTreeMap<String, usize>,
}

/// The category folder of an archive path (`GeneralStateTests/<category>/…`).
fn category(path: &str) -> Option<&str> {
    path.split('/').nth(1)
}

/// The subset's files, parsed, those that may burn the most gas first.
fn parsed_subset(files: &[(String, Vec<u8>)]) -> Vec<(&str, StateTestFile, U256)> {
    let mut parsed: Vec<(&str, StateTestFile, U256)> = files
        .iter()
        .map(|(path, bytes)| {
            let text = std::str::from_utf8(bytes).unwrap();
            let file = parse_file(text).unwrap_or_else(|e| panic!("{path}: {e}"));
            let gas = max_gas(&file);
            (path.as_str(), file, gas)
        })
        .collect();
    parsed.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    parsed
}

/// Run `files` on all cores, each thread on its own back-end from `backend`; print the
/// counts and the skipped forks; fail on any failing entry.
fn run_all<B: TestBackend>(
    files: &[(&str, StateTestFile, U256)],
    backend: impl Fn() -> B + Sync,
) -> Totals {
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Totals::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut backend = backend();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((path, file, _)) = files.get(i) else { break };
                    let report = run_file(file, &mut backend);
                    let mut t = totals.lock().unwrap();
                    t.files += 1;
                    t.passed += report.passed();
                    for (fork, n) in &report.skipped {
                        *t.skipped.entry(fork.clone()).or_default() += n;
                    }
                    for e in report.entries.iter().filter(|e| e.failure.is_some()) {
                        let i = e.indexes;
                        let reason = e.failure.as_ref().unwrap();
                        t.failures.push(format!(
                            "{path} {} {} d={} g={} v={}: {reason}",
                            e.test, e.fork, i.data, i.gas, i.value
                        ));
                    }
                }
            });
        }
    });
    let t = totals.into_inner().unwrap();
    let skipped: usize = t.skipped.values().sum();
    println!(
        "{} files: {} passed, {} failed, {skipped} skipped",
        t.files,
        t.passed,
        t.failures.len()
    );
    if !t.skipped.is_empty() {
        println!("skipped forks revm does not support: {:?}", t.skipped);
    }
    assert!(t.failures.is_empty(), "{} failures:\n{}", t.failures.len(), t.failures.join("\n"));
    t
}

#[test]
fn every_entry_of_the_subset_passes_in_memory() {
    let files = read_archive(&archive_path());
    let categories: BTreeSet<&str> = files.iter().filter_map(|(p, _)| category(p)).collect();
    assert!(files.len() >= 600, "{} files", files.len());
    assert_eq!(categories.len(), 60, "every category folder of GeneralStateTests: {categories:?}");
    let t = run_all(&parsed_subset(&files), || InMemory);
    assert!(t.passed >= 4000, "{} entries passed", t.passed);
}

#[test]
fn a_file_in_nine_of_every_category_passes_on_the_store() {
    let files = read_archive(&archive_path());
    let mut by_category: BTreeMap<&str, Vec<&(String, Vec<u8>)>> = BTreeMap::new();
    for file in &files {
        by_category.entry(category(&file.0).unwrap()).or_default().push(file);
    }
    let mut chosen: Vec<(String, Vec<u8>)> = Vec::new();
    for mut in_folder in by_category.into_values() {
        in_folder.sort_by(|a, b| a.0.cmp(&b.0));
        for start in (0..in_folder.len()).step_by(STORE_EVERY) {
            let mut candidates = in_folder[start..].iter();
            let memory_only =
                |f: &&&(String, Vec<u8>)| MEMORY_ONLY.iter().any(|m| f.0.ends_with(m));
            if let Some(file) = candidates.find(|f| !memory_only(f)) {
                chosen.push((*file).clone());
            }
        }
    }
    let categories: BTreeSet<&str> = chosen.iter().filter_map(|(p, _)| category(p)).collect();
    assert!(chosen.len() >= 100, "{} files", chosen.len());
    assert_eq!(categories.len(), 60, "every category folder: {categories:?}");
    let dir = tempfile::tempdir().unwrap();
    let created = AtomicUsize::new(0);
    let t = run_all(&parsed_subset(&chosen), || {
        let own = dir.path().join(format!("thread-{}", created.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&own).unwrap();
        InStore::new(own)
    });
    assert_eq!(t.files, chosen.len());
    assert!(t.passed >= 800, "{} entries passed", t.passed);
}

/// The largest gas limit any transaction of `file` may use.
fn max_gas(file: &StateTestFile) -> U256 {
    let limits = file.tests.iter().flat_map(|(_, t)| t.transaction.gas_limit.iter());
    limits
        .map(|g| if let TxNumber::Value(v) = g { *v } else { U256::ZERO })
        .max()
        .unwrap_or(U256::ZERO)
}
