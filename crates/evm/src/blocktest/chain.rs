//! [`BlockBackend`], where a blockchain test's chain lives, and [`Chain`], its one
//! implementation over a [`ChainTip`] (the state: in memory, [`super::MemoryTip`], or on a
//! RocksDB store, [`super::StoreTip`]).
//!
//! A backend starts from a genesis (allocation and genesis block), imports blocks by
//! their RLP (each accepted, becoming the head, or refused with a [`Rejection`] that
//! leaves the head unchanged), answers for the head (its hash, its state root, reads of
//! its state) and, at the end, checks its own consistency ([`BlockBackend::finish`]).
//!
//! [`Chain`] keeps every accepted block's header and state changes; its tip holds the
//! state after a path of blocks from genesis. A block may extend any known block, not
//! only the head (the tests' side chains): the tip then undoes its blocks down to the
//! common ancestor and applies the parent's branch. A block is decoded, validated against
//! its parent, executed over the tip at its parent and its changes applied only if they
//! give its header's state root. Cost per block: decode, validate, execute, one commit;
//! moving between branches costs the tip's undo and one commit per block replayed.

use std::collections::HashMap;

use alloy_consensus::Header;
use eth::{EthChanges, Genesis};
use state::H256;

use crate::block::{
    decode_block, execute_block, validate_header, ChainConfig, DecodeError, EthBlock, ExecError,
    InvalidBlock,
};
use crate::reader::WorldReader;
use crate::BlockHashes;

/// Why a backend refused a block (its head is unchanged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The bytes are not a block.
    #[error("undecodable: {0}")]
    Decode(#[from] DecodeError),
    /// The fixture's `rlp` is not even hex.
    #[error("rlp is not hex: {0}")]
    NotHex(String),
    /// The parent is not a known block.
    #[error("unknown parent {0}")]
    UnknownParent(H256),
    /// The block breaks a rule.
    #[error("{0}")]
    Invalid(#[from] InvalidBlock),
    /// The state root after the block is not the header's.
    #[error("state root {got}, header has {want}")]
    StateRoot {
        /// After the commit.
        got: H256,
        /// The header's.
        want: H256,
    },
    /// Another backend's reason.
    #[error("{0}")]
    Other(String),
}

/// The result of importing one block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted: the block's hash, now the head.
    Imported(H256),
    /// Refused; the head is unchanged.
    Rejected(Rejection),
}

/// Where a blockchain test's chain lives (see the module docs).
pub trait BlockBackend {
    /// A reader of the head's state.
    type State<'a>: crate::WorldReader
    where
        Self: 'a;
    /// Why the backend itself failed (not the block's fault).
    type Error: std::error::Error + 'static;

    /// Start the chain at `genesis` (its block) with `pre` as its state, under `chain`;
    /// the genesis state root.
    fn start(
        &mut self,
        pre: &Genesis,
        genesis: &EthBlock,
        chain: &ChainConfig,
    ) -> Result<H256, Self::Error>;

    /// Import the block whose RLP is `rlp`.
    fn import(&mut self, rlp: &[u8]) -> Result<Verdict, Self::Error>;

    /// The head block's hash.
    fn head(&self) -> H256;

    /// The head's state root.
    fn head_root(&self) -> H256;

    /// A reader of the head's state.
    fn head_state(&self) -> Self::State<'_>;

    /// The end of a test: the backend's own checks (a store's flush and verify).
    fn finish(&mut self) -> Result<(), Self::Error>;
}

/// A known block of a [`Chain`].
struct Known {
    header: Header,
    /// The block's changes (the genesis allocation for the genesis block).
    changes: EthChanges,
}

/// Where a [`Chain`]'s state lives: the state after a path of blocks from genesis.
pub trait ChainTip {
    /// A reader of the state.
    type Reader<'a>: WorldReader
    where
        Self: 'a;
    /// Why the tip failed (not a block's fault).
    type Error: std::error::Error + 'static;

    /// The blocks whose changes the state holds, genesis first.
    fn holds(&self) -> &[H256];

    /// Undo the last `n` blocks held.
    fn undo(&mut self, n: usize) -> Result<(), Self::Error>;

    /// Apply block `hash`'s `changes`; with `expected`, only if they give that root
    /// (else `Ok(Err(root they give))`, the state unchanged). The new root.
    fn apply(
        &mut self,
        hash: H256,
        changes: &EthChanges,
        expected: Option<H256>,
    ) -> Result<Result<H256, H256>, Self::Error>;

    /// A reader of the state.
    fn reader(&self) -> Self::Reader<'_>;

    /// The state's root.
    fn root(&self) -> H256;

    /// The end of a test: the tip's own checks.
    fn finish(&mut self) -> Result<(), Self::Error>;
}

/// A blockchain test's chain over a [`ChainTip`] (see the module docs).
pub struct Chain<T> {
    chain: Option<ChainConfig>,
    blocks: HashMap<H256, Known>,
    genesis: H256,
    head: H256,
    tip: T,
}

/// Why a [`Chain`] failed (not a block's fault).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError<E: std::error::Error + 'static> {
    /// The tip failed.
    #[error(transparent)]
    Tip(E),
    /// Execution failed for a reason that is not the block's.
    #[error("execution failed: {0}")]
    Execution(String),
    /// A block was imported before the chain was started.
    #[error("the chain has no genesis yet")]
    NotStarted,
}

