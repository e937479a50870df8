//! The transfer runtime on the import road: [`import()`] runs a chain of [`Block`]s
//! through [`crate::import_with`] with the runtime's executor (Block-STM or the sequential
//! executor, chosen per block by `exec::AdaptiveExecutor`). Blocks link by post-state root;
//! the values of every key a block can read or write as a transfer (its accounts, its
//! event keys, the counters) are read in one batch before it executes.

use std::sync::atomic::AtomicBool;

use exec::AdaptiveExecutor;
use state::{ChangeSet, ChildRoots, TrieId, H256};
use store::{ReadHandle, StateDb, StoreError};

use crate::block::Block;
use crate::parallel::{block_txs, ChainReceipt};
use crate::road::{
    import_with, BlockChanges, BlockExecutor, Executed, IdKind, ImportConfig, ImportError,
    ImportStats, Imported, InvalidBlock, Link, Pending,
};
use crate::runtime::{account_key, event_key, Counter};
use crate::BlockContext;

/// The transfer runtime's executor: one `exec::AdaptiveExecutor` kept across the import.
pub(crate) struct TransferExecutor {
    executor: AdaptiveExecutor,
}

impl TransferExecutor {
    pub(crate) fn new(workers: usize) -> Self {
        TransferExecutor { executor: AdaptiveExecutor::new(workers) }
    }
}

/// The main-trie keys a block can read or write as a transfer.
fn block_keys(block: &Block) -> Vec<Vec<u8>> {
    let accounts = block.transfers.iter().flat_map(|t| [account_key(&t.from), account_key(&t.to)]);
    let events = (0..block.transfers.len() as u32).map(|i| event_key(block.number, i));
    accounts
        .chain([account_key(&block.author)])
        .chain(events)
        .map(|k| k.0.to_vec())
        .chain(Counter::ALL.iter().map(|c| c.key().to_vec()))
        .collect()
}

impl BlockExecutor for TransferExecutor {
    type Block = Block;
    const ID_KIND: IdKind = IdKind::StateRoot;

    fn link(&self, block: &Block) -> Link {
        let root = block.state_root;
        Link { number: block.number, parent: block.parent_root, id: root, state_root: root }
    }

    fn recorded_id(&self, store: &ReadHandle, number: u64) -> Result<Option<H256>, StoreError> {
        store.recorded_root(number)
    }

    /// Execute `block` (Block-STM or the sequential executor, as the executor's
    /// measurements of the previous blocks choose): its change set, or why it is invalid.
    fn execute(&mut self, block: &Block, state: &mut Pending) -> Result<Executed, ImportError> {
        state.prefetch(&TrieId::Main, block_keys(block))?;
        let ctx = BlockContext { number: block.number, author: block.author };
        let txs = block_txs(ctx, &block.transfers);
        let out = self.executor.execute(&txs, &*state)?;
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
        let prior = state.prior(&TrieId::Main, &out.writes)?;
        let changes = ChangeSet::from([(TrieId::Main, out.writes)]);
        let prior = ChangeSet::from([(TrieId::Main, prior)]);
        let changes = BlockChanges::Flat { changes, prior };
        Ok(Executed { transactions: block.transfers.len(), gas_used: 0, changes })
    }

    fn model(&self) -> Option<&'static dyn ChildRoots> {
        None
    }
}

/// Import a chain of transfer-runtime blocks into `db` (see [`crate::import_with`]):
/// execution on `config.exec_workers` threads, Block-STM or the sequential executor per
/// block.
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
    let executor = TransferExecutor::new(config.exec_workers);
    import_with(db, blocks, executor, config, stop, on_block)
}
