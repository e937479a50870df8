//! Ordered range reads of one trie's flat state: the layer stack merged over a RocksDB
//! iterator, the store's side of the seam's [`state::StateReader::range`].
//!
//! The layers are snapshotted first, then the iterator opened: whatever the writer has
//! persisted meanwhile is in both and agrees (a layer holds a block's newest values), and
//! no commit can run while the iterator borrows the store.

use std::collections::btree_map;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::sync::Arc;

use rocksdb::DBRawIterator;
use state::{KeyValue, TrieId};

use crate::db::flat_iter;
use crate::error::StoreError;
use crate::keys::{flat_key, flat_range_for_path};
use crate::view::Reader;

/// A key's newest value in the layers (`None`: deleted).
type LayerValue = Option<Arc<[u8]>>;

/// The entries of one trie in a key range, in ascending key order (keys without the
/// trie prefix). Stops after the first error.
pub struct FlatRange<'a> {
    disk: Option<DBRawIterator<'a>>,
    /// Newest layer value of every key in the range (`None`: deleted).
    layers: Peekable<btree_map::IntoIter<Vec<u8>, LayerValue>>,
    /// Exclusive end (full flat key), or the inclusive end of the trie's keys.
    end: (Vec<u8>, bool),
    prefix_len: usize,
}

impl std::fmt::Debug for FlatRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatRange").field("done", &self.disk.is_none()).finish_non_exhaustive()
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
        let within = |k: &[u8]| k >= lo.as_slice() && FlatRange::before_end(&end, k);
        let mut newest = BTreeMap::new();
        for layer in self.layers.read().iter() {
            for (k, v) in layer.flat.iter().filter(|(k, _)| within(k)) {
                newest.insert(k.to_vec(), v.clone());
            }
        }
        let mut disk = flat_iter(&self.db)?;
        disk.seek(&lo);
        Ok(FlatRange {
            disk: Some(disk),
            layers: newest.into_iter().peekable(),
            end,
            prefix_len: trie.prefix_len(),
        })
    }
}

impl FlatRange<'_> {
    fn before_end((end, inclusive): &(Vec<u8>, bool), k: &[u8]) -> bool {
        if *inclusive {
            k <= end.as_slice()
        } else {
            k < end.as_slice()
        }
    }

    /// The disk iterator's current entry within the range.
    fn disk_key(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(it) = &self.disk else { return Ok(None) };
        match it.key() {
            Some(k) if Self::before_end(&self.end, k) => Ok(Some(k.to_vec())),
            Some(_) => Ok(None),
            None => it.status().map(|()| None).map_err(StoreError::from),
        }
    }

    fn step(&mut self) -> Result<Option<KeyValue>, StoreError> {
        loop {
            let disk = self.disk_key()?;
            let take_layer = match (self.layers.peek(), &disk) {
                (None, None) => return Ok(None),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((lk, _)), Some(dk)) => lk <= dk,
            };
            if take_layer {
                let (k, v) = self.layers.next().expect("peeked");
                if disk.as_deref() == Some(k.as_slice()) {
                    self.disk.as_mut().expect("positioned").next();
                }
                match v {
                    Some(v) if !v.is_empty() => return Ok(Some((k, v.to_vec()))),
                    _ => continue,
                }
            }
            let it = self.disk.as_mut().expect("positioned");
            let v = it.value().map(<[u8]>::to_vec).unwrap_or_default();
            it.next();
            let k = disk.expect("disk entry");
            if !v.is_empty() {
                return Ok(Some((k, v)));
            }
        }
    }
}

impl Iterator for FlatRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.disk.as_ref()?;
        match self.step() {
            Ok(Some((k, v))) => Some(Ok((k[self.prefix_len..].to_vec(), v))),
            Ok(None) => {
                self.disk = None;
                None
            }
            Err(e) => {
                self.disk = None;
                Some(Err(e))
            }
        }
    }
}
