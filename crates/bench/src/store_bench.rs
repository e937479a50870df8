//! The `store_bench` driver: the Arbor store and its baselines receive the same workload
//! ([`crate::workload`]) one after the other, in one process, in fresh directories under
//! one temporary directory. The engines:
//! - **arbor**: `StateDb::commit` per block (roots, reverse diffs, background writer);
//! - **plain+undo**: plain RocksDB that reads each block's old values (batched MultiGets on
//!   every thread) and writes the new values with a history record of the old ones — what
//!   any store that can undo a block must do;
//! - **blind**: plain RocksDB writing the new values only (the physical floor);
//! - **nomt**: NOMT 1.0 on the same keys and blocks (`crate::nomt_engine`): another
//!   authenticated store, committing to a binary BLAKE3 trie, durable on every commit.
//!
//! plain+undo and blind write with RocksDB's WAL (its default); Arbor writes its block
//! groups without it and makes them durable by flushing memtables (`docs/design.md`,
//! "Durability"). Every engine's blocks are durable when its timed final flush returns.
//!
//! Each engine: bulk-load the initial keys (timed), write the blocks (each commit timed
//! alone; generating a block is not timed), flush (timed, part of the total: sustained
//! blocks/s counts every block until it is durable), then compact and measure the files.
//! Each engine's peak RSS is its own (the peak is reset between engines). Engines run one
//! after the other rather than interleaved, because each one's background writes
//! (compaction, Arbor's writer) would otherwise run during the others' timed blocks. At the
//! end Arbor's root is verified from flat state and sampled keys are compared between the
//! databases.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use indicatif::ProgressBar;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use store::{StateDb, StoreConfig};
use trie::TrieId;

use crate::machine::MachineInfo;
use crate::opts::StoreBenchOpts;
use crate::plain_db::PlainDb;
use crate::progress::bar;
use crate::rss::load_average;
use crate::store_catch_up::measure_catch_up;
use crate::store_engines::{run_arbor, run_nomt, run_plain, ArborMode, PlainMode};
use crate::store_report::{
    EngineReport, RatioReport, StoreBenchReport, COMMIT_P50_TARGET_MS, MERKLE_OVERHEAD_TARGET,
    MERKLE_OVERHEAD_TARGET_10M, OVER_UNDO_TARGET, SIZE_RATIO_TARGET,
};
use crate::timing::ratio;
use crate::workload::Workload;

/// Keys whose values are compared between the two databases at the end.
const CROSS_CHECK_KEYS: u64 = 1_000;

/// Run the store benchmark (see the module docs); `progress` draws bars on stderr.
///
/// Fails if Arbor's verified root differs from its head root or if a sampled key holds
/// different values in the two databases.
pub fn store_bench(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    progress: bool,
) -> Result<StoreBenchReport> {
    ensure!(opts.keys > 0 || opts.blocks > 0, "nothing to measure: no keys and no blocks");
    config.validate().context("invalid store config")?;
    let machine = MachineInfo::detect();
    let load_average_start = load_average();
    let workload = Workload::new(opts.seed, opts.keys, opts.updates_per_block);
    let base = bench_dir(opts)?;
    let (arbor_dir, undo_dir, plain_dir) =
        (base.path().join("arbor"), base.path().join("undo"), base.path().join("plain"));

    let run = run_arbor(opts, config, &workload, &arbor_dir, ArborMode::Prior, progress)?;
    let (mut arbor, caches, keys_final, root) = (run.report, run.caches, run.keys_final, run.root);
    let mut arbor_reading = match opts.arbor_reading {
        true => {
            let dir = base.path().join("arbor-reading");
            let run = run_arbor(opts, config, &workload, &dir, ArborMode::Read, progress)?;
            ensure!(
                run.root == root,
                "Arbor reading old values reached root {}, not {root}",
                run.root
            );
            std::fs::remove_dir_all(&dir).ok();
            Some(run.report)
        }
        false => None,
    };
    let mut plain_undo = run_plain(opts, config, &workload, &undo_dir, PlainMode::Undo, progress)?;
    let mut plain = run_plain(opts, config, &workload, &plain_dir, PlainMode::Blind, progress)?;
    let nomt = match opts.nomt {
        true => {
            let dir = base.path().join("nomt");
            let report = run_nomt(opts, config, &workload, &dir, progress)?;
            std::fs::remove_dir_all(&dir).ok();
            Some(report)
        }
        false => None,
    };
    let engines =
        [Some(&mut arbor), arbor_reading.as_mut(), Some(&mut plain_undo), Some(&mut plain)];
    for e in engines.into_iter().flatten() {
        e.sst_bytes_per_key = ratio(e.sst_bytes as f64, keys_final as f64);
    }

    let pb = bar(progress, 2, "checking: verify, cross-check");
    let (root_verified, values_cross_checked) =
        check(opts, config, &workload, &arbor_dir, &[&plain_dir, &undo_dir], &pb)?;
    pb.finish();
    let arbor_catch_up =
        measure_catch_up(config, &workload, &arbor_dir, opts.blocks + 1, progress)?;

    let ratios = ratios(opts.keys, &arbor, &plain_undo, &plain, nomt.as_ref());
    Ok(StoreBenchReport {
        machine,
        load_average_start,
        load_average_end: load_average(),
        options: opts.clone(),
        config: config.clone(),
        keys_final,
        root,
        root_verified,
        values_cross_checked,
        arbor,
        arbor_reading,
        plain_undo,
        plain,
        nomt,
        arbor_caches: caches,
        arbor_catch_up,
        ratios,
    })
}

