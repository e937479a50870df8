//! The Block-STM collaborative scheduler (the paper's Algorithm 4 and 5).
//!
//! Two shared indices hand out work in block order: `execution_idx` (next transaction to
//! execute) and `validation_idx` (next to validate). Aborts and new writes lower them
//! again; `decrease_cnt` counts every lowering so that the completion check can tell
//! whether an index went down while it looked. `num_active_tasks` counts tasks handed out
//! and not finished.
//!
//! Pitfall handled as the paper does: a worker increments `num_active_tasks` *before* it
//! takes an index, so the completion check never sees both indices past the end while a
//! task that took the last index is still uncounted (the lost-update bug of some ports).
//! A suspended transaction (it read an estimate) is parked on its blocker's dependency
//! list under the blocker's lock, and re-checked against the blocker's status under that
//! lock, so a wake-up cannot be missed.
//!
//! A run ends one way, decided once by one atomic ([`End`]): every transaction is done, it
//! was halted (cancel, storage failure, a panic: halting overrides the others), or it
//! switched to sequential execution. A switch is refused once the block is done, so the
//! workers that tear the memory down on completion never race a switch that needs it.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::SeqCst};

use parking_lot::Mutex;

use crate::mvmemory::Version;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    ReadyToExecute,
    Executing,
    Executed,
    Aborting,
}

/// A unit of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Task {
    Execute(Version),
    Validate(Version),
}

/// A value alone on its cache lines (two of them: the adjacent-line prefetcher pairs lines),
/// so that workers bumping one index do not also take the others' lines away.
#[derive(Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Every transaction executed and validated.
    Complete,
    /// Stopped without a result.
    Halted,
    /// Stopped to finish the block sequentially on top of the validated prefix.
    Switched,
}

const RUNNING: u8 = 0;
const COMPLETE: u8 = 1;
const HALTED: u8 = 2;
const SWITCHED: u8 = 3;

pub(crate) struct Scheduler {
    block_size: usize,
    execution_idx: Padded<AtomicUsize>,
    validation_idx: Padded<AtomicUsize>,
    decrease_cnt: Padded<AtomicUsize>,
    num_active_tasks: Padded<AtomicUsize>,
    /// [`End`] as a byte; [`RUNNING`] until the run ends.
    end: AtomicU8,
    dependencies: Vec<Mutex<Vec<usize>>>,
    status: Vec<Mutex<(u32, Status)>>,
}

impl Scheduler {
    pub(crate) fn new(block_size: usize) -> Self {
        Scheduler {
            block_size,
            execution_idx: Padded::default(),
            validation_idx: Padded::default(),
            decrease_cnt: Padded::default(),
            num_active_tasks: Padded::default(),
            end: AtomicU8::new(RUNNING),
            dependencies: (0..block_size).map(|_| Mutex::new(Vec::new())).collect(),
            status: (0..block_size).map(|_| Mutex::new((0, Status::ReadyToExecute))).collect(),
        }
    }

    /// Whether the run has ended, one way or another: workers leave.
    pub(crate) fn done(&self) -> bool {
        self.end.load(SeqCst) != RUNNING
    }

    /// How the run ended (`None` while it runs).
    pub(crate) fn end(&self) -> Option<End> {
        match self.end.load(SeqCst) {
            COMPLETE => Some(End::Complete),
            HALTED => Some(End::Halted),
            SWITCHED => Some(End::Switched),
            _ => None,
        }
    }

    /// Stop every worker now (cancellation, a storage failure, or a worker panicked): the
    /// block has no result, whatever else ended the run.
    pub(crate) fn halt(&self) {
        self.end.store(HALTED, SeqCst);
    }

    /// Stop every worker so that the block finishes sequentially; false if the run has
    /// already ended.
    pub(crate) fn switch(&self) -> bool {
        self.end.compare_exchange(RUNNING, SWITCHED, SeqCst, SeqCst).is_ok()
    }

    /// Whether `txn`'s last incarnation has executed (and is not being aborted): with no
    /// worker running, its record and output are that incarnation's.
    pub(crate) fn executed(&self, txn: usize) -> bool {
        self.status[txn].lock().1 == Status::Executed
    }

    /// The transactions validated so far, about: the lower of the two indices (both go
    /// down again on aborts), for the pace check of a run with a cost model.
    pub(crate) fn progress(&self) -> usize {
        self.validation_idx.load(SeqCst).min(self.execution_idx.load(SeqCst)).min(self.block_size)
    }

    fn decrease_execution_idx(&self, target: usize) {
        self.execution_idx.fetch_min(target, SeqCst);
        self.decrease_cnt.fetch_add(1, SeqCst);
    }

    fn decrease_validation_idx(&self, target: usize) {
        self.validation_idx.fetch_min(target, SeqCst);
        self.decrease_cnt.fetch_add(1, SeqCst);
    }

