//! The resident trie: the committer's copy of the upper branch and extension nodes of every
//! trie, kept across commits, so that a block's walk finds the nodes it rewrites in memory
//! instead of rebuilding them from caches and layers each time.
//!
//! Entries are stored nodes exactly as the layers and `nodes` hold them (`hash ‖ encoding`,
//! shared `Arc`s, keyed by node key), so admitting a committed node copies nothing. Only the
//! committer reads and writes it (commits take `&mut StateDb`), so it needs no lock.
//!
//! Invariant: an entry is the node stored at its path in the head state. Once filled (one
//! scan of `nodes` before the first commit that needs it, plus the unpersisted layers), the
//! resident trie is *complete* above its depth limit: every stored node shallower than the
//! limit is an entry, so a missing entry there means "no stored node: a leaf", and the walk
//! needs no probe and no hash to recognise a leaf. Commits keep it complete (their node
//! writes, deletions included, are applied after their layer is published); reverts and
//! bulk loads, which write behind its back, empty it until the next fill.
//!
//! Layout: 16 parts, a node key's part chosen by the high nibble of its first byte after
//! the trie tag (a main-trie path's first nibble), so that a commit's node writes, spread
//! over the whole trie, are applied to the parts in parallel. Each part is a hash map with,
//! in front of it, a table of the main trie's upper levels indexed by path ([`shard`]).
//!
//! Memory: bounded by `cache.resident_bytes`. Nodes deeper than a depth limit are not kept;
//! when the resident bytes pass the budget, the limit drops by one level and the deepest
//! level is evicted (the upper levels, which every block rewrites, stay), which keeps it
//! complete above the new limit.
//!
//! Below the limit: from the first time the limit drops, a Bloom filter of every stored node
//! key deeper than the limit (`deep.rs`, at most an eighth of the budget, counted in it)
//! rules out most paths where nothing is stored, so the walk takes a leaf there without a
//! read. It learns the same events the entries do: the nodes evicted when the limit drops,
//! the fill's scan (which then steps over every deeper node instead of seeking past them),
//! and every commit's node writes; it never forgets a key, and once it fills up it is
//! dropped until the next fill, the walk then reading as it did without it.

pub(crate) mod deep;
mod shard;

use std::sync::Arc;

use rayon::prelude::*;
use rocksdb::{ReadOptions, DB};
use state::TrieId;

use shard::{table_len, Shard, DIRECT_DEPTH_MAX, POSITION_BYTES};

use crate::error::StoreError;
use crate::keys::{cf, CF_NODES};
use crate::tiers::blocked::key_hash;
use crate::tiers::layer::Layer;
use crate::tiers::resident::deep::DeepFilter;

/// Overhead of one entry besides its key and value bytes: its map slot (40 bytes, at the
/// maps' load of 44-88%), the value's `Arc` header, and the allocator's rounding up to its
/// size classes. Measured with the binary's allocator (mimalloc), 70k to 1.1M entries of
/// 6- and 40-byte keys and 260-600-byte values in 16 maps: 128-174 bytes of resident
/// memory per entry beyond key and value (this was 64, which let a full budget overshoot
/// by a quarter). An entry in a part's table is counted the same, though its slot is the
/// table's (counted apart): the count stays an upper bound.
const ENTRY_OVERHEAD_BYTES: u64 = 160;
/// The deepest limit: every node path is shorter than this many nibbles.
const DEPTH_LIMIT_MAX: u8 = 255;
/// Parts the entries are spread over.
const SHARDS: usize = 16;
/// Read-ahead of the fill's scan of `nodes`.
const SCAN_READAHEAD_BYTES: usize = 4 << 20;
/// The fill seeks over deeper nodes once it has stepped over this many in a row: a seek
/// costs a few steps, and below a node at the limit there are only a few deeper nodes until
/// the state is large (10M keys: ~3 below each node at depth 5; 100M: ~500 below each node
/// at depth 4).
const SEEK_AFTER_DEEP: u32 = 16;
/// Below this many entries to apply, one thread applies them all.
const PARALLEL_APPLY_MIN: usize = 2048;
/// The filter of deeper node keys takes at most the budget over this.
const DEEP_FILTER_SHARE: u64 = 8;
/// The parts' tables of upper levels take at most the budget over this (at the default
/// budget, all of their levels: 17.9 MB).
const TABLE_SHARE: u64 = 8;
/// The fill adds deeper node keys to the filter in batches of this many.
const DEEP_BATCH: usize = 4096;

