//! The block builder: applies transactions from a pool until the next one would take the
//! proof of validity over its limit (or the block over its weight limit), and produces the
//! block, its witness and its post-state root.
//!
//! The limit is checked with the session's exact [`PovSession::proof_size`] after every
//! transaction; a transaction that overflows is discarded (its writes and its witness
//! contribution) and left for the next block. Invalid transactions (unknown sender, wrong
//! nonce, no fee) are skipped. A limit below the witness of an empty block on the parent
//! (the smallest block the builder can produce) is refused before any transaction runs,
//! so a built block's witness never exceeds the limit.
//!
//! The other per-transaction measurements exist for the benchmark's modes: none (witness
//! at the block's end), the exact root after every transaction, or a naive root recomputed
//! from scratch after every transaction.
//!
//! Layouts: [`build_block`] and [`build_block_unrecorded`] take the trie layout as a type
//! parameter, which the caller names (the CLI from `--layout`): Ethereum's, or Substrate's
//! V0 and V1 (Blake2-256 roots, proof sizes in Substrate's SCALE accounting, empty values
//! kept).

use overlay::{ChangeSetError, Overlay, PovError, PovSession};
use state::{ChangeSet, StateReader, TransactionError, TrieId, H256};
use trie::{Layout, NodeSource, Trie, TrieError};

use crate::block::Block;
use crate::runtime::{self, ApplyError, BlockContext, Outcome, Transfer, TRANSFER_WEIGHT};

/// Default proof-of-validity limit (Substrate's 5 MiB).
pub const DEFAULT_POV_LIMIT: usize = 5 * 1024 * 1024;
/// Default weight limit: room for 10,000 transfers.
pub const DEFAULT_WEIGHT_LIMIT: u64 = 10_000 * TRANSFER_WEIGHT;

/// What the builder measures after every transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerTx {
    /// Nothing (the witness is taken at the block's end).
    Nothing,
    /// The exact proof size (and enforce the limit).
    ProofSize,
    /// The exact state root.
    Root,
    /// A root rebuilt from scratch over the parent plus every change so far (the naive way).
    NaiveRoot,
}

/// Builder settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildConfig {
    /// Largest witness, by the layout's proof-size rule (encoded node bytes in Ethereum's
    /// layout).
    pub pov_limit: usize,
    /// Largest block weight.
    pub weight_limit: u64,
    /// Per-transaction measurement (the limit is enforced only with [`PerTx::ProofSize`]).
    pub per_tx: PerTx,
}

impl Default for BuildConfig {
    fn default() -> Self {
        Self {
            pov_limit: DEFAULT_POV_LIMIT,
            weight_limit: DEFAULT_WEIGHT_LIMIT,
            per_tx: PerTx::ProofSize,
        }
    }
}

/// Why the builder stopped taking transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The pool ran out.
    PoolEmpty,
    /// The next transaction would have taken the witness over the limit.
    PovLimit,
    /// The next transaction would have taken the block over the weight limit.
    WeightLimit,
}

/// A built block.
#[derive(Debug, Clone)]
pub struct Built {
    /// The block (its `state_root` is the post-state root).
    pub block: Block,
    /// The witness: deduplicated pre-state nodes, sorted by hash (empty without recording).
    pub witness: Vec<Vec<u8>>,
    /// The witness's size by the layout's proof-size rule (encoded node bytes in
    /// Ethereum's layout; SCALE-encoded nodes in Substrate's).
    pub proof_size: usize,
    /// The block's changes (for the store).
    pub changes: ChangeSet,
    /// Outcome per included transaction.
    pub outcomes: Vec<Outcome>,
    /// Transactions skipped as invalid.
    pub invalid: usize,
    /// Why the builder stopped.
    pub stop: Stop,
    /// Hash calls (keccak, or Blake2-256 in Substrate's layouts) spent on roots.
    pub hashes: u64,
}

