//! The `store_bench` driver: the Arbor store and the plain RocksDB baseline receive the
//! same workload ([`crate::workload`]) one after the other, in one process, in fresh
//! directories under one temporary directory.
//!
//! Each engine: bulk-load the initial keys (timed), write the blocks (each commit timed
//! alone; generating a block is not timed), flush (timed, part of the total), then compact
//! and measure the files. Arbor's peak RSS is read before the baseline starts; the peak is
//! then reset so that the baseline's is its own. After both, Arbor's root is verified
//! from flat state and sampled keys are compared between the two databases.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use indicatif::ProgressBar;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use store::{StateDb, StoreConfig};
use trie::TrieId;

use crate::machine::MachineInfo;
use crate::plain_db::{column_sst_bytes, dir_bytes, PlainDb};
use crate::progress::bar;
use crate::rss::{load_average, peak_rss_bytes, reset_peak_rss};
use crate::store_report::{
    CacheReport, EngineReport, PhaseReport, RatioReport, StoreBenchReport, MERKLE_OVERHEAD_TARGET,
    RSS_OVER_BUDGET_TARGET, SIZE_RATIO_TARGET,
};
use crate::timing::{percentile_sorted, ratio, sorted};
use crate::workload::{LiveKeys, Workload};

/// Keys whose values are compared between the two databases at the end.
const CROSS_CHECK_KEYS: u64 = 1_000;

/// Options of [`store_bench`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreBenchOpts {
    /// Initial keys (`M`).
    pub keys: u64,
    /// Blocks committed (`N`).
    pub blocks: u64,
    /// Operations per block (`K`).
    pub updates_per_block: u64,
    /// Workload seed.
    pub seed: u64,
    /// Directory under which the temporary databases are created (default: the system's).
    pub dir: Option<PathBuf>,
}

impl Default for StoreBenchOpts {
    fn default() -> Self {
        StoreBenchOpts {
            keys: 1_000_000,
            blocks: 100,
            updates_per_block: 10_000,
            seed: 1,
            dir: None,
        }
    }
}

/// Per-block timings and counts of one engine's block phase.
struct BlockPhase {
    commit_seconds: Vec<f64>,
    writes: u64,
    hashes: u64,
    flush_seconds: f64,
}

impl BlockPhase {
    fn engine_report(&self, blocks: u64, bulk_keys: u64, bulk_seconds: f64) -> EngineReport {
        let commit_total: f64 = self.commit_seconds.iter().sum();
        let total = commit_total + self.flush_seconds;
        let s = sorted(&self.commit_seconds);
        EngineReport {
            bulk_keys,
            bulk_seconds,
            blocks,
            writes: self.writes,
            hashes_per_block_mean: ratio(self.hashes as f64, blocks as f64),
            commit_seconds: commit_total,
            flush_seconds: self.flush_seconds,
            total_seconds: total,
            blocks_per_second: ratio(blocks as f64, total),
            writes_per_second: ratio(self.writes as f64, total),
            commit_ms_p50: percentile_sorted(&s, 50.0) * 1e3,
            commit_ms_p99: percentile_sorted(&s, 99.0) * 1e3,
            commit_ms_max: s.last().copied().unwrap_or(0.0) * 1e3,
            compact_seconds: 0.0,
            end_to_end_seconds: 0.0,
            sst_bytes: 0,
            column_sst_bytes: Default::default(),
            dir_bytes: 0,
            sst_bytes_per_key: 0.0,
            peak_rss_bytes: 0,
            peak_rss_blocks_bytes: 0,
            peak_rss_reset: false,
            phases: None,
        }
    }
}

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
    let base = match &opts.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            tempfile::Builder::new().prefix("arbor-bench-store-").tempdir_in(d)
        }
        None => tempfile::Builder::new().prefix("arbor-bench-store-").tempdir(),
    }
    .context("cannot create a temporary directory")?;
    let (arbor_dir, plain_dir) = (base.path().join("arbor"), base.path().join("plain"));

    let (mut arbor, caches, keys_final, root) =
        run_arbor(opts, config, &workload, &arbor_dir, progress)?;
    let mut plain = run_plain(opts, config, &workload, &plain_dir, progress)?;
    let per_key = |bytes: u64| ratio(bytes as f64, keys_final as f64);
    arbor.sst_bytes_per_key = per_key(arbor.sst_bytes);
    plain.sst_bytes_per_key = per_key(plain.sst_bytes);

    let pb = bar(progress, 2, "checking: verify, cross-check");
    let (root_verified, values_cross_checked) =
        check(opts, config, &workload, &arbor_dir, &plain_dir, &pb)?;
    pb.finish();

    let ratios = ratios(&arbor, &plain);
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
        plain,
        arbor_caches: caches,
        ratios,
    })
}

