//! The report of `arbor bench blockstm`: per workload and worker count the median block
//! time, the speed-up over the sequential executor, allocations, re-executions and how the
//! adaptive executor ran the blocks; serialisable to JSON, rendered as a table.

use exec::{Mode, Reason, Run, SwitchReason};
use serde::Serialize;

use crate::common::machine::MachineInfo;

/// One workload at one worker count.
#[derive(Debug, Clone, Serialize)]
pub struct BlockStmRow {
    /// Workload.
    pub workload: &'static str,
    /// Workers (0: the sequential executor).
    pub workers: usize,
    /// Block-STM ran even with one worker (where the executor would fall back to
    /// sequential execution): the engine's own overhead.
    pub forced_engine: bool,
    /// The partitioned executor ran every block (more than one worker): its own speed,
    /// whatever the adaptive executor picks.
    pub forced_partitioned: bool,
    /// Median block time, ms.
    pub median_ms: f64,
    /// Transactions per second at the median.
    pub tps: f64,
    /// Speed-up over the sequential executor: the median of the per-round ratios.
    pub speedup: f64,
    /// (this median - sequential median) / transactions, in µs: with `forced_engine`, the
    /// engine's own cost per transaction.
    pub over_sequential_us_per_tx: f64,
    /// Allocations per block (median run).
    pub allocations: u64,
    /// Bytes allocated per block (median run).
    pub bytes: u64,
    /// Re-executions per transaction.
    pub reexecutions_per_tx: f64,
    /// Validations per transaction.
    pub validations_per_tx: f64,
    /// How the timed blocks ran: per executor, reason and switch, how many blocks.
    pub modes: Vec<ModeCount>,
    /// Where the timed blocks that switched to sequential execution did (the first
    /// transaction the sequential executor ran).
    pub switch_points: Vec<usize>,
    /// The adaptive executor's cost model after the last block (none for the sequential
    /// executor and forced Block-STM).
    pub estimates: Option<Estimate>,
}

/// Blocks that ran one way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModeCount {
    /// `seq`, `par` (Block-STM) or `part` (partitioned), why, and for a switched block
    /// `→seq` and why.
    pub mode: String,
    /// How many timed blocks.
    pub blocks: usize,
}

/// The cost model's estimates, ns per transaction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The sequential executor's.
    pub sequential_ns_per_tx: Option<f64>,
    /// Block-STM's.
    pub parallel_ns_per_tx: Option<f64>,
    /// The partitioned executor's.
    pub partitioned_ns_per_tx: Option<f64>,
}

/// Untimed blocks each adaptive executor runs before the timed ones: the model's first
/// measurements (the sequential executor once, Block-STM twice, the partitioned executor
/// twice, and up to three blocks more while the partitioned executor's waves grow).
pub(crate) const WARMUP_BLOCKS: usize = 8;

/// A short name of how a block ran, e.g. `par (probe) →seq (slower)`.
pub(crate) fn mode_label(run: &Run) -> String {
    let mode = |m: Mode| match m {
        Mode::Sequential => "seq",
        Mode::Partitioned => "part",
        _ => "par",
    };
    let reason = match run.reason {
        Reason::Requested => "requested",
        Reason::OneWorker => "one worker",
        Reason::SmallBlock => "small block",
        Reason::NoModel => "no model",
        Reason::Unmeasured => "unmeasured",
        Reason::Faster => "faster",
        Reason::Probe => "probe",
        _ => "other",
    };
    let label = match run.mode {
        Mode::Partitioned if run.waves > 1 => format!("part×{} ({reason})", run.waves),
        m => format!("{} ({reason})", mode(m)),
    };
    match run.switch.map(|s| s.reason) {
        None => label,
        Some(SwitchReason::Reexecutions) => format!("{label} →seq (re-executions)"),
        Some(SwitchReason::Slower) => format!("{label} →seq (slower)"),
        Some(SwitchReason::Conflict) => format!("{label} →seq (conflict)"),
        Some(_) => format!("{label} →seq (requested)"),
    }
}

