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
//! The index is lazy: a store that nobody reads below the head (a validator, an import)
//! does not keep it, and its commits skip the per-block index update (~30k keys at 1M keys:
//! 4-6 ms of the commit on 2 cores). The first read below the head builds it from the
//! blocks' maps outside the window's lock and installs it with what changed meanwhile
//! ([`Recent::index_sources`], [`Recent::install_index`]); commits then keep it up to date
//! until [`INDEX_IDLE_BLOCKS`] commits pass without such a read, when it is dropped again.
//! Without it a lookup asks the blocks after the read's block themselves, oldest first
//! (the window's own fill, which reads below the head, builds the index first, under the
//! lock: the window it starts from is small).
//!
//! Sources of the old values:
//! - **Commits** (the common case): the flat and meta values come from the reverse diff the
//!   commit encodes anyway; the old nodes from the resident trie (which still holds the
//!   pre-state when the layer is built) and, below it, the nodes the commit's walk read
//!   (it reads every node it rewrites or deletes) and one batched read of the rest.
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use smallvec::SmallVec;
use state::H256;

use crate::history::ReverseEntry;
use crate::keys::{decode_head, Column, META_HEAD};
use crate::tiers::layer::ChangeMap;

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

/// Estimated index bytes per changed key (hash, block list, table slot); counted whether
/// or not the index is built, so that building it never passes the byte bound.
const INDEX_ENTRY_BYTES: u64 = 48;

/// Commits without a read below the head after which the index is dropped.
const INDEX_IDLE_BLOCKS: u64 = 256;

