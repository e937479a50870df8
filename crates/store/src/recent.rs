//! The recent window: what the store needs to read and prove at any of the last K blocks
//! (`history.recent_blocks`) without reverting anything.
//!
//! For each block `n` of the window it keeps the block's *old* values: every flat key and
//! meta record the block changed, with its value before the block (from the block's
//! reverse diff), and every trie node the block rewrote or deleted, with the node before
//! the block. A value at block `B` is then the old value recorded by the first block after
//! `B` that changed the key, or the head's value when none did. An index from each key's
//! 64-bit hash to the blocks that changed it (a short list, in no order) makes that one
//! hash lookup and a scan of the list; an entry is only a hint: the block's own map is
//! asked for the key itself, so a hash collision or an entry of a block that left the
//! window costs a wasted map lookup, never a wrong answer.
//!
//! Sources of the old values:
//! - **Commits** (the common case): the flat and meta values come from the reverse diff the
//!   commit encodes anyway; the old nodes from the resident trie (which still holds the
//!   pre-state when the layer is built) and, below it, one batched read of the rest.
//! - **After an open** (or a revert or restore that reset the window), the window is filled
//!   lazily, on the first read below what it holds: flat and meta from the reverse diffs
//!   on disk, and the old nodes, only when a proof needs them, by undoing the blocks one by
//!   one on a trie over the window's own view (the undo of block `n` rewrites exactly the
//!   paths block `n` changed; its root must equal block `n - 1`'s recorded root).
//!
//! Invariants: the blocks are consecutive, oldest first; a block with old nodes has every
//! later block's old nodes too (`provable` is the oldest block a proof can be built at);
//! the window's `head` is the published head: a commit inserts its block before it
//! publishes the layer and moves `head` after, so a reader holding the window's lock sees
//! either the old head with the new block's old values (which are that head's values) or
//! the new head.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};
use smallvec::SmallVec;
use trie::H256;

use crate::history::ReverseEntry;
use crate::keys::{decode_head, Column, META_HEAD};
use crate::layer::ChangeMap;

/// The recent window (see `arbor stats` and [`crate::StateDb::at`]).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct RecentStats {
    /// Blocks below the head it may keep (`history.recent_blocks`, capped by
    /// `layers.history_depth`).
    pub limit_blocks: u64,
    /// Bytes it may hold (`history.recent_bytes`).
    pub limit_bytes: u64,
    /// The oldest block readable without reading reverse diffs back from disk.
    pub oldest_block: u64,
    /// The oldest block provable without undoing blocks first.
    pub provable_block: u64,
    /// Blocks it holds.
    pub blocks: u64,
    /// Bytes it holds (old values, old nodes, index).
    pub bytes: u64,
    /// Blocks this session dropped early, or did not read back, because of the byte bound.
    pub shrunk_blocks: u64,
}

/// Estimated index bytes per changed key (hash, block list, table slot).
const INDEX_ENTRY_BYTES: u64 = 48;

/// One block's old values.
#[derive(Debug)]
pub(crate) struct RecentBlock {
    /// The block number.
    pub(crate) number: u64,
    /// The state root before the block (block `number - 1`'s).
    pub(crate) parent_root: H256,
    /// Flat keys the block changed, with their values before it (`None`: absent).
    pub(crate) flat: ChangeMap,
    /// Meta records (per-trie roots) the block changed, with their values before it.
    pub(crate) meta: ChangeMap,
    /// Node keys the block wrote or deleted, with the stored node before it; `None` until
    /// known (a block read back from disk, before a proof needed it).
    pub(crate) nodes: Option<ChangeMap>,
    bytes: u64,
}

