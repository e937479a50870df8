//! [`AdaptiveExecutor`]: the executor a node keeps across blocks, so that a block never
//! runs much slower than the sequential executor would run it, and runs in parallel where
//! that pays.
//!
//! Block-STM pays when transactions cost more than its bookkeeping and the cross-core
//! traffic it causes (with signature checks, 1.8–2.0× the sequential executor on two
//! cores), and loses when they do not (cheap transfers without signatures: 0.3–0.7×,
//! `arbor bench blockstm --no-sig`). The partitioned executor (`partitioned.rs`) pays on
//! cheap transactions that do not conflict across its chunks, and loses a chunk's time when
//! they do. Which case a chain is in depends on its transactions and on the machine, so the
//! executor measures instead of guessing:
//!
//! - A cost model keeps each executor's time per transaction (an exponential average
//!   over the blocks it ran, a switched Block-STM block counting for both it and the
//!   sequential executor). A block runs with the one expected to be fastest; the first
//!   block runs sequentially, the next two with Block-STM, the two after with the
//!   partitioned executor, so all are measured. Timing noise only ever slows a block down,
//!   so a sample below the estimate weighs more than one above it ([`WEIGHT_DOWN`],
//!   [`WEIGHT_UP`]): a slow first block (cold caches, a busy machine) does not hold the
//!   estimate up.
//! - The others are measured again now and then, in turn, the one with the lower
//!   estimate first (a probe, after [`PROBE_EVERY_MIN`] blocks, doubling up to
//!   [`PROBE_EVERY_MAX`] while the choice holds, and back to the minimum when the choice
//!   changes or a sample is more than twice off its estimate): a chain's transactions
//!   change, and a stale estimate would keep the wrong executor.
//! - Within a Block-STM block (a probe or not), the run switches to sequential execution
//!   when its pace falls behind the sequential executor's measured time per transaction,
//!   or when re-executions pass first executions; the validated prefix is kept. So a
//!   parallel probe of a chain where parallel execution loses costs a few percent of one
//!   block, not the block. A partitioned block switches at its first conflicting chunk,
//!   so its probe costs at most about one chunk's time.
//!
//! - The partitioned executor's cut of the block into waves is measured too ([`Cut`]):
//!   one wave at first, more after a block that switched while more paid, the fastest
//!   count measured otherwise. A chain whose transactions depend on ones half a block
//!   before them conflicts with one chunk per worker and runs without conflicts once the
//!   waves are shorter than that distance; cheap transactions that never conflict keep one
//!   wave (`bench blockstm --no-sig`, hot-fee: 1.51–1.61× the sequential executor with
//!   one wave, 1.26–1.28× with four), and so do blocks whose switched chunks are cheap to
//!   run again (signature checks cached). A block that moved the search to a count not yet
//!   measured is not a sample of the executor: the next partitioned block measures it.
//!
//! Blocks under [`PARALLEL_MIN_TXS`] and one worker run sequentially and leave the model
//! as it is.

use std::time::{Duration, Instant};

use crate::parallel::{run as run_parallel, Guard, Split};
use crate::partitioned::{clamp_waves, run as run_partitioned, MAX_WAVES};
use crate::{
    execute_parallel_with, BlockOutput, ExecError, Mode, ParallelOptions, Reason, Transaction,
    PARALLEL_MIN_TXS,
};
use state::StateReader;

/// Blocks between probes of the executor the model did not pick, at first and after the
/// choice changes.
pub(crate) const PROBE_EVERY_MIN: u32 = 2;
/// The longest interval between probes, reached by doubling while probes confirm the
/// choice.
pub(crate) const PROBE_EVERY_MAX: u32 = 128;
/// The weight of a new measurement below its estimate...
const WEIGHT_DOWN: f64 = 0.75;
/// ... and of one above it.
const WEIGHT_UP: f64 = 0.25;
/// A sample this many times off its estimate (either way) means the blocks changed.
const JUMP: f64 = 2.0;
/// Each parallel executor's first blocks before the model compares: a first run pays for
/// its threads' and memory's first touch (measured with Block-STM on `chain-transfers`, 2
/// workers: a first parallel block slower than the sequential executor, the next ones 1.3×
/// faster), so one
/// sample would keep the model on the sequential executor until its first probe. The
/// estimate starts from the fastest of these blocks, not their average: a 48 ms first
/// block averaged with a 24 ms second one left Block-STM's estimate level with the
/// sequential executor's 30 ms, and some runs kept the slower executor.
const PARALLEL_FIRST_SAMPLES: u32 = 2;

