//! The report of [`crate::evm_bench`]: per workload, each engine's figures (sustained
//! Mgas/s and transactions/s, where the block time went, commit latency, peak RSS) and
//! Arbor's ratios against the plain and in-memory runs; the roots every engine reached.
//! Plain data, serialisable to JSON, rendered for people here and as HTML in `html`.
//!
//! Sustained figures count every block until it is durable: a workload's time is the sum
//! of its blocks' times (recover + execute + commit) and the flush after its last block.
//! The commit share is the commit's part of the blocks' time (the flush apart).

use std::fmt::Write;

use serde::Serialize;

use crate::common::html::downsample;
use crate::common::machine::MachineInfo;
use crate::common::table::{table, text};
use crate::common::text::thousands;
use crate::common::timing::{percentile_sorted, ratio, sorted};
use crate::evm_bench::engines::BlockRecord;
use crate::evm_bench::opts::EvmBenchOpts;
use crate::evm_bench::worker::WorkloadRun;

/// ERC-20 blocks must reach this many Mgas/s (execute + commit, RocksDB, senders
/// recovered inside the measured time): issue 59.
pub(crate) const ERC20_MGAS_PER_S_TARGET: f64 = 500.0;
/// Arbor's time over the plain run's must stay at most this: issue 59.
pub(crate) const OVER_PLAIN_UNDO_TARGET: f64 = 1.5;
/// Points of a latency series at most.
const SERIES_POINTS: usize = 1000;

/// One engine's figures on one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvmEngineReport {
    /// The blocks' time plus the final flush, seconds.
    pub total_s: f64,
    /// Million gas per second, sustained.
    pub mgas_per_s: f64,
    /// Transactions per second, sustained.
    pub tx_per_s: f64,
    /// Decoding and recovering senders, seconds (all blocks).
    pub recover_s: f64,
    /// Executing (and collecting changes), seconds.
    pub execute_s: f64,
    /// Committing, seconds.
    pub commit_s: f64,
    /// The flush after the last block, seconds.
    pub flush_s: f64,
    /// Commit time over the blocks' time.
    pub commit_share: f64,
    /// Block time, median and 99th percentile, ms.
    pub block_ms_p50: f64,
    /// See `block_ms_p50`.
    pub block_ms_p99: f64,
    /// Commit time, median and 99th percentile, ms.
    pub commit_ms_p50: f64,
    /// See `commit_ms_p50`.
    pub commit_ms_p99: f64,
    /// Peak RSS of the engine's process during the workload, bytes (0: unknown).
    pub peak_rss_bytes: u64,
    /// Block time over the blocks, `(block, ms)` (averaged in buckets past 1,000 points).
    pub block_ms_series: Vec<(f64, f64)>,
}

impl EvmEngineReport {
    /// The figures of one engine's run.
    pub(crate) fn of(run: &WorkloadRun) -> EvmEngineReport {
        let b = &run.blocks;
        let block_s: Vec<f64> = b.iter().map(|r| r.recover_s + r.execute_s + r.commit_s).collect();
        let sum = |f: fn(&BlockRecord) -> f64| b.iter().map(f).sum::<f64>();
        let (recover_s, execute_s, commit_s) =
            (sum(|r| r.recover_s), sum(|r| r.execute_s), sum(|r| r.commit_s));
        let blocks_s: f64 = block_s.iter().sum();
        let seconds = blocks_s + run.flush_s;
        let gas = b.iter().map(|r| r.gas).sum::<u64>() as f64;
        let txs = b.iter().map(|r| r.txs).sum::<u64>() as f64;
        let block_ms = sorted(&block_s.iter().map(|s| s * 1e3).collect::<Vec<_>>());
        let commit_ms = sorted(&b.iter().map(|r| r.commit_s * 1e3).collect::<Vec<_>>());
        let series: Vec<f64> = block_s.iter().map(|s| s * 1e3).collect();
        EvmEngineReport {
            total_s: seconds,
            mgas_per_s: ratio(gas / 1e6, seconds),
            tx_per_s: ratio(txs, seconds),
            recover_s,
            execute_s,
            commit_s,
            flush_s: run.flush_s,
            commit_share: ratio(commit_s, blocks_s),
            block_ms_p50: percentile_sorted(&block_ms, 50.0),
            block_ms_p99: percentile_sorted(&block_ms, 99.0),
            commit_ms_p50: percentile_sorted(&commit_ms, 50.0),
            commit_ms_p99: percentile_sorted(&commit_ms, 99.0),
            peak_rss_bytes: run.peak_rss_bytes,
            block_ms_series: downsample(&series, SERIES_POINTS),
        }
    }
}

