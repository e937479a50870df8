//! The in-memory pre-state the unit tests and the speed probe update.
use std::collections::{BTreeMap, HashMap};

use std::sync::Arc;

use state::TrieId;

use super::{KeyValue, PreState};
use crate::error::StoreError;

/// Which stored nodes memory knows without a lookup ([`PreState::node_in_memory`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) enum Known {
    /// Nodes at paths of even length ("resident" and complete): every lookup kind is
    /// exercised.
    #[default]
    EvenPaths,
    /// None: every node is looked up.
    Nothing,
    /// Every node.
    Everything,
}

/// Stored nodes by path, and the flat state, as the store keeps them.
#[derive(Default)]
pub(crate) struct Mem {
    pub(crate) nodes: HashMap<Vec<u8>, Arc<[u8]>>,
    pub(crate) flat: BTreeMap<Vec<u8>, Vec<u8>>,
    pub(crate) known: Known,
}

impl PreState for Mem {
    fn trie(&self) -> TrieId {
        TrieId::Main
    }

    fn node(&self, path: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        Ok(self.nodes.get(path).cloned())
    }

    fn node_in_memory(&self, path: &[u8]) -> Option<Option<&[u8]>> {
        let known = match self.known {
            Known::EvenPaths => path.len().is_multiple_of(2),
            Known::Nothing => false,
            Known::Everything => true,
        };
        known.then(|| self.nodes.get(path).map(|v| &v[..]))
    }

    fn leaf_under(&self, path: &[u8]) -> Result<Option<KeyValue>, StoreError> {
        // The keys under `path` are the ones from its first (zero-padded) bytes on, up
        // to the first that is not under it.
        let mut lo = Vec::new();
        for pair in path.chunks(2) {
            lo.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
        }
        let mut under =
            self.flat.range(lo..).take_while(|(k, _)| crate::tiers::reader::key_has_path(k, path));
        let first = under.next().map(|(k, v)| (k.clone(), v.clone()));
        assert!(under.next().is_none(), "two keys under the leaf at {path:?}");
        Ok(first)
    }
}
