//! The blockchain-test subset in `testdata/ethereum/blockchain-tests/` (see its SOURCES.md),
//! run through the block executor: every test of every network it runs must pass (blocks
//! marked invalid refused with the head unchanged, the post-state and last block hash
//! matched); skipped networks are printed by name. Every file in memory, and every tenth
//! (in path order) with the side-chain files on RocksDB stores. Files run on all cores,
//! the largest first.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use evm::blocktest::{parse_file, run_file, BlockBackend, InMemoryChain, InStoreChain, Outcome};
use test_support::statetests::{blocktests_archive_path, read_archive};

#[derive(Default)]
struct Totals {
    passed: usize,
    failures: Vec<String>,
    skipped: BTreeMap<String, usize>,
    invalid_blocks: usize,
}

#[test]
fn every_test_of_the_subset_passes_in_memory() {
    let started = std::time::Instant::now();
    let mut files = read_archive(&blocktests_archive_path());
    let folder = |p: &str, depth: usize| p.split('/').nth(depth).unwrap_or_default().to_string();
    let groups: BTreeSet<String> = files.iter().map(|(p, _)| folder(p, 1)).collect();
    let categories: BTreeSet<String> = files
        .iter()
        .filter(|(p, _)| folder(p, 1) == "GeneralStateTests")
        .map(|(p, _)| folder(p, 2))
        .collect();
    assert!(files.len() >= 800, "{} files", files.len());
    assert_eq!(groups.len(), 3, "ValidBlocks, InvalidBlocks, GeneralStateTests: {groups:?}");
    assert_eq!(categories.len(), 60, "every category folder of GeneralStateTests: {categories:?}");
    let t = run_all(&mut files, InMemoryChain::new);
    let skipped: usize = t.skipped.values().sum();
    println!(
        "{} files: {} passed, {} failed, {skipped} skipped ({} blocks expected invalid) in {:.1} s",
        files.len(),
        t.passed,
        t.failures.len(),
        t.invalid_blocks,
        started.elapsed().as_secs_f64()
    );
    if !t.skipped.is_empty() {
        println!("skipped networks the block executor does not run: {:?}", t.skipped);
    }
    assert!(t.failures.is_empty(), "{} failures:\n{}", t.failures.len(), t.failures.join("\n"));
    // The subset's counts (SOURCES.md): 1,844 tests, all of networks the executor runs,
    // 235 blocks expected refused.
    assert!(t.passed >= 1800 && skipped == 0, "{} tests passed, {skipped} skipped", t.passed);
    assert!(t.invalid_blocks >= 200, "{} invalid blocks", t.invalid_blocks);
}

/// Run `files` (largest first) on all cores, each test on a fresh backend from `backend`.
fn run_all<B: BlockBackend>(
    files: &mut [(String, Vec<u8>)],
    backend: impl Fn() -> B + Sync,
) -> Totals {
    files.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Totals::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((path, bytes)) = files.get(i) else { break };
                let text = std::str::from_utf8(bytes).unwrap();
                let file = parse_file(text).unwrap_or_else(|e| panic!("{path}: {e}"));
                let invalid: usize = file
                    .tests
                    .iter()
                    .map(|(_, t)| t.blocks.iter().filter(|b| b.expect_exception.is_some()).count())
                    .sum();
                let reports = run_file(&file, &backend);
                let mut t = totals.lock().unwrap();
                t.invalid_blocks += invalid;
                for r in reports {
                    match r.outcome {
                        Outcome::Passed => t.passed += 1,
                        Outcome::Skipped => *t.skipped.entry(r.network).or_default() += 1,
                        Outcome::Failed(why) => {
                            t.failures.push(format!("{path} {} {}: {why}", r.test, r.network))
                        }
                    }
                }
            });
        }
    });
    totals.into_inner().unwrap()
}

#[test]
fn every_tenth_file_and_the_side_chains_pass_on_the_store() {
    let started = std::time::Instant::now();
    let side_chains = ["/bcForkStressTest/", "/bcMultiChainTest/"];
    let mut files: Vec<(String, Vec<u8>)> = read_archive(&blocktests_archive_path())
        .into_iter()
        .enumerate()
        .filter(|(i, (p, _))| i % 10 == 0 || side_chains.iter().any(|s| p.contains(s)))
        .map(|(_, f)| f)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let made = AtomicUsize::new(0);
    let t = run_all(&mut files, || {
        let n = made.fetch_add(1, Ordering::Relaxed);
        InStoreChain::in_dir(dir.path().join(format!("test-{n}")))
    });
    println!(
        "{} files on the store: {} passed, {} failed in {:.1} s",
        files.len(),
        t.passed,
        t.failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(t.failures.is_empty(), "{} failures:\n{}", t.failures.len(), t.failures.join("\n"));
    assert!(files.len() >= 80 && t.passed >= 150, "{} files, {} passed", files.len(), t.passed);
    assert!(t.skipped.is_empty(), "{:?}", t.skipped);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "every database removed");
}
