//! Full-root comparison: Arbor's serial and parallel builders against alloy-trie's
//! `HashBuilder` and the keccak bound, interleaved run by run on the same sorted input.
//!
//! Interleaving (serial, parallel, alloy, replay; serial, parallel, …) exposes all four
//! to the same frequency and cache drift. Every run's roots must be equal; a mismatch is
//! an error, never a number.

use std::hint::black_box;
use std::time::Instant;

use alloy_trie::{HashBuilder, Nibbles};
use trie::{EthLayout, HashStats, H256};

use crate::bound::{Replay, ReplaySamples};
use crate::input::Item;
use crate::report::{BoundReport, RootReport};
use crate::timing::{ratio, Timing};

/// What the root phase measured, plus the serial build's hash counters and the bound.
pub(crate) struct RootPhase {
    pub(crate) report: RootReport,
    pub(crate) bound: BoundReport,
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
    alloy: Vec<f64>,
    replay: ReplaySamples,
}

/// One run of each builder and of the replay; returns the agreed root and serial stats.
fn run_once(items: &[Item], replay: &Replay, s: &mut Samples) -> anyhow::Result<(H256, HashStats)> {
    let start = Instant::now();
    let (s_root, stats) = black_box(trie::root_from_sorted::<EthLayout, _, _>(items)?);
    s.serial.push(start.elapsed().as_secs_f64());
    let start = Instant::now();
    let (p_root, _) = black_box(trie::parallel_root::<EthLayout, _, _>(items)?);
    s.parallel.push(start.elapsed().as_secs_f64());
    let start = Instant::now();
    let a_root = black_box(alloy_root(items));
    s.alloy.push(start.elapsed().as_secs_f64());
    if s_root != p_root || s_root != a_root {
        anyhow::bail!(
            "roots differ over {} keys: arbor serial {s_root}, arbor parallel {p_root}, \
             alloy-trie {a_root}",
            items.len()
        );
    }
    replay.run(&mut s.replay);
    Ok((s_root, stats))
}

/// Time the three builders and the keccak replay `runs` times each, checking that the
/// roots agree.
pub(crate) fn measure(
    items: &[Item],
    runs: usize,
    replay: &Replay,
    pb: &indicatif::ProgressBar,
) -> anyhow::Result<RootPhase> {
    let mut s = Samples::default();
    let (mut root, mut serial_stats) = (H256::ZERO, HashStats::default());
    for _ in 0..runs {
        (root, serial_stats) = run_once(items, replay, &mut s)?;
        pb.inc(1);
    }
    let serial = Timing::from_samples(&s.serial);
    let parallel = Timing::from_samples(&s.parallel);
    let alloy = Timing::from_samples(&s.alloy);
    let threads = rayon::current_num_threads();
    let mut bound = replay.report(serial_stats, &s.replay);
    bound.serial_over_bound = ratio(serial.seconds_median, bound.bound.seconds_median);
    bound.serial_over_bound_fastest = ratio(serial.seconds_min, bound.bound.seconds_min);
    bound.parallel_over_bound_per_thread =
        ratio(parallel.seconds_median, bound.bound.seconds_median / threads as f64);
    let report = RootReport {
        root: root.to_string(),
        roots_equal: true,
        parallel_threads: threads,
        alloy_over_serial: ratio(alloy.seconds_median, serial.seconds_median),
        alloy_over_parallel: ratio(alloy.seconds_median, parallel.seconds_median),
        alloy_over_serial_fastest: ratio(alloy.seconds_min, serial.seconds_min),
        alloy_over_parallel_fastest: ratio(alloy.seconds_min, parallel.seconds_min),
        serial_over_parallel: ratio(serial.seconds_median, parallel.seconds_median),
        arbor_serial: serial,
        arbor_parallel: parallel,
        alloy,
    };
    Ok(RootPhase { report, bound })
}