/// The cost model's estimates: each executor's time per transaction, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimates {
    /// The sequential executor's, if measured.
    pub sequential_ns_per_tx: Option<f64>,
    /// Block-STM's (wall time over the block's transactions), if measured.
    pub parallel_ns_per_tx: Option<f64>,
    /// The partitioned executor's (wall time over the block's transactions, its
    /// sequential finish included), if measured.
    pub partitioned_ns_per_tx: Option<f64>,
}

impl Estimates {
    /// The estimate of `mode`'s executor.
    fn of(&mut self, mode: Mode) -> &mut Option<f64> {
        match mode {
            Mode::Parallel => &mut self.parallel_ns_per_tx,
            Mode::Partitioned => &mut self.partitioned_ns_per_tx,
            _ => &mut self.sequential_ns_per_tx,
        }
    }
}

/// The executors the model compares, in the order it first measures them.
const MODES: [Mode; 3] = [Mode::Sequential, Mode::Parallel, Mode::Partitioned];

/// Block execution that picks the sequential executor, Block-STM or the partitioned
/// executor per block from measurements of all three, and switches a parallel block to
/// sequential execution when it falls behind. Keep one across blocks; every result equals
/// [`crate::execute_sequential`]'s.
#[derive(Debug, Clone)]
pub struct AdaptiveExecutor {
    /// The executor every block starts with, if pinned.
    pinned: Option<Mode>,
    workers: usize,
    model: Model,
}

#[derive(Debug, Clone)]
struct Model {
    estimates: Estimates,
    /// Blocks run with the model's choice since another executor was last measured.
    since_probe: u32,
    /// Blocks between probes.
    probe_every: u32,
    /// Blocks each parallel executor has run (capped at [`PARALLEL_FIRST_SAMPLES`]), in
    /// [`MODES`] order.
    samples: [u32; 3],
    /// Probes so far: they take the executors the model did not pick in turn.
    probes: u32,
    /// The partitioned executor's cut of a block into waves.
    cut: Cut,
}

impl AdaptiveExecutor {
    /// An executor for `workers` threads (the calling thread is one), with no
    /// measurements yet.
    pub fn new(workers: usize) -> Self {
        Self::with_pin(workers, None)
    }

    /// An executor that starts every block with `mode`'s executor (the partitioned one
    /// still adapts its waves, a Block-STM block still switches when it falls behind), for
    /// measuring one executor as the adaptive one would run it.
    pub fn pinned(workers: usize, mode: Mode) -> Self {
        Self::with_pin(workers, Some(mode))
    }

    fn with_pin(workers: usize, pinned: Option<Mode>) -> Self {
        let estimates = Estimates::default();
        AdaptiveExecutor {
            pinned,
            workers: workers.max(1),
            model: Model {
                estimates,
                since_probe: 0,
                probe_every: PROBE_EVERY_MIN,
                samples: [0; 3],
                probes: 0,
                cut: Cut::new(workers),
            },
        }
    }

    /// The worker count.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The cost model's current estimates.
    pub fn estimates(&self) -> Estimates {
        self.model.estimates
    }

    /// Execute one block: the result equals [`crate::execute_sequential`]'s; its
    /// [`BlockOutput::run`] says which executor ran it and why.
    pub fn execute<T: Transaction, S: StateReader + Sync>(
        &mut self,
        txs: &[T],
        storage: &S,
    ) -> Result<BlockOutput<T::Output>, S::Error> {
        match self.execute_with(txs, storage, ParallelOptions::default()) {
            Ok(out) => Ok(out),
            Err(ExecError::Storage(e)) => Err(e),
            Err(ExecError::Cancelled) => {
                unreachable!("nothing can cancel a run without a cancel flag")
            }
        }
    }

