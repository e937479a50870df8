//! The runtime as Block-STM transactions: a block of [`Transfer`]s run by `exec`'s
//! executors (sequential or parallel) with exactly the effects [`runtime::apply`] has on
//! an overlay.
//!
//! Each transaction runs the runtime directly on the executor's per-transaction view (a
//! [`state::StateView`] with its own checkpoint stack for the runtime's nested
//! transactions): no overlay per transaction, no write copied. Index 0 of a block is the
//! block-start hook ([`runtime::start_block`]), the last the block-end hook
//! ([`runtime::finish_block`]). A transaction that fails (invalid, corrupt state) is
//! rolled back whole: it changes nothing.
//!
//! Parallelism: transfers touch their two accounts plus the block's counters and fee pot,
//! and those go through deltas, which create no read dependency; events are keyed by the
//! transaction's position. Transfers among distinct accounts therefore run in parallel;
//! only the block-end hook reads the pot.

use exec::{Stop, View};
use state::TransactionError;

use crate::runtime::{self, ApplyError, CorruptState, InvalidTransaction, Outcome};
use crate::{BlockContext, Transfer};

/// One transaction of a block executed through `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainTx {
    /// The block-start hook (clears the previous block's bookkeeping).
    Start,
    /// Transfer `.0` of the block (its position names its event).
    Transfer(u32, Transfer),
    /// The block-end hook (pays the fees to the author).
    Finish,
}

/// What a [`ChainTx`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChainReceipt {
    /// The block-start hook ran.
    Started,
    /// The transfer was applied (and did or did not move the amount).
    Applied(Outcome),
    /// The block-end hook ran.
    Finished,
    /// The transfer is not valid: it changed nothing.
    Invalid(InvalidTransaction),
    /// A stored value did not decode: the transaction changed nothing.
    Corrupt(CorruptState),
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

/// A block for the executors: the start hook, then `txs` (numbered from 0), then the end
/// hook, all in block `ctx`.
pub fn block_txs(ctx: BlockContext, txs: &[Transfer]) -> Vec<BlockTx> {
    std::iter::once(ChainTx::Start)
        .chain(txs.iter().zip(0u32..).map(|(t, i)| ChainTx::Transfer(i, *t)))
        .chain([ChainTx::Finish])
        .map(|tx| BlockTx { ctx, tx })
        .collect()
}

impl BlockTx {
    fn run(&self, view: &mut dyn View) -> Result<ChainReceipt, ApplyError<Stop>> {
        let BlockTx { ctx, tx } = self;
        Ok(match tx {
            ChainTx::Start => {
                runtime::start_block(view, ctx)?;
                ChainReceipt::Started
            }
            ChainTx::Transfer(i, t) => ChainReceipt::Applied(runtime::apply(view, ctx, *i, t)?),
            ChainTx::Finish => {
                runtime::finish_block(view, ctx)?;
                ChainReceipt::Finished
            }
        })
    }
}

impl exec::Transaction for BlockTx {
    type Output = ChainReceipt;

    fn execute(&self, view: &mut dyn View) -> Result<ChainReceipt, Stop> {
        let receipt = match self.run(view) {
            Ok(receipt) => return Ok(receipt),
            Err(ApplyError::State(stop)) => return Err(stop),
            Err(ApplyError::Invalid(i)) => ChainReceipt::Invalid(i),
            Err(ApplyError::Corrupt(c)) => ChainReceipt::Corrupt(c),
            Err(ApplyError::Transaction(e)) => ChainReceipt::Transaction(e),
        };
        // A failed transaction changes nothing.
        view.discard_writes();
        Ok(receipt)
    }
}
