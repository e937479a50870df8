//! The `store_bench` driver: the Arbor store and its baselines receive the same workload
//! ([`crate::common::workload`]), each in its own worker process ([`crate::store_bench::worker`]) and its
//! own fresh directory under one temporary directory. The engines:
//! - **arbor**: `StateDb::commit` per block (roots, reverse diffs, background writer);
//! - **plain+undo**: plain RocksDB that reads each block's old values (batched MultiGets on
//!   every thread) and writes the new values with a history record of the old ones — what
//!   any store that can undo a block must do;
//! - **blind**: plain RocksDB writing the new values only (the physical floor);
//! - **nomt**: NOMT 1.0 on the same keys and blocks (`crate::store_bench::nomt`): another
//!   authenticated store, committing to a binary BLAKE3 trie, durable on every commit.
//!
//! plain+undo and blind write with RocksDB's WAL (its default); Arbor writes its block
//! groups without it and makes them durable by flushing memtables (`docs/design.md`,
//! "Durability"). Every engine's blocks are durable when its timed final flush returns.
//!
//! Each engine: bulk-load the initial keys (timed, one engine after the other), write the
//! blocks (each commit timed alone; generating a block is not timed), flush (timed, part
//! of the total: sustained blocks/s counts every block until it is durable), then compact
//! and measure the files. The blocks come in interleaved rounds (a twentieth of them per
//! round, engine after engine, the order reversed every other round), and an engine runs
//! only during its own rounds: its worker is stopped otherwise, background threads
//! included, so no engine's compactions or writer run during another's timed blocks, and
//! the ratios compare engines that met the same drifts of the machine. Each engine's peak
//! RSS and disk writes are its own process's. At the end Arbor's root is verified from flat
//! state and sampled keys are compared between the databases.

pub(crate) mod catch_up;
pub(crate) mod engines;
pub(crate) mod html;
pub(crate) mod nomt;
pub(crate) mod opts;
pub(crate) mod report;
pub(crate) mod worker;

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use indicatif::ProgressBar;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::TrieId;
use store::{StateDb, StoreConfig};

use crate::common::machine::MachineInfo;
use crate::common::plain_db::PlainDb;
use crate::common::progress::bar;
use crate::common::rss::load_average;
use crate::common::timing::ratio;
use crate::common::worker::{run_rounds, Launch, Worker};
use crate::common::workload::Workload;
use crate::store_bench::catch_up::measure_catch_up;
use crate::store_bench::engines::{ArborExtras, EngineOutcome};
use crate::store_bench::opts::StoreBenchOpts;
use crate::store_bench::report::{
    EngineReport, RatioReport, StoreBenchReport, COMMIT_P50_TARGET_MS, MERKLE_OVERHEAD_TARGET,
    MERKLE_OVERHEAD_TARGET_10M, OVER_UNDO_TARGET, SIZE_RATIO_TARGET,
};
use crate::store_bench::worker::{EngineKind, WorkerSpec};

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
    let workers = start_workers(opts, config, base.path(), progress)?;
    let Runs { mut arbor, arbor_extras, mut arbor_reading, mut plain_undo, mut plain, nomt } =
        finish_workers(workers, opts.blocks, base.path(), progress)?;
    let ArborExtras { caches, keys_final, root } = arbor_extras;
    let engines =
        [Some(&mut arbor), arbor_reading.as_mut(), Some(&mut plain_undo), Some(&mut plain)];
    for e in engines.into_iter().flatten() {
        e.sst_bytes_per_key = ratio(e.sst_bytes as f64, keys_final as f64);
    }

    let (arbor_dir, undo_dir, plain_dir) =
        (base.path().join("arbor"), base.path().join("undo"), base.path().join("plain"));
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

/// Start a worker per engine (each bulk-loads, one after the other, then waits).
fn start_workers(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    base: &Path,
    progress: bool,
) -> Result<Vec<Worker<EngineKind>>> {
    let exe = match &opts.worker {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().context("cannot find this executable for the workers")?,
    };
    let mut workers = Vec::new();
    for kind in engines(opts) {
        let spec = WorkerSpec {
            engine: kind,
            dir: base.join(dir_name(kind)),
            keys: opts.keys,
            blocks: opts.blocks,
            updates_per_block: opts.updates_per_block,
            seed: opts.seed,
            config: config.clone(),
        };
        let pb = bar(progress, opts.keys, format!("{}: bulk load", kind.label()));
        let spec_path = base.join(format!("{}.json", dir_name(kind)));
        let launch = Launch { exe: &exe, command: "store-worker", spec_path: &spec_path };
        workers.push(Worker::start(&launch, kind, kind.label(), &spec, &pb)?);
        pb.finish();
    }
    Ok(workers)
}

