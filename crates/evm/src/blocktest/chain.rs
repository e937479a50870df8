//! [`BlockBackend`], where a blockchain test's chain lives, and its in-memory
//! implementation [`InMemoryChain`].
//!
//! A backend starts from a genesis (allocation and genesis block), imports blocks by
//! their RLP (each accepted, becoming the head, or refused with a [`Rejection`] that
//! leaves the head unchanged) and answers for the head: its hash, its state root, reads of
//! its state. The import road with RocksDB (`arbor blocktest --db`) plugs in as a second
//! backend running the same blocks.
//!
//! [`InMemoryChain`] keeps every accepted block's header and state changes, and the head's
//! state in a [`MemoryWorld`]. A block may extend any known block, not only the head (the
//! tests' side chains): the world is then rebuilt at the parent by replaying the changes
//! from genesis. A block whose state root does not match is refused and the world rebuilt
//! at the head the same way (in memory a commit cannot be taken back). Cost per block:
//! decode, validate, execute, one commit; a replay costs one commit per block replayed.

use std::collections::HashMap;

use alloy_consensus::Header;
use eth::{EthChanges, Genesis, MemoryWorld, WorldError};
use state::H256;

use crate::block::{
    decode_block, execute_block, validate_header, ChainConfig, DecodeError, EthBlock, ExecError,
    InvalidBlock,
};
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
}

/// A known block of an [`InMemoryChain`].
struct Known {
    header: Header,
    /// The block's changes (the genesis allocation for the genesis block).
    changes: EthChanges,
}

/// A blockchain test's chain in memory (see the module docs).
#[derive(Default)]
pub struct InMemoryChain {
    chain: Option<ChainConfig>,
    blocks: HashMap<H256, Known>,
    genesis: H256,
    head: H256,
    /// The state at `world_at`.
    world: MemoryWorld,
    world_at: H256,
}

/// Why the in-memory chain failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InMemoryError {
    /// A commit failed.
    #[error(transparent)]
    World(#[from] WorldError),
    /// Execution failed for a reason that is not the block's.
    #[error("execution failed: {0}")]
    Execution(String),
    /// A block was imported before the chain was started.
    #[error("the chain has no genesis yet")]
    NotStarted,
}

impl InMemoryChain {
    /// An empty chain; [`BlockBackend::start`] gives it a genesis.
    pub fn new() -> Self {
        Self::default()
    }

    /// The hashes from `to` back to genesis, `to` first.
    fn path(&self, to: H256) -> Vec<H256> {
        let mut path = vec![to];
        let mut at = to;
        while at != self.genesis {
            let Some(known) = self.blocks.get(&at) else { break };
            at = H256(known.header.parent_hash.0);
            path.push(at);
        }
        path
    }

    /// Make `world` the state after block `at` (replaying from genesis if it is not).
    fn world_at(&mut self, at: H256) -> Result<(), InMemoryError> {
        if self.world_at == at {
            return Ok(());
        }
        let mut world = MemoryWorld::new();
        for hash in self.path(at).into_iter().rev() {
            if let Some(known) = self.blocks.get(&hash) {
                world.apply(&known.changes)?;
            }
        }
        self.world = world;
        self.world_at = at;
        Ok(())
    }

    fn import_block(&mut self, block: EthBlock) -> Result<Verdict, InMemoryError> {
        let chain = self.chain.clone().ok_or(InMemoryError::NotStarted)?;
        let parent_hash = H256(block.header.parent_hash.0);
        let Some(parent) = self.blocks.get(&parent_hash) else {
            return Ok(Verdict::Rejected(Rejection::UnknownParent(parent_hash)));
        };
        if let Err(invalid) = validate_header(&block.header, &parent.header, &chain) {
            return Ok(Verdict::Rejected(invalid.into()));
        }
        self.world_at(parent_hash)?;
        let hashes = Ancestors { blocks: &self.blocks, parent: parent_hash };
        let outcome = match execute_block(&block, &self.world, &hashes, &chain) {
            Ok(outcome) => outcome,
            Err(ExecError::Invalid(invalid)) => return Ok(Verdict::Rejected(invalid.into())),
            Err(e) => return Err(InMemoryError::Execution(e.to_string())),
        };
        let got = self.world.apply(&outcome.changes)?;
        let want = H256(block.header.state_root.0);
        if got != want {
            // The world holds the refused block's state: `import` rebuilds it at the head.
            self.world_at = H256::default();
            return Ok(Verdict::Rejected(Rejection::StateRoot { got, want }));
        }
        self.world_at = block.hash;
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

impl BlockBackend for InMemoryChain {
    type State<'a> = &'a MemoryWorld;
    type Error = InMemoryError;

    fn start(
        &mut self,
        pre: &Genesis,
        genesis: &EthBlock,
        chain: &ChainConfig,
    ) -> Result<H256, InMemoryError> {
        let changes = EthChanges::from_genesis(pre);
        let mut world = MemoryWorld::new();
        let root = world.apply(&changes)?;
        *self = InMemoryChain {
            chain: Some(chain.clone()),
            blocks: HashMap::new(),
            genesis: genesis.hash,
            head: genesis.hash,
            world,
            world_at: genesis.hash,
        };
        self.blocks.insert(genesis.hash, Known { header: genesis.header.clone(), changes });
        Ok(root)
    }

    fn import(&mut self, rlp: &[u8]) -> Result<Verdict, InMemoryError> {
        let verdict = match decode_block(rlp) {
            Ok(block) => self.import_block(block)?,
            Err(e) => Verdict::Rejected(e.into()),
        };
        // A refused block may have moved the world to its parent: bring it back to the head.
        let head = self.head;
        self.world_at(head)?;
        Ok(verdict)
    }

    fn head(&self) -> H256 {
        self.head
    }

    fn head_root(&self) -> H256 {
        self.world.root()
    }

    fn head_state(&self) -> &MemoryWorld {
        &self.world
    }
}
