//! The HTML page of `arbor bench pov` (`--html FILE`): per workload, the exact proof size
//! and exact root ratios against their targets and the time of each mode.

use crate::common::html::{bar, bars, figure_page, machine_line, verdict};
use crate::pov_bench::PovBenchReport;

impl PovBenchReport {
    /// Per workload: the per-transaction exact proof size (c/b) and exact root (d/b)
    /// ratios against their targets, and the time of each mode.
    pub fn html(&self) -> String {
        let mut figures = Vec::new();
        for w in &self.workloads {
            let name = format!("{} × transfer_{}", w.transactions, w.kind.replace('-', "_"));
            figures.push(bars(
                format!(
                    "{name}: exact proof size per tx c/b {:.3} (target <= {}), exact root per tx d/b {:.3} (target <= {})",
                    w.c_over_b, self.proof_size_target, w.d_over_b, self.root_target
                ),
                "x",
                vec![bar("c/b (proof size)", w.c_over_b), bar("d/b (root)", w.d_over_b)],
                Some(self.root_target),
            ));
            figures.push(bars(
                format!("{name}: median block production time per mode"),
                "ms",
                w.modes
                    .iter()
                    .map(|m| bar(format!("({}) {}", m.mode, m.label), m.median_ms))
                    .collect(),
                None,
            ));
        }
        let notes = vec![format!(
            "layout {}, {} funded accounts in {}, median of {} runs per mode; c/b target <= {} ({}), d/b target <= {} ({}) — the line on each ratio chart is the d/b target",
            self.layout,
            self.accounts,
            self.state_label(),
            self.runs,
            self.proof_size_target,
            verdict(self.proof_size_met),
            self.root_target,
            verdict(self.root_met)
        )];
        figure_page("arbor bench pov", &machine_line(&self.machine), &notes, &figures)
    }
}
