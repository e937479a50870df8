//! The HTML page of `arbor bench blockstm` (`--html FILE`): per workload, the speed-up
//! over the sequential executor per worker count against the machine's two-thread ceiling.

use crate::blockstm_bench::report::BlockStmReport;
use crate::common::html::{bar, bars, figure_page, machine_line, Figure};

impl BlockStmReport {
    /// Per workload: the speed-up over the sequential executor per worker count, with the
    /// machine's two-thread ceiling as the line.
    pub fn html(&self) -> String {
        let figures: Vec<Figure> = self
            .ceilings
            .iter()
            .map(|(name, ceiling)| {
                let rows = self.rows.iter().filter(|r| r.workload == *name && r.workers > 0);
                bars(
                    format!("{name}: speed-up over sequential (line: two sequential blocks on two threads, {ceiling:.2}x)"),
                    "x",
                    rows.map(|r| {
                        let label = if r.forced_engine {
                            "1 worker (Block-STM forced)".to_string()
                        } else if r.forced_partitioned {
                            format!("{} workers (partitioned forced)", r.workers)
                        } else {
                            format!("{} workers", r.workers)
                        };
                        bar(label, r.speedup)
                    })
                    .collect(),
                    Some(*ceiling),
                )
            })
            .collect();
        let notes = vec![format!(
            "{} transactions per block, signatures {}, median of {} runs",
            self.txs,
            if self.signatures { "verified" } else { "off" },
            self.runs
        )];
        figure_page("arbor bench blockstm", &machine_line(&self.machine), &notes, &figures)
    }
}