fn ratios(arbor: &EngineReport, plain: &EngineReport) -> RatioReport {
    let merkle_overhead = ratio(arbor.total_seconds, plain.total_seconds);
    let state = arbor.state_sst_bytes();
    let size = ratio(arbor.sst_bytes as f64, plain.sst_bytes as f64);
    let size_state = ratio(state as f64, plain.sst_bytes as f64);
    RatioReport {
        merkle_overhead,
        merkle_overhead_target: MERKLE_OVERHEAD_TARGET,
        merkle_overhead_met: merkle_overhead <= MERKLE_OVERHEAD_TARGET,
        merkle_overhead_with_compaction: ratio(arbor.end_to_end_seconds, plain.end_to_end_seconds),
        bulk_time: ratio(arbor.bulk_seconds, plain.bulk_seconds),
        size,
        size_state,
        size_target: SIZE_RATIO_TARGET,
        size_met: size <= SIZE_RATIO_TARGET,
        size_state_met: size_state <= SIZE_RATIO_TARGET,
    }
}

/// Arbor: bulk load, blocks, flush, caches, compaction. Returns the engine report, the
/// cache report, the live key count and the head root.
fn run_arbor(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    workload: &Workload,
    dir: &Path,
    progress: bool,
) -> Result<(EngineReport, CacheReport, u64, String)> {
    let peak_rss_reset = reset_peak_rss();
    let mut db = StateDb::open(dir, config.clone()).context("cannot open the Arbor store")?;
    let pb = bar(progress, opts.keys, "arbor: bulk load");
    let start = Instant::now();
    let mut load = db.begin_bulk_load("bench store").context("Arbor bulk load refused")?;
    for (i, (k, v)) in workload.initial_entries().enumerate() {
        tick(&pb, i);
        load.put(&TrieId::Main, &k, &v).context("Arbor bulk load failed")?;
    }
    pb.set_message("arbor: bulk load, node rebuild");
    let bulk_keys = load.finish().context("Arbor bulk load failed")?.entries;
    let bulk_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let rss = RssPhases::start_blocks();

    let mut live = LiveKeys::initial(opts.keys);
    let pb = bar(progress, opts.blocks, "arbor: blocks");
    let mut commit_seconds = Vec::with_capacity(opts.blocks as usize);
    let mut timings = Vec::with_capacity(opts.blocks as usize);
    let (mut writes, mut hashes) = (0, 0);
    for b in 1..=opts.blocks {
        let ops = workload.block_ops(b);
        live.apply(&ops);
        let changes = workload.change_set_of(&ops);
        writes += changes.values().map(|m| m.len() as u64).sum::<u64>();
        let start = Instant::now();
        let info =
            db.commit(&changes).with_context(|| format!("Arbor commit of block {b} failed"))?;
        commit_seconds.push(start.elapsed().as_secs_f64());
        ensure!(info.number == b, "Arbor committed block {} as number {}", b, info.number);
        hashes += info.hashes;
        timings.push(info.timings);
        pb.inc(1);
    }
    let start = Instant::now();
    db.flush().context("Arbor flush failed")?;
    let flush_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let peak_rss_blocks_bytes = rss.blocks_peak();
    let phase = BlockPhase { commit_seconds, writes, hashes, flush_seconds };
    let mut report = phase.engine_report(opts.blocks, bulk_keys, bulk_seconds);
    report.peak_rss_blocks_bytes = peak_rss_blocks_bytes;
    report.phases = Some(PhaseReport::of(&timings));
    let stats = db.stats();
    let root = db.head_root();

    let pb = bar(progress, 1, "arbor: compaction");
    let start = Instant::now();
    db.compact().context("Arbor compaction failed")?;
    report.compact_seconds = start.elapsed().as_secs_f64();
    report.end_to_end_seconds = report.total_seconds + report.compact_seconds;
    report.sst_bytes = db.stats().sst_bytes;
    report.peak_rss_bytes = rss.whole_peak();
    report.peak_rss_reset = peak_rss_reset;
    db.close().context("Arbor close failed")?;
    report.column_sst_bytes = column_sst_bytes(dir)?;
    report.dir_bytes = dir_bytes(dir)?;
    pb.finish();

    let budget_bytes = config.cache_budget_bytes();
    let peak_rss_over_budget = ratio(report.peak_rss_blocks_bytes as f64, budget_bytes as f64);
    let caches = CacheReport {
        node: stats.node_cache,
        node_hit_rate: stats.node_cache.hit_rate(),
        flat: stats.flat_cache,
        flat_hit_rate: stats.flat_cache.hit_rate(),
        resident: stats.resident,
        commit_waits: stats.commit_waits,
        budget_bytes,
        peak_rss_over_budget,
        rss_target_met: peak_rss_over_budget <= RSS_OVER_BUDGET_TARGET,
    };
    Ok((report, caches, live.count(), root.to_string()))
}

