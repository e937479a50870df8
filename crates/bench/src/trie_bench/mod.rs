//! The `trie_bench` driver: the phases in order, one seeded RNG per phase, every phase in
//! the layout the options name.

pub(crate) mod bound;
pub(crate) mod html;
pub(crate) mod incremental;
pub(crate) mod input;
pub(crate) mod opts;
pub(crate) mod oracle;
pub(crate) mod proofs;
pub(crate) mod render;
pub(crate) mod report;
pub(crate) mod roots;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use trie::{Layout, LayoutName, WithLayout};

use crate::common::machine::MachineInfo;
use crate::common::progress::bar;
use crate::trie_bench::bound::Replay;
use crate::trie_bench::input::{sorted_input, KEY_BYTES, VALUE_BYTES};
use crate::trie_bench::opts::TrieBenchOpts;
use crate::trie_bench::report::{InputReport, TrieBenchReport};
use crate::trie_bench::roots::{Reference, RootPhase};

/// A phase's own RNG, so that changing one phase's options leaves the others' inputs alone.
fn phase_rng(seed: u64, phase: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(phase);
    rng
}

/// Run the trie benchmark (see the crate docs) in `opts.layout`; `progress` draws bars on
/// stderr.
///
/// Fails if the builders' roots differ (from each other or from the reference engine's),
/// if the incremental trie's root differs from a rebuild, or if a proof does not verify to
/// the stored value.
pub fn trie_bench(opts: &TrieBenchOpts, progress: bool) -> anyhow::Result<TrieBenchReport> {
    if opts.runs == 0 {
        anyhow::bail!("runs must be at least 1");
    }
    opts.layout.dispatch(Bench { opts, progress })
}

/// [`trie_bench`] with the layout's type chosen.
struct Bench<'a> {
    opts: &'a TrieBenchOpts,
    progress: bool,
}

impl WithLayout for Bench<'_> {
    type Output = anyhow::Result<TrieBenchReport>;

    fn run<L: Layout>(self) -> Self::Output {
        bench_in::<L>(self.opts, self.progress)
    }
}