/// The part that holds node key `key`.
fn shard(key: &[u8]) -> usize {
    usize::from(key.get(1).copied().unwrap_or(0) >> 4)
}

/// One entry to apply: a node (`Some`) or a deletion.
type Op<'a> = (&'a [u8], Option<Arc<[u8]>>, Capture);

/// For a write whose old node the recent window wants, the write's position among the
/// block's writes (its replaced value is returned with it); `None`: the value is dropped.
type Capture = Option<usize>;

/// A node key and the node it held before a write (`None`: none).
pub(crate) type OldNode = (Vec<u8>, Option<Arc<[u8]>>);

/// The position of a write among the block's writes and the node it replaced (`None`:
/// none).
pub(crate) type Replaced = (usize, Option<Arc<[u8]>>);

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Resident {
    shards: Vec<Shard>,
    bytes: u64,
    bytes_max: u64,
    /// Nodes whose path is at least this many nibbles deep are not kept.
    depth_limit: u8,
    /// Every stored node above the depth limit is an entry (see the module docs).
    complete: bool,
    /// Every stored node key at or below the depth limit is a "maybe" here (see the module
    /// docs); `None` before the limit first drops, and after the filter filled up (it is
    /// started again only by a fill: the limit never rises back to none).
    deep: Option<DeepFilter>,
    hits: u64,
    misses: u64,
}

/// Counters of the resident trie.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResidentStats {
    /// Nodes held.
    pub entries: u64,
    /// Bytes held (keys, values and overhead, the parts' tables and the filter).
    pub bytes: u64,
    /// The budget.
    pub bytes_max: u64,
    /// Nodes at least this many nibbles deep are not kept (255: no limit).
    pub depth_limit: u8,
    /// True when every stored node above the depth limit is held.
    pub complete: bool,
    /// Bytes of the filter of deeper node keys (0: none), part of `bytes`.
    pub deep_filter_bytes: u64,
    /// Lookups answered since open.
    pub hits: u64,
    /// Lookups that went on to the layers and RocksDB.
    pub misses: u64,
}

/// The nibble depth of a node key (its last byte, see `keys::node_key`).
fn depth(key: &[u8]) -> u8 {
    key.last().copied().unwrap_or(0)
}

fn entry_bytes(key: &[u8], value: &[u8]) -> u64 {
    sized_entry_bytes(key.len(), value)
}

fn sized_entry_bytes(key_len: usize, value: &[u8]) -> u64 {
    (key_len + value.len()) as u64 + ENTRY_OVERHEAD_BYTES
}

/// Levels the parts' tables hold within the budget's share: the most whose 16 tables fit.
fn table_levels(bytes_max: u64) -> u8 {
    (0..=DIRECT_DEPTH_MAX)
        .rev()
        .find(|&l| SHARDS as u64 * table_len(l) as u64 * POSITION_BYTES <= bytes_max / TABLE_SHARE)
        .unwrap_or(0)
}

/// 16 empty parts whose tables hold the levels `bytes_max` allows above depth limit `limit`.
fn empty_shards(bytes_max: u64, limit: u8) -> Vec<Shard> {
    let levels = table_levels(bytes_max).min(limit.saturating_sub(1));
    (0..SHARDS).map(|_| Shard::with_levels(levels)).collect()
}

impl Resident {
    /// An empty resident trie with a byte budget (0 keeps nothing).
    pub(crate) fn new(bytes_max: u64) -> Resident {
        let depth_limit = if bytes_max == 0 { 0 } else { DEPTH_LIMIT_MAX };
        let shards = empty_shards(bytes_max, depth_limit);
        Resident {
            bytes: shards.iter().map(Shard::table_bytes).sum(),
            shards,
            bytes_max,
            depth_limit,
            complete: false,
            deep: None,
            hits: 0,
            misses: 0,
        }
    }

