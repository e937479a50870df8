//! Ordered range reads of one trie's flat state: the layer stack merged over a RocksDB
//! iterator, the store's side of the seam's [`state::StateReader::range`].
//!
//! The layers are snapshotted first, then the iterator opened: whatever the writer has
//! persisted meanwhile is in both and agrees (a layer holds a block's newest values), and
//! no commit can run while the iterator borrows the store.

use std::ops::Range;
use std::sync::Arc;

use rocksdb::DBRawIterator;
use state::{merge_writes, TrieId};

use crate::error::StoreError;
use crate::keys::{flat_key, flat_range_for_path};
use crate::rocks::flat_iter;
use crate::tiers::layer::Layer;
use crate::tiers::reader::Reader;

/// The entries of one trie in a key range, in ascending key order (keys without the
/// trie prefix): `flat` on disk with each layer's writes in the range merged over it,
/// oldest layer first, through the seam's one ordered merge; nothing is collected, so a
/// caller that reads one entry (a storage emptiness check) pays one seek per layer, not a
/// copy of every write in the range. Stops after the first error.
pub struct FlatRange<'a> {
    merge: Box<dyn Iterator<Item = RangeEntry> + 'a>,
    prefix_len: usize,
}

/// A full flat key and its value, or why it could not be read.
type RangeEntry = Result<(Vec<u8>, Vec<u8>), StoreError>;

impl std::fmt::Debug for FlatRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatRange").field("prefix_len", &self.prefix_len).finish_non_exhaustive()
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
        // The layers are snapshotted before the iterator is opened (see the module docs).
        let layers: Vec<Arc<Layer>> = self.layers.read().clone();
        let mut it = flat_iter(&self.db)?;
        it.seek(&lo);
        let mut merge: Box<dyn Iterator<Item = RangeEntry> + '_> =
            Box::new(Disk { it, end: end.clone(), done: false });
        for layer in layers {
            let span = layer.flat.span(&lo, &end.0, end.1);
            if !span.is_empty() {
                merge = Box::new(merge_writes(merge, LayerSlice { layer, span }));
            }
        }
        Ok(FlatRange { merge, prefix_len: trie.prefix_len() })
    }
}

/// One layer's writes in a range, ascending, as writes (an empty value deletes, as in
/// `flat`).
struct LayerSlice {
    layer: Arc<Layer>,
    span: Range<usize>,
}

impl Iterator for LayerSlice {
    type Item = (Vec<u8>, Option<Vec<u8>>);

    fn next(&mut self) -> Option<Self::Item> {
        let (key, value) = self.layer.flat.entry(self.span.next()?);
        Some((key.clone(), value.as_deref().filter(|v| !v.is_empty()).map(<[u8]>::to_vec)))
    }
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
