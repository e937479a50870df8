//! Proofs straight from sorted entries, in any layout: the streaming builder runs once and
//! keeps only the nodes that lie on the proven keys' paths, then the proof walker follows
//! each key through them.
//!
//! This needs no mutable trie and no node store, so it serves layouts the mutable trie does
//! not take yet (Substrate's) and callers that hold a trie's entries but not its nodes (a
//! chain spec's genesis). The proof is the same node list [`crate::Trie::prove_many`] gives:
//! the root and every node referenced by hash on the keys' paths, each once in first-use
//! order, plus in Substrate's V1 layout the value nodes of the proven values.
//!
//! Cost: one root computation (each node encoded and hashed once), plus one unpacking and a
//! binary search over the keys per finished node; memory holds the kept nodes only.

use std::collections::{HashMap, HashSet};

use state::H256;

use crate::builder::{BuildError, EmittedKind, NodeSink, RootBuilder};
use crate::nibbles::{NibbleSlice, Nibbles};
use crate::node::{ChildRef, Layout};
use crate::proof::walk;

/// Keeps the nodes (by hash) that start on one of the target paths.
struct PathSink<L: Layout> {
    /// Unpacked nibble paths of the proven keys, sorted and deduplicated.
    targets: Vec<Vec<u8>>,
    nodes: HashMap<H256, Vec<u8>>,
    _layout: std::marker::PhantomData<L>,
}

impl<L: Layout> PathSink<L> {
    /// True when some target path starts with `path`. The smallest target not below `path`
    /// is the one to check: a target with that prefix sorts before every other target above.
    fn on_a_path(&self, path: NibbleSlice<'_>) -> bool {
        let p = path.to_nibbles().0;
        let i = self.targets.partition_point(|t| *t < p);
        self.targets.get(i).is_some_and(|t| t.starts_with(&p))
    }
}

impl<L: Layout> NodeSink for PathSink<L> {
    const LEAVES: bool = true;

    fn node(&mut self, _: EmittedKind, path: NibbleSlice<'_>, encoded: &[u8], r: &ChildRef) {
        // Inline nodes travel inside their parents, except the root, which a proof always
        // holds (its hash is the root).
        let hash = match r.as_hash() {
            Some(h) => h,
            None if path.is_empty() => L::hash(encoded),
            None => return,
        };
        if self.on_a_path(path) {
            self.nodes.insert(hash, encoded.to_vec());
        }
    }
}

/// A proof for `keys` (each present or absent) in the trie of `items`, which must be
/// sorted by key with no duplicates (else the builder's [`BuildError`]). One key gives a
/// single-key proof in path order ([`crate::verify_proof`]); several give a multiproof
/// ([`crate::verify_multiproof`]).
pub fn prove_sorted<L, K, V>(
    items: &[(K, V)],
    keys: &[impl AsRef<[u8]>],
) -> Result<Vec<Vec<u8>>, BuildError>
where
    L: Layout,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut targets: Vec<Vec<u8>> =
        keys.iter().map(|k| Nibbles::from_bytes(k.as_ref()).0).collect();
    targets.sort_unstable();
    targets.dedup();
    let sink = PathSink::<L> { targets, nodes: HashMap::new(), _layout: Default::default() };
    let mut builder = RootBuilder::<L, PathSink<L>>::with_sink(sink);
    for (k, v) in items {
        builder.add(k.as_ref(), v.as_ref())?;
    }
    let (root, mut sink, _) = builder.finish_with();
    if let Some(min) = L::FAMILY.value_node_min() {
        for key in keys {
            if let Ok(i) = items.binary_search_by(|(k, _)| k.as_ref().cmp(key.as_ref())) {
                let v = items[i].1.as_ref();
                if v.len() >= min {
                    sink.nodes.insert(L::hash(v), v.to_vec());
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for key in keys {
        let walked = walk::<L>(&root, key.as_ref(), |hash, _| {
            let node = sink.nodes.get(hash);
            // Invariant: the sink kept every hashed node on the key's path.
            let node = node.expect("the builder reports every node on a proven key's path");
            if seen.insert(*hash) {
                out.push(node.clone());
            }
            Ok(node.as_slice())
        });
        walked.expect("the builder's own nodes decode");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethereum::EthLayout;
    use crate::mutable::Trie;
    use crate::proof::verify_proof;
    use crate::source::MemoryNodeSource;

    #[test]
    fn matches_the_mutable_tries_proofs() {
        let items: Vec<(Vec<u8>, Vec<u8>)> = (0u16..300)
            .map(|i| {
                (i.wrapping_mul(7919).to_be_bytes().to_vec(), vec![i as u8; 1 + (i % 40) as usize])
            })
            .collect();
        let mut items = items;
        items.sort();
        let mut trie: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::default());
        for (k, v) in &items {
            trie.insert(k, v).unwrap();
        }
        let root = trie.root().unwrap();
        for key in [&items[5].0[..], &items[200].0[..], &[0xff, 0xff][..], &[0x00][..]] {
            let a = prove_sorted::<EthLayout, _, _>(&items, &[key]).unwrap();
            assert_eq!(a, trie.prove(key).unwrap(), "key {key:02x?}");
            verify_proof::<EthLayout>(&root, key, &a).unwrap();
        }
        let keys = [&items[1].0, &items[2].0, &items[250].0];
        assert_eq!(
            prove_sorted::<EthLayout, _, _>(&items, &keys).unwrap(),
            trie.prove_many(&keys).unwrap()
        );
    }
}
