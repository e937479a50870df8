//! The Block-STM worker loop (the paper's Algorithm 1 and 2) over the multi-version
//! memory and the scheduler, and the switch to sequential execution within a block.
//!
//! Switch: a worker that sees the run going badly (its re-executions pass its first
//! executions; with a cost model, the run's pace falls behind the sequential executor's)
//! ends the run ([`Scheduler::switch`]). Once every worker has left, the calling thread
//! finds the longest prefix of transactions whose last incarnation executed and still
//! validates, keeps their outputs, and runs the rest with the sequential executor on top
//! of the prefix's writes, read from the multi-version memory. The block's result is the
//! sequential executor's either way: the prefix is a sequential run's by the same argument
//! as a finished block (each transaction read what the ones before it wrote), and the rest
//! is one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::journal::Journaled;
use crate::mvmemory::{
    DeltaKeys, IndexKey, KeyId, MvMemory, ReadOrigin, ReadResult, ScanRecord, Version,
};
use crate::scan::{scan, Sources, SCAN_CAPACITY};
use crate::scheduler::{End, Scheduler, Task};
use crate::sequential::{run_over, Under};
use crate::view::{DeltaBelow, TxView};
use crate::{
    Base, BlockOutput, Counters, ExecError, Key, Mode, Reason, Run, ScanBounds, Stop, Switch,
    SwitchReason, Transaction, Value, Write, PARALLEL_MIN_TXS,
};
use state::{apply_delta, StateReader};

/// Below one incarnation's own writes: the multi-version memory, then storage; with the
/// reads and scans the incarnation made, for validation.
struct MvBelow<'a, 'b, S: StateReader> {
    txn: usize,
    memory: &'a MvMemory,
    storage: &'a Base<'b, S>,
    reads: Vec<(KeyId, ReadOrigin)>,
    scans: Vec<ScanRecord>,
}

impl<S: StateReader> MvBelow<'_, '_, S> {
    /// Stop the transaction if a storage read failed.
    fn check(&self) -> Result<(), Stop> {
        if self.storage.failed() {
            return Err(Stop::ReadFailed);
        }
        Ok(())
    }
}

impl<S: StateReader> DeltaBelow for MvBelow<'_, '_, S> {
    /// The value below this transaction (lower writes, then storage), recording the read.
    fn read_below(&mut self, key: &[u8]) -> Result<Option<Value>, Stop> {
        let (id, r) = self.memory.read(key, self.txn);
        let (origin, value) = match r {
            ReadResult::Blocked(blocking) => return Err(Stop::Blocked(blocking)),
            ReadResult::Version(version, value) => (ReadOrigin::Version(version), value),
            ReadResult::Storage => (ReadOrigin::Storage, self.storage.get(key)),
            r @ ReadResult::Deltas { .. } => {
                let value = r.resolve(key, self.storage).flatten();
                (ReadOrigin::Resolved { key: key.to_vec(), value: value.clone() }, value)
            }
        };
        self.check()?;
        self.reads.push((id, origin));
        Ok(value)
    }

    /// A merge of three ordered sources ([`scan`]): the own writes, the keys written
    /// during the block (the memory's ordered index) and storage. Every key visited is
    /// read below the transaction and recorded with its origin, for validation.
    fn scan(
        &mut self,
        own: &mut Journaled<Write>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (memory, txn) = (self.memory, self.txn);
        memory.note_scan(txn);
        let sources = Sources {
            storage: self.storage,
            layer: |bounds: &ScanBounds<'_>| memory.next_key(bounds),
            written: None,
            own: own.map(),
        };
        // Sized for a scan that finds few dead keys: one allocation each.
        let mut visited = Vec::with_capacity(limit.saturating_add(2).min(SCAN_CAPACITY));
        let start = ScanBounds { from, last: None, reverse };
        let out = scan(sources, start, limit, |key, found| {
            let (id, r) = memory.read(key, txn);
            let (origin, under) = match r {
                ReadResult::Blocked(blocking) => return Err(Stop::Blocked(blocking)),
                ReadResult::Version(version, value) => (ReadOrigin::Version(version), value),
                ReadResult::Storage => (ReadOrigin::Storage, found.stored),
                ReadResult::Deltas { base, sum } => {
                    let value = Some(apply_delta(base.unwrap_or(found.stored).as_deref(), sum));
                    (ReadOrigin::Resolved { key: key.clone(), value: value.clone() }, value)
                }
            };
            visited.push((id, origin));
            Ok(match found.own {
                Some(Write::Value(v)) => v.clone(),
                Some(Write::Delta(d)) => Some(apply_delta(under.as_deref(), *d)),
                None => under,
            })
        })?;
        // A scan that filled up covered the range up to its last entry.
        let stop = if out.len() == limit { out.last().map(|(k, _)| k.clone()) } else { None };
        self.scans.push(ScanRecord { from: from.to_vec(), reverse, stop, visited });
        Ok(out)
    }
}