impl RecentBlock {
    /// A block from its decoded reverse diff (nodes unknown). `None` when the diff lacks
    /// the head record, which every block's diff holds.
    pub(crate) fn from_reverse(number: u64, entries: Vec<ReverseEntry>) -> Option<RecentBlock> {
        let (mut flat, mut meta) = (Vec::new(), Vec::new());
        let mut parent_root = None;
        for (col, key, old) in entries {
            let old: Option<Arc<[u8]>> = old.map(Arc::from);
            match col {
                Column::Flat => flat.push((key, old)),
                Column::Meta if key.as_slice() == META_HEAD => {
                    // The parent's head record: block `number - 1` and its root.
                    let parent = old.as_deref().and_then(|v| decode_head(v).ok());
                    parent_root =
                        parent.filter(|p| p.0.checked_add(1) == Some(number)).map(|p| p.1);
                }
                Column::Meta => meta.push((key, old)),
                Column::Nodes => {}
            }
        }
        let mut block = RecentBlock {
            number,
            parent_root: parent_root?,
            flat: ChangeMap::from_writes(flat),
            meta: ChangeMap::from_writes(meta),
            nodes: None,
            bytes: 0,
        };
        block.measure();
        Some(block)
    }

    /// Set the old nodes a commit found (before the block joins the window).
    pub(crate) fn set_old_nodes(&mut self, nodes: ChangeMap) {
        self.nodes = Some(nodes);
        self.measure();
    }

    /// Bytes held, the index's share included.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    fn measure(&mut self) {
        let maps = [Some(&self.flat), Some(&self.meta), self.nodes.as_ref()];
        self.bytes = maps.into_iter().flatten().map(held_bytes).sum();
    }

    fn map(&self, column: Column) -> Option<&ChangeMap> {
        match column {
            Column::Flat => Some(&self.flat),
            Column::Meta => Some(&self.meta),
            Column::Nodes => self.nodes.as_ref(),
        }
    }
}

/// The window (see the module docs).
#[derive(Debug)]
pub(crate) struct Recent {
    /// Blocks kept below the head (`history.recent_blocks`, capped by the history depth).
    limit_blocks: u64,
    /// Bytes the blocks may hold (`history.recent_bytes`).
    limit_bytes: u64,
    /// The published head.
    head: (u64, H256),
    blocks: VecDeque<RecentBlock>,
    index: Index,
    bytes: u64,
    /// Blocks that left the window, or were not read back into it, because of the byte
    /// bound (this session).
    shrunk: u64,
    /// Blocks evicted since the index was last swept.
    evicted: u32,
    /// A block whose reverse diff is known to be missing (pruned, or a bulk-loaded or
    /// restored head): the window does not grow down past it. Cleared by a revert below
    /// it (a block committed again with that number has its diff).
    missing: Option<u64>,
}

/// Bytes a change map holds in the window, its index entries included.
pub(crate) fn held_bytes(map: &ChangeMap) -> u64 {
    map.bytes() + map.len() as u64 * INDEX_ENTRY_BYTES
}

/// Hash of a column-tagged key.
fn key_hash(column: Column, key: &[u8]) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    h.write_u8(column as u8);
    h.write(key);
    h.finish()
}

impl Recent {
    /// An empty window at `head`.
    pub(crate) fn new(limit_blocks: u64, limit_bytes: u64, head: (u64, H256)) -> Recent {
        Recent {
            limit_blocks,
            limit_bytes,
            head,
            blocks: VecDeque::new(),
            index: Index::new(),
            bytes: 0,
            shrunk: 0,
            evicted: 0,
            missing: None,
        }
    }

    /// Whether the window keeps anything (`history.recent_blocks` > 0).
    pub(crate) fn enabled(&self) -> bool {
        self.limit_blocks > 0
    }

    /// The published head.
    pub(crate) fn head(&self) -> (u64, H256) {
        self.head
    }

    /// The oldest block a read can be served at now.
    pub(crate) fn oldest(&self) -> u64 {
        self.blocks.front().map_or(self.head.0, |b| b.number - 1)
    }

