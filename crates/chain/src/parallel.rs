//! The runtime as Block-STM transactions: a block of [`Transfer`]s run by `exec`'s
//! executors (sequential or parallel) with exactly the effects [`runtime::apply`] has on
//! an overlay.
//!
//! Each transaction runs the unchanged runtime code on an [`Overlay`] whose backend is the
//! executor's view (so nested transactions and rollbacks behave as in block building), then
//! hands the overlay's surviving writes to the view. Index 0 of a block is the block-start
//! hook ([`runtime::start_block`]).
//!
//! Note on parallelism: every transfer pays its fee to the block author and updates the
//! per-block bookkeeping (event count, weight, length), and the event key is derived from
//! the event count, so each transaction reads what the previous one wrote. Block-STM still
//! gives the sequential result, but a block of these transfers is as serial as the Cosmos
//! benchmark's worst case; the hot keys would have to become commutative deltas (as the
//! `hot-fee` workload shows) for transfers to run in parallel.

use std::cell::RefCell;

use exec::{Blocked, View};
use overlay::{Overlay, TransactionError};
use trie::{StateReader, TrieId};

use crate::runtime::{self, ApplyError, CorruptState, Invalid, Outcome};
use crate::{BlockContext, Transfer};

/// One transaction of a block executed through `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainTx {
    /// The block-start hook (clears the previous block's bookkeeping).
    Start,
    /// A transfer.
    Transfer(Transfer),
}

/// What a [`ChainTx`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChainReceipt {
    /// The block-start hook ran.
    Started,
    /// The transfer was applied (and did or did not move the amount).
    Applied(Outcome),
    /// The transfer is not valid: it changed nothing.
    Invalid(Invalid),
    /// A stored value did not decode: the transaction changed nothing.
    Corrupt(CorruptState),
    /// The runtime read a child trie, which the executor's state (the main trie only)
    /// does not hold: the transaction changed nothing.
    ChildTrie(TrieId),
    /// The runtime's nested transactions did not balance (a bug in the runtime): the
    /// transaction changed nothing.
    Transaction(TransactionError),
}

/// A [`ChainTx`] in its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockTx {
    /// The block it runs in.
    pub ctx: BlockContext,
    /// The transaction.
    pub tx: ChainTx,
}

/// A block for the executors: the start hook, then `txs`, all in block `ctx`.
pub fn block_txs(ctx: BlockContext, txs: &[Transfer]) -> Vec<BlockTx> {
    std::iter::once(ChainTx::Start)
        .chain(txs.iter().copied().map(ChainTx::Transfer))
        .map(|tx| BlockTx { ctx, tx })
        .collect()
}

/// Why a read through the executor's view failed.
#[derive(Debug, thiserror::Error)]
enum ViewError {
    #[error("read blocked on transaction {0}")]
    Blocked(usize),
    #[error("the runtime read child trie {0:?}; the executor's state is the main trie only")]
    ChildTrie(TrieId),
}

/// The executor's view as an overlay backend (main trie only).
struct ViewReader<'v> {
    view: RefCell<&'v mut dyn View>,
}

impl StateReader for ViewReader<'_> {
    type Error = ViewError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, ViewError> {
        if *trie != TrieId::Main {
            return Err(ViewError::ChildTrie(*trie));
        }
        self.view.borrow_mut().get(key).map_err(|Blocked(i)| ViewError::Blocked(i))
    }
}

impl exec::Transaction for BlockTx {
    type Output = ChainReceipt;

    fn execute(&self, view: &mut dyn View) -> Result<ChainReceipt, Blocked> {
        let BlockTx { ctx, tx } = self;
        let reader = ViewReader { view: RefCell::new(view) };
        let mut o = Overlay::new(&reader);
        let receipt = match tx {
            ChainTx::Start => {
                runtime::start_block(&mut o);
                ChainReceipt::Started
            }
            ChainTx::Transfer(t) => match runtime::apply(&mut o, ctx, t) {
                Ok(outcome) => ChainReceipt::Applied(outcome),
                Err(ApplyError::Invalid(i)) => return Ok(ChainReceipt::Invalid(i)),
                Err(ApplyError::Corrupt(c)) => return Ok(ChainReceipt::Corrupt(c)),
                Err(ApplyError::Transaction(e)) => return Ok(ChainReceipt::Transaction(e)),
                Err(ApplyError::State(ViewError::Blocked(i))) => return Err(Blocked(i)),
                Err(ApplyError::State(ViewError::ChildTrie(t))) => {
                    return Ok(ChainReceipt::ChildTrie(t))
                }
            },
        };
        let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = o
            .pending_writes()
            .into_iter()
            .map(|(_, k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        drop(o);
        let view = reader.view.into_inner();
        for (k, v) in writes {
            match v {
                Some(v) => view.set(&k, v),
                None => view.delete(&k),
            }
        }
        Ok(receipt)
    }
}
