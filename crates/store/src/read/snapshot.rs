//! [`PersistedState`]: the state as persisted on disk, pinned by a RocksDB snapshot, for
//! long reads (checkpoint creation) while blocks keep committing.
//!
//! The writer persists each group of blocks in one atomic batch that carries its head
//! record, so a snapshot always sees one whole block: its `flat`, root records and head
//! agree. Its `nodes` may lag (the node watermark, see `catch_up.rs`): the node buffer then
//! holds exactly the node writes the snapshot's `nodes` lacks, and the pinned state keeps
//! that buffer beside the snapshot. Reads through it bypass the caches and the unpersisted
//! layers (they hold newer blocks) and do not fill RocksDB's block cache.

use std::sync::Arc;

use rocksdb::{DBRawIteratorWithThreadMode, ReadOptions, SnapshotWithThreadMode, DB};
use state::{TrieId, H256};
use trie::{LayoutName, NodeSource, SourceError};

use crate::error::{Corruption, StoreError};
use crate::keys::{
    cf, decode_head, decode_root, flat_range_for_path, node_key, root_key, CF_CODE, CF_FLAT,
    CF_META, CF_NODES, META_BULK, META_HEAD, META_NODES_AT,
};
use crate::rocks::flat_total_order;
use crate::statedb::ReadHandle;
use crate::tiers::buffer::decode_nodes_at;
use crate::tiers::layer::{node_buffer_of, Layer};

/// Readahead for sequential scans of `flat` (RocksDB reads ahead this much per iterator).
/// Measured on a 1M-key checkpoint creation with 2 threads: 256 KiB 0.27-0.31 s, RocksDB's
/// automatic readahead 0.31 s, 2 MiB 0.61-0.68 s (page faults on its buffer, twice the
/// system time).
const SCAN_READAHEAD_BYTES: usize = 256 << 10;

/// The persisted state at one block, pinned (see the module docs). Shareable across
/// threads: each scan opens its own cursor.
pub struct PersistedState<'a> {
    db: &'a DB,
    snap: SnapshotWithThreadMode<'a, DB>,
    head: (u64, H256),
    layout: LayoutName,
    /// The node buffer that brings the snapshot's lagging `nodes` to `head`.
    overlay: Option<Arc<Layer>>,
}

/// Attempts to pin a snapshot and a node buffer of the same block (the writer swaps its
/// buffer just after each write, so a mismatch lasts a moment).
const PIN_ATTEMPTS: u32 = 2000;

impl std::fmt::Debug for PersistedState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistedState").field("head", &self.head).finish_non_exhaustive()
    }
}

impl ReadHandle {
    /// Pin the persisted state (the last block the background writer finished; call
    /// [`crate::StateDb::flush`] first for the head). A database holding an unfinished
    /// bulk load is refused.
    pub fn persisted(&self) -> Result<PersistedState<'_>, StoreError> {
        let db = self.db();
        for _ in 0..PIN_ATTEMPTS {
            let (snap, buffer) = {
                let layers = self.shared.reader.layers.read();
                (db.snapshot(), node_buffer_of(&layers).cloned())
            };
            let meta = cf(db, CF_META)?;
            if let Some(v) = snap.get_cf(meta, META_BULK)? {
                return Err(StoreError::UnfinishedBulkLoad {
                    label: String::from_utf8_lossy(&v).into_owned(),
                });
            }
            let head = match snap.get_cf(meta, META_HEAD)? {
                Some(v) => decode_head(&v)?,
                None => return Err(Corruption::NoHead.into()),
            };
            let nodes_at = match snap.get_cf(meta, META_NODES_AT)? {
                Some(v) => Some(decode_nodes_at(&v)?),
                None => None,
            };
            let overlay = match (nodes_at, buffer) {
                (None, _) => None,
                (Some(w), Some(b)) if b.lag_base == Some(w) && b.number == head.0 => Some(b),
                // The writer wrote a group and has not swapped its buffer yet.
                _ => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
            };
            let layout = self.layout();
            return Ok(PersistedState { db, snap, head, layout, overlay });
        }
        Err(StoreError::WriterStopped)
    }
}

impl<'a> PersistedState<'a> {
    /// The pinned block: number and main root.
    pub fn head(&self) -> (u64, H256) {
        self.head
    }

    /// The layout of the database's tries.
    pub fn layout(&self) -> LayoutName {
        self.layout
    }

    /// The root of `trie` at the pinned block (a storage trie without a root record is
    /// empty).
    pub fn trie_root(&self, trie: &TrieId) -> Result<H256, StoreError> {
        if *trie == TrieId::Main {
            return Ok(self.head.1);
        }
        match self.snap.get_cf(cf(self.db, CF_META)?, root_key(trie))? {
            Some(v) => Ok(decode_root(trie, &v)?),
            None => Ok(self.layout.empty_root()),
        }
    }