    /// The oldest block the window may reach: head - K (or 0).
    pub(crate) fn floor(&self) -> u64 {
        self.head.0.saturating_sub(self.limit_blocks)
    }

    /// The oldest block a proof can be built at now.
    pub(crate) fn provable(&self) -> u64 {
        match self.blocks.iter().rposition(|b| b.nodes.is_none()) {
            Some(i) => self.blocks[i].number,
            None => self.oldest(),
        }
    }

    /// Whether the block below the window (number `oldest()`) may be read back from disk
    /// within the block bound.
    pub(crate) fn can_extend(&self) -> bool {
        let next = self.oldest();
        next > self.floor() && self.missing.is_none_or(|m| m < next)
    }

    /// Note that a block was not read back because of the byte bound.
    pub(crate) fn note_shrunk(&mut self) {
        self.shrunk += 1;
    }

    /// Note that block `number`'s reverse diff is not kept.
    pub(crate) fn set_missing(&mut self, number: u64) {
        self.missing = Some(number);
    }

    /// Whether `bytes` more for block `number` fit under the byte bound (the newest
    /// block, the head's, always fits, as in `trim`).
    pub(crate) fn has_room(&self, number: u64, bytes: u64) -> bool {
        number >= self.head.0 || self.bytes.saturating_add(bytes) <= self.limit_bytes
    }

    /// Whether a read (a proof if `nodes`) at block `number` can be served now.
    pub(crate) fn serves(&self, number: u64, nodes: bool) -> bool {
        let oldest = if nodes { self.provable() } else { self.oldest() };
        number <= self.head.0 && number >= oldest
    }

    /// What `arbor stats` shows of the window.
    pub(crate) fn stats(&self) -> RecentStats {
        RecentStats {
            limit_blocks: self.limit_blocks,
            limit_bytes: self.limit_bytes,
            oldest_block: self.oldest(),
            provable_block: self.provable(),
            blocks: self.blocks.len() as u64,
            bytes: self.bytes,
            shrunk_blocks: self.shrunk,
        }
    }

    /// The block `number` of the window.
    pub(crate) fn block(&self, number: u64) -> Option<&RecentBlock> {
        let first = self.blocks.front()?.number;
        self.blocks.get(usize::try_from(number.checked_sub(first)?).ok()?)
    }

    /// The blocks after `number`, oldest first.
    pub(crate) fn blocks_after(&self, number: u64) -> impl Iterator<Item = &RecentBlock> {
        self.blocks.iter().filter(move |b| b.number > number)
    }

    /// The state root of block `number`, if the window holds it.
    pub(crate) fn root_at(&self, number: u64) -> Option<H256> {
        if number == self.head.0 {
            return Some(self.head.1);
        }
        self.block(number.checked_add(1)?).map(|b| b.parent_root)
    }

    /// The value of `key` in `column` at block `number` if a later block of the window
    /// changed it (`Some(None)`: absent then); `None` when the head's value is the one.
    pub(crate) fn changed_after(
        &self,
        column: Column,
        key: &[u8],
        number: u64,
    ) -> Option<Option<&Arc<[u8]>>> {
        // The list is short and in no particular order, and may name blocks that left the
        // window (until a sweep): the first block after `number` whose own map holds the
        // key answers, so a stale or colliding entry costs a lookup, never a wrong value.
        let blocks = self.index.get(key_hash(column, key))?;
        let mut found: Option<(u64, Option<&Arc<[u8]>>)> = None;
        for &n in blocks.iter().filter(|n| **n > number) {
            if found.is_some_and(|(f, _)| f <= n) {
                continue;
            }
            if let Some(v) = self.block(n).and_then(|b| b.map(column)?.get(key)) {
                found = Some((n, v));
            }
        }
        found.map(|(_, v)| v)
    }

    /// Add the newest block (its number follows the last block's, or the head's). Blocks
    /// past the bounds leave from the front.
    pub(crate) fn push(&mut self, block: RecentBlock) {
        debug_assert!(block.number == self.blocks.back().map_or(self.head.0, |b| b.number) + 1);
        self.index_block(&block);
        self.blocks.push_back(block);
        self.trim();
    }