impl<T: ChainTip> Chain<T> {
    /// A chain over `tip`, without a genesis yet ([`BlockBackend::start`] gives it one).
    pub fn with_tip(tip: T) -> Self {
        Chain {
            chain: None,
            blocks: HashMap::new(),
            genesis: H256::default(),
            head: H256::default(),
            tip,
        }
    }

    /// The hashes from genesis to `to`, genesis first.
    fn path(&self, to: H256) -> Vec<H256> {
        let mut path = vec![to];
        let mut at = to;
        while at != self.genesis {
            let Some(known) = self.blocks.get(&at) else { break };
            at = H256(known.header.parent_hash.0);
            path.push(at);
        }
        path.reverse();
        path
    }

    /// Make the tip hold the state after block `at`: undo to the common ancestor, then
    /// apply `at`'s branch.
    fn tip_at(&mut self, at: H256) -> Result<(), ChainError<T::Error>> {
        let path = self.path(at);
        let held = self.tip.holds();
        let common = held.iter().zip(&path).take_while(|(a, b)| a == b).count();
        self.tip.undo(held.len() - common).map_err(ChainError::Tip)?;
        for hash in &path[common..] {
            let Some(known) = self.blocks.get(hash) else { break };
            self.tip.apply(*hash, &known.changes, None).map_err(ChainError::Tip)?.ok();
        }
        Ok(())
    }

    fn import_block(&mut self, block: EthBlock) -> Result<Verdict, ChainError<T::Error>> {
        let chain = self.chain.clone().ok_or(ChainError::NotStarted)?;
        let parent_hash = H256(block.header.parent_hash.0);
        let Some(parent) = self.blocks.get(&parent_hash) else {
            return Ok(Verdict::Rejected(Rejection::UnknownParent(parent_hash)));
        };
        if let Err(invalid) = validate_header(&block.header, &parent.header, &chain) {
            return Ok(Verdict::Rejected(invalid.into()));
        }
        self.tip_at(parent_hash)?;
        let hashes = Ancestors { blocks: &self.blocks, parent: parent_hash };
        let outcome = match execute_block(&block, &self.tip.reader(), &hashes, &chain) {
            Ok(outcome) => outcome,
            Err(ExecError::Invalid(invalid)) => return Ok(Verdict::Rejected(invalid.into())),
            Err(e) => return Err(ChainError::Execution(e.to_string())),
        };
        let want = H256(block.header.state_root.0);
        let applied = self.tip.apply(block.hash, &outcome.changes, Some(want));
        if let Err(got) = applied.map_err(ChainError::Tip)? {
            return Ok(Verdict::Rejected(Rejection::StateRoot { got, want }));
        }
        self.head = block.hash;
        self.blocks.insert(block.hash, Known { header: block.header, changes: outcome.changes });
        Ok(Verdict::Imported(self.head))
    }
}

/// The hashes of a block's ancestors, for BLOCKHASH: walked back from its parent.
struct Ancestors<'a> {
    blocks: &'a HashMap<H256, Known>,
    parent: H256,
}

impl BlockHashes for Ancestors<'_> {
    fn block_hash(&self, number: u64) -> Option<H256> {
        let mut at = self.parent;
        loop {
            let known = self.blocks.get(&at)?;
            if known.header.number == number {
                return Some(at);
            }
            if known.header.number < number {
                return None;
            }
            at = H256(known.header.parent_hash.0);
        }
    }
}

impl<T: ChainTip> BlockBackend for Chain<T> {
    type State<'a>
        = T::Reader<'a>
    where
        T: 'a;
    type Error = ChainError<T::Error>;

    fn start(
        &mut self,
        pre: &Genesis,
        genesis: &EthBlock,
        chain: &ChainConfig,
    ) -> Result<H256, Self::Error> {
        let changes = EthChanges::from_genesis(pre);
        self.tip.undo(self.tip.holds().len()).map_err(ChainError::Tip)?;
        let root = self.tip.apply(genesis.hash, &changes, None).map_err(ChainError::Tip)?;
        let root = root.unwrap_or_else(|got| got);
        self.chain = Some(chain.clone());
        self.blocks =
            HashMap::from([(genesis.hash, Known { header: genesis.header.clone(), changes })]);
        self.genesis = genesis.hash;
        self.head = genesis.hash;
        Ok(root)
    }

    fn import(&mut self, rlp: &[u8]) -> Result<Verdict, Self::Error> {
        let verdict = match decode_block(rlp) {
            Ok(block) => self.import_block(block)?,
            Err(e) => Verdict::Rejected(e.into()),
        };
        // A refused block may have moved the tip to its parent: bring it back to the head.
        self.tip_at(self.head)?;
        Ok(verdict)
    }

    fn head(&self) -> H256 {
        self.head
    }

    fn head_root(&self) -> H256 {
        self.tip.root()
    }

    fn head_state(&self) -> T::Reader<'_> {
        self.tip.reader()
    }

    fn finish(&mut self) -> Result<(), Self::Error> {
        self.tip.finish().map_err(ChainError::Tip)
    }
}