    /// The flat value of `key` in `trie`.
    pub fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let k = crate::keys::flat_key(trie, key)?;
        Ok(self.snap.get_cf(cf(self.db, CF_FLAT)?, k)?)
    }

    /// The database's estimate of the bytes `flat` holds on disk between each pair of
    /// consecutive `bounds` (ascending full keys), for splitting a scan into parts of equal
    /// work: RocksDB's approximate sizes of its files, so not of the pinned block exactly
    /// and without what is still in memory.
    pub fn approximate_flat_bytes(&self, bounds: &[Vec<u8>]) -> Result<Vec<u64>, StoreError> {
        let ranges: Vec<rocksdb::Range<'_>> =
            bounds.windows(2).map(|w| rocksdb::Range::new(&w[0], &w[1])).collect();
        Ok(self.db.get_approximate_sizes_cf(cf(self.db, CF_FLAT)?, &ranges))
    }

    /// A cursor over `flat` in key order (full keys: trie prefix ‖ key), positioned at the
    /// first key at or after `from`.
    pub fn cursor(&self, from: &[u8]) -> Result<FlatCursor<'_>, StoreError> {
        let mut opts = flat_total_order();
        opts.fill_cache(false);
        opts.set_readahead_size(SCAN_READAHEAD_BYTES);
        let mut iter = self.snap.raw_iterator_cf_opt(cf(self.db, CF_FLAT)?, opts);
        iter.seek(from);
        Ok(FlatCursor { iter })
    }

    /// A cursor over the pinned `code` family (contract code by its 32-byte hash) in hash
    /// order, positioned at the first hash at or after `from`; `None` for a database
    /// opened read-only that was written before the family existed (it holds no code).
    /// Code is written in the same atomic batch as the block that brings it, so the
    /// snapshot holds the code of every account it holds.
    pub fn code_cursor(&self, from: &[u8]) -> Result<Option<FlatCursor<'_>>, StoreError> {
        let Some(h) = self.db.cf_handle(CF_CODE) else { return Ok(None) };
        let mut opts = ReadOptions::default();
        opts.fill_cache(false);
        opts.set_readahead_size(SCAN_READAHEAD_BYTES);
        let mut iter = self.snap.raw_iterator_cf_opt(h, opts);
        iter.seek(from);
        Ok(Some(FlatCursor { iter }))
    }

    /// One trie at the pinned block as a [`NodeSource`] (stored nodes, and leaves rebuilt
    /// from `flat`), for proofs.
    pub fn node_source(&self, trie: TrieId) -> PersistedSource<'_, 'a> {
        PersistedSource { state: self, trie }
    }

    fn read_opts(&self) -> ReadOptions {
        let mut o = ReadOptions::default();
        o.fill_cache(false);
        o
    }
}

/// A position in a pinned column family: `flat` ([`PersistedState::cursor`]) or `code`
/// ([`PersistedState::code_cursor`]).
pub struct FlatCursor<'s> {
    iter: DBRawIteratorWithThreadMode<'s, DB>,
}

impl FlatCursor<'_> {
    /// The entry under the cursor (full flat key, value), or `None` past the end; a read
    /// error ends the scan and is reported by [`FlatCursor::status`].
    pub fn entry(&self) -> Option<(&[u8], &[u8])> {
        Some((self.iter.key()?, self.iter.value()?))
    }

    /// Move to the next entry.
    pub fn advance(&mut self) {
        self.iter.next();
    }

    /// Move to the first key at or after `key`.
    pub fn seek(&mut self, key: &[u8]) {
        self.iter.seek(key);
    }

    /// The error that ended the scan early, if any.
    pub fn status(&self) -> Result<(), StoreError> {
        Ok(self.iter.status()?)
    }
}

/// [`PersistedState::node_source`].
pub struct PersistedSource<'s, 'a> {
    state: &'s PersistedState<'a>,
    trie: TrieId,
}

impl PersistedSource<'_, '_> {
    fn stored(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        let s = self.state;
        let key = node_key(&self.trie, path);
        let buffered = s.overlay.as_ref().and_then(|b| b.nodes.get(&key));
        let v = match buffered {
            Some(v) => v.map(|v| v.to_vec()),
            None => s
                .snap
                .get_pinned_cf_opt(cf(s.db, CF_NODES)?, key, s.read_opts())?
                .map(|p| p.to_vec()),
        };
        let Some(v) = v else {
            return Ok(None);
        };
        // Invariant: the stored hash is the one the parent refers to.
        if v.len() < 32 || &v[..32] != hash.as_bytes() {
            let e = Corruption::NodeHash { trie: self.trie, path: path.to_vec(), expected: *hash };
            return Err(e.into());
        }
        Ok(Some(v[32..].to_vec()))
    }

    /// The leaf at `path`: the one flat key under it.
    fn leaf(&self, path: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let (lo, hi) = flat_range_for_path(&self.trie, path);
        let cursor = self.state.cursor(&lo)?;
        let Some((k, v)) = cursor.entry().filter(|(k, _)| *k <= hi.as_slice()) else {
            cursor.status()?;
            return Ok(None);
        };
        Ok(Some(crate::tiers::reader::leaf_at(
            self.state.layout,
            path.len(),
            &k[self.trie.prefix_len()..],
            v,
        )))
    }
}

impl NodeSource for PersistedSource<'_, '_> {
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        let s = self.state;
        let value = |k: &[u8]| Ok(s.get(&self.trie, k)?.map(Arc::from));
        if let Some(v) = crate::tiers::reader::value_node(s.layout, path, hash, value)? {
            return Ok(Some(v));
        }
        if let Some(n) = self.stored(path, hash)? {
            return Ok(Some(n));
        }
        Ok(self.leaf(path)?)
    }
}
