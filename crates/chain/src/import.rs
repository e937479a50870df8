//! The block import road: blocks → stateless checks → execution (Block-STM or
//! sequential) → `StateDb::commit_expecting` (the header's post-state root checked before
//! anything is published) → the store's background persistence.
//!
//! Pipelined, block N+1 executes on its own thread while block N commits: it reads the
//! store's published state through a [`ReadHandle`] under the change sets of the blocks
//! executed but not yet committed, so whichever of them the store has published, every
//! read sees the state after block N. One bounded queue (`queue_blocks`) lies between
//! execution and commit; a full queue blocks the executor (its wait is reported as
//! stalled time). A failed block — invalid, a root mismatch, a store error — is reported
//! after every block before it has committed, so the head and the error are the same
//! pipelined or not; the speculative results of later blocks are dropped unpublished.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exec::AdaptiveExecutor;
use parking_lot::Mutex;
use state::{
    key_bounds, merge_writes, ChangeSet, RangeItem, StateReader, TransactionError, TrieId, H256,
};
use store::{CommitError, ReadHandle, StateDb, StoreError};

use crate::block::{Block, CodecError};
use crate::chainfile::ChainFileError;
use crate::parallel::{block_txs, ChainReceipt};
use crate::runtime::{account_key, event_key, CorruptState, Counter, InvalidTransaction};
use crate::BlockContext;

/// How [`import`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportConfig {
    /// Execute block N+1 while block N commits.
    pub pipelined: bool,
    /// Execution threads per block (1: the sequential executor); with more, one
    /// `exec::AdaptiveExecutor` kept across the import picks Block-STM or the sequential
    /// executor per block.
    pub exec_workers: usize,
    /// Executed blocks that may wait in the queue for their commit (pipelined; at least
    /// 1). Blocks in flight are at most this plus two: the one committing and one
    /// executed and waiting for room.
    pub queue_blocks: usize,
}

impl Default for ImportConfig {
    /// Pipelined, one block queued, execution on every core but the committer's.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        ImportConfig {
            pipelined: true,
            exec_workers: cores.saturating_sub(1).max(1),
            queue_blocks: 1,
        }
    }
}

/// Why a block is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBlock {
    /// Its bytes do not decode.
    #[error("undecodable: {0}")]
    Undecodable(#[source] CodecError),
    /// Its number does not follow the previous block's (the error names the expected
    /// one: the position that failed).
    #[error("number {got}, expected {expected}")]
    Number {
        /// The next number.
        expected: u64,
        /// The block's.
        got: u64,
    },
    /// Its parent root is not the previous block's post-state root.
    #[error("parent root {got}, the previous state root is {expected}")]
    ParentRoot {
        /// The previous block's post-state root.
        expected: H256,
        /// The block's.
        got: H256,
    },
    /// A transaction is not valid.
    #[error("transaction {index}: {reason}")]
    Transaction {
        /// Its position in the block.
        index: usize,
        /// Why.
        reason: InvalidTransaction,
    },
    /// A transaction met state that does not decode.
    #[error("transaction {index}: {source}")]
    Corrupt {
        /// Its position in the block (the block-end hook counts as one past the last).
        index: usize,
        /// What did not decode.
        source: CorruptState,
    },
    /// The runtime's nested transactions did not balance.
    #[error("runtime: {0}")]
    Runtime(TransactionError),
    /// A block already imported (at or below the head) whose post-state root is not the
    /// one the store recorded for its number.
    #[error("post-state root {got} in the header, the database recorded {recorded} for this block (a damaged block, or another chain's)")]
    Recorded {
        /// The store's.
        recorded: H256,
        /// The header's.
        got: H256,
    },
    /// Its post-state root is not the one its execution gives.
    #[error("post-state root {expected} in the header, execution gives {computed}")]
    PostRoot {
        /// The header's.
        expected: H256,
        /// Computed.
        computed: H256,
    },
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// Block `number` is invalid; the head is the block before it (or, for a block at or
    /// below the head, where it was).
    #[error("invalid block {number}: {reason}")]
    Invalid {
        /// The number expected at the failing position: the previous block's successor
        /// (the record's own number may be anything when it is invalid).
        number: u64,
        /// Why.
        reason: InvalidBlock,
    },
    /// The database's head is not the chain's block at that height: it holds another
    /// chain (nothing was imported past it).
    #[error("the database's block {number} has root {database}, the chain's block {number} has {chain}: the database holds another chain")]
    OtherChain {
        /// The head's number.
        number: u64,
        /// The database's root at the head.
        database: H256,
        /// The chain's post-state root of that block.
        chain: H256,
    },
    /// Every block of the chain lies below the database's head, so nothing shows that the
    /// database holds this chain (the head's block is the one a rerun checks).
    #[error("the database's head is block {head} but the chain ends {}: nothing shows that the database holds this chain", match .last { Some(n) => format!("at block {n}"), None => "at its genesis".to_string() })]
    HeadPastChain {
        /// The database's head.
        head: u64,
        /// The chain's last block (`None`: it has none).
        last: Option<u64>,
    },
    /// The block source failed (a truncated or unreadable chain file).
    #[error(transparent)]
    Source(ChainFileError),
    /// The store failed while executing or committing.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A commit failed for another reason than the block.
    #[error("commit: {0}")]
    Commit(CommitError),
}

