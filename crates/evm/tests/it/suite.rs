//! The state-test subset in `testdata/ethereum/state-tests/` (see its SOURCES.md), run in
//! memory through revm and Arbor's commit: every post entry of every fork revm supports
//! must pass; skipped forks are printed by name. Files run on all cores, those whose
//! transactions may burn the most gas first (one file's 4.3 billion BLAKE2 rounds, some
//! 38 s here, would otherwise start last and set the wall time alone).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use alloy_primitives::U256;
use evm::statetest::{parse_file, run_file, InMemory, StateTestFile, TxNumber};
use test_support::statetests::{archive_path, read_archive};

#[derive(Default)]
struct Totals {
    passed: usize,
    failures: Vec<String>,
    skipped: BTreeMap<String, usize>,
}

#[test]
fn every_entry_of_the_subset_passes_in_memory() {
    let files = read_archive(&archive_path());
    let categories: BTreeSet<&str> =
        files.iter().filter_map(|(p, _)| p.split('/').nth(1)).collect();
    assert!(files.len() >= 600, "{} files", files.len());
    assert_eq!(categories.len(), 60, "every category folder of GeneralStateTests: {categories:?}");
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
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Totals::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((path, file, _)) = parsed.get(i) else { break };
                let report = run_file(file, &mut InMemory);
                let mut t = totals.lock().unwrap();
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
            });
        }
    });
    let t = totals.into_inner().unwrap();
    let skipped: usize = t.skipped.values().sum();
    println!(
        "{} files: {} passed, {} failed, {skipped} skipped",
        files.len(),
        t.passed,
        t.failures.len()
    );
    if !t.skipped.is_empty() {
        println!("skipped forks revm does not support: {:?}", t.skipped);
    }
    assert!(t.failures.is_empty(), "{} failures:\n{}", t.failures.len(), t.failures.join("\n"));
    assert!(t.passed >= 4000, "{} entries passed", t.passed);
}

/// The largest gas limit any transaction of `file` may use.
fn max_gas(file: &StateTestFile) -> U256 {
    let limits = file.tests.iter().flat_map(|(_, t)| t.transaction.gas_limit.iter());
    limits
        .map(|g| if let TxNumber::Value(v) = g { *v } else { U256::ZERO })
        .max()
        .unwrap_or(U256::ZERO)
}
