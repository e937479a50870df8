//! Ethereum blocks on the import road: [`EvmExecutor`], the `chain::BlockExecutor` that
//! executes an [`EthRoadBlock`] against the road's [`Pending`] state (the store's published
//! state under the blocks executed but not yet committed), and [`import_eth`], which runs
//! a chain of them through `chain::import_with` (the one road: pipelining, the commit's
//! root check, resumability and stop handling are the road's).
//!
//! Blocks link by hash ([`IdKind::BlockHash`]). The store keeps each block's header RLP as
//! its record (`state::NestedChanges::record`, written by the block's commit; block 0's
//! by the genesis load), so the id recorded for a block is the keccak of its record and a
//! resumed import links its first block to the head's header. A database must hold the
//! genesis header as block 0's record: the Ethereum block number is the store's block
//! number.
//!
//! Per block: the header checked against its parent's (the previous block executed here,
//! else the parent's record) under the [`ChainConfig`] ([`crate::block::validate_header`]),
//! then [`crate::block::execute_block`] over a [`PendingWorld`]: the body, the system
//! calls, the transactions, the withdrawals and requests, and the header's gas used,
//! receipts root, logs bloom, requests hash and blob gas. The block's changes go to the
//! road as nested changes under [`AccountModel`], whose commit checks the header's state
//! root before anything is published. A block that breaks a rule is
//! `ImportError::Invalid` with the executor's reason ([`RoadError::Invalid`] or
//! [`RoadError::Undecodable`] inside `chain::InvalidBlock::Rejected`); the head stays at
//! the block before it.
//!
//! Blocks come from any iterator; [`RlpBlocks`] reads a file of concatenated RLP blocks
//! (`geth export`'s format).
//!
//! BLOCKHASH reads the hashes of the blocks executed in this import (the last 256 kept)
//! and, below them, the keccak of the store's records (kept for the head and the 256
//! blocks before it).

mod source;
mod world;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use alloy_consensus::Header;
use chain::{
    import_with, BlockChanges, BlockExecutor, Executed, IdKind, ImportConfig, ImportError,
    ImportStats, Imported, Link, Pending, Rejection,
};
use eth::AccountModel;
use state::{ChildRoots, H256};
use store::{ReadHandle, StateDb, StoreError};

use crate::block::{
    decode_block, execute_block, split_header, validate_header, ChainConfig, DecodeError, EthBlock,
    ExecError, InvalidBlock,
};
use crate::database::DbError;
use crate::stored::{BlockHashes, StoreReadError};
pub use source::RlpBlocks;
use world::PendingWorld;

/// The hashes BLOCKHASH may ask for: the 256 blocks before the executing one.
const BLOCK_HASHES_KEPT: u64 = 256;

/// An Ethereum block as the road carries it: decoded, with its header's bytes (the record
/// its commit stores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthRoadBlock {
    /// The decoded block.
    pub block: EthBlock,
    /// The header's RLP as the block carries it (its keccak is `block.hash`).
    pub header_rlp: Vec<u8>,
}

impl EthRoadBlock {
    /// Decode a block from its RLP (see [`decode_block`]).
    pub fn decode(rlp: &[u8]) -> Result<Self, DecodeError> {
        let block = decode_block(rlp)?;
        let header_rlp = split_header(rlp).map_err(DecodeError::Rlp)?.0.to_vec();
        // `decode_block` hashed the bytes its header decoder consumed, which are these for
        // a header that decodes strictly; checked, not assumed, as the record is what the
        // next import links to.
        if trie::keccak256(&header_rlp) != block.hash {
            let problem = "the header's bytes are not the ones its hash was taken of";
            return Err(DecodeError::Rlp(alloy_rlp::Error::Custom(problem)));
        }
        Ok(EthRoadBlock { block, header_rlp })
    }
}