    /// [`AdaptiveExecutor::execute`] with options. With
    /// [`ParallelOptions::always_parallel`] the block runs as [`execute_parallel_with`]
    /// runs it and the model learns nothing from it.
    pub fn execute_with<T: Transaction, S: StateReader + Sync>(
        &mut self,
        txs: &[T],
        storage: &S,
        options: ParallelOptions<'_>,
    ) -> Result<BlockOutput<T::Output>, ExecError<S::Error>> {
        if options.always_parallel || self.workers == 1 || txs.len() < PARALLEL_MIN_TXS {
            return execute_parallel_with(txs, storage, self.workers, options);
        }
        let (mode, reason) = match self.pinned {
            Some(mode) => (mode, Reason::Requested),
            None => self.model.plan(),
        };
        let started = Instant::now();
        let (output, split) = match mode {
            Mode::Parallel => {
                let guard = Guard {
                    reexecutions: true,
                    seq_ns_per_tx: self.model.estimates.sequential_ns_per_tx,
                };
                let ran = run_parallel(txs, storage, self.workers, options, guard, reason)?;
                (ran.output, ran.split)
            }
            Mode::Partitioned => {
                let waves = self.model.cut.waves();
                let out =
                    run_partitioned(txs, storage, self.workers, waves, options.cancel, reason)?;
                (out, None)
            }
            _ => (crate::sequential::run(txs, storage, options.cancel, reason)?, None),
        };
        let at = output.run.switch.map(|s| s.at);
        let far = at.is_some_and(|at| txs.len() - at > 1);
        let switched = split.zip(at);
        self.model.observe(mode, reason, txs.len(), started.elapsed(), switched, far);
        Ok(output)
    }
}

impl Model {
    /// The executor for the next block, and why.
    fn plan(&self) -> (Mode, Reason) {
        if self.estimates.sequential_ns_per_tx.is_none() {
            return (Mode::Sequential, Reason::Unmeasured);
        }
        for (i, mode) in MODES.into_iter().enumerate().skip(1) {
            if self.samples[i] < PARALLEL_FIRST_SAMPLES {
                return (mode, Reason::Unmeasured);
            }
        }
        let faster = self.faster().unwrap_or(Mode::Sequential);
        if self.since_probe < self.probe_every {
            return (faster, Reason::Faster);
        }
        // In turn, the most promising first: a partitioned executor whose first blocks
        // paid for first touches is measured again before Block-STM at twice its cost.
        let mut e = self.estimates;
        let mut others: Vec<(Mode, f64)> = (MODES.into_iter().filter(|m| *m != faster))
            .map(|m| (m, e.of(m).unwrap_or(f64::MAX)))
            .collect();
        others.sort_by(|a, b| a.1.total_cmp(&b.1));
        (others[self.probes as usize % others.len()].0, Reason::Probe)
    }

    /// Which executor the estimates favour (`None` until all are measured).
    fn faster(&self) -> Option<Mode> {
        let mut e = self.estimates;
        let mut best: Option<(Mode, f64)> = None;
        for mode in MODES {
            let ns = (*e.of(mode))?;
            if best.is_none_or(|(_, b)| ns < b) {
                best = Some((mode, ns));
            }
        }
        best.map(|(mode, _)| mode)
    }

    /// Learn from a block of `n` transactions that started with `mode` and took
    /// `elapsed`; a switched Block-STM block brings its two parts and where it switched,
    /// and `far` says that a block switched before its last transaction.
    fn observe(
        &mut self,
        mode: Mode,
        reason: Reason,
        n: usize,
        elapsed: Duration,
        switched: Option<(Split, usize)>,
        far: bool,
    ) {
        if mode == Mode::Partitioned && self.cut.observe(per_tx(elapsed, n), far) {
            // The next partitioned block tries more waves: this one is a step of the cut's
            // search, not yet the executor's sample, and the next that would be
            // partitioned measures them.
            return;
        }
        let before = self.faster();
        let slot = MODES.iter().position(|m| *m == mode).unwrap_or(0);
        let first_sample = slot > 0 && self.samples[slot] < PARALLEL_FIRST_SAMPLES;
        if slot > 0 {
            self.samples[slot] = (self.samples[slot] + 1).min(PARALLEL_FIRST_SAMPLES);
        }
        let e = &mut self.estimates;
        let jumped = match (mode, switched) {
            (Mode::Parallel, Some((split, at))) => {
                // The parallel part's pace: its time over the prefix it left.
                let par = average(&mut e.parallel_ns_per_tx, per_tx(split.parallel, at));
                let seq = at < n
                    && average(&mut e.sequential_ns_per_tx, per_tx(split.sequential, n - at));
                par || seq
            }
            // Its cut keeps a time per wave count; the executor's is the best cut's.
            (Mode::Partitioned, _) => {
                let sample = per_tx(elapsed, n);
                let old = e.partitioned_ns_per_tx.replace(self.cut.best().unwrap_or(sample));
                old.is_some_and(|old| jumped(old, sample))
            }
            // A parallel executor's first blocks: the fastest stands (the first pays first
            // touches).
            _ if first_sample => lowest(e.of(mode), per_tx(elapsed, n)),
            _ => average(e.of(mode), per_tx(elapsed, n)),
        };
        if jumped {
            self.probe_every = PROBE_EVERY_MIN;
        }
        match reason {
            Reason::Probe => {
                self.since_probe = 0;
                self.probes = self.probes.wrapping_add(1);
                self.probe_every = if before.is_some() && self.faster() == before {
                    (self.probe_every * 2).min(PROBE_EVERY_MAX)
                } else {
                    PROBE_EVERY_MIN
                };
            }
            Reason::Faster => self.since_probe += 1,
            _ => self.since_probe = 0,
        }
    }
}