    fn check_done(&self) {
        let observed = self.decrease_cnt.load(SeqCst);
        if self.execution_idx.load(SeqCst).min(self.validation_idx.load(SeqCst)) >= self.block_size
            && self.num_active_tasks.load(SeqCst) == 0
            && observed == self.decrease_cnt.load(SeqCst)
        {
            // Refused if a switch or a halt came first.
            let _ = self.end.compare_exchange(RUNNING, COMPLETE, SeqCst, SeqCst);
        }
    }

    /// Claim `txn` for execution if it is ready; else release the active-task count.
    fn try_incarnate(&self, txn: usize) -> Option<Version> {
        if txn < self.block_size {
            let mut s = self.status[txn].lock();
            if s.1 == Status::ReadyToExecute {
                s.1 = Status::Executing;
                return Some((txn, s.0));
            }
        }
        self.num_active_tasks.fetch_sub(1, SeqCst);
        None
    }

    fn next_version_to_execute(&self) -> Option<Version> {
        if self.execution_idx.load(SeqCst) >= self.block_size {
            self.check_done();
            return None;
        }
        self.num_active_tasks.fetch_add(1, SeqCst);
        let idx = self.execution_idx.fetch_add(1, SeqCst);
        self.try_incarnate(idx)
    }

    fn next_version_to_validate(&self) -> Option<Version> {
        if self.validation_idx.load(SeqCst) >= self.block_size {
            self.check_done();
            return None;
        }
        self.num_active_tasks.fetch_add(1, SeqCst);
        let idx = self.validation_idx.fetch_add(1, SeqCst);
        if idx < self.block_size {
            let s = self.status[idx].lock();
            if s.1 == Status::Executed {
                return Some((idx, s.0));
            }
        }
        self.num_active_tasks.fetch_sub(1, SeqCst);
        None
    }

    /// The next task, validation first when it lags behind execution.
    pub(crate) fn next_task(&self) -> Option<Task> {
        if self.validation_idx.load(SeqCst) < self.execution_idx.load(SeqCst) {
            self.next_version_to_validate().map(Task::Validate)
        } else {
            self.next_version_to_execute().map(Task::Execute)
        }
    }

    /// Park `txn` until `blocking` has executed again; false if it already has (the
    /// caller then re-executes at once).
    pub(crate) fn add_dependency(&self, txn: usize, blocking: usize) -> bool {
        let mut deps = self.dependencies[blocking].lock();
        if self.status[blocking].lock().1 == Status::Executed {
            return false;
        }
        {
            let mut s = self.status[txn].lock();
            s.1 = Status::Aborting;
        }
        deps.push(txn);
        drop(deps);
        self.num_active_tasks.fetch_sub(1, SeqCst);
        true
    }

    fn set_ready_status(&self, txn: usize) {
        let mut s = self.status[txn].lock();
        *s = (s.0 + 1, Status::ReadyToExecute);
    }

    /// `txn`'s incarnation finished executing; returns a validation task to run at once
    /// when possible.
    pub(crate) fn finish_execution(
        &self,
        txn: usize,
        incarnation: u32,
        wrote_new_location: bool,
    ) -> Option<Task> {
        *self.status[txn].lock() = (incarnation, Status::Executed);
        let deps = std::mem::take(&mut *self.dependencies[txn].lock());
        if let Some(&min) = deps.iter().min() {
            for d in &deps {
                self.set_ready_status(*d);
            }
            self.decrease_execution_idx(min);
        }
        if self.validation_idx.load(SeqCst) > txn {
            if wrote_new_location {
                self.decrease_validation_idx(txn);
            } else {
                return Some(Task::Validate((txn, incarnation)));
            }
        }
        self.num_active_tasks.fetch_sub(1, SeqCst);
        None
    }

    /// Abort `txn`'s incarnation after a failed validation, unless another validation
    /// already did.
    pub(crate) fn try_validation_abort(&self, txn: usize, incarnation: u32) -> bool {
        let mut s = self.status[txn].lock();
        if *s == (incarnation, Status::Executed) {
            s.1 = Status::Aborting;
            true
        } else {
            false
        }
    }

    /// A validation finished; after an abort, returns the re-execution task when it is
    /// the caller's to run.
    pub(crate) fn finish_validation(&self, txn: usize, aborted: bool) -> Option<Task> {
        if aborted {
            self.set_ready_status(txn);
            self.decrease_validation_idx(txn + 1);
            if self.execution_idx.load(SeqCst) > txn {
                // try_incarnate releases the active count itself when it finds nothing.
                return self.try_incarnate(txn).map(Task::Execute);
            }
        }
        self.num_active_tasks.fetch_sub(1, SeqCst);
        None
    }
}