/// One workload: Arbor's headline figures, its ratios, and every engine's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvmWorkloadReport {
    /// `eth-transfer`, `erc20-transfer` or `storage-heavy`.
    pub name: &'static str,
    /// Blocks.
    pub blocks: u64,
    /// Transactions in all blocks.
    pub transactions: u64,
    /// Gas used by all blocks.
    pub gas: u64,
    /// Gas used per block, mean.
    pub gas_per_block: f64,
    /// Arbor's sustained Mgas/s (execute + commit, senders recovered, until durable).
    pub mgas_per_s: f64,
    /// Arbor's sustained transactions per second.
    pub tx_per_s: f64,
    /// Arbor's commit share of its block time.
    pub commit_share: f64,
    /// Arbor's time over the plain+undo run's.
    pub arbor_over_plain_undo: f64,
    /// The bound of `arbor_over_plain_undo`.
    pub over_plain_undo_target: f64,
    /// `arbor_over_plain_undo <= over_plain_undo_target`.
    pub over_plain_undo_met: bool,
    /// Arbor's time over the in-memory run's (what authentication and disk cost).
    pub arbor_over_memory: f64,
    /// The Mgas/s Arbor must reach on this workload, if the issue sets one.
    pub mgas_per_s_target: Option<f64>,
    /// Whether it did.
    pub mgas_per_s_met: Option<bool>,
    /// Arbor.
    pub arbor: EvmEngineReport,
    /// revm's in-memory database.
    pub memory: EvmEngineReport,
    /// Plain RocksDB with undo records.
    pub plain_undo: EvmEngineReport,
}

impl EvmWorkloadReport {
    /// The workload's report from the three engines' runs of it (the same blocks: the
    /// caller checked that they used the same gas).
    pub(crate) fn of(
        name: &'static str,
        arbor: &WorkloadRun,
        memory: &WorkloadRun,
        plain: &WorkloadRun,
    ) -> EvmWorkloadReport {
        let gas = arbor.blocks.iter().map(|r| r.gas).sum::<u64>();
        let blocks = arbor.blocks.len() as u64;
        let (a, m, p) =
            (EvmEngineReport::of(arbor), EvmEngineReport::of(memory), EvmEngineReport::of(plain));
        let over_plain = ratio(a.total_s, p.total_s);
        let target = (name == "erc20-transfer").then_some(ERC20_MGAS_PER_S_TARGET);
        EvmWorkloadReport {
            name,
            blocks,
            transactions: arbor.blocks.iter().map(|r| r.txs).sum(),
            gas,
            gas_per_block: ratio(gas as f64, blocks as f64),
            mgas_per_s: a.mgas_per_s,
            tx_per_s: a.tx_per_s,
            commit_share: a.commit_share,
            arbor_over_plain_undo: over_plain,
            over_plain_undo_target: OVER_PLAIN_UNDO_TARGET,
            over_plain_undo_met: over_plain <= OVER_PLAIN_UNDO_TARGET,
            arbor_over_memory: ratio(a.total_s, m.total_s),
            mgas_per_s_target: target,
            mgas_per_s_met: target.map(|t| a.mgas_per_s >= t),
            arbor: a,
            memory: m,
            plain_undo: p,
        }
    }
}

/// The roots the engines ended at, each computed its own way (see the engines' docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvmRoots {
    /// Arbor's head root, from its commits.
    pub arbor_head: String,
    /// Arbor's roots rebuilt from `flat` by `verify` agree with its stored ones.
    pub arbor_verified: bool,
    /// The root of revm's in-memory state, built from scratch.
    pub memory: String,
    /// The root of the plain state, built from scratch.
    pub plain_undo: String,
    /// All of them are the same root (the run fails otherwise).
    pub agree: bool,
}

/// Loading the genesis, per engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvmLoadReport {
    /// Seconds (building the allocation included), per engine in the order arbor, memory,
    /// plain+undo.
    pub load_s: [f64; 3],
    /// Peak RSS while loading, bytes, in the same order.
    pub peak_rss_bytes: [u64; 3],
}

/// The whole report of `arbor bench evm`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvmBenchReport {
    /// The machine.
    pub machine: MachineInfo,
    /// The 1-minute load average when the run started and ended.
    pub load_average_start: f64,
    /// See `load_average_start`.
    pub load_average_end: f64,
    /// The options.
    pub options: EvmBenchOpts,
    /// Keyed accounts that send the transactions.
    pub senders: u64,
    /// The compiler of the contracts (solcjs version).
    pub compiler: String,
    /// Per workload, in the order run.
    pub workloads: Vec<EvmWorkloadReport>,
    /// The final roots.
    pub roots: EvmRoots,
    /// Loading the genesis.
    pub load: EvmLoadReport,
}

fn mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / f64::from(1u32 << 20))
}