/// A block's time per transaction, ns.
fn per_tx(d: Duration, txs: usize) -> f64 {
    d.as_nanos() as f64 / txs.max(1) as f64
}

/// Wave counts the partitioned executor tries: 1, 2, 4 … [`MAX_WAVES`].
const CUTS: usize = MAX_WAVES.trailing_zeros() as usize + 1;

/// The partitioned executor's cut of a block into waves, chosen by measurement. More
/// waves let a block whose transactions depend on ones far before them run without a
/// conflict (`chain-transfers`: transfer `i + 5,000` reads what transfer `i` wrote, one
/// wave conflicts and four do not), but each wave costs a thread hand-off and an index of
/// its keys, and where re-running a conflicting chunk is cheap (signature checks cached
/// by the first run) one wave switched still beats eight. So each count has its own
/// estimate: after a block that switched before its last transaction, the next count is
/// tried if it has not been and the last doubling paid (or none was made yet); otherwise
/// the fastest count measured is kept.
#[derive(Debug, Clone)]
struct Cut {
    /// Time per transaction at 1, 2, 4 … waves, and the samples behind each.
    ns: [Option<f64>; CUTS],
    samples: [u32; CUTS],
    /// The count the next block uses, as an index into `ns`.
    level: usize,
    /// The highest index whose count the workers allow ([`clamp_waves`]).
    most: usize,
}

impl Cut {
    /// A cut for `workers`, one wave and nothing measured.
    fn new(workers: usize) -> Self {
        let fits = |level: usize| clamp_waves(workers, 1 << level) == 1 << level;
        let most = (0..CUTS).take_while(|&level| fits(level)).last().unwrap_or(0);
        Cut { ns: [None; CUTS], samples: [0; CUTS], level: 0, most }
    }

    /// The waves of the next partitioned block.
    fn waves(&self) -> usize {
        1 << self.level
    }

    /// The fastest count's time per transaction.
    fn best(&self) -> Option<f64> {
        self.ns.iter().flatten().copied().reduce(f64::min)
    }

    /// Learn from a block at the current count that took `sample` ns per transaction and
    /// switched before its last transaction (`far`), and pick the next count; true if that
    /// one has not been measured yet (the block was a step of the search).
    fn observe(&mut self, sample: f64, far: bool) -> bool {
        let at = self.level;
        match self.samples[at] < PARALLEL_FIRST_SAMPLES {
            true => lowest(&mut self.ns[at], sample),
            false => average(&mut self.ns[at], sample),
        };
        self.samples[at] = self.samples[at].saturating_add(1);
        let next = at + 1;
        let paid = at == 0 || self.ns[at] < self.ns[at - 1];
        if far && paid && next <= self.most && self.ns[next].is_none() {
            self.level = next;
            return true;
        }
        let measured = (0..CUTS).filter_map(|i| self.ns[i].map(|ns| (i, ns)));
        self.level = measured.min_by(|a, b| a.1.total_cmp(&b.1)).map_or(0, |(i, _)| i);
        false
    }
}

/// Keep the lower of `estimate` and `sample`; never a jump.
fn lowest(estimate: &mut Option<f64>, sample: f64) -> bool {
    *estimate = Some(estimate.map_or(sample, |old| old.min(sample)));
    false
}

/// Fold `sample` into the exponential average `estimate`; true if the sample is more
/// than [`JUMP`] times off the estimate.
fn average(estimate: &mut Option<f64>, sample: f64) -> bool {
    let Some(old) = *estimate else {
        *estimate = Some(sample);
        return false;
    };
    let weight = if sample < old { WEIGHT_DOWN } else { WEIGHT_UP };
    *estimate = Some(old + weight * (sample - old));
    jumped(old, sample)
}

