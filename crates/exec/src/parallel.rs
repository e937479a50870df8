//! The Block-STM worker loop (the paper's Algorithm 1 and 2) over the multi-version
//! memory and the scheduler.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::journal::Journaled;
use crate::mvmemory::{DeltaKeys, KeyId, MvMemory, ReadOrigin, ReadResult, ScanRecord, Version};
use crate::scheduler::{Scheduler, Task};
use crate::view::{Below, TxView};
use crate::{
    apply_delta, Base, BlockOutput, Counters, ExecError, Key, ScanBounds, StateReader, Stop,
    Transaction, Value, Write, PARALLEL_MIN_TXS,
};

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
}

impl<S: StateReader> Below for MvBelow<'_, '_, S> {
    type Write = Write;

    fn get(&mut self, own: &mut Journaled<Write>, key: &[u8]) -> Result<Option<Value>, Stop> {
        match own.get(key) {
            Some(Write::Value(v)) => Ok(v.clone()),
            Some(Write::Delta(d)) => {
                let d = *d;
                let below = self.read_below(key)?;
                let v = apply_delta(below.as_deref(), d);
                // From here on the transaction holds the value itself.
                own.settle(key, Write::Value(Some(v.clone())));
                Ok(Some(v))
            }
            None => self.read_below(key),
        }
    }

    fn add_delta(
        &mut self,
        own: &mut Journaled<Write>,
        key: &[u8],
        amount: i64,
    ) -> Result<(), Stop> {
        let w = match own.get(key) {
            Some(Write::Value(v)) => Write::Value(Some(apply_delta(v.as_deref(), amount))),
            Some(Write::Delta(d)) => Write::Delta(d.wrapping_add(amount)),
            None => Write::Delta(amount),
        };
        own.insert(key, w);
        Ok(())
    }

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
        self.memory.note_scan(self.txn);
        let (mut out, mut below) = (Vec::new(), Vec::new());
        let mut last: Option<Key> = None;
        let mut stop = None;
        loop {
            if out.len() == limit {
                stop = last;
                break;
            }
            let b = ScanBounds { from, last: last.as_deref(), reverse };
            let mine = b.first_key_in(own.map());
            let next =
                b.earlier(b.earlier(mine, self.memory.next_key(&b)), self.storage.next_key(&b));
            self.check()?;
            let Some(k) = next else { break };
            let (_, r) = self.memory.read(&k, self.txn);
            if let ReadResult::Blocked(blocking) = r {
                return Err(Stop::Blocked(blocking));
            }
            let under = r.resolve(&k, self.storage).flatten();
            self.check()?;
            if let Some(v) = &under {
                below.push((k.clone(), v.clone()));
            }
            let visible = match own.get(&k) {
                Some(Write::Value(v)) => v.clone(),
                Some(Write::Delta(d)) => Some(apply_delta(under.as_deref(), *d)),
                None => under,
            };
            if let Some(v) = visible {
                out.push((k.clone(), v));
            }
            last = Some(k);
        }
        self.scans.push(ScanRecord { from: from.to_vec(), reverse, stop, below });
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
#[derive(Default)]
struct Tally {
    executions: u64,
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
    /// [`PARALLEL_MIN_TXS`]): for tests and to measure the engine's own overhead.
    pub always_parallel: bool,
}

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
}

impl<T: Transaction, S: StateReader + Sync> Shared<'_, T, S> {
    fn worker(&self, mut jitter: Jitter, cancel: Option<&AtomicBool>) {
        // A panicking transaction stops every worker (the panic then propagates from the
        // scope) instead of leaving the others waiting for it forever.
        let _halt = HaltOnPanic(&self.scheduler);
        let mut task: Option<Task> = None;
        let mut idle = 0u32;
        let mut tally = Tally::default();
        let mut flagged = DeltaKeys::default();
        while !self.scheduler.done() {
            if cancel.is_some_and(|c| c.load(Relaxed)) || self.storage.failed() {
                self.scheduler.halt();
                break;
            }
            jitter.pause();
            task = match task {
                Some(Task::Execute(v)) => self.try_execute(v, &mut tally, &mut flagged),
                Some(Task::Validate(v)) => self.needs_reexecution(v, &mut jitter, &mut tally),
                None => {
                    let next = self.scheduler.next_task();
                    if next.is_some() {
                        idle = 0;
                    } else {
                        // Nothing to do until another worker finishes or lowers an index.
                        // Usually a moment (the other worker is finishing the transaction
                        // this one would validate): spin; after a while give the core away
                        // (matters with more workers than cores).
                        idle += 1;
                        if idle < IDLE_SPINS {
                            std::hint::spin_loop();
                        } else {
                            std::thread::yield_now();
                        }
                    }
                    next
                }
            };
        }
        self.counters.add(&tally);
        if !self.scheduler.halted() {
            self.memory.finish();
        }
    }

    fn try_execute(
        &self,
        (txn, incarnation): Version,
        tally: &mut Tally,
        flagged: &mut DeltaKeys,
    ) -> Option<Task> {
        loop {
            tally.executions += 1;
            let mut view = TxView::new(MvBelow {
                txn,
                memory: &self.memory,
                storage: &self.storage,
                reads: Vec::new(),
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

/// Run `txs` over the main trie of `storage` with Block-STM on `workers` threads (the
/// calling thread is one of them). The result equals [`crate::execute_sequential`]'s
/// (outputs and writes, or the first storage error); small blocks and one worker run
/// sequentially.
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

/// [`execute_parallel`] with options (stress mode, cancellation, no fallback).
pub fn execute_parallel_with<T: Transaction, S: StateReader + Sync>(
    txs: &[T],
    storage: &S,
    workers: usize,
    options: ParallelOptions<'_>,
) -> Result<BlockOutput<T::Output>, ExecError<S::Error>> {
    let workers = workers.max(1);
    if !options.always_parallel && (workers == 1 || txs.len() < PARALLEL_MIN_TXS) {
        return crate::sequential::run(txs, storage, options.cancel);
    }
    let shared = Shared {
        txs,
        storage: Base::new(storage),
        memory: MvMemory::new(txs.len()),
        scheduler: Scheduler::new(txs.len()),
        outputs: (0..txs.len()).map(|_| Mutex::new(None)).collect(),
        counters: AtomicCounters::default(),
    };
    std::thread::scope(|s| {
        for w in 1..workers as u64 {
            let shared = &shared;
            s.spawn(move || shared.worker(Jitter::new(options.stress_seed, w), options.cancel));
        }
        // The calling thread is a worker too.
        shared.worker(Jitter::new(options.stress_seed, 0), options.cancel);
    });
    let Shared { storage, memory, outputs, counters: c, scheduler, .. } = shared;
    if scheduler.halted() {
        // A storage failure halts the workers too: report it rather than a cancel.
        return Err(storage.finish(()).err().unwrap_or(ExecError::Cancelled));
    }
    let writes = memory.into_writes(&storage);
    let outputs = outputs
        .into_iter()
        .map(|o| o.into_inner().expect("every transaction executed before the scheduler is done"))
        .collect();
    let executions = c.executions.load(Relaxed);
    let counters = Counters {
        executions,
        reexecutions: executions.saturating_sub(txs.len() as u64),
        validations: c.validations.load(Relaxed),
        aborts: c.aborts.load(Relaxed),
        suspensions: c.suspensions.load(Relaxed),
    };
    storage.finish(BlockOutput { outputs, writes, counters })
}