#[derive(Default)]
struct AtomicCounters {
    executions: AtomicU64,
    validations: AtomicU64,
    aborts: AtomicU64,
    suspensions: AtomicU64,
}

/// One worker's counts, added to the shared [`AtomicCounters`] once when it stops (a
/// shared counter bumped per transaction is one more cache line the workers pass around).
/// The worker's own counts also drive its switch decision.
#[derive(Default)]
struct Tally {
    executions: u64,
    /// Executions of an incarnation above 0, or an execution resumed after a suspension.
    reexecutions: u64,
    validations: u64,
    aborts: u64,
    suspensions: u64,
}

impl AtomicCounters {
    fn add(&self, t: &Tally) {
        self.executions.fetch_add(t.executions, Relaxed);
        self.validations.fetch_add(t.validations, Relaxed);
        self.aborts.fetch_add(t.aborts, Relaxed);
        self.suspensions.fetch_add(t.suspensions, Relaxed);
    }

    /// The run's counters: `n` transactions, `extra` executions and validations outside
    /// the workers (a sequential tail, the prefix's validation after a switch).
    fn total(&self, n: usize, extra: (u64, u64)) -> Counters {
        let executions = self.executions.load(Relaxed) + extra.0;
        Counters {
            executions,
            reexecutions: executions.saturating_sub(n as u64),
            validations: self.validations.load(Relaxed) + extra.1,
            aborts: self.aborts.load(Relaxed),
            suspensions: self.suspensions.load(Relaxed),
        }
    }
}

/// Options of [`execute_parallel_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ParallelOptions<'a> {
    /// Stress mode: with a seed, every worker yields or sleeps a few microseconds at random
    /// points of its loop (before tasks, between a read-set validation and its abort), to
    /// shake out interleavings that plain runs rarely hit. For tests.
    pub stress_seed: Option<u64>,
    /// Cancellation: once set, every worker stops at its next step (a transaction being
    /// executed finishes that execution first; suspended transactions hold no thread) and
    /// the call returns [`ExecError::Cancelled`].
    pub cancel: Option<&'a AtomicBool>,
    /// Run Block-STM even where the sequential fallback would (one worker, blocks under
    /// [`PARALLEL_MIN_TXS`]), and never switch to sequential execution on the engine's own
    /// account: for tests and to measure the engine's own overhead.
    pub always_parallel: bool,
    /// For tests: a worker switches the block to sequential execution once it has started
    /// this many executions ([`crate::SwitchReason::Requested`]), on top of the validated
    /// prefix, whatever else holds.
    pub switch_after: Option<u64>,
}

/// When a Block-STM run stops and finishes its block sequentially.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Guard {
    /// When a worker's re-executions pass its first executions (once it has run
    /// [`REEXEC_MIN_EXECUTIONS`]): most of its work is then thrown away, and the
    /// transactions depend on each other too much for parallel execution to pay.
    pub(crate) reexecutions: bool,
    /// The sequential executor's measured time per transaction: when the run's pace is
    /// behind it by more than the prefix's validation would cost (see
    /// [`Shared::behind_sequential_pace`]).
    pub(crate) seq_ns_per_tx: Option<f64>,
}

/// Executions a worker runs before its re-execution count can switch the block.
const REEXEC_MIN_EXECUTIONS: u64 = 64;
/// The pace check waits for this share of the block's expected sequential time...
const PACE_WINDOW: f64 = 0.05;
/// ... and at least this long (ns): starting the other workers takes tens of µs...
const PACE_MIN_NS: f64 = 50_000.0;
/// ... and at least this many transactions' sequential time: in a small block of
/// expensive transactions the first ones are still running when the other bounds pass.
const PACE_MIN_TXS: f64 = 8.0;
/// A pace within this factor of the sequential executor's is not behind it.
const PACE_SLACK: f64 = 1.05;
/// Validating the prefix after a switch, as a share of its sequential execution time
/// (an upper estimate: a validation re-reads the read set, an execution also writes and
/// runs the transaction's own code).
const VALIDATE_COST: f64 = 0.25;
/// The calling worker checks the pace every this many turns of its loop.
const PACE_TURNS: u32 = 32;

