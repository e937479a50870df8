//! Ordered range reads of one trie's flat state: the layer stack merged over a RocksDB
//! iterator, the store's side of the seam's [`state::StateReader::range`].
//!
//! The layers are snapshotted first, then the iterator opened: whatever the writer has
//! persisted meanwhile is in both and agrees (a layer holds a block's newest values), and
//! no commit can run while the iterator borrows the store.

use std::collections::btree_map;
use std::collections::BTreeMap;
use std::sync::Arc;

use rocksdb::DBRawIterator;
use state::{merge_writes, MergeWrites, TrieId};

use crate::error::StoreError;
use crate::keys::{flat_key, flat_range_for_path};
use crate::rocks::flat_iter;
use crate::tiers::reader::Reader;

/// A key's newest value in the layers (`None`: deleted).
type LayerValue = Option<Arc<[u8]>>;

/// The layers' newest writes in the range, ascending (full flat keys; an empty value is a
/// deletion, as in `flat`).
type LayerWrites = std::iter::Map<
    btree_map::IntoIter<Vec<u8>, LayerValue>,
    fn((Vec<u8>, LayerValue)) -> (Vec<u8>, Option<Vec<u8>>),
>;

/// The entries of one trie in a key range, in ascending key order (keys without the
/// trie prefix): the layers' writes over `flat` on disk, through the seam's one ordered
/// merge. Stops after the first error.
pub struct FlatRange<'a> {
    merge: MergeWrites<Disk<'a>, LayerWrites>,
    prefix_len: usize,
}

impl std::fmt::Debug for FlatRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatRange").field("merge", &self.merge).finish_non_exhaustive()
    }
}

impl Reader {
    /// The entries of trie `trie` with `start <= key < end`.
    pub(crate) fn flat_range(
        &self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<FlatRange<'_>, StoreError> {
        let lo = flat_key(trie, start)?;
        let end = match end {
            Some(end) => (flat_key(trie, end)?, false),
            None => (flat_range_for_path(trie, &[]).1, true),
        };
        let within = |k: &[u8]| k >= lo.as_slice() && before_end(&end, k);
        let mut newest = BTreeMap::new();
        for layer in self.layers.read().iter() {
            for (k, v) in layer.flat.iter().filter(|(k, _)| within(k)) {
                newest.insert(k.to_vec(), v.clone());
            }
        }
        let mut it = flat_iter(&self.db)?;
        it.seek(&lo);
        let layers: LayerWrites = newest.into_iter().map(layer_write as fn(_) -> _);
        Ok(FlatRange {
            merge: merge_writes(Disk { it, end, done: false }, layers),
            prefix_len: trie.prefix_len(),
        })
    }
}

/// A layer's newest value as a write: an empty value deletes, as in `flat`.
fn layer_write((key, value): (Vec<u8>, LayerValue)) -> (Vec<u8>, Option<Vec<u8>>) {
    (key, value.filter(|v| !v.is_empty()).map(|v| v.to_vec()))
}

/// Whether full flat key `k` lies before the range's end (exclusive, or the inclusive end
/// of the trie's keys).
fn before_end((end, inclusive): &(Vec<u8>, bool), k: &[u8]) -> bool {
    if *inclusive {
        k <= end.as_slice()
    } else {
        k < end.as_slice()
    }
}

/// `flat` on disk from the range's start to its end, ascending (full flat keys; entries
/// with an empty value, which `flat` never holds, are skipped). Stops after an error.
struct Disk<'a> {
    it: DBRawIterator<'a>,
    end: (Vec<u8>, bool),
    done: bool,
}

impl Iterator for Disk<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some(k) = self.it.key().filter(|k| before_end(&self.end, k)) else {
                self.done = true;
                return self.it.status().err().map(|e| Err(e.into()));
            };
            let (k, v) = (k.to_vec(), self.it.value().map(<[u8]>::to_vec).unwrap_or_default());
            self.it.next();
            if !v.is_empty() {
                return Some(Ok((k, v)));
            }
        }
        None
    }
}

impl Iterator for FlatRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (k, v) = match self.merge.next()? {
            Ok(entry) => entry,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok((k[self.prefix_len..].to_vec(), v)))
    }
}