/// Whether `sample` is more than [`JUMP`] times off `estimate`, either way.
fn jumped(estimate: f64, sample: f64) -> bool {
    sample > estimate * JUMP || sample * JUMP < estimate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        AdaptiveExecutor::new(2).model
    }

    /// One block at `ns_per_tx` for whichever executor the model picks.
    fn block(m: &mut Model, ns_per_tx: u64) -> (Mode, Reason) {
        blocks(m, |_| ns_per_tx)
    }

    /// One block whose time per transaction depends on the executor.
    fn blocks(m: &mut Model, cost: impl Fn(Mode) -> u64) -> (Mode, Reason) {
        let (mode, reason) = m.plan();
        m.observe(mode, reason, 1000, Duration::from_nanos(cost(mode) * 1000), None, false);
        (mode, reason)
    }

    /// Costs per executor: sequential, Block-STM, partitioned.
    fn costs(seq: u64, par: u64, part: u64) -> impl Fn(Mode) -> u64 {
        move |mode| match mode {
            Mode::Parallel => par,
            Mode::Partitioned => part,
            _ => seq,
        }
    }

    /// The executors' first blocks: the sequential executor, then each parallel one twice.
    fn measure_all(m: &mut Model, cost: &impl Fn(Mode) -> u64) {
        assert_eq!(blocks(m, cost), (Mode::Sequential, Reason::Unmeasured));
        for mode in [Mode::Parallel, Mode::Parallel, Mode::Partitioned, Mode::Partitioned] {
            assert_eq!(blocks(m, cost), (mode, Reason::Unmeasured));
        }
    }

    /// First every executor, then the fastest, with a probe of the others in turn after
    /// `PROBE_EVERY_MIN` blocks and probes further apart once confirmed.
    #[test]
    fn measures_all_then_picks_the_fastest_and_probes_the_others() {
        let mut m = model();
        let slow = costs(1000, 1400, 1600);
        measure_all(&mut m, &slow);
        let mut probed = Vec::new();
        for every in [PROBE_EVERY_MIN, 2 * PROBE_EVERY_MIN, 4 * PROBE_EVERY_MIN] {
            assert_eq!(m.probe_every, every);
            for _ in 0..every {
                assert_eq!(blocks(&mut m, &slow), (Mode::Sequential, Reason::Faster));
            }
            let (mode, reason) = blocks(&mut m, &slow);
            assert_eq!(reason, Reason::Probe);
            probed.push(mode);
        }
        assert_eq!(probed, [Mode::Parallel, Mode::Partitioned, Mode::Parallel]);
        // The transactions became expensive: the next probe (the partitioned executor)
        // finds it faster and the model changes its choice (and probes again soon).
        for _ in 0..8 * PROBE_EVERY_MIN {
            blocks(&mut m, &slow);
        }
        assert_eq!(blocks(&mut m, costs(1000, 1400, 300)), (Mode::Partitioned, Reason::Probe));
        assert_eq!(m.plan(), (Mode::Partitioned, Reason::Faster));
        assert_eq!(m.probe_every, PROBE_EVERY_MIN);
    }

    /// Where a parallel executor is faster, the sequential executor is probed too, after
    /// the more promising other executor.
    #[test]
    fn probes_the_sequential_executor_too() {
        let mut m = model();
        let cost = costs(1000, 500, 700);
        measure_all(&mut m, &cost);
        for _ in 0..PROBE_EVERY_MIN {
            assert_eq!(blocks(&mut m, &cost), (Mode::Parallel, Reason::Faster));
        }
        assert_eq!(blocks(&mut m, &cost), (Mode::Partitioned, Reason::Probe));
        for _ in 0..2 * PROBE_EVERY_MIN {
            assert_eq!(blocks(&mut m, &cost), (Mode::Parallel, Reason::Faster));
        }
        assert_eq!(blocks(&mut m, &cost), (Mode::Sequential, Reason::Probe));
    }

    /// A sample below the estimate pulls it down faster than one above pushes it up
    /// (noise only slows blocks down); one more than twice off calls for a probe soon.
    #[test]
    fn slow_samples_weigh_less_and_jumps_bring_the_probe_forward() {
        let mut m = model();
        measure_all(&mut m, &costs(2000, 1000, 3000));
        block(&mut m, 1000);
        assert_eq!(m.estimates.parallel_ns_per_tx, Some(1000.0));
        assert_eq!(m.probe_every, PROBE_EVERY_MIN);
        block(&mut m, 1800);
        assert_eq!(m.estimates.parallel_ns_per_tx, Some(1200.0));
        assert_eq!(block(&mut m, 1000), (Mode::Sequential, Reason::Probe));
        assert_eq!(m.estimates.sequential_ns_per_tx, Some(1250.0));
        assert_eq!(m.probe_every, 2 * PROBE_EVERY_MIN);
        // Transactions ten times as expensive: a jump.
        block(&mut m, 12_000);
        assert_eq!(m.probe_every, PROBE_EVERY_MIN);
    }

    /// A slow first parallel block (first touches) does not count once a second is
    /// faster: the model then picks that executor, where an average would not.
    #[test]
    fn the_first_parallel_blocks_count_by_their_fastest() {
        let mut m = model();
        block(&mut m, 1000);
        assert_eq!(block(&mut m, 5000), (Mode::Parallel, Reason::Unmeasured));
        assert_eq!(block(&mut m, 800), (Mode::Parallel, Reason::Unmeasured));
        assert_eq!(m.estimates.parallel_ns_per_tx, Some(800.0));
        assert_eq!(block(&mut m, 6000), (Mode::Partitioned, Reason::Unmeasured));
        assert_eq!(block(&mut m, 700), (Mode::Partitioned, Reason::Unmeasured));
        assert_eq!(m.estimates.partitioned_ns_per_tx, Some(700.0));
        assert_eq!(m.plan(), (Mode::Partitioned, Reason::Faster));
        // From the third block on, samples are averaged again.
        block(&mut m, 1100);
        assert_eq!(m.estimates.partitioned_ns_per_tx, Some(800.0));
    }

    /// The cut's search: more waves after a block that switched while more paid, the
    /// fastest count otherwise; a count is tried once by the search.
    #[test]
    fn the_cut_tries_more_waves_while_they_pay() {
        // Dependencies half a block away: one wave and two conflict, four do not.
        let mut cut = Cut::new(2);
        assert_eq!(cut.waves(), 1);
        assert!(cut.observe(1200.0, true));
        assert_eq!(cut.waves(), 2);
        assert!(cut.observe(1000.0, true));
        assert_eq!(cut.waves(), 4);
        // Only the block-end hook ran again: no further search.
        assert!(!cut.observe(600.0, false));
        assert_eq!((cut.waves(), cut.best()), (4, Some(600.0)));
        // A far switch at four waves, which paid: eight are tried, lose, and four stay.
        assert!(cut.observe(650.0, true));
        assert_eq!(cut.waves(), 8);
        assert!(!cut.observe(900.0, false));
        assert_eq!(cut.waves(), 4);
        assert!(!cut.observe(640.0, true));
        assert_eq!(cut.waves(), 4, "each count is tried once by the search");
        // Conflicts that cost little to run again: two waves lose to one, which stays.
        let mut cut = Cut::new(2);
        assert!(cut.observe(500.0, true));
        assert!(!cut.observe(700.0, true));
        assert_eq!(cut.waves(), 1);
        assert!(!cut.observe(520.0, true));
        assert_eq!((cut.waves(), cut.best()), (1, Some(500.0)));
        // Every doubling pays: up to eight waves, or as many as 64 chunks allow.
        for (workers, most) in [(2, 8), (16, 4), (64, 1)] {
            let mut cut = Cut::new(workers);
            let mut ns = 1000.0;
            while cut.observe(ns, true) {
                ns -= 100.0;
            }
            assert_eq!(cut.waves(), most, "{workers} workers");
        }
    }

    /// A switched Block-STM block measures both executors: the parallel part's pace over
    /// the prefix it kept, the sequential part's over the rest.
    #[test]
    fn a_switched_block_measures_both_parts() {
        let mut m = model();
        block(&mut m, 1000);
        let split = Split {
            parallel: Duration::from_nanos(100 * 3000),
            sequential: Duration::from_nanos(900 * 800),
        };
        m.observe(
            Mode::Parallel,
            Reason::Unmeasured,
            1000,
            Duration::ZERO,
            Some((split, 100)),
            false,
        );
        let e = m.estimates;
        assert_eq!(e.parallel_ns_per_tx, Some(3000.0));
        assert_eq!(e.sequential_ns_per_tx, Some(850.0));
        // One Block-STM block is not enough to judge it (its first pays for first touches).
        assert_eq!(m.plan(), (Mode::Parallel, Reason::Unmeasured));
        // A switch before any transaction validated counts the whole parallel part.
        m.observe(Mode::Parallel, Reason::Probe, 1000, Duration::ZERO, Some((split, 0)), false);
        assert!(m.estimates.parallel_ns_per_tx.is_some_and(|p| p > 50_000.0));
    }
}