/// Plain RocksDB: the same keys, values and blocks, no Merkle work.
fn run_plain(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    workload: &Workload,
    dir: &Path,
    progress: bool,
) -> Result<EngineReport> {
    let peak_rss_reset = reset_peak_rss();
    let db = PlainDb::open(dir, config)?;
    let pb = bar(progress, opts.keys, "plain: bulk load");
    let start = Instant::now();
    let entries = workload.initial_entries().enumerate().map(|(i, kv)| {
        tick(&pb, i);
        kv
    });
    let bulk_keys = db.bulk_load(entries).context("plain bulk load failed")?;
    let bulk_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let rss = RssPhases::start_blocks();

    let pb = bar(progress, opts.blocks, "plain: blocks");
    let mut commit_seconds = Vec::with_capacity(opts.blocks as usize);
    let mut writes = 0;
    for b in 1..=opts.blocks {
        let changes = workload.block_changes(b);
        writes += changes.len() as u64;
        let start = Instant::now();
        db.write_block(&changes).with_context(|| format!("plain write of block {b} failed"))?;
        commit_seconds.push(start.elapsed().as_secs_f64());
        pb.inc(1);
    }
    let start = Instant::now();
    db.flush().context("plain flush failed")?;
    let flush_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let peak_rss_blocks_bytes = rss.blocks_peak();
    let phase = BlockPhase { commit_seconds, writes, hashes: 0, flush_seconds };
    let mut report = phase.engine_report(opts.blocks, bulk_keys, bulk_seconds);
    report.peak_rss_blocks_bytes = peak_rss_blocks_bytes;

    let pb = bar(progress, 1, "plain: compaction");
    let start = Instant::now();
    db.compact().context("plain compaction failed")?;
    report.compact_seconds = start.elapsed().as_secs_f64();
    report.end_to_end_seconds = report.total_seconds + report.compact_seconds;
    report.sst_bytes = db.sst_bytes()?;
    report.peak_rss_bytes = rss.whole_peak();
    report.peak_rss_reset = peak_rss_reset;
    drop(db);
    report.column_sst_bytes = column_sst_bytes(dir)?;
    report.dir_bytes = dir_bytes(dir)?;
    pb.finish();
    Ok(report)
}

/// Peak RSS of an engine's phase, split at the start of its blocks: the peak so far is
/// kept, then reset so that the block run's own peak can be read.
struct RssPhases {
    bulk_peak: u64,
    reset: bool,
}

impl RssPhases {
    fn start_blocks() -> RssPhases {
        let bulk_peak = peak_rss_bytes().unwrap_or(0);
        RssPhases { bulk_peak, reset: reset_peak_rss() }
    }

    /// The block run's peak (0 when the peak could not be reset).
    fn blocks_peak(&self) -> u64 {
        if self.reset {
            peak_rss_bytes().unwrap_or(0)
        } else {
            0
        }
    }

    /// The whole phase's peak.
    fn whole_peak(&self) -> u64 {
        self.bulk_peak.max(peak_rss_bytes().unwrap_or(0))
    }
}

/// Verify Arbor's root from flat state, then compare sampled keys (live or not) between
/// the two databases. Returns (verified, keys compared).
fn check(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    workload: &Workload,
    arbor_dir: &Path,
    plain_dir: &Path,
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
    let plain = PlainDb::open(plain_dir, config)?;
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let range = workload.index_range(opts.blocks).max(1);
    let samples = CROSS_CHECK_KEYS.min(range);
    for _ in 0..samples {
        let key = workload.key(rng.gen_range(0..range));
        let a = db.get(&TrieId::Main, &key)?;
        let p = plain.get(&key)?;
        ensure!(
            a == p,
            "key 0x{} differs: Arbor {:?}, plain {:?}",
            hex(&key),
            a.map(|v| hex(&v)),
            p.map(|v| hex(&v))
        );
    }
    pb.inc(1);
    Ok((true, samples))
}

fn hex(bytes: &[u8]) -> String {
    crate::input::hex(bytes)
}

/// Advance a bulk-load bar every 65,536 entries (cheap enough to call per entry).
fn tick(pb: &ProgressBar, i: usize) {
    if i.is_multiple_of(65_536) {
        pb.set_position(i as u64);
    }
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
        };
        let report = store_bench(&opts, &StoreConfig::default(), false).unwrap();
        assert!(report.root_verified);
        assert_eq!(report.values_cross_checked, 1_000);
        assert_eq!(report.arbor.bulk_keys, 3_000);
        assert_eq!(report.plain.bulk_keys, 3_000);
        assert_eq!(report.arbor.writes, report.plain.writes);
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
        assert!(text.contains("Merkle overhead"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["options"]["keys"], 3_000);
        assert!(json["ratios"]["size"].as_f64().unwrap() > 0.0);
        // The temporary databases are gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