/// One committed block, for progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Its number.
    pub number: u64,
    /// Its transactions.
    pub transactions: usize,
    /// Time its commit took (trie update and publish).
    pub commit: Duration,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportStats {
    /// Blocks committed.
    pub blocks: u64,
    /// Their transactions.
    pub transactions: u64,
    /// Blocks skipped as already imported (at or below the head).
    pub skipped: u64,
    /// Time spent executing.
    pub exec: Duration,
    /// Time spent committing (trie update, publish; persistence runs behind).
    pub commit: Duration,
    /// Time the executor waited on a full queue.
    pub stalled: Duration,
    /// Time of the final flush (persistence catching up).
    pub flush: Duration,
    /// Most executed-but-uncommitted blocks held at once.
    pub max_pending_blocks: usize,
    /// Most bytes (keys and values) of their change sets held at once.
    pub max_pending_bytes: u64,
    /// Whether the stop flag ended the import before the source did.
    pub stopped: bool,
}

/// Main-trie writes of one executed block (`None` = delete).
type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// An executed block's changes, shared by the committer and the readers above the store
/// until its commit has published them.
type Shared = Arc<ChangeSet>;

/// The main-trie writes of a change set, if any.
fn main_writes(changes: &ChangeSet) -> Option<&Writes> {
    changes.get(&TrieId::Main)
}

/// An executed block on its way to the committer.
struct Executed {
    number: u64,
    state_root: H256,
    transactions: usize,
    changes: Shared,
    /// Every changed key's value before the block, for the commit.
    prior: ChangeSet,
}

/// Import `blocks` into `db`: blocks at or below the head are checked against the blocks
/// around them and the roots the store recorded, then skipped; the rest must follow it.
/// Stops at the first failure (the head stays at the block before it, or where it was for
/// a block at or below it), at the end of `blocks`, or at a block boundary once `stop` is
/// set. The store is flushed (durable) before returning, whatever the outcome.
pub fn import<I>(
    db: &mut StateDb,
    blocks: I,
    config: &ImportConfig,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(Imported),
) -> (ImportStats, Result<(), ImportError>)
where
    I: Iterator<Item = Result<Block, ImportError>> + Send,
{
    let mut stats = ImportStats::default();
    let result = if config.pipelined {
        pipelined(db, blocks, config, stop, on_block, &mut stats)
    } else {
        unpipelined(db, blocks, config, stop, on_block, &mut stats)
    };
    let start = Instant::now();
    let flushed = db.flush();
    stats.flush = start.elapsed();
    let result = result.and_then(|()| flushed.map_err(ImportError::from));
    (stats, result)
}

/// Check `block` and, unless it was imported already (`Ok(None)`), execute it on the
/// store's state under the changes of the blocks in flight (`above`, oldest first).
fn admit_and_execute(
    seq: &mut Sequencer,
    block: Result<Block, ImportError>,
    base: &ReadHandle,
    above: impl FnOnce() -> Vec<Shared>,
    executor: &mut AdaptiveExecutor,
) -> Result<Option<Executed>, ImportError> {
    let block = block?;
    if seq.admit(&block)?.is_none() {
        return Ok(None);
    }
    let reader = Pending::new(base.clone(), above(), &block)?;
    execute(&block, &reader, executor).map(Some)
}