fn bench_in<L: Layout>(opts: &TrieBenchOpts, progress: bool) -> anyhow::Result<TrieBenchReport> {
    let machine = MachineInfo::detect();

    let pb = bar(progress, 1, "generating and sorting input");
    let input = sorted_input(&mut phase_rng(opts.seed, 0), opts.keys);
    pb.finish();

    // Ethereum's layout: alloy-trie and the keccak bound; Substrate's: trie-db's root.
    let replay;
    let (reference, label) = if opts.layout == LayoutName::Ethereum {
        replay = Replay::prepare(&input.items, &mut phase_rng(opts.seed, 1))?;
        (Reference::Alloy(&replay), "root: serial, parallel, alloy, bound")
    } else {
        let o = oracle::for_layout(opts.layout)
            .ok_or_else(|| anyhow::anyhow!("no reference engine for layout {}", opts.layout))?;
        (Reference::Oracle(o), "root: serial, parallel, trie-db")
    };
    let pb = bar(progress, opts.runs as u64, label);
    let RootPhase { report: root, bound } =
        roots::measure::<L>(&input.items, opts.runs, &reference, &pb)?;
    pb.finish();
    let input_report = InputReport {
        keys: input.items.len(),
        key_bytes: KEY_BYTES,
        value_bytes: VALUE_BYTES,
        duplicates_dropped: input.duplicates_dropped,
        sort_seconds: input.sort_seconds,
    };
    drop(input);

    let mut rng = phase_rng(opts.seed, 2);
    let pb = bar(progress, opts.incremental_keys as u64, "incremental: building trie");
    let mut state = incremental::build::<L>(&mut rng, opts.incremental_keys, &pb)?;
    pb.finish();
    let pb = bar(progress, opts.incremental_rounds as u64, "incremental: rounds");
    let incremental = incremental::measure(&mut state, opts, &mut rng, &pb)?;
    pb.finish();

    let pb = bar(progress, opts.proofs as u64, "proofs: generate, verify");
    let proofs = proofs::measure(&mut state, opts.proofs, &mut phase_rng(opts.seed, 3), &pb)?;
    pb.finish();

    Ok(TrieBenchReport {
        machine,
        options: opts.clone(),
        input: input_report,
        root,
        bound,
        incremental,
        proofs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_end_to_end() {
        let opts = TrieBenchOpts {
            keys: 2_000,
            runs: 2,
            incremental_rounds: 20,
            updates_per_round: 10,
            incremental_keys: 2_000,
            proofs: 50,
            seed: 7,
            layout: LayoutName::Ethereum,
        };
        let report = trie_bench(&opts, false).unwrap();
        assert!(report.root.roots_equal);
        assert_eq!(report.root.root.len(), 66, "0x + 64 hex digits");
        assert_eq!(report.input.keys, 2_000);
        assert_eq!(report.root.arbor_serial.runs, 2);
        // Every leaf is hashed (100-byte values never inline) and the counts reconcile.
        let bound = report.bound.as_ref().unwrap();
        assert_eq!(bound.leaf.calls, 2_000);
        assert!(bound.nodes_hashed <= bound.builder_hashes);
        assert!(bound.bound.seconds_median > 0.0);
        assert!(report.root.alloy().is_some() && report.root.oracle().is_none());
        assert!(report.incremental.root_matches_rebuild);
        assert!(report.incremental.hashes_per_round_mean > 10.0);
        assert_eq!(report.proofs.proofs, 50);
        assert!(report.proofs.nodes_per_proof_mean >= 2.0);

        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["options"]["keys"], 2_000);
        assert_eq!(json["options"]["layout"], "ethereum");
        assert!(json["root"]["alloy"]["seconds_median"].as_f64().unwrap() > 0.0);
        assert_eq!(json["root"]["root"], report.root.root.as_str());
        assert!(json["proofs"]["verified_per_second"].as_f64().unwrap() > 0.0);
        assert!(serde_json::to_string_pretty(&report).unwrap().contains("alloy_over_serial"));
        let text = report.render();
        assert!(text.contains("alloy/arbor serial"), "{text}");
    }

    #[test]
    fn tiny_run_with_progress_bars() {
        let opts = TrieBenchOpts {
            keys: 100,
            runs: 1,
            incremental_rounds: 3,
            updates_per_round: 3,
            incremental_keys: 0,
            proofs: 5,
            seed: 3,
            layout: LayoutName::Ethereum,
        };
        let report = trie_bench(&opts, true).unwrap();
        assert_eq!(report.incremental.keys_initial, 0);
        assert_eq!(report.proofs.proofs, 5);
    }

    /// Substrate's layouts: trie-db's root instead of alloy-trie, no keccak bound, the
    /// incremental trie and the proofs in the layout.
    #[test]
    fn small_runs_in_substrate_layouts() {
        for layout in [LayoutName::SubstrateV0, LayoutName::SubstrateV1] {
            let opts = TrieBenchOpts {
                keys: 1_000,
                runs: 2,
                incremental_rounds: 10,
                updates_per_round: 4,
                incremental_keys: 500,
                proofs: 20,
                seed: 5,
                layout,
            };
            let report = trie_bench(&opts, false).unwrap();
            assert!(report.root.roots_equal && report.bound.is_none());
            assert!(report.root.alloy().is_none());
            let oracle = report.root.oracle().unwrap();
            assert_eq!(oracle.oracle.runs, 2);
            assert!(oracle.keys_per_s.oracle > 0.0 && oracle.oracle_over_serial > 0.0);
            assert!(report.incremental.root_matches_rebuild);
            assert_eq!(report.proofs.proofs, 20);

            let json = serde_json::to_value(&report).unwrap();
            assert_eq!(json["options"]["layout"], layout.as_str());
            assert!(json["root"]["oracle"]["seconds_median"].as_f64().unwrap() > 0.0);
            assert!(json["root"]["oracle_engine"].as_str().unwrap().contains("trie-db"));
            assert!(json["root"].get("alloy").is_none() && json["bound"].is_null());
            let text = report.render();
            assert!(text.contains("trie-db/arbor serial") && text.contains("bound"), "{text}");
            assert!(!text.contains("alloy"), "{text}");
            let html = report.html();
            assert!(html.contains("trie-db") && !html.contains("alloy"), "{html}");
        }
    }

    #[test]
    fn rejects_zero_runs() {
        let opts = TrieBenchOpts { runs: 0, ..TrieBenchOpts::default() };
        assert!(trie_bench(&opts, false).is_err());
    }
}