impl EvmBenchReport {
    /// A few lines and a table for people; the JSON form carries every field.
    pub fn render(&self) -> String {
        let o = &self.options;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "arbor bench evm: {} accounts ({} senders), {} blocks per workload of gas limit {}, seed {}",
            thousands(o.accounts),
            thousands(self.senders),
            o.blocks,
            thousands(o.gas_limit),
            o.seed
        );
        let m = &self.machine;
        let _ = writeln!(
            out,
            "machine: {} ({} cores), {}, opt-level {}; load average {:.2} → {:.2}; contracts: solc {}",
            m.cpu_model, m.logical_cores, m.rustc, m.opt_level, self.load_average_start,
            self.load_average_end, self.compiler
        );
        out.push_str(&text(&self.engines_table()));
        for w in &self.workloads {
            out.push_str(&w.summary_line());
        }
        let r = &self.roots;
        let _ = writeln!(
            out,
            "final root {} (Arbor's head; verify {}; in-memory and plain states rebuilt from scratch: {})",
            r.arbor_head,
            if r.arbor_verified { "ok" } else { "FAILED" },
            if r.agree { "same root" } else { "DIFFERENT" }
        );
        out
    }

    /// One row per workload and engine.
    fn engines_table(&self) -> comfy_table::Table {
        let mut t = table(&[
            "workload",
            "engine",
            "Mgas/s",
            "tx/s",
            "block ms p50/p99",
            "commit ms p50/p99",
            "commit share",
            "recover/exec/commit/flush s",
            "peak RSS MiB",
        ]);
        for w in &self.workloads {
            for (label, e) in
                [("arbor", &w.arbor), ("plain+undo", &w.plain_undo), ("memory", &w.memory)]
            {
                t.add_row(vec![
                    if label == "arbor" { w.name.to_string() } else { String::new() },
                    label.to_string(),
                    format!("{:.1}", e.mgas_per_s),
                    format!("{:.0}", e.tx_per_s),
                    format!("{:.1} / {:.1}", e.block_ms_p50, e.block_ms_p99),
                    format!("{:.1} / {:.1}", e.commit_ms_p50, e.commit_ms_p99),
                    format!("{:.2}", e.commit_share),
                    format!(
                        "{:.2}/{:.2}/{:.2}/{:.2}",
                        e.recover_s, e.execute_s, e.commit_s, e.flush_s
                    ),
                    mib(e.peak_rss_bytes),
                ]);
            }
        }
        t
    }
}

impl EvmWorkloadReport {
    /// The workload's ratios and targets, one line.
    fn summary_line(&self) -> String {
        let mut out = format!(
            "{}: {} tx, {:.1} Mgas per block; Arbor/plain+undo {:.2}x (target <= {}: {}), Arbor/memory {:.2}x",
            self.name,
            thousands(self.transactions),
            self.gas_per_block / 1e6,
            self.arbor_over_plain_undo,
            self.over_plain_undo_target,
            if self.over_plain_undo_met { "met" } else { "not met" },
            self.arbor_over_memory
        );
        if let (Some(t), Some(met)) = (self.mgas_per_s_target, self.mgas_per_s_met) {
            let _ = write!(
                out,
                "; Arbor {:.0} Mgas/s (target >= {t}: {})",
                self.mgas_per_s,
                if met { "met" } else { "not met" }
            );
        }
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evm_bench::blocks::Workload;

    fn run(ms: &[f64], commit: f64, flush: f64) -> WorkloadRun {
        let blocks = ms
            .iter()
            .map(|m| BlockRecord {
                gas: 1_000_000,
                txs: 10,
                recover_s: 0.0,
                execute_s: m / 1e3 - commit,
                commit_s: commit,
            })
            .collect();
        WorkloadRun { workload: Workload::Erc20Transfer, blocks, flush_s: flush, peak_rss_bytes: 5 }
    }

    #[test]
    fn figures_and_ratios() {
        let arbor = run(&[10.0, 10.0, 30.0, 10.0], 0.005, 0.06);
        let plain = run(&[5.0; 4], 0.002, 0.0);
        let memory = run(&[2.0; 4], 0.0, 0.0);
        let w = EvmWorkloadReport::of("erc20-transfer", &arbor, &memory, &plain);
        assert_eq!((w.blocks, w.transactions, w.gas), (4, 40, 4_000_000));
        assert!((w.arbor.total_s - 0.12).abs() < 1e-9, "{}", w.arbor.total_s);
        assert!((w.mgas_per_s - 4.0 / 0.12).abs() < 1e-6);
        assert!((w.commit_share - 0.02 / 0.06).abs() < 1e-9);
        assert!((w.arbor_over_plain_undo - 6.0).abs() < 1e-9);
        assert!(!w.over_plain_undo_met);
        assert_eq!(w.mgas_per_s_target, Some(ERC20_MGAS_PER_S_TARGET));
        assert_eq!(w.mgas_per_s_met, Some(false));
        assert!(
            (w.arbor.block_ms_p99 - 30.0).abs() < 1e-9
                && (w.arbor.block_ms_p50 - 10.0).abs() < 1e-9
        );
        assert_eq!(w.arbor.block_ms_series.len(), 4);
        let none = EvmWorkloadReport::of("eth-transfer", &arbor, &memory, &plain);
        assert_eq!(none.mgas_per_s_target, None);
    }
}