/// The stateless checks of the next block: its number and parent root. Blocks follow one
/// another; the first may be one imported already, and so may the ones after it up to the
/// head: each of those must link to the block before it and carry the roots the store
/// recorded for it (while its history holds them) before it is skipped.
struct Sequencer {
    next: u64,
    root: H256,
    /// The source's previous block: its number and post-state root.
    prev: Option<(u64, H256)>,
    /// Where the roots recorded for blocks below the head are read.
    recorded: ReadHandle,
    /// The chain was seen to hold the database's head: its block at the head's height
    /// carried the head's root, or the head is the genesis (checked by the caller).
    anchored: bool,
    /// The last block skipped as imported already.
    last_skipped: Option<u64>,
}

impl Sequencer {
    fn new(db: &StateDb) -> Result<Self, StoreError> {
        let head = db.head_number();
        Ok(Sequencer {
            next: head + 1,
            root: db.head_root(),
            prev: None,
            recorded: db.read_handle()?,
            anchored: head == 0,
            last_skipped: None,
        })
    }

    /// At the end of the chain: an error when no block of it reached the database's head.
    fn finish(&self) -> Result<(), ImportError> {
        if self.anchored {
            return Ok(());
        }
        Err(ImportError::HeadPastChain { head: self.next - 1, last: self.last_skipped })
    }

    /// `Ok(None)`: a block already imported, checked and skipped. A block whose number is
    /// not the one expected is invalid block `expected` (so a block at or below the head
    /// after one above it is out of order).
    fn admit(&mut self, block: &Block) -> Result<Option<()>, ImportError> {
        let expected = self.prev.map_or(self.next, |(n, _)| n.saturating_add(1));
        let first_skipped = self.prev.is_none() && block.number < self.next;
        if block.number != expected && !first_skipped {
            return Err(ImportError::Invalid {
                number: expected,
                reason: InvalidBlock::Number { expected, got: block.number },
            });
        }
        let admitted = if block.number < self.next { self.skip(block) } else { self.follow(block) };
        self.prev = Some((block.number, block.state_root));
        admitted
    }

    /// A block at or below the head: it must link to the block before it (the source's,
    /// or for the first one the root the store recorded), and carry the root recorded for
    /// its number; the one at the head's height must carry the head's root, otherwise the
    /// database holds another chain.
    fn skip(&mut self, block: &Block) -> Result<Option<()>, ImportError> {
        let invalid = |reason| ImportError::Invalid { number: block.number, reason };
        match (self.prev, block.number.checked_sub(1)) {
            (Some((_, parent)), _) if block.parent_root != parent => {
                return Err(invalid(InvalidBlock::ParentRoot {
                    expected: parent,
                    got: block.parent_root,
                }));
            }
            (None, Some(parent)) => {
                if let Some(database) = self.recorded.recorded_root(parent)? {
                    if database != block.parent_root {
                        return Err(ImportError::OtherChain {
                            number: parent,
                            database,
                            chain: block.parent_root,
                        });
                    }
                }
            }
            _ => {}
        }
        if block.number + 1 == self.next {
            if block.state_root != self.root {
                return Err(ImportError::OtherChain {
                    number: block.number,
                    database: self.root,
                    chain: block.state_root,
                });
            }
            self.anchored = true;
        } else if let Some(recorded) = self.recorded.recorded_root(block.number)? {
            if recorded != block.state_root {
                return Err(invalid(InvalidBlock::Recorded { recorded, got: block.state_root }));
            }
        }
        self.last_skipped = Some(block.number);
        Ok(None)
    }

    /// The head's successor: it must link to the head.
    fn follow(&mut self, block: &Block) -> Result<Option<()>, ImportError> {
        if block.parent_root != self.root {
            return Err(ImportError::Invalid {
                number: block.number,
                reason: InvalidBlock::ParentRoot { expected: self.root, got: block.parent_root },
            });
        }
        self.next = self.next.saturating_add(1);
        self.root = block.state_root;
        self.anchored = true;
        Ok(Some(()))
    }
}