/// A worker's random pauses in stress mode (xorshift; no dependency).
struct Jitter(Option<u64>);

impl Jitter {
    /// Worker `w`'s generator: a non-zero state per worker.
    fn new(seed: Option<u64>, w: u64) -> Self {
        Jitter(seed.map(|seed| (seed ^ (w + 1) << 32) | 1))
    }

    fn pause(&mut self) {
        let Some(x) = self.0.as_mut() else { return };
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        match *x % 8 {
            0 | 1 => std::thread::yield_now(),
            2 => std::thread::sleep(std::time::Duration::from_micros(*x % 50)),
            _ => {}
        }
    }
}

struct Shared<'a, T: Transaction, S: StateReader> {
    txs: &'a [T],
    storage: Base<'a, S>,
    memory: MvMemory,
    scheduler: Scheduler,
    outputs: Vec<Mutex<Option<T::Output>>>,
    counters: AtomicCounters,
    guard: Guard,
    switch_after: Option<u64>,
    started: Instant,
    /// Why the run switched, set by the worker whose switch ended it.
    switch_reason: OnceLock<SwitchReason>,
}

impl<T: Transaction, S: StateReader + Sync> Shared<'_, T, S> {
    /// One worker's loop; the `pacer` (the calling thread) also checks the run's pace.
    fn worker(&self, mut jitter: Jitter, cancel: Option<&AtomicBool>, pacer: bool) {
        // A panicking transaction stops every worker (the panic then propagates from the
        // scope) instead of leaving the others waiting for it forever.
        let _halt = HaltOnPanic(&self.scheduler);
        let mut task: Option<Task> = None;
        let (mut idle, mut turns) = (0u32, 0u32);
        let mut tally = Tally::default();
        let mut flagged = DeltaKeys::default();
        while !self.scheduler.done() {
            if cancel.is_some_and(|c| c.load(Relaxed)) || self.storage.failed() {
                self.scheduler.halt();
                break;
            }
            turns = turns.wrapping_add(1);
            if let Some(reason) = self.switch_due(&tally, pacer && turns % PACE_TURNS == 0) {
                if self.scheduler.switch() {
                    let _ = self.switch_reason.set(reason);
                }
                break;
            }
            jitter.pause();
            task = match task {
                Some(Task::Execute(v)) => self.try_execute(v, &mut tally, &mut flagged),
                Some(Task::Validate(v)) => self.needs_reexecution(v, &mut jitter, &mut tally),
                None => self.next_task(&mut idle),
            };
        }
        self.counters.add(&tally);
        if self.scheduler.end() == Some(End::Complete) {
            self.memory.finish(self.txs.len());
        }
    }

    /// A task from the scheduler; with none, wait a moment: usually the other worker is
    /// finishing the transaction this one would validate, so spin, and after a while give
    /// the core away (matters with more workers than cores).
    fn next_task(&self, idle: &mut u32) -> Option<Task> {
        let next = self.scheduler.next_task();
        if next.is_some() {
            *idle = 0;
        } else {
            *idle += 1;
            if *idle < IDLE_SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        next
    }

    /// Whether this worker should switch the block to sequential execution, and why.
    fn switch_due(&self, tally: &Tally, check_pace: bool) -> Option<SwitchReason> {
        if self.switch_after.is_some_and(|k| tally.executions >= k) {
            return Some(SwitchReason::Requested);
        }
        if self.guard.reexecutions
            && tally.executions >= REEXEC_MIN_EXECUTIONS
            && 2 * tally.reexecutions > tally.executions
        {
            return Some(SwitchReason::Reexecutions);
        }
        if check_pace && self.behind_sequential_pace() {
            return Some(SwitchReason::Slower);
        }
        None
    }

    /// Whether finishing the block sequentially now beats going on at the run's pace so
    /// far: the pace (time per transaction validated) is behind the sequential
    /// executor's measured time per transaction, by more than validating the prefix would
    /// cost over the transactions left. Judged once the run has had a fair start.
    fn behind_sequential_pace(&self) -> bool {
        let Some(seq) = self.guard.seq_ns_per_tx else { return false };
        let n = self.txs.len() as f64;
        let elapsed = self.started.elapsed().as_nanos() as f64;
        if elapsed < (seq * n * PACE_WINDOW).max(PACE_MIN_NS).max(seq * PACE_MIN_TXS) {
            return false;
        }
        let done = self.scheduler.progress() as f64;
        if done == 0.0 {
            return true;
        }
        let pace = elapsed / done;
        pace > seq * PACE_SLACK && (n - done) * (pace - seq) > done * seq * VALIDATE_COST
    }

    fn try_execute(
        &self,
        (txn, incarnation): Version,
        tally: &mut Tally,
        flagged: &mut DeltaKeys,
    ) -> Option<Task> {
        let mut again = incarnation > 0;
        loop {
            tally.executions += 1;
            tally.reexecutions += u64::from(again);
            let mut view = TxView::new(MvBelow {
                txn,
                memory: &self.memory,
                storage: &self.storage,
                reads: Vec::with_capacity(8),
                scans: Vec::new(),
            });
            match self.txs[txn].execute(&mut view) {
                Err(Stop::ReadFailed) => {
                    assert!(
                        self.storage.failed(),
                        "a transaction returned Stop::ReadFailed without a failed read"
                    );
                    self.scheduler.halt();
                    return None;
                }
                Err(Stop::Blocked(blocking)) => {
                    tally.suspensions += 1;
                    if self.scheduler.add_dependency(txn, blocking) {
                        return None;
                    }
                    // The blocker finished meanwhile: run again at once.
                    again = true;
                }
                Ok(output) => {
                    let TxView { own, below: MvBelow { reads, scans, .. } } = view;
                    let writes = own.into_writes();
                    let wrote_new =
                        self.memory.record((txn, incarnation), reads, scans, writes, flagged);
                    *self.outputs[txn].lock() = Some(output);
                    return self.scheduler.finish_execution(txn, incarnation, wrote_new);
                }
            }
        }
    }

    fn needs_reexecution(
        &self,
        (txn, incarnation): Version,
        jitter: &mut Jitter,
        tally: &mut Tally,
    ) -> Option<Task> {
        tally.validations += 1;
        let valid = self.memory.validate_read_set(txn, &self.storage);
        jitter.pause();
        let aborted = !valid && self.scheduler.try_validation_abort(txn, incarnation);
        if aborted {
            tally.aborts += 1;
            self.memory.convert_writes_to_estimates(txn);
        }
        self.scheduler.finish_validation(txn, aborted)
    }

    /// With no worker running: the longest prefix of transactions whose last incarnation
    /// executed and still validates. Each of them read what the ones before it wrote, so
    /// its output and writes are the sequential executor's. Also returns the validations
    /// it ran.
    fn validated_prefix(&self) -> (usize, u64) {
        let mut validations = 0;
        for t in 0..self.txs.len() {
            if !self.scheduler.executed(t) {
                return (t, validations);
            }
            validations += 1;
            if !self.memory.validate_read_set(t, &self.storage) {
                return (t, validations);
            }
        }
        (self.txs.len(), validations)
    }
}