    /// Add the block just below the window (read back from disk).
    pub(crate) fn push_front(&mut self, block: RecentBlock) {
        debug_assert!(self.has_room(block.number, block.bytes));
        debug_assert!(block.number == self.oldest());
        self.index_block(&block);
        self.blocks.push_front(block);
    }

    /// Set block `number`'s old nodes (found by undoing it).
    pub(crate) fn set_nodes(&mut self, number: u64, nodes: ChangeMap) {
        debug_assert!(self.has_room(number, held_bytes(&nodes)));
        let Some(first) = self.blocks.front().map(|b| b.number) else { return };
        let Some(i) = number.checked_sub(first).and_then(|i| usize::try_from(i).ok()) else {
            return;
        };
        let Some(block) = self.blocks.get_mut(i) else { return };
        if block.nodes.is_some() {
            return;
        }
        self.index.update(hashes([&nodes], Column::Nodes), |list| {
            list.push(number);
        });
        self.bytes -= block.bytes;
        block.nodes = Some(nodes);
        block.measure();
        self.bytes += block.bytes;
    }

    /// The head was published (a commit) or moved down (a revert).
    pub(crate) fn set_head(&mut self, head: (u64, H256)) {
        self.head = head;
        self.truncate_above(head.0);
        self.trim();
    }

    /// Forget everything (the state was replaced: a bulk load or a restore).
    pub(crate) fn reset(&mut self, head: (u64, H256)) {
        let shrunk = self.shrunk;
        *self = Recent::new(self.limit_blocks, self.limit_bytes, head);
        self.shrunk = shrunk;
        self.missing = Some(head.0);
    }

    /// Drop the blocks above `number` (a commit that failed to publish, a revert).
    pub(crate) fn truncate_above(&mut self, number: u64) {
        self.missing = self.missing.filter(|m| *m <= number);
        if self.blocks.back().is_some_and(|b| b.number > number) && self.evicted > 0 {
            // Blocks committed again will reuse these numbers: drop the entries of evicted
            // blocks now (they would only cost lookups, but need not wait for a sweep).
            self.sweep_evicted();
        }
        while self.blocks.back().is_some_and(|b| b.number > number) {
            let block = self.blocks.pop_back().expect("checked");
            self.unindex(block);
        }
    }

    /// Drop the oldest blocks past the block and byte bounds (the newest block stays
    /// whatever its size: the head's parent is always readable).
    fn trim(&mut self) {
        let keep_from = self.head.0.saturating_sub(self.limit_blocks);
        while let Some(front) = self.blocks.front() {
            let too_old = front.number <= keep_from;
            let too_big = self.bytes > self.limit_bytes && self.blocks.len() > 1;
            if !too_old && !too_big {
                break;
            }
            if !too_old {
                self.shrunk += 1;
            }
            // The index keeps the block's entries until the next sweep: lookups skip
            // blocks that left the window, and one pass over the index every
            // `SWEEP_BLOCKS` evictions costs less than a lookup per key of each block.
            // The block's maps hold tens of thousands of allocations, most of them made by
            // other threads: they are freed on the rayon pool, off the commit's path.
            let block = self.blocks.pop_front().expect("checked");
            self.bytes -= block.bytes;
            rayon::spawn(move || drop(block));
            self.evicted += 1;
        }
        if self.evicted >= SWEEP_BLOCKS {
            self.sweep_evicted();
        }
    }

    /// Drop the index entries of the blocks evicted since the last sweep.
    fn sweep_evicted(&mut self) {
        let first = self.blocks.front().map_or(self.head.0 + 1, |b| b.number);
        self.index.sweep(first);
        self.evicted = 0;
    }

