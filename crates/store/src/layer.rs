//! In-memory diff layers: one immutable layer per committed block that is not yet on disk.
//!
//! A layer holds the block's change maps exactly as they will be written (`None` =
//! delete), sorted so that range reads (leaf lookups by path prefix) can merge them with
//! the database. The background writer builds the block's write batch straight from these
//! maps. Invariant: layers in the stack have consecutive block numbers, oldest first.

use std::collections::BTreeMap;

use trie::H256;

/// Changes of one column: key → new value (`None` = delete).
pub(crate) type ChangeMap = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// One block's changes, waiting to be persisted.
#[derive(Debug, Default)]
pub(crate) struct Layer {
    /// Block number.
    pub(crate) number: u64,
    /// State root after the block.
    pub(crate) root: H256,
    /// `flat` changes.
    pub(crate) flat: ChangeMap,
    /// `nodes` changes.
    pub(crate) nodes: ChangeMap,
    /// `meta` changes (head, per-trie roots).
    pub(crate) meta: ChangeMap,
    /// The encoded reverse diff, stored under the block number.
    pub(crate) history: Vec<u8>,
    /// A history entry old enough to prune in the same batch.
    pub(crate) prune: Option<u64>,
    /// Approximate heap bytes held (keys + values + history).
    pub(crate) bytes: u64,
}

fn map_bytes(m: &ChangeMap) -> u64 {
    m.iter().map(|(k, v)| (k.len() + v.as_ref().map_or(0, Vec::len) + 48) as u64).sum()
}

impl Layer {
    /// Recompute [`Layer::bytes`].
    pub(crate) fn measure(&mut self) {
        self.bytes = map_bytes(&self.flat)
            + map_bytes(&self.nodes)
            + map_bytes(&self.meta)
            + self.history.len() as u64;
    }
}
