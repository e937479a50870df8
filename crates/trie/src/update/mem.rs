//! The in-memory pre-state the unit tests and the speed probe update.
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;

use state::KeyValue;

use super::PreState;
use crate::nibbles::nibble_at;

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

/// Whether `key`'s nibbles start with `path`.
fn key_has_path(key: &[u8], path: &[u8]) -> bool {
    path.len() <= key.len() * 2 && path.iter().enumerate().all(|(i, n)| nibble_at(key, i) == *n)
}

impl PreState for Mem {
    type Error = Infallible;

    fn node(&self, path: &[u8]) -> Result<Option<Arc<[u8]>>, Infallible> {
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

    fn leaf_under(&self, path: &[u8]) -> Result<Option<KeyValue>, Infallible> {
        // The keys under `path` are the ones from its first (zero-padded) bytes on, up
        // to the first that is not under it.
        let mut lo = Vec::new();
        for pair in path.chunks(2) {
            lo.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
        }
        let mut under = self.flat.range(lo..).take_while(|(k, _)| key_has_path(k, path));
        let first = under.next().map(|(k, v)| (k.clone(), v.clone()));
        assert!(under.next().is_none(), "two keys under the leaf at {path:?}");
        Ok(first)
    }
}