/// Why the EVM executor refused a block, or could not execute one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RoadError {
    /// The block's bytes are not a block.
    #[error("undecodable: {0}")]
    Undecodable(#[from] DecodeError),
    /// The block breaks a rule (its header, body, transactions or the header's
    /// commitments to execution's results).
    #[error("{0}")]
    Invalid(#[from] InvalidBlock),
    /// The parent's record (its header) is not in the store.
    #[error("the store holds no record of block {number}, the parent")]
    NoParentRecord {
        /// The parent's number.
        number: u64,
    },
    /// The parent's record does not decode as a header.
    #[error("the store's record of block {number} is not a header: {source}")]
    ParentRecord {
        /// The parent's number.
        number: u64,
        /// Why.
        source: alloy_rlp::Error,
    },
    /// Execution failed for a reason that is not the block's.
    #[error(transparent)]
    Execution(ExecError<StoreReadError>),
}

/// `ImportError::Invalid` for block `number` with the executor's `reason`.
fn refused(number: u64, reason: RoadError) -> ImportError {
    let reason = chain::InvalidBlock::Rejected(Rejection::new(reason));
    ImportError::Invalid { number, reason }
}

/// The refusal of a block whose bytes do not decode, at position `number` of its chain
/// (for block sources: the road's reason for an undecodable block).
pub fn undecodable(number: u64, error: DecodeError) -> ImportError {
    refused(number, RoadError::Undecodable(error))
}

/// The Ethereum block executor of the road (see the module docs).
#[derive(Debug)]
pub struct EvmExecutor {
    chain: ChainConfig,
    /// The last block executed: its number and header (the next one's parent).
    last: Option<(u64, Header)>,
    /// Hashes of the blocks executed, the last [`BLOCK_HASHES_KEPT`].
    recent: BTreeMap<u64, H256>,
}

impl EvmExecutor {
    /// An executor of blocks under `chain`'s fork schedule.
    pub fn new(chain: ChainConfig) -> Self {
        EvmExecutor { chain, last: None, recent: BTreeMap::new() }
    }

    /// The header of block `number` − 1: the last block executed, else its record.
    fn parent_header(&self, number: u64, state: &Pending) -> Result<Header, ImportError> {
        let parent = number.saturating_sub(1);
        if let Some((n, header)) = &self.last {
            if *n == parent {
                return Ok(header.clone());
            }
        }
        let executor = |reason| ImportError::Executor { number, reason: Rejection::new(reason) };
        let record = state
            .block_record(parent)?
            .ok_or(executor(RoadError::NoParentRecord { number: parent }))?;
        let mut bytes = record.as_slice();
        let header = <Header as alloy_rlp::Decodable>::decode(&mut bytes)
            .map_err(|source| executor(RoadError::ParentRecord { number: parent, source }))?;
        Ok(header)
    }

    /// Remember block `number`'s header and hash for its successors.
    fn remember(&mut self, number: u64, hash: H256, header: Header) {
        self.recent.insert(number, hash);
        while self.recent.len() as u64 > BLOCK_HASHES_KEPT {
            self.recent.pop_first();
        }
        self.last = Some((number, header));
    }
}

/// Block hashes for BLOCKHASH: the executor's recent ones, else the records' (a failed
/// read is kept, to be reported after execution).
struct RecordHashes<'a> {
    state: &'a Pending,
    recent: &'a BTreeMap<u64, H256>,
    failed: RefCell<Option<StoreError>>,
}

impl BlockHashes for RecordHashes<'_> {
    fn block_hash(&self, number: u64) -> Option<H256> {
        if let Some(hash) = self.recent.get(&number) {
            return Some(*hash);
        }
        match self.state.block_record(number) {
            Ok(record) => record.map(|r| trie::keccak256(&r)),
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                None
            }
        }
    }
}

/// What an execution error is on the road: a refusal, a store failure, or the executor's.
fn exec_error(number: u64, error: ExecError<StoreReadError>) -> ImportError {
    match error {
        ExecError::Invalid(invalid) => refused(number, RoadError::Invalid(invalid)),
        ExecError::State(DbError::Read(StoreReadError::Store(e))) => ImportError::Store(e),
        other => {
            ImportError::Executor { number, reason: Rejection::new(RoadError::Execution(other)) }
        }
    }
}

impl BlockExecutor for EvmExecutor {
    type Block = EthRoadBlock;
    const ID_KIND: IdKind = IdKind::BlockHash;

    fn link(&self, block: &EthRoadBlock) -> Link {
        let header = &block.block.header;
        Link {
            number: header.number,
            parent: H256(header.parent_hash.0),
            id: block.block.hash,
            state_root: H256(header.state_root.0),
        }
    }

    fn recorded_id(&self, store: &ReadHandle, number: u64) -> Result<Option<H256>, StoreError> {
        Ok(store.block_record(number)?.map(|record| trie::keccak256(&record)))
    }

    fn execute(
        &mut self,
        block: &EthRoadBlock,
        state: &mut Pending,
    ) -> Result<Executed, ImportError> {
        let header = &block.block.header;
        let number = header.number;
        let parent = self.parent_header(number, state)?;
        validate_header(header, &parent, &self.chain)
            .map_err(|e| refused(number, RoadError::Invalid(e)))?;
        let hashes = RecordHashes { state, recent: &self.recent, failed: RefCell::new(None) };
        let outcome = execute_block(&block.block, PendingWorld::new(state), &hashes, &self.chain);
        if let Some(e) = hashes.failed.into_inner() {
            return Err(ImportError::Store(e));
        }
        let outcome = outcome.map_err(|e| exec_error(number, e))?;
        let mut nested = outcome.changes.to_nested();
        nested.record = Some(block.header_rlp.clone());
        self.remember(number, block.block.hash, header.clone());
        Ok(Executed {
            transactions: block.block.transactions.len(),
            gas_used: outcome.gas_used,
            changes: BlockChanges::Nested(nested),
        })
    }

    fn model(&self) -> Option<&'static dyn ChildRoots> {
        Some(&AccountModel)
    }
}

/// Import a chain of Ethereum blocks into `db` (whose block 0's record is the chain's
/// genesis header) under `chain`'s fork schedule (see `chain::import_with`).
pub fn import_eth<I>(
    db: &mut StateDb,
    blocks: I,
    chain: ChainConfig,
    config: &ImportConfig,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(Imported),
) -> (ImportStats, Result<(), ImportError>)
where
    I: Iterator<Item = Result<EthRoadBlock, ImportError>> + Send,
{
    import_with(db, blocks, EvmExecutor::new(chain), config, stop, on_block)
}