/// One block's old values.
#[derive(Debug)]
pub(crate) struct RecentBlock {
    /// The block number.
    pub(crate) number: u64,
    /// The state root before the block (block `number - 1`'s).
    pub(crate) parent_root: H256,
    /// Flat keys the block changed, with their values before it (`None`: absent).
    /// Shared, never changed: an index build reads the maps outside the window's lock.
    pub(crate) flat: Arc<ChangeMap>,
    /// Meta records (per-trie roots) the block changed, with their values before it.
    pub(crate) meta: Arc<ChangeMap>,
    /// Node keys the block wrote or deleted, with the stored node before it; `None` until
    /// known (a block read back from disk, before a proof needed it).
    pub(crate) nodes: Option<Arc<ChangeMap>>,
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
            flat: Arc::new(ChangeMap::from_writes(flat)),
            meta: Arc::new(ChangeMap::from_writes(meta)),
            nodes: None,
            bytes: 0,
        };
        block.measure();
        Some(block)
    }

    /// Set the old nodes a commit found (before the block joins the window).
    pub(crate) fn set_old_nodes(&mut self, nodes: ChangeMap) {
        self.nodes = Some(Arc::new(nodes));
        self.measure();
    }

    /// Bytes held, the index's share included.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    fn measure(&mut self) {
        self.bytes = self.maps().map(|(_, m)| held_bytes(m)).sum();
    }

    fn map(&self, column: Column) -> Option<&Arc<ChangeMap>> {
        match column {
            Column::Flat => Some(&self.flat),
            Column::Meta => Some(&self.meta),
            Column::Nodes => self.nodes.as_ref(),
        }
    }

    /// Each map the block holds, with its column.
    fn maps(&self) -> impl Iterator<Item = (Column, &Arc<ChangeMap>)> {
        [Column::Flat, Column::Meta, Column::Nodes]
            .into_iter()
            .filter_map(|c| Some((c, self.map(c)?)))
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
    /// Key hash → blocks; `None` until a read below the head wants it (module docs).
    index: Option<Index>,
    /// The head at the last read below the head (readers hold only the read lock).
    last_read: AtomicU64,
    /// A reader is building the index outside the lock ([`Recent::index_sources`]).
    building: AtomicBool,
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
            index: None,
            last_read: AtomicU64::new(0),
            building: AtomicBool::new(false),
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
        let Some(index) = &self.index else {
            // The first block after `number` that changed the key holds its value then.
            return self.blocks_after(number).find_map(|b| b.map(column)?.get(key));
        };
        // The list is short and in no particular order, and may name blocks that left the
        // window (until a sweep): the first block after `number` whose own map holds the
        // key answers, so a stale or colliding entry costs a lookup, never a wrong value.
        let blocks = index.get(key_hash(column, key))?;
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
        let idle = self.head.0.saturating_sub(*self.last_read.get_mut()) >= INDEX_IDLE_BLOCKS;
        if idle {
            if let Some(index) = self.index.take() {
                // Millions of entries at a full window: freed off the commit's path.
                rayon::spawn(move || drop(index));
            }
        }
        self.index_block(&block);
        self.blocks.push_back(block);
        self.trim();
    }

    /// Whether the index is built (see the module docs).
    #[cfg(test)]
    fn indexed(&self) -> bool {
        self.index.is_some()
    }

    /// Build the index from the blocks held, if it is not built (under the write lock).
    pub(crate) fn ensure_index(&mut self) {
        if self.index.is_none() {
            let sources = self.sources();
            self.index = Some(sources.build(true).index);
            self.note_read();
        }
    }

    /// The maps to build the index from outside the lock ([`IndexSources::build`], then
    /// [`Recent::install_index`]), unless it is built or another reader is building it
    /// (lookups meanwhile ask the blocks themselves). Building a full window of 1M-key
    /// blocks takes a few hundred ms: under the lock, the committer would wait for it.
    pub(crate) fn index_sources(&self) -> Option<IndexSources> {
        if self.index.is_some() || self.building.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(self.sources())
    }

    fn sources(&self) -> IndexSources {
        let maps = self.blocks.iter().flat_map(|b| b.maps().map(|(c, m)| (b.number, c, m.clone())));
        IndexSources(maps.collect())
    }

    /// Install an index built outside the lock, adding what changed meanwhile: every map
    /// of the window it was not built from (blocks committed or read back since, old nodes
    /// found since, blocks committed again after a revert). Entries of blocks that left
    /// meanwhile are stale, which lookups tolerate and sweeps remove.
    pub(crate) fn install_index(&mut self, built: BuiltIndex) {
        *self.building.get_mut() = false;
        if self.index.is_some() {
            return;
        }
        let BuiltIndex { mut index, from } = built;
        // The maps stay alive in `from`, so no other map can have one of their addresses.
        let seen: FxHashSet<(u64, u8, usize)> =
            from.iter().map(|(n, c, m)| (*n, *c as u8, Arc::as_ptr(m) as usize)).collect();
        for block in &self.blocks {
            for (c, map) in block.maps() {
                if !seen.contains(&(block.number, c as u8, Arc::as_ptr(map) as usize)) {
                    index.update(hashes(map, c), |list| list.push(block.number));
                }
            }
        }
        self.index = Some(index);
        self.note_read();
    }

    /// A build given up before its install (its thread panicked): another may start.
    pub(crate) fn abandon_index_build(&self) {
        self.building.store(false, Ordering::Release);
    }

    /// Note a read below the head (keeps the index from being dropped as idle).
    pub(crate) fn note_read(&self) {
        // Loaded first: readers on many threads would otherwise all write one cache line.
        if self.last_read.load(Ordering::Relaxed) != self.head.0 {
            self.last_read.store(self.head.0, Ordering::Relaxed);
        }
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
        if let Some(index) = &mut self.index {
            index.update(hashes(&nodes, Column::Nodes), |list| list.push(number));
        }
        self.bytes -= block.bytes;
        block.nodes = Some(Arc::new(nodes));
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
        if let Some(index) = &mut self.index {
            index.sweep(first);
        }
        self.evicted = 0;
    }

    /// Add `block` to the index (when built) and the byte count.
    fn index_block(&mut self, block: &RecentBlock) {
        let n = block.number;
        if let Some(index) = &mut self.index {
            index.update(block_hashes(block), |list| list.push(n));
        }
        self.bytes += block.bytes;
    }

    /// Remove `block` from the index (one entry of its number per key) and the byte count;
    /// the block itself is dropped on the rayon pool beside the index work.
    fn unindex(&mut self, block: RecentBlock) {
        self.bytes -= block.bytes;
        let Some(index) = &mut self.index else {
            rayon::spawn(move || drop(block));
            return;
        };
        let n = block.number;
        let hashes = block_hashes(&block);
        let remove = |list: &mut Blocks| {
            if let Some(at) = list.iter().rposition(|x| *x == n) {
                list.swap_remove(at);
            }
        };
        rayon::join(|| index.update(hashes, remove), || drop(block));
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

    /// The index of each block number's key hashes: each shard filled from every block's
    /// hashes (one rayon task per shard if `parallel`, else on the calling thread), sized
    /// once (a full window of 1M-key blocks holds millions of entries).
    fn from_hashed(hashed: &[(u64, Vec<u64>)], parallel: bool) -> Index {
        let total: usize = hashed.iter().map(|h| h.1.len()).sum();
        let fill = |(i, shard): (usize, &mut FxHashMap<u64, Blocks>)| {
            shard.reserve(total / INDEX_SHARDS + total / (8 * INDEX_SHARDS));
            for (n, hashes) in hashed {
                for &h in hashes.iter().filter(|h| shard_of(**h) == i) {
                    shard.entry(h).or_default().push(*n);
                }
            }
        };
        let mut index = Index::new();
        match parallel {
            true => index.shards.par_iter_mut().enumerate().for_each(fill),
            false => index.shards.iter_mut().enumerate().for_each(fill),
        }
        index
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
    block.maps().flat_map(|(column, map)| hashes(map, column)).collect()
}

/// The window's maps as an index build reads them: block number, column, map.
pub(crate) struct IndexSources(Vec<(u64, Column, Arc<ChangeMap>)>);

/// An index and the maps it was built from.
pub(crate) struct BuiltIndex {
    index: Index,
    from: Vec<(u64, Column, Arc<ChangeMap>)>,
}

impl IndexSources {
    /// Hash every key, then fill the index: on the rayon pool if `parallel`, else on the
    /// calling thread alone (a reader's build outside the lock, which would otherwise queue
    /// the committer's walk behind its tasks).
    pub(crate) fn build(self, parallel: bool) -> BuiltIndex {
        let hash = |(n, c, m): &(u64, Column, Arc<ChangeMap>)| (*n, hashes(m, *c));
        let hashed: Vec<(u64, Vec<u64>)> = match parallel {
            true => self.0.par_iter().map(hash).collect(),
            false => self.0.iter().map(hash).collect(),
        };
        BuiltIndex { index: Index::from_hashed(&hashed, parallel), from: self.0 }
    }
}

/// The index hashes of every key of one column's map.
fn hashes(map: &ChangeMap, column: Column) -> Vec<u64> {
    map.iter().map(|(k, _)| key_hash(column, k)).collect()
}

#[cfg(test)]
mod tests;