    /// The stored node under node key `key`, if resident.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&Arc<[u8]>> {
        self.shards[shard(key)].get(key)
    }

    /// What the resident trie knows of node key `key`: `Some(Some(node))` stored,
    /// `Some(None)` known not stored (complete above the depth limit, or ruled out by the
    /// filter below it), `None` unknown.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<Option<&Arc<[u8]>>> {
        match self.get(key) {
            Some(v) => Some(Some(v)),
            None if self.complete && (self.keeps(key) || !self.may_hold_deep(key)) => Some(None),
            None => None,
        }
    }

    /// False when the filter rules out a stored node at `key`, a key below the depth limit
    /// of a complete resident trie; true when it may hold one or there is no filter.
    pub(crate) fn may_hold_deep(&self, key: &[u8]) -> bool {
        self.deep.as_ref().is_none_or(|f| f.may_hold(key))
    }

    /// True once filled (and until emptied).
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// The depth limit when the trie is complete above it and deeper nodes may be stored
    /// (the walk then reads them from the store); `None` when it keeps every level or is
    /// not filled.
    pub(crate) fn floor(&self) -> Option<u8> {
        (self.complete && self.depth_limit < DEPTH_LIMIT_MAX).then_some(self.depth_limit)
    }

    /// Make the resident trie complete: every stored node above the depth limit from one
    /// scan of `nodes`, then the unpersisted `layers` (oldest first) over them.
    pub(crate) fn fill(&mut self, db: &DB, layers: &[Arc<Layer>]) -> Result<(), StoreError> {
        self.clear();
        if self.bytes_max > 0 {
            if self.depth_limit < DEPTH_LIMIT_MAX {
                self.start_deep();
            }
            self.scan_nodes(db)?;
        }
        for layer in layers {
            self.apply(Vec::new(), layer.nodes.iter().map(|(k, v)| (k.as_slice(), v.as_ref())));
        }
        self.enforce_budget();
        self.complete = true;
        Ok(())
    }

    /// Admit every stored node above the depth limit from one pass over `nodes`. Once the
    /// limit is known, the pass seeks over long runs of deeper nodes ([`next_kept`]) instead
    /// of stepping through them; only the nodes kept are copied, and the scan bypasses the
    /// block cache (it would evict what readers and leaf scans reuse: at 10M keys the column
    /// is ~3x the cache) and reads ahead in large steps.
    fn scan_nodes(&mut self, db: &DB) -> Result<(), StoreError> {
        let mut opts = ReadOptions::default();
        opts.fill_cache(false);
        opts.set_readahead_size(SCAN_READAHEAD_BYTES);
        let mut iter = db.raw_iterator_cf_opt(cf(db, CF_NODES)?, opts);
        iter.seek_to_first();
        let (mut since_check, mut deep_run) = (0u32, 0u32);
        let mut deep_keys = Vec::with_capacity(DEEP_BATCH);
        while let (Some(k), Some(v)) = (iter.key(), iter.value()) {
            if let (false, Some(deep)) = (self.keeps(k), &mut self.deep) {
                deep_keys.push(key_hash(k));
                if deep_keys.len() == DEEP_BATCH {
                    deep.add_hashes(&deep_keys);
                    deep_keys.clear();
                }
                iter.next();
                continue;
            }
            if !self.keeps(k) {
                deep_run += 1;
                match next_kept(k, self.depth_limit).filter(|_| deep_run >= SEEK_AFTER_DEEP) {
                    Some(target) => {
                        iter.seek(&target);
                        deep_run = 0;
                    }
                    None => iter.next(),
                }
                continue;
            }
            deep_run = 0;
            let (delta, _) = insert(&mut self.shards[shard(k)], k, Arc::from(v));
            self.bytes = self.bytes.saturating_add_signed(delta);
            since_check += 1;
            if since_check == 65_536 {
                self.enforce_budget();
                since_check = 0;
            }
            iter.next();
        }
        if let Some(deep) = &mut self.deep {
            deep.add_hashes(&deep_keys);
        }
        Ok(iter.status()?)
    }

    /// Count one pass's lookups.
    pub(crate) fn count(&mut self, hits: u64, misses: u64) {
        self.hits += hits;
        self.misses += misses;
    }

    /// True when a node at this key would be kept.
    pub(crate) fn keeps(&self, key: &[u8]) -> bool {
        depth(key) < self.depth_limit
    }

    /// Admit the nodes a commit's walk loaded (pre-state values), then apply its node
    /// writes (in any order, each key once) over them, then enforce the budget.
    pub(crate) fn apply<'a>(
        &mut self,
        loaded: Vec<(Vec<u8>, Arc<[u8]>)>,
        writes: impl IntoIterator<Item = (&'a [u8], Option<&'a Arc<[u8]>>)>,
    ) {
        self.apply_ops_of(loaded, writes, false);
    }

    /// [`Resident::apply`] that also returns what each written key it keeps held before
    /// (the pre-state, the walk's loads included), by the write's position in `writes`, in
    /// no particular order.
    pub(crate) fn apply_capturing<'a>(
        &mut self,
        loaded: Vec<(Vec<u8>, Arc<[u8]>)>,
        writes: impl IntoIterator<Item = (&'a [u8], Option<&'a Arc<[u8]>>)>,
    ) -> Vec<Replaced> {
        self.apply_ops_of(loaded, writes, true)
    }

    fn apply_ops_of<'a>(
        &mut self,
        loaded: Vec<(Vec<u8>, Arc<[u8]>)>,
        writes: impl IntoIterator<Item = (&'a [u8], Option<&'a Arc<[u8]>>)>,
        capture: bool,
    ) -> Vec<Replaced> {
        // Invariant: within each map the writes come last, so a loaded node the block
        // replaced or deleted never survives (a key's entries all go to one map).
        let mut parts: Vec<Vec<Op<'_>>> = (0..SHARDS).map(|_| Vec::new()).collect();
        let mut deep_keys = Vec::new();
        for (k, v) in &loaded {
            if self.keeps(k) {
                parts[shard(k)].push((k, Some(v.clone()), None));
            }
        }
        for (at, (k, v)) in writes.into_iter().enumerate() {
            let keeps = self.keeps(k);
            if let (false, Some(_), Some(_)) = (keeps, &self.deep, v) {
                deep_keys.push(key_hash(k));
            }
            let v = v.filter(|_| keeps).cloned();
            parts[shard(k)].push((k, v, (capture && keeps).then_some(at)));
        }
        if let Some(deep) = &mut self.deep {
            deep.add_hashes(&deep_keys);
        }
        let total: usize = parts.iter().map(Vec::len).sum();
        let results: Vec<(i64, Vec<Replaced>)> = if total >= PARALLEL_APPLY_MIN {
            self.shards.par_iter_mut().zip(parts).map(|(s, ops)| apply_ops(s, ops)).collect()
        } else {
            self.shards.iter_mut().zip(parts).map(|(s, ops)| apply_ops(s, ops)).collect()
        };
        let delta: i64 = results.iter().map(|r| r.0).sum();
        self.bytes = self.bytes.saturating_add_signed(delta);
        if self.deep.as_ref().is_some_and(DeepFilter::is_full) {
            self.drop_deep();
        }
        self.enforce_budget();
        results.into_iter().flat_map(|r| r.1).collect()
    }

    /// Start the filter of deeper node keys (its bytes count in the budget).
    fn start_deep(&mut self) {
        self.deep = DeepFilter::within(self.bytes_max / DEEP_FILTER_SHARE);
        self.bytes += self.deep.as_ref().map_or(0, DeepFilter::bytes);
    }

    /// Drop the filter of deeper node keys until the next fill (it filled up).
    fn drop_deep(&mut self) {
        if let Some(deep) = self.deep.take() {
            self.bytes -= deep.bytes();
        }
    }

    /// Drop the deepest kept levels until the bytes fit: the new limit is chosen from one
    /// count of the bytes per level, then one pass evicts every level at or below it (one
    /// pass per dropped level cost a fill at 10M keys a fifth of its time).
    fn enforce_budget(&mut self) {
        if self.bytes <= self.bytes_max {
            return;
        }
        if self.deep.is_none() && self.depth_limit == DEPTH_LIMIT_MAX {
            self.start_deep();
        }
        let mut per_depth = [0u64; DEPTH_LIMIT_MAX as usize + 1];
        for (key_len, depth, v) in self.shards.iter().flat_map(Shard::sizes) {
            per_depth[usize::from(depth)] += sized_entry_bytes(key_len, v);
        }
        let Some(limit) = limit_within(&per_depth, self.bytes, self.bytes_max) else {
            return;
        };
        self.depth_limit = limit;
        let mut freed = 0;
        let mut deep_keys = Vec::new();
        let learn = self.deep.is_some();
        for (first, s) in self.shards.iter_mut().enumerate() {
            let tabled = s.table_bytes();
            s.evict_from(first as u8, limit, &mut |k, v| {
                freed += entry_bytes(k, v);
                if learn {
                    deep_keys.push(key_hash(k));
                }
            });
            freed += tabled - s.table_bytes();
        }
        if let Some(deep) = &mut self.deep {
            deep.add_hashes(&deep_keys);
        }
        self.bytes -= freed;
    }

    /// Forget everything (after writes that bypassed the committer); the next commit
    /// fills it again.
    pub(crate) fn clear(&mut self) {
        self.shards = empty_shards(self.bytes_max, self.depth_limit);
        self.bytes = self.shards.iter().map(Shard::table_bytes).sum();
        self.complete = false;
        self.deep = None;
    }

    /// Counters.
    pub(crate) fn stats(&self) -> ResidentStats {
        ResidentStats {
            entries: self.shards.iter().map(|s| s.len() as u64).sum(),
            bytes: self.bytes,
            bytes_max: self.bytes_max,
            depth_limit: self.depth_limit,
            complete: self.complete,
            deep_filter_bytes: self.deep.as_ref().map_or(0, DeepFilter::bytes),
            hits: self.hits,
            misses: self.misses,
        }
    }
}

