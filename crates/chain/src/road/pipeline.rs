//! The road's two loops: unpipelined (execute a block, commit it, next) and pipelined (an
//! executor thread runs ahead of the committer by at most `queue_blocks` blocks, its reads
//! under the blocks in flight), and the commit of one executed block.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use state::{ChildRoots, H256};
use store::{CommitError, CommitInfo, ReadHandle, StateDb};

use super::pending::Pending;
use super::sequence::Sequencer;
use super::{
    BlockChanges, BlockExecutor, Executed, ImportConfig, ImportError, ImportStats, Imported,
    InvalidBlock,
};

/// A block executed and on its way to the committer, with what the road needs to commit it.
struct Ready {
    number: u64,
    state_root: H256,
    transactions: usize,
    gas_used: u64,
    /// Shared with the readers above the store until its commit has published it.
    changes: Arc<BlockChanges>,
}

impl Ready {
    fn new(number: u64, state_root: H256, executed: Executed) -> Ready {
        let Executed { transactions, gas_used, changes } = executed;
        Ready { number, state_root, transactions, gas_used, changes: Arc::new(changes) }
    }
}

/// The blocks in flight: executed, not yet committed, oldest first, by number.
type InFlight = Mutex<Vec<(u64, Arc<BlockChanges>)>>;

/// Check `block` and, unless it was imported already (`Ok(None)`), execute it on the
/// store's state under the changes of the blocks in flight (`above`, oldest first).
fn admit_and_execute<E: BlockExecutor>(
    seq: &mut Sequencer,
    executor: &mut E,
    block: Result<E::Block, ImportError>,
    base: &ReadHandle,
    above: impl FnOnce() -> Vec<(u64, Arc<BlockChanges>)>,
) -> Result<Option<Ready>, ImportError> {
    let block = block?;
    if seq.admit(executor, &block)?.is_none() {
        return Ok(None);
    }
    let link = executor.link(&block);
    let mut state = Pending::new(base.clone(), above());
    let executed = executor.execute(&block, &mut state)?;
    Ok(Some(Ready::new(link.number, link.state_root, executed)))
}

pub(super) fn unpipelined<E, I>(
    db: &mut StateDb,
    blocks: I,
    mut executor: E,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(Imported),
    stats: &mut ImportStats,
) -> Result<(), ImportError>
where
    E: BlockExecutor,
    I: Iterator<Item = Result<E::Block, ImportError>>,
{
    let mut seq = Sequencer::new(db, &executor)?;
    let model = executor.model();
    for block in blocks {
        if stop.load(Ordering::Relaxed) {
            stats.stopped = true;
            break;
        }
        let start = Instant::now();
        let base = db.read_handle()?;
        let ready = admit_and_execute(&mut seq, &mut executor, block, &base, Vec::new)?;
        stats.exec += start.elapsed();
        match ready {
            None => stats.skipped += 1,
            Some(r) => commit(db, model, r, stats, on_block)?,
        }
    }
    if stats.stopped {
        return Ok(());
    }
    seq.finish()
}

pub(super) fn pipelined<E, I>(
    db: &mut StateDb,
    blocks: I,
    executor: E,
    config: &ImportConfig,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(Imported),
    stats: &mut ImportStats,
) -> Result<(), ImportError>
where
    E: BlockExecutor,
    I: Iterator<Item = Result<E::Block, ImportError>> + Send,
{
    let (tx, rx) = sync_channel::<Result<Ready, ImportError>>(config.queue_blocks.max(1));
    let pending: InFlight = Mutex::new(Vec::new());
    let base = db.read_handle()?;
    let seq = Sequencer::new(db, &executor)?;
    let model = executor.model();
    let front = Front { base, pending: &pending, executor, stop };
    std::thread::scope(|s| {
        // The source (reading and decoding blocks: an Ethereum block's sender recovery)
        // runs ahead of execution, `queue_blocks` blocks at most, on a pool of its own: its
        // parallel work never queues in front of the commit's on the global pool (where a
        // block's recoveries held each commit's trie update back until they were done). It
        // ends when the executor drops its receiver.
        let (source_tx, source_rx) = sync_channel(config.queue_blocks.max(1));
        s.spawn(move || match source_pool() {
            Some(pool) => pool.install(|| read_ahead(blocks, source_tx, stop)),
            None => read_ahead(blocks, source_tx, stop),
        });
        let executor = s.spawn(move || front.run(source_rx.into_iter(), seq, tx));
        let committed = drain(db, model, rx, &pending, stats, on_block);
        // Dropping the receiver (inside `drain`) ends the executor at its next send.
        let front_stats = executor.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        stats.exec += front_stats.exec;
        stats.stalled += front_stats.stalled;
        stats.skipped += front_stats.skipped;
        stats.stopped |= front_stats.stopped;
        stats.max_pending_blocks = stats.max_pending_blocks.max(front_stats.max_blocks);
        stats.max_pending_bytes = stats.max_pending_bytes.max(front_stats.max_bytes);
        committed
    })
}

/// The source's pool: every core but one (the executor's; the commit's pool has them
/// all), at least one thread. `None` if its threads cannot be started: the source then
/// shares the global pool.
fn source_pool() -> Option<rayon::ThreadPool> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    rayon::ThreadPoolBuilder::new()
        .num_threads(cores.saturating_sub(1).max(1))
        .thread_name(|i| format!("arbor-source-{i}"))
        .build()
        .ok()
}

