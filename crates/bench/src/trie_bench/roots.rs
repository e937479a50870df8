//! Full-root comparison: Arbor's serial and parallel builders against a reference engine,
//! interleaved run by run on the same sorted input. In Ethereum's layout the reference is
//! alloy-trie's `HashBuilder`, and the keccak bound is replayed in the same rounds; in
//! Substrate's it is trie-db's root (see `oracle`), and there is no bound.
//!
//! Interleaving (serial, parallel, reference, replay; serial, parallel, …) exposes all of
//! them to the same frequency and cache drift. Every run's roots must be equal; a mismatch
//! is an error, never a number.

use std::hint::black_box;
use std::time::Instant;

use alloy_trie::{HashBuilder, Nibbles};
use state::H256;
use trie::{HashStats, Layout};

use crate::common::timing::{ratio, Timing};
use crate::trie_bench::bound::{Replay, ReplaySamples};
use crate::trie_bench::input::Item;
use crate::trie_bench::oracle::Oracle;
use crate::trie_bench::report::{
    AlloyFigures, BoundReport, KeysPerSecond, OracleFigures, RootReference, RootReport,
};

/// What the root phase measured, plus the serial build's hash counters and the bound.
pub(crate) struct RootPhase {
    pub(crate) report: RootReport,
    /// The keccak bound (Ethereum's layout only).
    pub(crate) bound: Option<BoundReport>,
}

/// The engine the builders are compared with.
pub(crate) enum Reference<'a> {
    /// alloy-trie, with the keccak bound's replay (Ethereum's layout).
    Alloy(&'a Replay),
    /// trie-db's root (Substrate's layouts).
    Oracle(Oracle),
}

impl Reference<'_> {
    /// The root of `items` by the reference engine.
    fn root(&self, items: &[Item]) -> H256 {
        match self {
            Reference::Alloy(_) => alloy_root(items),
            Reference::Oracle(o) => (o.root)(items),
        }
    }

    /// The engine's name in an error.
    fn name(&self) -> &'static str {
        match self {
            Reference::Alloy(_) => "alloy-trie",
            Reference::Oracle(_) => "trie-db",
        }
    }
}

/// Root of `items` with alloy-trie (values are stored as given, like Arbor's).
pub(crate) fn alloy_root(items: &[Item]) -> H256 {
    let mut hb = HashBuilder::default();
    for (k, v) in items {
        hb.add_leaf(Nibbles::unpack_array(k), v);
    }
    H256(hb.root().0)
}

/// Seconds of every run, per engine.
#[derive(Default)]
struct Samples {
    serial: Vec<f64>,
    parallel: Vec<f64>,
    reference: Vec<f64>,
    replay: ReplaySamples,
}

/// One run of each builder (and of the replay); returns the agreed root and serial stats.
fn run_once<L: Layout>(
    items: &[Item],
    reference: &Reference<'_>,
    s: &mut Samples,
) -> anyhow::Result<(H256, HashStats)> {
    let start = Instant::now();
    let (s_root, stats) = black_box(trie::root_from_sorted::<L, _, _>(items)?);
    s.serial.push(start.elapsed().as_secs_f64());
    let start = Instant::now();
    let (p_root, _) = black_box(trie::parallel_root::<L, _, _>(items)?);
    s.parallel.push(start.elapsed().as_secs_f64());
    let start = Instant::now();
    let r_root = black_box(reference.root(items));
    s.reference.push(start.elapsed().as_secs_f64());
    if s_root != p_root || s_root != r_root {
        anyhow::bail!(
            "roots differ over {} keys: arbor serial {s_root}, arbor parallel {p_root}, \
             {} {r_root}",
            items.len(),
            reference.name()
        );
    }
    if let Reference::Alloy(replay) = reference {
        replay.run(&mut s.replay);
    }
    Ok((s_root, stats))
}

/// Time the builders in layout `L`, the reference engine and (with alloy-trie) the keccak
/// replay `runs` times each, checking that the roots agree.
pub(crate) fn measure<L: Layout>(
    items: &[Item],
    runs: usize,
    reference: &Reference<'_>,
    pb: &indicatif::ProgressBar,
) -> anyhow::Result<RootPhase> {
    let mut s = Samples::default();
    let (mut root, mut serial_stats) = (H256::ZERO, HashStats::default());
    for _ in 0..runs {
        (root, serial_stats) = run_once::<L>(items, reference, &mut s)?;
        pb.inc(1);
    }
    let serial = Timing::from_samples(&s.serial);
    let parallel = Timing::from_samples(&s.parallel);
    let other = Timing::from_samples(&s.reference);
    let threads = rayon::current_num_threads();
    // The reference engine's time over Arbor's (> 1: Arbor faster).
    let over_serial = ratio(other.seconds_median, serial.seconds_median);
    let over_parallel = ratio(other.seconds_median, parallel.seconds_median);
    let over_serial_fastest = ratio(other.seconds_min, serial.seconds_min);
    let over_parallel_fastest = ratio(other.seconds_min, parallel.seconds_min);
    let (reference, bound) = match reference {
        Reference::Alloy(replay) => {
            let mut bound = replay.report(serial_stats, &s.replay);
            bound.serial_over_bound = ratio(serial.seconds_median, bound.bound.seconds_median);
            bound.serial_over_bound_fastest = ratio(serial.seconds_min, bound.bound.seconds_min);
            bound.parallel_over_bound_per_thread =
                ratio(parallel.seconds_median, bound.bound.seconds_median / threads as f64);
            let alloy = AlloyFigures {
                alloy: other,
                alloy_over_serial: over_serial,
                alloy_over_parallel: over_parallel,
                alloy_over_serial_fastest: over_serial_fastest,
                alloy_over_parallel_fastest: over_parallel_fastest,
            };
            (RootReference::Alloy(alloy), Some(bound))
        }
        Reference::Oracle(o) => {
            let per_s = |t: &Timing| ratio(items.len() as f64, t.seconds_median);
            let oracle = OracleFigures {
                oracle_engine: o.engine.to_string(),
                oracle: other,
                oracle_over_serial: over_serial,
                oracle_over_parallel: over_parallel,
                oracle_over_serial_fastest: over_serial_fastest,
                oracle_over_parallel_fastest: over_parallel_fastest,
                keys_per_s: KeysPerSecond {
                    arbor_serial: per_s(&serial),
                    arbor_parallel: per_s(&parallel),
                    oracle: per_s(&other),
                },
            };
            (RootReference::Oracle(oracle), None)
        }
    };
    let report = RootReport {
        root: root.to_string(),
        roots_equal: true,
        parallel_threads: threads,
        serial_over_parallel: ratio(serial.seconds_median, parallel.seconds_median),
        arbor_serial: serial,
        arbor_parallel: parallel,
        reference,
    };
    Ok(RootPhase { report, bound })
}