/// Where the next node key above depth limit `limit` may be, given a node key `key` at or
/// below it: `None` when `key` is not a node key (the scan then steps on).
///
/// A kept key is `prefix ‖ q ‖ d` with `d < limit` and `|q| = ceil(d / 2) ≤ s = limit / 2`.
/// `key` is `prefix ‖ p ‖ d'` with `|p| ≥ s + 1`; let `x = p[s]`. Every key after `key` that
/// starts with `prefix ‖ p[..s]` and is not a proper prefix of `key` (those sort before it)
/// is longer than `prefix ‖ p[..s] ‖ y` for its byte `y ≥ x`, hence deep, unless it is
/// exactly `prefix ‖ p[..s] ‖ d` with `d > x` a depth that packs into `s` bytes. So the next
/// candidate is the least such `d`, else the first key after every key under `p[..s]`.
fn next_kept(key: &[u8], limit: u8) -> Option<Vec<u8>> {
    let prefix = key.len() - TrieId::split(key)?.1.len();
    let s = usize::from(limit / 2);
    // `key` must be a node key deeper than `s` packed bytes, so that `x` is a path byte and
    // not its depth byte.
    if key.len() < prefix + s + 2 {
        return None;
    }
    let (head, x) = (&key[..prefix + s], key[prefix + s]);
    // The depths that pack into `s` bytes, ascending.
    let next_depth = [(2 * s).checked_sub(1), Some(2 * s)]
        .into_iter()
        .flatten()
        .find(|&d| d > usize::from(x) && d < usize::from(limit));
    let mut target = head.to_vec();
    match next_depth.and_then(|d| u8::try_from(d).ok()) {
        Some(d) => target.push(d),
        // The first key after every key that starts with `head` (its shortest upper bound,
        // not a fixed-width increment: that would skip a shorter key sorting between them).
        None => loop {
            match target.pop() {
                Some(0xff) => continue,
                Some(b) => {
                    target.push(b + 1);
                    break;
                }
                None => return None,
            }
        },
    }
    // After `key` by construction; checked so that the scan can only move forward.
    (target.as_slice() > key).then_some(target)
}