    /// Add `block` to the index and the byte count.
    fn index_block(&mut self, block: &RecentBlock) {
        let n = block.number;
        self.index.update(block_hashes(block), |list| list.push(n));
        self.bytes += block.bytes;
    }

    /// Remove `block` from the index (one entry of its number per key) and the byte count;
    /// the block itself is dropped on the rayon pool beside the index work.
    fn unindex(&mut self, block: RecentBlock) {
        self.bytes -= block.bytes;
        let n = block.number;
        let hashes = block_hashes(&block);
        let remove = |list: &mut Blocks| {
            if let Some(at) = list.iter().rposition(|x| *x == n) {
                list.swap_remove(at);
            }
        };
        rayon::join(|| self.index.update(hashes, remove), || drop(block));
    }
}

/// The blocks of the window that changed one key (hints, in no order; see the module docs).
type Blocks = SmallVec<[u64; 2]>;

/// Evictions between two sweeps of the index.
const SWEEP_BLOCKS: u32 = 32;

/// Shards of the index (by the hash's top bits), updated in parallel.
const INDEX_SHARDS: usize = 16;

/// The index: key hash → blocks that changed it, in [`INDEX_SHARDS`] maps.
#[derive(Debug)]
struct Index {
    shards: Vec<FxHashMap<u64, Blocks>>,
}

fn shard_of(hash: u64) -> usize {
    (hash >> 60) as usize % INDEX_SHARDS
}

impl Index {
    fn new() -> Index {
        Index { shards: (0..INDEX_SHARDS).map(|_| FxHashMap::default()).collect() }
    }

    fn get(&self, hash: u64) -> Option<&Blocks> {
        self.shards[shard_of(hash)].get(&hash)
    }

    /// Drop the entries of blocks below `first` (evicted), one rayon task per shard.
    fn sweep(&mut self, first: u64) {
        self.shards.par_iter_mut().for_each(|shard| {
            shard.retain(|_, list| {
                list.retain(|n| *n >= first);
                !list.is_empty()
            });
        });
    }

    /// Apply `f` to the block list of every hash (created empty when missing; removed when
    /// `f` leaves it empty), one rayon task per shard.
    fn update(&mut self, hashes: Vec<u64>, f: impl Fn(&mut Blocks) + Sync) {
        let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); INDEX_SHARDS];
        for h in hashes {
            by_shard[shard_of(h)].push(h);
        }
        self.shards.par_iter_mut().zip(by_shard).for_each(|(shard, hashes)| {
            for h in hashes {
                let list = shard.entry(h).or_default();
                f(list);
                if list.is_empty() {
                    shard.remove(&h);
                }
            }
        });
    }
}

/// The index hashes of every key a block's maps hold.
fn block_hashes(block: &RecentBlock) -> Vec<u64> {
    let mut out = hashes(block.map(Column::Flat), Column::Flat);
    out.extend(hashes(block.map(Column::Meta), Column::Meta));
    out.extend(hashes(block.map(Column::Nodes), Column::Nodes));
    out
}