/// Send the blocks of `blocks` into `to` until it is dropped, the source ends or fails,
/// or a stop is asked.
fn read_ahead<B, I>(blocks: I, to: SyncSender<Result<B, ImportError>>, stop: &AtomicBool)
where
    I: Iterator<Item = Result<B, ImportError>>,
{
    for block in blocks {
        let failed = block.is_err();
        if stop.load(Ordering::Relaxed) || to.send(block).is_err() || failed {
            return;
        }
    }
}

/// The executor's side of the pipeline.
struct Front<'a, E> {
    base: ReadHandle,
    pending: &'a InFlight,
    executor: E,
    stop: &'a AtomicBool,
}

#[derive(Default)]
struct FrontStats {
    exec: Duration,
    stalled: Duration,
    skipped: u64,
    stopped: bool,
    max_blocks: usize,
    max_bytes: u64,
}

impl<E: BlockExecutor> Front<'_, E> {
    fn run<I>(
        mut self,
        blocks: I,
        mut seq: Sequencer,
        tx: SyncSender<Result<Ready, ImportError>>,
    ) -> FrontStats
    where
        I: Iterator<Item = Result<E::Block, ImportError>>,
    {
        let mut st = FrontStats::default();
        for block in blocks {
            if self.stop.load(Ordering::Relaxed) {
                st.stopped = true;
                return st;
            }
            let start = Instant::now();
            let pending = self.pending;
            let above = || pending.lock().clone();
            let ready = admit_and_execute(&mut seq, &mut self.executor, block, &self.base, above);
            st.exec += start.elapsed();
            let msg = match ready {
                Ok(None) => {
                    st.skipped += 1;
                    continue;
                }
                Ok(Some(r)) => {
                    self.hold(&r, &mut st);
                    Ok(r)
                }
                Err(e) => Err(e),
            };
            let failed = msg.is_err();
            let start = Instant::now();
            if tx.send(msg).is_err() || failed {
                return st;
            }
            st.stalled += start.elapsed();
        }
        if let Err(e) = seq.finish() {
            // The committer reports it after the blocks before it (if it still listens).
            let _ = tx.send(Err(e));
        }
        st
    }

    /// Keep `r`'s changes above the store until its commit has published them.
    fn hold(&self, r: &Ready, st: &mut FrontStats) {
        let mut pending = self.pending.lock();
        pending.push((r.number, r.changes.clone()));
        st.max_blocks = st.max_blocks.max(pending.len());
        let bytes: u64 = pending.iter().map(|(_, c)| changes_bytes(c)).sum();
        st.max_bytes = st.max_bytes.max(bytes);
    }
}

/// Keys and values a block's changes hold.
fn changes_bytes(changes: &BlockChanges) -> u64 {
    let tries = match changes {
        BlockChanges::Flat { changes, .. } => changes,
        BlockChanges::Nested(n) => &n.changes,
    };
    let entry = |(k, v): (&Vec<u8>, &Option<Vec<u8>>)| k.len() + v.as_ref().map_or(0, Vec::len);
    tries.values().flatten().map(|e| entry(e) as u64).sum()
}

/// The committer's side: commit each executed block in order, releasing its changes.
fn drain(
    db: &mut StateDb,
    model: Option<&'static dyn ChildRoots>,
    rx: Receiver<Result<Ready, ImportError>>,
    pending: &InFlight,
    stats: &mut ImportStats,
    on_block: &mut dyn FnMut(Imported),
) -> Result<(), ImportError> {
    for msg in rx {
        let ready = msg?;
        let number = ready.number;
        commit(db, model, ready, stats, on_block)?;
        pending.lock().retain(|(n, _)| *n != number);
    }
    Ok(())
}

/// Commit one executed block, expecting its header's post-state root.
fn commit(
    db: &mut StateDb,
    model: Option<&'static dyn ChildRoots>,
    r: Ready,
    stats: &mut ImportStats,
    on_block: &mut dyn FnMut(Imported),
) -> Result<(), ImportError> {
    let start = Instant::now();
    let committed = commit_changes(db, model, &r.changes, r.state_root);
    committed.map_err(|err| match err {
        CommitError::RootMismatch { expected, computed } => ImportError::Invalid {
            number: r.number,
            reason: InvalidBlock::PostRoot { expected, computed },
        },
        CommitError::Store(s) => ImportError::Store(s),
        other => ImportError::Commit(other),
    })?;
    let commit = start.elapsed();
    let (transactions, gas_used) = (r.transactions, r.gas_used);
    stats.commit += commit;
    stats.blocks += 1;
    stats.transactions += transactions as u64;
    stats.gas_used += gas_used;
    on_block(Imported { number: r.number, transactions, gas_used, commit });
    Ok(())
}

fn commit_changes(
    db: &mut StateDb,
    model: Option<&'static dyn ChildRoots>,
    changes: &BlockChanges,
    expected: H256,
) -> Result<CommitInfo, CommitError> {
    match changes {
        BlockChanges::Flat { changes, prior } => {
            db.commit_with_prior_expecting(changes, prior, expected)
        }
        BlockChanges::Nested(nested) => {
            // Invariant of the executor: nested changes come with the model they need.
            let model =
                model.expect("an executor whose blocks change nested tries names its model");
            db.commit_nested_expecting(nested, model, expected)
        }
    }
}