/// A builder failure: the configuration cannot be met, or the state below failed (never
/// the transactions' fault: invalid transactions are skipped).
///
/// `E` is the error of the state the runtime reads: [`PovError`] for [`build_block`]
/// (the recording session), the reader's own for [`build_block_unrecorded`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError<E: std::error::Error + 'static = PovError> {
    /// The PoV limit is below the witness of an empty block on this parent, so no block
    /// built on it can meet the limit.
    #[error(
        "PoV limit of {limit} bytes is below {min} bytes, the witness of an empty block on \
         this parent (block-start bookkeeping and the root computation): use a limit of at \
         least {min} bytes"
    )]
    PovLimitTooSmall {
        /// The configured limit.
        limit: usize,
        /// The smallest limit a block on this parent can meet.
        min: usize,
    },
    /// Proof recording or the parent trie failed.
    #[error(transparent)]
    Pov(#[from] PovError),
    /// The parent trie failed.
    #[error(transparent)]
    Trie(#[from] TrieError),
    /// The runtime found corrupt state, the state failed, or the runtime misused nested
    /// transactions.
    #[error("the runtime failed: {0}")]
    Runtime(#[source] ApplyError<E>),
    /// The builder's own transaction around a transaction did not balance (a bug).
    #[error("the builder misused the overlay's nested transactions: {0}")]
    Transaction(#[from] TransactionError),
    /// The block's changes could not be taken from the overlay.
    #[error("cannot take the block's changes: {0}")]
    Changes(#[source] ChangeSetError<E>),
}

/// Build a block in trie layout `L` on the parent `root` served by `source`, recording its
/// witness: the parent `root` and every node `source` serves are `L`'s, and the proof size
/// and limit are counted by `L`'s rule.
///
/// With [`PerTx::ProofSize`] the limit must be at least the witness of an empty block on
/// this parent (the block-start bookkeeping's reads and the root computation), the
/// smallest block the builder can produce: a smaller limit is refused with
/// [`BuildError::PovLimitTooSmall`], which names that size.
pub fn build_block<L: Layout, S: NodeSource>(
    source: &S,
    root: H256,
    ctx: BlockContext,
    pool: &[Transfer],
    config: &BuildConfig,
) -> Result<Built, BuildError> {
    let mut s: PovSession<&S, L> = PovSession::new(source, root);
    runtime::start_block(s.overlay(), &ctx).map_err(BuildError::Runtime)?;
    if config.per_tx == PerTx::ProofSize {
        let min = s.proof_size()?;
        if config.pov_limit < min {
            return Err(BuildError::PovLimitTooSmall { limit: config.pov_limit, min });
        }
    }
    let mut acc = Included::default();
    let mut naive_hashes = 0u64;
    for tx in pool {
        if acc.weight.saturating_add(TRANSFER_WEIGHT) > config.weight_limit {
            acc.stop = Stop::WeightLimit;
            break;
        }
        s.begin_candidate()?;
        let index = acc.transfers.len() as u32;
        let outcome = match runtime::apply(s.overlay(), &ctx, index, tx) {
            Ok(o) => o,
            Err(ApplyError::Invalid(_)) => {
                s.discard()?;
                acc.invalid += 1;
                continue;
            }
            Err(e) => return Err(BuildError::Runtime(e)),
        };
        match config.per_tx {
            PerTx::Nothing => {}
            PerTx::ProofSize => {
                if s.proof_size()? > config.pov_limit {
                    s.discard()?;
                    acc.stop = Stop::PovLimit;
                    break;
                }
            }
            PerTx::Root => {
                s.storage_root()?;
            }
            PerTx::NaiveRoot => {
                naive_hashes += naive_root(source, root, &mut s)?;
            }
        }
        s.keep()?;
        acc.push(tx, outcome);
    }
    runtime::finish_block(s.overlay(), &ctx).map_err(BuildError::Runtime)?;
    let state_root = s.storage_root()?;
    let witness = s.witness()?;
    let proof_size = witness.iter().map(|n| L::PROOF_SIZE.item_size(n.len())).sum();
    let hashes = s.hashes() + naive_hashes;
    let changes = s.overlay().drain_changes().map_err(BuildError::Changes)?;
    let Included { transfers, outcomes, invalid, stop, .. } = acc;
    let block =
        Block { number: ctx.number, parent_root: root, state_root, author: ctx.author, transfers };
    Ok(Built { block, witness, proof_size, changes, outcomes, invalid, stop, hashes })
}

/// The transactions a build has taken so far.
struct Included {
    transfers: Vec<Transfer>,
    outcomes: Vec<Outcome>,
    invalid: usize,
    weight: u64,
    stop: Stop,
}

impl Default for Included {
    fn default() -> Self {
        Included {
            transfers: Vec::new(),
            outcomes: Vec::new(),
            invalid: 0,
            weight: 0,
            stop: Stop::PoolEmpty,
        }
    }
}

impl Included {
    fn push(&mut self, tx: &Transfer, outcome: Outcome) {
        self.weight = self.weight.saturating_add(TRANSFER_WEIGHT);
        self.transfers.push(*tx);
        self.outcomes.push(outcome);
    }
}

/// The naive per-transaction root: a fresh trie over the parent with every change so far
/// applied, hashed with no cached hashes. Returns its hash calls.
fn naive_root<L: Layout, S: NodeSource>(
    source: &S,
    root: H256,
    s: &mut PovSession<&S, L>,
) -> Result<u64, BuildError> {
    let mut t: Trie<_, L> = Trie::from_root(source, root);
    for (trie_id, k, v) in s.overlay().pending_writes() {
        if trie_id != TrieId::Main {
            continue;
        }
        t.write(k, v)?;
    }
    t.root()?;
    Ok(t.hash_stats().hashes)
}

/// Build a block in trie layout `L` without recording (the benchmark's baseline): reads go
/// to `reader` (flat state, holding empty values as `L` does), and the post-state root is
/// computed once at the end on a trie over `source`. No limit is enforced: there is no
/// proof size to check.
pub fn build_block_unrecorded<L: Layout, R: StateReader, S: NodeSource>(
    reader: R,
    source: S,
    root: H256,
    ctx: BlockContext,
    pool: &[Transfer],
) -> Result<Built, BuildError<R::Error>> {
    let mut o = Overlay::new(reader).keep_empty_values(L::ALLOW_EMPTY_VALUE);
    runtime::start_block(&mut o, &ctx).map_err(BuildError::Runtime)?;
    let (mut transfers, mut outcomes, mut invalid) = (Vec::new(), Vec::new(), 0);
    for tx in pool {
        o.start_transaction();
        match runtime::apply(&mut o, &ctx, transfers.len() as u32, tx) {
            Ok(outcome) => {
                o.commit_transaction()?;
                transfers.push(*tx);
                outcomes.push(outcome);
            }
            Err(ApplyError::Invalid(_)) => {
                o.rollback_transaction()?;
                invalid += 1;
            }
            Err(e) => return Err(BuildError::Runtime(e)),
        }
    }
    runtime::finish_block(&mut o, &ctx).map_err(BuildError::Runtime)?;
    let changes = o.drain_changes().map_err(BuildError::Changes)?;
    let mut t: Trie<_, L> = Trie::from_root(source, root);
    for (k, v) in changes.get(&TrieId::Main).into_iter().flatten() {
        t.write(k, v.as_deref())?;
    }
    let state_root = t.root()?;
    let hashes = t.hash_stats().hashes;
    let block =
        Block { number: ctx.number, parent_root: root, state_root, author: ctx.author, transfers };
    Ok(Built {
        block,
        witness: Vec::new(),
        proof_size: 0,
        changes,
        outcomes,
        invalid,
        stop: Stop::PoolEmpty,
        hashes,
    })
}
