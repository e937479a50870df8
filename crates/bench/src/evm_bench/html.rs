//! The HTML page of `arbor bench evm` (`--html FILE`): per workload, sustained Mgas/s of
//! the three engines (with the ERC-20 target) and the block time over the blocks; then
//! Arbor's time over the plain run's per workload against its bound.

use crate::common::html::{bar, bars, figure_page, machine_line, verdict, Figure, LineChart};
use crate::evm_bench::report::{EvmBenchReport, OVER_PLAIN_UNDO_TARGET};

impl EvmBenchReport {
    /// The page (see the module docs).
    pub fn html(&self) -> String {
        let mut figures = Vec::new();
        for w in &self.workloads {
            let engines =
                [("arbor", &w.arbor), ("plain+undo", &w.plain_undo), ("memory", &w.memory)];
            figures.push(bars(
                format!(
                    "{}: sustained Mgas/s ({} blocks, {:.1} Mgas each)",
                    w.name,
                    w.blocks,
                    w.gas_per_block / 1e6
                ),
                "Mgas/s",
                engines.iter().map(|(n, e)| bar(*n, e.mgas_per_s)).collect(),
                w.mgas_per_s_target,
            ));
            figures.push(Figure::Lines(LineChart {
                title: format!("{}: block time (recover + execute + commit)", w.name),
                x_label: "block".into(),
                unit: "ms".into(),
                series: engines
                    .iter()
                    .map(|(n, e)| (n.to_string(), e.block_ms_series.clone()))
                    .collect(),
                target: None,
            }));
        }
        figures.push(bars(
            format!("Arbor's time over plain RocksDB with undo records (line: {OVER_PLAIN_UNDO_TARGET}x)"),
            "x",
            self.workloads.iter().map(|w| bar(w.name, w.arbor_over_plain_undo)).collect(),
            Some(OVER_PLAIN_UNDO_TARGET),
        ));
        let o = &self.options;
        let mut notes = vec![format!(
            "{} accounts ({} senders), {} blocks per workload, gas limit {}, seed {}; contracts compiled by solc {}",
            o.accounts, self.senders, o.blocks, o.gas_limit, o.seed, self.compiler
        )];
        for w in &self.workloads {
            notes.push(format!(
                "{}: Arbor/plain+undo {:.2}x ({}), Arbor/memory {:.2}x, commit share {:.2}",
                w.name,
                w.arbor_over_plain_undo,
                verdict(w.over_plain_undo_met),
                w.arbor_over_memory,
                w.commit_share
            ));
        }
        notes.push(format!(
            "final root {} (verify {}, in-memory and plain states rebuilt from scratch agree: {})",
            self.roots.arbor_head, self.roots.arbor_verified, self.roots.agree
        ));
        figure_page("arbor bench evm", &machine_line(&self.machine), &notes, &figures)
    }
}