fn unpipelined<I>(
    db: &mut StateDb,
    blocks: I,
    config: &ImportConfig,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(Imported),
    stats: &mut ImportStats,
) -> Result<(), ImportError>
where
    I: Iterator<Item = Result<Block, ImportError>>,
{
    let mut seq = Sequencer::new(db)?;
    let mut executor = AdaptiveExecutor::new(config.exec_workers);
    for block in blocks {
        if stop.load(Ordering::Relaxed) {
            stats.stopped = true;
            break;
        }
        let start = Instant::now();
        let base = db.read_handle()?;
        let executed = admit_and_execute(&mut seq, block, &base, Vec::new, &mut executor)?;
        stats.exec += start.elapsed();
        match executed {
            None => stats.skipped += 1,
            Some(e) => commit(db, e, stats, on_block)?,
        }
    }
    if stats.stopped {
        return Ok(());
    }
    seq.finish()
}

fn pipelined<I>(
    db: &mut StateDb,
    blocks: I,
    config: &ImportConfig,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(Imported),
    stats: &mut ImportStats,
) -> Result<(), ImportError>
where
    I: Iterator<Item = Result<Block, ImportError>> + Send,
{
    let (tx, rx) = sync_channel::<Result<Executed, ImportError>>(config.queue_blocks.max(1));
    let pending: Mutex<Vec<(u64, Shared)>> = Mutex::new(Vec::new());
    let base = db.read_handle()?;
    let seq = Sequencer::new(db)?;
    let executor = AdaptiveExecutor::new(config.exec_workers);
    let front = Front { base, pending: &pending, executor, stop };
    std::thread::scope(|s| {
        let executor = s.spawn(move || front.run(blocks, seq, tx));
        let committed = drain(db, rx, &pending, stats, on_block);
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

/// The executor's side of the pipeline.
struct Front<'a> {
    base: ReadHandle,
    pending: &'a Mutex<Vec<(u64, Shared)>>,
    /// Block-STM or the sequential executor, chosen per block by measurement.
    executor: AdaptiveExecutor,
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

impl Front<'_> {
    fn run<I>(
        mut self,
        blocks: I,
        mut seq: Sequencer,
        tx: SyncSender<Result<Executed, ImportError>>,
    ) -> FrontStats
    where
        I: Iterator<Item = Result<Block, ImportError>>,
    {
        let mut st = FrontStats::default();
        for block in blocks {
            if self.stop.load(Ordering::Relaxed) {
                st.stopped = true;
                return st;
            }
            let start = Instant::now();
            let above = || self.pending.lock().iter().map(|(_, w)| w.clone()).collect();
            let executed =
                admit_and_execute(&mut seq, block, &self.base, above, &mut self.executor);
            st.exec += start.elapsed();
            let msg = match executed {
                Ok(None) => {
                    st.skipped += 1;
                    continue;
                }
                Ok(Some(e)) => {
                    self.hold(&e, &mut st);
                    Ok(e)
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

    /// Keep `e`'s writes above the store until its commit has published them.
    fn hold(&self, e: &Executed, st: &mut FrontStats) {
        let mut pending = self.pending.lock();
        pending.push((e.number, e.changes.clone()));
        st.max_blocks = st.max_blocks.max(pending.len());
        let bytes: u64 = pending.iter().map(|(_, w)| writes_bytes(w)).sum();
        st.max_bytes = st.max_bytes.max(bytes);
    }
}

fn writes_bytes(changes: &ChangeSet) -> u64 {
    let entry = |(k, v): (&Vec<u8>, &Option<Vec<u8>>)| k.len() + v.as_ref().map_or(0, Vec::len);
    main_writes(changes).into_iter().flatten().map(|e| entry(e) as u64).sum()
}

/// The committer's side: commit each executed block in order, releasing its writes.
fn drain(
    db: &mut StateDb,
    rx: Receiver<Result<Executed, ImportError>>,
    pending: &Mutex<Vec<(u64, Shared)>>,
    stats: &mut ImportStats,
    on_block: &mut dyn FnMut(Imported),
) -> Result<(), ImportError> {
    for msg in rx {
        let executed = msg?;
        let number = executed.number;
        commit(db, executed, stats, on_block)?;
        pending.lock().retain(|(n, _)| *n != number);
    }
    Ok(())
}

fn commit(
    db: &mut StateDb,
    e: Executed,
    stats: &mut ImportStats,
    on_block: &mut dyn FnMut(Imported),
) -> Result<(), ImportError> {
    let start = Instant::now();
    db.commit_with_prior_expecting(&e.changes, &e.prior, e.state_root).map_err(
        |err| match err {
            CommitError::RootMismatch { expected, computed } => ImportError::Invalid {
                number: e.number,
                reason: InvalidBlock::PostRoot { expected, computed },
            },
            CommitError::Store(s) => ImportError::Store(s),
            other => ImportError::Commit(other),
        },
    )?;
    let commit = start.elapsed();
    stats.commit += commit;
    stats.blocks += 1;
    stats.transactions += e.transactions as u64;
    on_block(Imported { number: e.number, transactions: e.transactions, commit });
    Ok(())
}

/// Execute `block` over `reader` (Block-STM or the sequential executor, as `executor`'s
/// measurements of the previous blocks choose): its change set, or why the block is
/// invalid.
fn execute(
    block: &Block,
    reader: &Pending,
    executor: &mut AdaptiveExecutor,
) -> Result<Executed, ImportError> {
    let ctx = BlockContext { number: block.number, author: block.author };
    let txs = block_txs(ctx, &block.transfers);
    let out = executor.execute(&txs, reader)?;
    let invalid = |reason| ImportError::Invalid { number: block.number, reason };
    for (i, receipt) in out.outputs.into_iter().enumerate() {
        let index = i.saturating_sub(1);
        match receipt {
            ChainReceipt::Invalid(reason) => {
                return Err(invalid(InvalidBlock::Transaction { index, reason }))
            }
            ChainReceipt::Corrupt(source) => {
                return Err(invalid(InvalidBlock::Corrupt { index, source }))
            }
            ChainReceipt::Transaction(e) => return Err(invalid(InvalidBlock::Runtime(e))),
            _ => {}
        }
    }
    let prior = reader.prior(&out.writes)?;
    let changes = Arc::new(ChangeSet::from([(TrieId::Main, out.writes)]));
    Ok(Executed {
        number: block.number,
        state_root: block.state_root,
        transactions: block.transfers.len(),
        changes,
        prior: ChangeSet::from([(TrieId::Main, prior)]),
    })
}

/// The state after the blocks in flight: their writes (newest last) over the store, and
/// the values of every key the block can write or read as a transfer (its accounts, its
/// event keys, the counters), read in one batch before it executes.
///
/// The batch is read after `above` is fixed, so a key that a block in flight changes is
/// answered by `above`, and any other key has the same value in every state the batch
/// may have read it from.
struct Pending {
    base: ReadHandle,
    above: Vec<Shared>,
    known: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Pending {
    fn new(base: ReadHandle, above: Vec<Shared>, block: &Block) -> Result<Self, StoreError> {
        let mut keys: Vec<Vec<u8>> = block
            .transfers
            .iter()
            .flat_map(|t| [account_key(&t.from), account_key(&t.to)])
            .chain([account_key(&block.author)])
            .map(|k| k.0.to_vec())
            .chain((0..block.transfers.len() as u32).map(|i| event_key(block.number, i).0.to_vec()))
            .chain(Counter::ALL.iter().map(|c| c.key().to_vec()))
            .filter(|k| !above.iter().filter_map(|c| main_writes(c)).any(|w| w.contains_key(k)))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let values = base.get_many(&TrieId::Main, &keys)?;
        let known = keys.into_iter().zip(values).collect();
        Ok(Pending { base, above, known })
    }

    /// The value before the block of every key in `writes`.
    fn prior(&self, writes: &Writes) -> Result<Writes, StoreError> {
        writes.keys().map(|k| Ok((k.clone(), self.get(&TrieId::Main, k)?))).collect()
    }
}

impl StateReader for Pending {
    type Error = StoreError;
    type Range<'a> = Box<dyn Iterator<Item = RangeItem<StoreError>> + 'a>;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if *trie == TrieId::Main {
            let mut above = self.above.iter().rev().filter_map(|c| main_writes(c));
            if let Some(v) = above.find_map(|w| w.get(key)) {
                return Ok(v.clone().filter(|v| !v.is_empty()));
            }
            if let Some(v) = self.known.get(key) {
                return Ok(v.clone());
            }
        }
        self.base.get(trie, key)
    }

    /// The store's range with the blocks in flight merged over it, oldest first (a newer
    /// block's write lands over an older one's), one streaming merge per block: nothing is
    /// collected.
    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Self::Range<'a>, StoreError> {
        let mut merged: Self::Range<'a> = Box::new(self.base.range(trie, start, end)?);
        if let (TrieId::Main, Some(bounds)) = (trie, key_bounds(start, end)) {
            for w in self.above.iter().filter_map(|c| main_writes(c)) {
                // An empty value is a deletion, as in the store.
                let writes = w
                    .range::<[u8], _>(bounds)
                    .map(|(k, v)| (k.as_slice(), v.as_deref().filter(|v| !v.is_empty())));
                merged = Box::new(merge_writes(merged, writes));
            }
        }
        Ok(merged)
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use store::StoreConfig;

    use super::*;

    fn key(i: u8) -> Vec<u8> {
        vec![b'k', i]
    }

    /// Random main-trie writes of a block in flight: values, deletions and empty values
    /// (deletions too).
    fn writes(rng: &mut ChaCha8Rng) -> Writes {
        (0..rng.gen_range(0..12))
            .map(|_| {
                let value = match rng.gen_range(0..4) {
                    0 => None,
                    1 => Some(Vec::new()),
                    _ => Some(vec![rng.gen(), rng.gen()]),
                };
                (key(rng.gen_range(0..48)), value)
            })
            .collect()
    }

    #[test]
    fn pending_ranges_merge_the_blocks_in_flight_over_the_store() {
        // `ARBOR_SEED` replays a failure; printed so that the harness shows it.
        let seed = match std::env::var("ARBOR_SEED") {
            Ok(s) => s.parse().expect("ARBOR_SEED is a u64"),
            Err(_) => rand::thread_rng().gen(),
        };
        eprintln!("seed {seed} (replay with ARBOR_SEED={seed})");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut db = StateDb::open(dir.path(), StoreConfig::default()).expect("a new store");
        let stored: Writes = (0..40).step_by(3).map(|i| (key(i), Some(vec![i, 0]))).collect();
        let storage = ChangeSet::from([(TrieId::Storage(H256([7; 32])), stored.clone())]);
        db.commit(&ChangeSet::from([(TrieId::Main, stored.clone())])).expect("block 1");
        db.commit(&storage).expect("block 2");
        for round in 0..64 {
            let above: Vec<Shared> = (0..rng.gen_range(0..4))
                .map(|_| Arc::new(ChangeSet::from([(TrieId::Main, writes(&mut rng))])))
                .collect();
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> =
                stored.iter().map(|(k, v)| (k.clone(), v.clone().unwrap_or_default())).collect();
            for (k, v) in above.iter().filter_map(|c| main_writes(c)).flatten() {
                match v.as_ref().filter(|v| !v.is_empty()) {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(k),
                };
            }
            let handle = db.read_handle().expect("a read handle");
            let pending = Pending { base: handle, above, known: HashMap::new() };
            let start = key(rng.gen_range(0..50));
            let end = rng.gen_bool(0.7).then(|| key(rng.gen_range(0..50)));
            let want: Vec<_> = key_bounds(&start, end.as_deref())
                .map(|b| model.range::<[u8], _>(b).map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            let got: Result<Vec<_>, _> =
                pending.range(&TrieId::Main, &start, end.as_deref()).expect("a range").collect();
            assert_eq!(got.expect("no read fails"), want, "seed {seed}, round {round}");
            // Blocks in flight hold main-trie writes only: other tries read the store.
            let other = TrieId::Storage(H256([7; 32]));
            let got: Result<Vec<_>, _> =
                pending.range(&other, &[], None).expect("a range").collect();
            let stored_other: Vec<_> =
                stored.iter().map(|(k, v)| (k.clone(), v.clone().unwrap_or_default())).collect();
            assert_eq!(got.expect("no read fails"), stored_other, "seed {seed}");
        }
    }
}
