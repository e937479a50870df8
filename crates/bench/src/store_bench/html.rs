//! The HTML page of `arbor bench store` (`--html FILE`): commit latency over the blocks,
//! p50 and p99, sustained blocks/s and Arbor's ratios against their targets.

use crate::common::html::{bar, bars, figure_page, machine_line, verdict, Figure, LineChart};
use crate::store_bench::report::StoreBenchReport;

impl StoreBenchReport {
    /// Commit latency over the blocks per engine, sustained blocks/s, and Arbor's ratios
    /// against their targets.
    pub fn html(&self) -> String {
        let engines = self.columns();
        let latency = Figure::Lines(LineChart {
            title: format!(
                "Commit latency over {} blocks of {} operations (target: Arbor p50 <= {} ms)",
                self.options.blocks,
                self.options.updates_per_block,
                self.ratios.commit_p50_target_ms
            ),
            x_label: "block".into(),
            unit: "ms".into(),
            series: engines
                .iter()
                .map(|(n, e)| (n.to_string(), e.commit_ms_series.clone()))
                .collect(),
            target: Some(self.ratios.commit_p50_target_ms),
        });
        let p50 = bars(
            "Commit p50 and p99".into(),
            "ms",
            engines
                .iter()
                .flat_map(|(n, e)| {
                    [
                        bar(format!("{n} p50"), e.commit_ms_p50),
                        bar(format!("{n} p99"), e.commit_ms_p99),
                    ]
                })
                .collect(),
            None,
        );
        let sustained = bars(
            "Sustained blocks/s (blocks + final flush)".into(),
            "blocks/s",
            engines.iter().map(|(n, e)| bar(*n, e.blocks_per_second)).collect(),
            None,
        );
        let r = &self.ratios;
        let overhead = bars(
            format!(
                "Arbor / blind RocksDB: {:.2}x, target <= {}x ({})",
                r.merkle_overhead,
                r.merkle_overhead_target,
                verdict(r.merkle_overhead_met)
            ),
            "x",
            vec![bar("blocks + flush", r.merkle_overhead)],
            Some(r.merkle_overhead_target),
        );
        let undo = bars(
            format!(
                "Arbor / plain+undo: {:.2}x, target <= {}x ({})",
                r.over_undo,
                r.over_undo_target,
                verdict(r.over_undo_met)
            ),
            "x",
            vec![bar("blocks + flush", r.over_undo)],
            Some(r.over_undo_target),
        );
        let notes = vec![format!(
            "{} initial keys, {} blocks of {} operations, seed {}; final root {} ({})",
            self.options.keys,
            self.options.blocks,
            self.options.updates_per_block,
            self.options.seed,
            self.root,
            if self.root_verified { "verified from flat state" } else { "VERIFY FAILED" }
        )];
        figure_page(
            "arbor bench store",
            &machine_line(&self.machine),
            &notes,
            &[latency, p50, sustained, overhead, undo],
        )
    }
}