/// Blocks per label, in order of first appearance.
pub(crate) fn mode_counts(runs: &[Run]) -> Vec<ModeCount> {
    let mut counts: Vec<ModeCount> = Vec::new();
    for run in runs {
        let mode = mode_label(run);
        match counts.iter_mut().find(|c| c.mode == mode) {
            Some(c) => c.blocks += 1,
            None => counts.push(ModeCount { mode, blocks: 1 }),
        }
    }
    counts
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct BlockStmReport {
    /// The machine.
    pub machine: MachineInfo,
    /// Signatures verified.
    pub signatures: bool,
    /// Transactions per block.
    pub txs: usize,
    /// Timed runs per row.
    pub runs: usize,
    /// Rows: per workload the sequential executor (`workers` 0) then each variant.
    pub rows: Vec<BlockStmRow>,
    /// Per workload, the throughput of two sequential blocks run at once on two threads
    /// over one (median of the rounds): what this machine gives two independent threads
    /// on that workload, the ceiling for a 2-worker speed-up.
    pub ceilings: Vec<(&'static str, f64)>,
}

impl BlockStmReport {
    /// The human-readable table.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "arbor bench blockstm: {} transactions per block, signatures {}, median of {} runs ({} cores)",
            self.txs,
            if self.signatures { "verified" } else { "off (--no-sig)" },
            self.runs,
            self.machine.logical_cores
        );
        let mut t = crate::common::table::table(&[
            "workload",
            "workers",
            "ms/block",
            "tx/s",
            "speedup",
            "+µs/tx",
            "allocs",
            "bytes",
            "reexec",
            "valid",
            "blocks ran as",
        ]);
        for (name, ceiling) in &self.ceilings {
            for r in self.rows.iter().filter(|r| r.workload == *name) {
                let workers = match (r.workers, r.forced_engine, r.forced_partitioned) {
                    (0, ..) => "seq".to_string(),
                    (_, true, _) => "1 (stm)".to_string(),
                    (w, _, true) => format!("{w} (part)"),
                    (w, ..) => w.to_string(),
                };
                t.add_row(vec![
                    if r.workers == 0 { name.to_string() } else { String::new() },
                    workers,
                    format!("{:.1}", r.median_ms),
                    format!("{:.0}", r.tps),
                    format!("{:.2}", r.speedup),
                    format!("{:.2}", r.over_sequential_us_per_tx),
                    r.allocations.to_string(),
                    r.bytes.to_string(),
                    format!("{:.3}", r.reexecutions_per_tx),
                    format!("{:.3}", r.validations_per_tx),
                    r.modes
                        .iter()
                        .map(|m| format!("{}× {}", m.blocks, m.mode))
                        .collect::<Vec<_>>()
                        .join(", "),
                ]);
            }
            // The ceiling: two sequential blocks at once on two threads.
            t.add_row(vec![
                String::new(),
                "ceiling".to_string(),
                String::new(),
                String::new(),
                format!("{ceiling:.2}"),
            ]);
        }
        out.push_str(&crate::common::table::text(&t));
        let _ = writeln!(
            out,
            "(1 worker runs the sequential fallback; \"1 (stm)\" forces Block-STM on one worker: \
             its time over the sequential executor's is the engine's own overhead; \"N (part)\" \
             forces the partitioned executor; \"ceiling\": two sequential blocks at once on two \
             threads over one block's throughput; \"blocks ran as\": the executor the adaptive \
             executor picked per timed block (seq, par = Block-STM, part = partitioned) and why, \
             \"→seq\" a switch to sequential execution midway, after {WARMUP_BLOCKS} untimed \
             blocks per worker count above 1)"
        );
        self.render_iterate_allocations(&mut out);
        out
    }

    /// The allocations per block of the `iterate` workload, per row, in millions.
    fn render_iterate_allocations(&self, out: &mut String) {
        use std::fmt::Write;
        let rows: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.workload.starts_with("iterate"))
            .map(|r| {
                let who = match (r.workers, r.forced_engine, r.forced_partitioned) {
                    (0, ..) => "seq".to_string(),
                    (_, true, _) => "1 (stm)".to_string(),
                    (w, _, true) => format!("{w} (part)"),
                    (1, ..) => "1 worker".to_string(),
                    (w, ..) => format!("{w} workers"),
                };
                let per_10k = r.allocations as f64 * 10_000.0 / self.txs as f64 / 1e6;
                format!("{who} {per_10k:.2}M")
            })
            .collect();
        if !rows.is_empty() {
            let _ = writeln!(
                out,
                "iterate allocations per 10,000 transactions (median run): {}",
                rows.join(", ")
            );
        }
    }
}