/// Empty polls of the scheduler a worker spins through before it starts yielding.
const IDLE_SPINS: u32 = 64;

/// Halts the scheduler when its worker unwinds.
struct HaltOnPanic<'a>(&'a Scheduler);

impl Drop for HaltOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.halt();
        }
    }
}

/// Under the sequential executor that finishes a switched block: Block-STM's validated
/// prefix `..end` in the multi-version memory.
struct Prefix<'a, 'b, S: StateReader> {
    memory: &'a MvMemory,
    end: usize,
    storage: &'a Base<'b, S>,
}

impl<S: StateReader> Under for Prefix<'_, '_, S> {
    fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        self.memory.committed(key, self.end, self.storage)
    }

    fn first_key(&self, bounds: &ScanBounds<'_>) -> Option<IndexKey> {
        self.memory.next_key(bounds)
    }
}

/// A run's block output and, when it switched, how long each part took.
pub(crate) struct Ran<O> {
    pub(crate) output: BlockOutput<O>,
    pub(crate) split: Option<Split>,
}

/// The two parts of a switched run, for the cost model.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Split {
    /// From the start to the switch (the workers joined).
    pub(crate) parallel: Duration,
    /// The sequential executor's run over the transactions after the prefix.
    pub(crate) sequential: Duration,
}