/// Every engine's report (and Arbor's extras).
struct Runs {
    arbor: EngineReport,
    arbor_extras: ArborExtras,
    arbor_reading: Option<EngineReport>,
    plain_undo: EngineReport,
    plain: EngineReport,
    nomt: Option<EngineReport>,
}

/// Interleave the workers' blocks, then finish each one (flush, compaction, report); the
/// databases no later step reads are removed.
fn finish_workers(
    mut workers: Vec<Worker<EngineKind>>,
    blocks: u64,
    base: &Path,
    progress: bool,
) -> Result<Runs> {
    let pb = bar(progress, blocks * workers.len() as u64, "blocks, engines interleaved");
    run_rounds(&mut workers, 1..=blocks, ROUNDS, &pb, "blocks, engines interleaved")?;
    pb.finish();
    let mut outcomes = Outcomes::default();
    for worker in workers {
        let kind = worker.kind;
        let pb = bar(progress, 1, format!("{}: flush, compaction", kind.label()));
        outcomes.put(kind, worker.finish::<EngineOutcome>()?);
        pb.finish();
        if matches!(kind, EngineKind::ArborReading | EngineKind::Nomt) {
            std::fs::remove_dir_all(base.join(dir_name(kind))).ok();
        }
    }
    let (arbor, arbor_extras) = outcomes.arbor()?;
    let arbor_reading = match outcomes.take(EngineKind::ArborReading) {
        Ok(run) => {
            let root = run.arbor.map(|a| a.root).unwrap_or_default();
            ensure!(
                root == arbor_extras.root,
                "Arbor reading old values reached root {root}, not {}",
                arbor_extras.root
            );
            Some(run.report)
        }
        Err(_) => None,
    };
    Ok(Runs {
        arbor,
        arbor_extras,
        arbor_reading,
        plain_undo: outcomes.take(EngineKind::PlainUndo)?.report,
        plain: outcomes.take(EngineKind::Blind)?.report,
        nomt: outcomes.take(EngineKind::Nomt).ok().map(|o| o.report),
    })
}

/// The engines of a run, in the order of the first round.
fn engines(opts: &StoreBenchOpts) -> Vec<EngineKind> {
    let mut kinds = vec![EngineKind::Arbor];
    if opts.arbor_reading {
        kinds.push(EngineKind::ArborReading);
    }
    kinds.extend([EngineKind::PlainUndo, EngineKind::Blind]);
    if opts.nomt {
        kinds.push(EngineKind::Nomt);
    }
    kinds
}

/// An engine's database directory under the run's directory.
fn dir_name(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::Arbor => "arbor",
        EngineKind::ArborReading => "arbor-reading",
        EngineKind::PlainUndo => "undo",
        EngineKind::Blind => "plain",
        EngineKind::Nomt => "nomt",
    }
}

/// Rounds per run: every engine's blocks come in this many rounds (fewer when there are
/// fewer blocks), engine after engine, the order reversed every other round.
const ROUNDS: u64 = 20;

/// The finished engines' outcomes.
#[derive(Default)]
struct Outcomes(Vec<(EngineKind, EngineOutcome)>);

impl Outcomes {
    fn put(&mut self, kind: EngineKind, outcome: EngineOutcome) {
        self.0.push((kind, outcome));
    }

    fn take(&mut self, kind: EngineKind) -> Result<EngineOutcome> {
        let at = self.0.iter().position(|(k, _)| *k == kind);
        let at = at.with_context(|| format!("no {} run", kind.label()))?;
        Ok(self.0.swap_remove(at).1)
    }

    fn arbor(&mut self) -> Result<(EngineReport, ArborExtras)> {
        let run = self.take(EngineKind::Arbor)?;
        let extras = run.arbor.context("the Arbor worker sent no caches")?;
        Ok((run.report, extras))
    }
}

/// The run's temporary directory (under `--dir` when given).
fn bench_dir(opts: &StoreBenchOpts) -> Result<tempfile::TempDir> {
    crate::common::temp::temp_dir("arbor-bench-store-", opts.dir.as_deref())
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
    crate::common::text::hex(bytes)
}
