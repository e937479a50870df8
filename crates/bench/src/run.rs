//! The `trie_bench` driver: the phases in order, one seeded RNG per phase.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::bound::Replay;
use crate::input::{sorted_input, KEY_BYTES, VALUE_BYTES};
use crate::machine::MachineInfo;
use crate::opts::TrieBenchOpts;
use crate::progress::bar;
use crate::report::{InputReport, TrieBenchReport};
use crate::roots::RootPhase;
use crate::{incremental, proofs, roots};

/// A phase's own RNG, so that changing one phase's options leaves the others' inputs alone.
fn phase_rng(seed: u64, phase: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(phase);
    rng
}

/// Run the trie benchmark (see the crate docs); `progress` draws bars on stderr.
///
/// Fails if the builders' roots differ, if the incremental trie's root differs from a
/// rebuild, or if a proof does not verify to the stored value.
pub fn trie_bench(opts: &TrieBenchOpts, progress: bool) -> anyhow::Result<TrieBenchReport> {
    if opts.runs == 0 {
        anyhow::bail!("runs must be at least 1");
    }
    let machine = MachineInfo::detect();

    let pb = bar(progress, 1, "generating and sorting input");
    let input = sorted_input(&mut phase_rng(opts.seed, 0), opts.keys);
    pb.finish();

    let replay = Replay::prepare(&input.items, &mut phase_rng(opts.seed, 1))?;
    let pb = bar(progress, opts.runs as u64, "root: serial, parallel, alloy, bound");
    let RootPhase { report: root, bound } = roots::measure(&input.items, opts.runs, &replay, &pb)?;
    pb.finish();
    let input_report = InputReport {
        keys: input.items.len(),
        key_bytes: KEY_BYTES,
        value_bytes: VALUE_BYTES,
        duplicates_dropped: input.duplicates_dropped,
        sort_seconds: input.sort_seconds,
    };
    drop((input, replay));

    let mut rng = phase_rng(opts.seed, 2);
    let pb = bar(progress, opts.incremental_keys as u64, "incremental: building trie");
    let mut state = incremental::build(&mut rng, opts.incremental_keys, &pb)?;
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
        };
        let report = trie_bench(&opts, false).unwrap();
        assert!(report.root.roots_equal);
        assert_eq!(report.root.root.len(), 66, "0x + 64 hex digits");
        assert_eq!(report.input.keys, 2_000);
        assert_eq!(report.root.arbor_serial.runs, 2);
        // Every leaf is hashed (100-byte values never inline) and the counts reconcile.
        assert_eq!(report.bound.leaf.calls, 2_000);
        assert!(report.bound.nodes_hashed <= report.bound.builder_hashes);
        assert!(report.bound.bound.seconds_median > 0.0);
        assert!(report.incremental.root_matches_rebuild);
        assert!(report.incremental.hashes_per_round_mean > 10.0);
        assert_eq!(report.proofs.proofs, 50);
        assert!(report.proofs.nodes_per_proof_mean >= 2.0);

        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["options"]["keys"], 2_000);
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
        };
        let report = trie_bench(&opts, true).unwrap();
        assert_eq!(report.incremental.keys_initial, 0);
        assert_eq!(report.proofs.proofs, 5);
    }

    #[test]
    fn rejects_zero_runs() {
        let opts = TrieBenchOpts { runs: 0, ..TrieBenchOpts::default() };
        assert!(trie_bench(&opts, false).is_err());
    }
}