/// The depth limit that drops the deepest levels present in `per_depth` (bytes per level)
/// until `bytes` fit `bytes_max` (the shallowest present level when none fits); `None`
/// when nothing is present.
fn limit_within(per_depth: &[u64], mut bytes: u64, bytes_max: u64) -> Option<u8> {
    let mut limit = None;
    for (d, &level) in per_depth.iter().enumerate().rev().filter(|(_, b)| **b > 0) {
        if bytes <= bytes_max {
            break;
        }
        bytes = bytes.saturating_sub(level);
        limit = u8::try_from(d).ok();
    }
    limit
}

/// Apply `ops` in order to `map`: the change in bytes held, and the old values of the ops
/// marked for capture.
fn apply_ops(part: &mut Shard, ops: Vec<Op<'_>>) -> (i64, Vec<Replaced>) {
    let mut delta = 0;
    let mut olds = Vec::new();
    for (k, v, capture) in ops {
        let (change, old) = match v {
            Some(v) => insert(part, k, v),
            None => {
                let old = part.remove(k);
                (old.as_ref().map_or(0, |o| -(entry_bytes(k, o) as i64)), old)
            }
        };
        delta += change;
        if let Some(at) = capture {
            olds.push((at, old));
        }
    }
    (delta, olds)
}

/// Insert or replace: the change in bytes held, and the replaced value.
fn insert(part: &mut Shard, key: &[u8], value: Arc<[u8]>) -> (i64, Option<Arc<[u8]>>) {
    let added = entry_bytes(key, &value) as i64;
    let old = part.insert(key, value);
    (added - old.as_ref().map_or(0, |o| entry_bytes(key, o) as i64), old)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(depth: u8, i: u8) -> Vec<u8> {
        vec![0, i, depth]
    }

    /// The keys a scan with [`next_kept`]'s seeks visits are exactly the keys above the
    /// limit, over random node keys of the main trie and two storage tries.
    #[test]
    fn seeks_over_deep_nodes_skip_no_kept_key() {
        use rand::{Rng, SeedableRng};
        use state::H256;
        use std::collections::BTreeSet;

        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let tries =
            [TrieId::Main, TrieId::Storage(H256([0; 32])), TrieId::Storage(H256([0xff; 32]))];
        let mut keys = BTreeSet::new();
        for _ in 0..20_000 {
            let trie = &tries[rng.gen_range(0..tries.len())];
            let depth = rng.gen_range(0..12usize);
            // Few distinct nibbles, so that paths share prefixes and depths interleave.
            let path: Vec<u8> =
                (0..depth).map(|_| [0u8, 1, 2, 3, 4, 0xf][rng.gen_range(0..6)]).collect();
            keys.insert(crate::keys::node_key(trie, &path));
        }
        let after = |k: &Vec<u8>| {
            use std::ops::Bound::{Excluded, Unbounded};
            keys.range::<Vec<u8>, _>((Excluded(k), Unbounded)).next()
        };
        for limit in 0..=12u8 {
            let mut seen = Vec::new();
            let mut at = keys.iter().next();
            while let Some(k) = at {
                if depth(k) < limit {
                    seen.push(k.clone());
                    at = after(k);
                    continue;
                }
                at = match next_kept(k, limit) {
                    Some(target) => {
                        assert!(target.as_slice() > k.as_slice());
                        keys.range(target..).next()
                    }
                    None => after(k),
                };
            }
            let want: Vec<Vec<u8>> = keys.iter().filter(|k| depth(k) < limit).cloned().collect();
            assert_eq!(seen, want, "limit {limit}");
        }
    }

    #[test]
    fn limit_drops_present_levels_from_the_deepest() {
        let mut per_depth = [0u64; 256];
        (per_depth[0], per_depth[1], per_depth[5]) = (10, 20, 40);
        assert_eq!(limit_within(&per_depth, 70, 70), None);
        assert_eq!(limit_within(&per_depth, 70, 69), Some(5));
        assert_eq!(limit_within(&per_depth, 70, 30), Some(5));
        assert_eq!(limit_within(&per_depth, 70, 29), Some(1));
        assert_eq!(limit_within(&per_depth, 70, 0), Some(0));
        assert_eq!(limit_within(&[0u64; 256], 5, 0), None);
    }

    #[test]
    fn budget_drops_the_deepest_levels() {
        let mut r = Resident::new(10 * (3 + 100 + ENTRY_OVERHEAD_BYTES));
        let value: Arc<[u8]> = Arc::from(vec![7u8; 100]);
        let writes: Vec<crate::tiers::layer::Entry> = (0..4u8)
            .flat_map(|d| (0..4u8).map(move |i| key(d, i)))
            .map(|k| (k, Some(value.clone())))
            .collect();
        r.apply(Vec::new(), writes.iter().map(|(k, v)| (k.as_slice(), v.as_ref())));
        // 16 nodes do not fit 10: levels 3 and 2 go, into the filter of deeper keys (an
        // eighth of the budget, a power of two of words: 32 of them).
        assert_eq!(r.stats().depth_limit, 2);
        assert_eq!(r.stats().entries, 8);
        assert_eq!(r.stats().deep_filter_bytes, 256);
        assert!(r.get(&key(1, 3)).is_some() && r.get(&key(2, 0)).is_none());
        assert!((2..4).all(|d| (0..4).all(|i| r.may_hold_deep(&key(d, i)))));
        // Deeper nodes are no longer admitted, but the filter learns them; deletions remove.
        r.apply(Vec::new(), [(key(3, 9).as_slice(), Some(&value)), (key(0, 0).as_slice(), None)]);
        assert!(r.get(&key(3, 9)).is_none() && r.get(&key(0, 0)).is_none());
        assert!(r.may_hold_deep(&key(3, 9)));
        assert_eq!(r.stats().entries, 7);
        // The parts' tables: an eighth of the budget holds one level (a position each).
        let tables = SHARDS as u64 * POSITION_BYTES;
        assert_eq!(r.stats().bytes, 7 * (3 + 100 + ENTRY_OVERHEAD_BYTES) + 256 + tables);
    }
}
