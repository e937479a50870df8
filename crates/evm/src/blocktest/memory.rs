//! [`MemoryTip`]: a blockchain test's state in memory, a [`MemoryWorld`] with the changes
//! of the blocks it holds, and [`InMemoryChain`], the chain over it (the default of
//! `arbor blocktest` and of the test suite).
//!
//! A [`MemoryWorld`] cannot take a commit back: undoing blocks rebuilds the world from the
//! genesis by applying the changes of the blocks that remain, and a block whose changes
//! give another root than expected is undone the same way. Cost: one commit per block
//! applied; an undo costs one commit per block kept.

use eth::{EthChanges, MemoryWorld, WorldError};
use state::H256;

use super::chain::{Chain, ChainTip};

/// A blockchain test's chain in memory.
pub type InMemoryChain = Chain<MemoryTip>;

impl InMemoryChain {
    /// An empty chain in memory; [`super::BlockBackend::start`] gives it a genesis.
    pub fn new() -> Self {
        Chain::with_tip(MemoryTip::default())
    }
}

impl Default for InMemoryChain {
    fn default() -> Self {
        Self::new()
    }
}

/// The state in memory (see the module docs).
#[derive(Default)]
pub struct MemoryTip {
    world: MemoryWorld,
    held: Vec<H256>,
    changes: Vec<EthChanges>,
}

impl MemoryTip {
    /// Rebuild the world from the changes held.
    fn rebuild(&mut self) -> Result<(), WorldError> {
        let mut world = MemoryWorld::new();
        for changes in &self.changes {
            world.apply(changes)?;
        }
        self.world = world;
        Ok(())
    }
}

impl ChainTip for MemoryTip {
    type Reader<'a> = &'a MemoryWorld;
    type Error = WorldError;

    fn holds(&self) -> &[H256] {
        &self.held
    }

    fn undo(&mut self, n: usize) -> Result<(), WorldError> {
        if n == 0 {
            return Ok(());
        }
        let keep = self.held.len().saturating_sub(n);
        self.held.truncate(keep);
        self.changes.truncate(keep);
        self.rebuild()
    }

    fn apply(
        &mut self,
        hash: H256,
        changes: &EthChanges,
        expected: Option<H256>,
    ) -> Result<Result<H256, H256>, WorldError> {
        let root = self.world.apply(changes)?;
        if expected.is_some_and(|want| want != root) {
            self.rebuild()?;
            return Ok(Err(root));
        }
        self.held.push(hash);
        self.changes.push(changes.clone());
        Ok(Ok(root))
    }

    fn reader(&self) -> &MemoryWorld {
        &self.world
    }

    fn root(&self) -> H256 {
        self.world.root()
    }

    fn finish(&mut self) -> Result<(), WorldError> {
        Ok(())
    }
}