fn hashes<'a>(maps: impl IntoIterator<Item = &'a ChangeMap>, column: Column) -> Vec<u64> {
    maps.into_iter().flat_map(ChangeMap::iter).map(|(k, _)| key_hash(column, k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::Entry;

    fn v(b: u8) -> Option<Arc<[u8]>> {
        Some(Arc::from(vec![b]))
    }

    fn block(number: u64, flat: Vec<Entry>) -> RecentBlock {
        let mut b = RecentBlock {
            number,
            parent_root: H256([number as u8; 32]),
            flat: ChangeMap::from_writes(flat),
            meta: ChangeMap::default(),
            nodes: Some(ChangeMap::default()),
            bytes: 0,
        };
        b.measure();
        b
    }

    #[test]
    fn values_at_each_block() {
        let mut r = Recent::new(3, u64::MAX, (10, H256([10; 32])));
        // Block 11 changes a (was 1) and b (was absent); block 12 changes a (was 2).
        r.push(block(11, vec![(b"a".to_vec(), v(1)), (b"b".to_vec(), None)]));
        r.set_head((11, H256([11; 32])));
        r.push(block(12, vec![(b"a".to_vec(), v(2))]));
        r.set_head((12, H256([12; 32])));
        assert_eq!(r.oldest(), 10);
        assert_eq!(r.changed_after(Column::Flat, b"a", 10), Some(v(1).as_ref()));
        assert_eq!(r.changed_after(Column::Flat, b"a", 11), Some(v(2).as_ref()));
        assert_eq!(r.changed_after(Column::Flat, b"a", 12), None);
        assert_eq!(r.changed_after(Column::Flat, b"b", 10), Some(None));
        assert_eq!(r.changed_after(Column::Flat, b"b", 11), None);
        assert_eq!(r.changed_after(Column::Flat, b"c", 10), None);
        assert_eq!(r.root_at(10), Some(H256([11; 32])));
        assert_eq!(r.root_at(12), Some(H256([12; 32])));
        // The bound of 3 blocks: 13, 14 push 11 out (head 14 - 3 = 11 is the floor).
        for n in 13..=14 {
            r.push(block(n, vec![(vec![n as u8], None)]));
            r.set_head((n, H256([n as u8; 32])));
        }
        assert_eq!(r.oldest(), 11);
        assert_eq!(r.changed_after(Column::Flat, b"a", 11), Some(v(2).as_ref()));
        // A revert to 12 drops 13 and 14.
        r.set_head((12, H256([12; 32])));
        assert_eq!(r.changed_after(Column::Flat, &[13], 12), None);
        assert_eq!(r.stats().blocks, 1);
        // The byte bound keeps the newest block only.
        let mut r = Recent::new(8, 1, (0, H256([0; 32])));
        for n in 1..=3 {
            r.push(block(n, vec![(vec![n as u8], v(n as u8))]));
            r.set_head((n, H256([0; 32])));
        }
        assert_eq!((r.oldest(), r.stats().blocks, r.stats().shrunk_blocks), (2, 1, 2));
    }

    /// Evicted blocks stay in the index until a sweep; a revert between sweeps and blocks
    /// committed again with the same numbers must still find each key's first change.
    #[test]
    fn stale_index_entries_never_answer() {
        let mut r = Recent::new(3, u64::MAX, (0, H256([0; 32])));
        let commit = |r: &mut Recent, n: u64, tag: u8| {
            r.push(block(n, vec![(b"a".to_vec(), v(tag)), (vec![tag, n as u8], None)]));
            r.set_head((n, H256([n as u8; 32])));
        };
        for n in 1..=40 {
            commit(&mut r, n, n as u8);
        }
        assert_eq!(r.oldest(), 37);
        assert_eq!(r.changed_after(Column::Flat, b"a", 37), Some(v(38).as_ref()));
        // Back to 38 (39, 40 undone), then 39 and 40 again with other old values.
        r.set_head((38, H256([38; 32])));
        for n in 39..=40 {
            commit(&mut r, n, 100 + n as u8);
        }
        assert_eq!(r.changed_after(Column::Flat, b"a", 37), Some(v(38).as_ref()));
        assert_eq!(r.changed_after(Column::Flat, b"a", 38), Some(v(139).as_ref()));
        assert_eq!(r.changed_after(Column::Flat, b"a", 39), Some(v(140).as_ref()));
        // A key only evicted blocks changed reads from the head.
        assert_eq!(r.changed_after(Column::Flat, &[5, 5], 37), None);
        for n in 41..=120 {
            commit(&mut r, n, n as u8);
        }
        assert_eq!(r.changed_after(Column::Flat, b"a", 118), Some(v(119).as_ref()));
        assert!(r.index.shards.iter().map(|s| s.len()).sum::<usize>() < 3 * 40);
    }
}