/// The run's temporary directory (under `--dir` when given).
fn bench_dir(opts: &StoreBenchOpts) -> Result<tempfile::TempDir> {
    temp_dir("arbor-bench-store-", opts.dir.as_deref())
}

/// A temporary directory named `prefix…`, under `dir` when given (created if missing).
pub(crate) fn temp_dir(prefix: &str, dir: Option<&std::path::Path>) -> Result<tempfile::TempDir> {
    let builder = || tempfile::Builder::new().prefix(prefix).clone();
    match dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            builder().tempdir_in(d)
        }
        None => builder().tempdir(),
    }
    .context("cannot create a temporary directory")
}

fn ratios(
    keys: u64,
    arbor: &EngineReport,
    undo: &EngineReport,
    plain: &EngineReport,
    nomt: Option<&EngineReport>,
) -> RatioReport {
    let overhead_target =
        if keys >= 10_000_000 { MERKLE_OVERHEAD_TARGET_10M } else { MERKLE_OVERHEAD_TARGET };
    let merkle_overhead = ratio(arbor.total_seconds, plain.total_seconds);
    let over_undo = ratio(arbor.total_seconds, undo.total_seconds);
    let state = arbor.state_sst_bytes();
    let size = ratio(arbor.sst_bytes as f64, plain.sst_bytes as f64);
    let size_state = ratio(state as f64, plain.sst_bytes as f64);
    RatioReport {
        merkle_overhead,
        merkle_overhead_target: overhead_target,
        merkle_overhead_met: merkle_overhead <= overhead_target,
        over_undo,
        over_undo_target: OVER_UNDO_TARGET,
        over_undo_met: over_undo <= OVER_UNDO_TARGET,
        over_nomt: nomt.map(|n| ratio(arbor.blocks_per_second, n.blocks_per_second)),
        commit_p50_target_ms: COMMIT_P50_TARGET_MS,
        commit_p50_met: arbor.commit_ms_p50 <= COMMIT_P50_TARGET_MS,
        merkle_overhead_with_compaction: ratio(arbor.end_to_end_seconds, plain.end_to_end_seconds),
        bulk_time: ratio(arbor.bulk_seconds, plain.bulk_seconds),
        size,
        size_state,
        size_target: SIZE_RATIO_TARGET,
        size_met: size <= SIZE_RATIO_TARGET,
        size_state_met: size_state <= SIZE_RATIO_TARGET,
    }
}

/// Verify Arbor's root from flat state, then compare sampled keys (live or not) between
/// Arbor and every plain database. Returns (verified, keys compared).
fn check(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    workload: &Workload,
    arbor_dir: &Path,
    plain_dirs: &[&Path],
    pb: &ProgressBar,
) -> Result<(bool, u64)> {
    let db = StateDb::open(arbor_dir, config.clone()).context("cannot reopen the Arbor store")?;
    let report = db.verify().context("Arbor verify failed")?;
    if !report.ok() {
        bail!(
            "Arbor root mismatch at block {}: stored {}, recomputed {}",
            report.number,
            report.stored_root,
            report.computed_root
        );
    }
    pb.inc(1);
    let plains = plain_dirs.iter().map(|d| PlainDb::open(d, config)).collect::<Result<Vec<_>>>()?;
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let range = workload.index_range(opts.blocks).max(1);
    let samples = CROSS_CHECK_KEYS.min(range);
    for _ in 0..samples {
        let key = workload.key(rng.gen_range(0..range));
        let a = db.get(&TrieId::Main, &key)?;
        for plain in &plains {
            let p = plain.get(&key)?;
            ensure!(
                a == p,
                "key 0x{} differs: Arbor {:?}, plain {:?}",
                hex(&key),
                a.as_ref().map(|v| hex(v)),
                p.map(|v| hex(&v))
            );
        }
    }
    pb.inc(1);
    Ok((true, samples))
}

fn hex(bytes: &[u8]) -> String {
    crate::input::hex(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_end_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreBenchOpts {
            keys: 3_000,
            blocks: 6,
            updates_per_block: 200,
            seed: 3,
            dir: Some(dir.path().to_path_buf()),
            arbor_reading: true,
            nomt: true,
        };
        let report = store_bench(&opts, &StoreConfig::default(), false).unwrap();
        assert!(report.root_verified);
        assert_eq!(report.values_cross_checked, 1_000);
        assert_eq!(report.arbor.bulk_keys, 3_000);
        assert_eq!(report.plain.bulk_keys, 3_000);
        assert_eq!(report.arbor.writes, report.plain.writes);
        assert_eq!(report.plain_undo.writes, report.plain.writes);
        assert!(report.plain_undo.bytes_written_per_block > report.plain.bytes_written_per_block);
        assert!(report.arbor.bytes_written_per_block > 0.0);
        assert_eq!(report.arbor_reading.as_ref().unwrap().writes, report.arbor.writes);
        assert_eq!(report.nomt.as_ref().unwrap().writes, report.arbor.writes);
        assert!(report.ratios.over_nomt.unwrap() > 0.0);
        assert!(report.arbor.writes > 6 * 150, "{}", report.arbor.writes);
        assert!((2_700..3_100).contains(&report.keys_final), "{}", report.keys_final);
        assert!(report.arbor.sst_bytes > 0 && report.plain.sst_bytes > 0);
        assert!(
            report.arbor.column_sst_bytes.contains_key("flat"),
            "{:?}",
            report.arbor.column_sst_bytes
        );
        assert!(report.ratios.merkle_overhead > 0.0);
        let text = report.render();
        assert!(text.contains("Arbor/blind"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["options"]["keys"], 3_000);
        assert!(json["ratios"]["size"].as_f64().unwrap() > 0.0);
        // The temporary databases are gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