/// Run `txs` with Block-STM on `workers` threads (the calling thread is one of them),
/// switching to sequential execution as `guard` and `options` say; `reason` is why the
/// block runs in parallel.
pub(crate) fn run<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
    options: ParallelOptions<'_>,
    guard: Guard,
    reason: Reason,
) -> Result<Ran<T::Output>, ExecError<S::Error>> {
    let shared = Shared {
        txs,
        storage: Base::new(storage),
        memory: MvMemory::new(txs.len()),
        scheduler: Scheduler::new(txs.len()),
        outputs: (0..txs.len()).map(|_| Mutex::new(None)).collect(),
        counters: AtomicCounters::default(),
        guard,
        switch_after: options.switch_after,
        started: Instant::now(),
        switch_reason: OnceLock::new(),
    };
    std::thread::scope(|s| {
        for w in 1..workers.max(1) as u64 {
            let shared = &shared;
            let jitter = Jitter::new(options.stress_seed, w);
            s.spawn(move || shared.worker(jitter, options.cancel, false));
        }
        // The calling thread is a worker too.
        shared.worker(Jitter::new(options.stress_seed, 0), options.cancel, true);
    });
    let run = Run { mode: Mode::Parallel, reason, switch: None, waves: 1 };
    match shared.scheduler.end() {
        Some(End::Complete) => {
            let Shared { storage, memory, outputs, counters, .. } = shared;
            let writes = memory.into_writes(txs.len(), &storage);
            let outputs = outputs.into_iter().map(|o| o.into_inner().expect(EXECUTED)).collect();
            let counters = counters.total(txs.len(), (0, 0));
            let output = BlockOutput { outputs, writes, counters, run };
            storage.finish(Ran { output, split: None })
        }
        Some(End::Switched) => finish_sequentially(shared, run, options.cancel),
        // A storage failure halts the workers too: report it rather than a cancel.
        _ => Err(shared.storage.finish(()).err().unwrap_or(ExecError::Cancelled)),
    }
}

const EXECUTED: &str = "every transaction of a finished prefix has executed";

/// After a switch: keep the validated prefix and run the rest sequentially on top of it.
fn finish_sequentially<T: Transaction, S: StateReader + Sync>(
    shared: Shared<'_, T, S>,
    run: Run,
    cancel: Option<&AtomicBool>,
) -> Result<Ran<T::Output>, ExecError<S::Error>> {
    let parallel = shared.started.elapsed();
    let (at, validations) = shared.validated_prefix();
    let tail_started = Instant::now();
    let prefix = Prefix { memory: &shared.memory, end: at, storage: &shared.storage };
    let (tail, tail_writes) = run_over(&shared.txs[at..], &shared.storage, &prefix, cancel)?;
    let sequential = tail_started.elapsed();
    let Shared { txs, storage, memory, outputs, counters, switch_reason, .. } = shared;
    memory.finish(at);
    let mut writes = memory.into_writes(at, &storage);
    writes.extend(tail_writes);
    let outputs =
        outputs.into_iter().take(at).map(|o| o.into_inner().expect(EXECUTED)).chain(tail).collect();
    let extra = ((txs.len() - at) as u64, validations);
    let reason = switch_reason.into_inner().expect("the worker that switched gave its reason");
    let output = BlockOutput {
        outputs,
        writes,
        counters: counters.total(txs.len(), extra),
        run: Run { switch: Some(Switch { at, reason }), ..run },
    };
    storage.finish(Ran { output, split: Some(Split { parallel, sequential }) })
}

/// Run `txs` over the main trie of `storage` with Block-STM on `workers` threads (the
/// calling thread is one of them). The result equals [`crate::execute_sequential`]'s
/// (outputs and writes, or the first storage error); small blocks and one worker run
/// sequentially, and a block whose re-executions pass its first executions finishes
/// sequentially on top of its validated prefix. [`crate::AdaptiveExecutor`] also picks
/// the executor per block from measurements.
pub fn execute_parallel<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
) -> Result<BlockOutput<T::Output>, S::Error> {
    match execute_parallel_with(txs, storage, workers, ParallelOptions::default()) {
        Ok(out) => Ok(out),
        Err(ExecError::Storage(e)) => Err(e),
        Err(ExecError::Cancelled) => {
            unreachable!("nothing can cancel a run without a cancel flag")
        }
    }
}

/// [`execute_parallel`] with options (stress mode, cancellation, no fallback, a forced
/// switch).
pub fn execute_parallel_with<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
    options: ParallelOptions<'_>,
) -> Result<BlockOutput<T::Output>, ExecError<S::Error>> {
    let workers = workers.max(1);
    if options.always_parallel {
        return Ok(run(txs, storage, workers, options, Guard::default(), Reason::Requested)?.output);
    }
    if workers == 1 {
        return crate::sequential::run(txs, storage, options.cancel, Reason::OneWorker);
    }
    if txs.len() < PARALLEL_MIN_TXS {
        return crate::sequential::run(txs, storage, options.cancel, Reason::SmallBlock);
    }
    let guard = Guard { reexecutions: true, seq_ns_per_tx: None };
    Ok(run(txs, storage, workers, options, guard, Reason::NoModel)?.output)
}
