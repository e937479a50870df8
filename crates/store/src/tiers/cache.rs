//! Byte-bounded, thread-safe read caches for nodes and flat values.
//!
//! [`ByteCache`] maps byte-string keys to cheaply clonable values (the store uses
//! `Arc<[u8]>`, and `Option<Arc<[u8]>>` to remember that a key is absent). It wraps
//! `quick_cache`'s sharded CLOCK-Pro cache, which keeps frequently read entries over
//! once-read ones, and adds exact hit, miss, admission, eviction and invalidation counters.
//!
//! Admission policy (seed 2): the cache is filled only by [`ByteCache::admit`] after a read
//! missed and went to disk. Freshly written entries are never admitted: during write-heavy
//! import they evict the entries that are read again in favour of ones that may never be.
//! Writers instead call [`ByteCache::invalidate`] for every key they change, once the new
//! value is readable elsewhere (a diff layer or the database). The caller must also keep
//! an invalidation from falling between a reader's disk read and its `admit`, or the old
//! value would be cached after the write (the store holds its layer lock shared across
//! the read and the admission, and exclusive while invalidating).
//!
//! Invariant: the summed weight of the entries never exceeds `bytes_max` (no shard
//! rounding slack: the per-shard capacity is rounded down). An entry weighs
//! [`ENTRY_OVERHEAD_BYTES`] + key length + [`Weigh::weight_bytes`] of its value, where the
//! overhead is sized so that the weight tracks real memory, including the recently
//! evicted ("ghost") keys the policy remembers; see its docs for the measured ratio.
//!
//! Cost: a `get` is one hash, one shard read lock and a value clone; an `admit` takes one
//! shard write lock and allocates the key. Counters are striped per thread so that readers
//! on many cores do not contend on one cache line.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, OptionsBuilder, Weighter};
use serde::Serialize;

/// Bytes charged to every entry on top of its key and value: the slab slot with its clock
/// links, the hash-table slot, the remembered ghost keys (about half a slot per entry),
/// and two allocator headers (key and value).
///
/// Measured (glibc malloc, 16 and 64 MiB caches filled well past capacity): the memory a
/// full cache holds is 0.94-1.12 × `bytes_max` for 20-40 byte keys and 0-500 byte
/// values; with an overhead of 64 it was 1.27-1.48 ×.
pub(crate) const ENTRY_OVERHEAD_BYTES: u64 = 128;

/// Typical entry size used to estimate the entry count (sizes shards and the ghost ring).
const ESTIMATED_ENTRY_BYTES: u64 = ENTRY_OVERHEAD_BYTES + 64;

/// Share of each shard reserved for "hot" entries (quick_cache's default, set explicitly
/// because the largest admissible entry is derived from it).
const HOT_ALLOCATION: f64 = 0.97;

/// Counter stripes; a power of two at least as large as typical reader thread counts.
const STRIPES: usize = 16;

/// The heap bytes a cached value accounts for.
///
/// Invariant: a value's weight never changes while it is cached (quick_cache's accounting
/// relies on it); immutable values such as `Arc<[u8]>` satisfy this trivially.
pub(crate) trait Weigh {
    /// Bytes this value keeps alive, excluding the entry overhead
    /// ([`ENTRY_OVERHEAD_BYTES`]) that the cache adds itself.
    fn weight_bytes(&self) -> u64;
}

impl Weigh for Arc<[u8]> {
    /// The bytes plus the Arc's two reference counts.
    fn weight_bytes(&self) -> u64 {
        16 + self.len() as u64
    }
}

/// `None` caches "this key is absent": it weighs nothing beyond the entry overhead.
impl<T: Weigh> Weigh for Option<T> {
    fn weight_bytes(&self) -> u64 {
        self.as_ref().map_or(0, Weigh::weight_bytes)
    }
}

/// A snapshot of a cache's counters and size.
///
/// Each counter is exact; a snapshot taken while other threads use the cache may mix
/// counts from slightly different moments. With no concurrent use,
/// `entries == admissions - evictions - invalidations`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct CacheStats {
    /// `get` calls that found a value.
    pub hits: u64,
    /// `get` calls that found nothing (every call, when the cache is disabled).
    pub misses: u64,
    /// Entries added by `admit` (replacing a cached value does not count again).
    pub admissions: u64,
    /// Entries pushed out to stay within `bytes_max`.
    pub evictions: u64,
    /// Entries removed by `invalidate` or `clear`.
    pub invalidations: u64,
    /// `admit` calls refused because the entry alone was too large for the cache.
    pub rejections: u64,
    /// Entries currently cached.
    pub entries: u64,
    /// Summed weight of the cached entries, in bytes.
    pub bytes: u64,
    /// The configured byte bound.
    pub bytes_max: u64,
}

impl CacheStats {
    /// `hits / (hits + misses)`, or 0.0 before the first lookup.
    pub fn hit_rate(&self) -> f64 {
        rate(self.hits, self.misses)
    }
}

/// Node and flat cache lookups and evictions summed over the sessions of one database:
/// each clean close adds its session's counters to the record in `meta`, so that
/// `arbor stats` shows what earlier commands (an `arbor load`, say) saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheTotals {
    /// Node cache hits.
    pub node_hits: u64,
    /// Node cache misses.
    pub node_misses: u64,
    /// Node cache evictions.
    pub node_evictions: u64,
    /// Flat cache hits.
    pub flat_hits: u64,
    /// Flat cache misses.
    pub flat_misses: u64,
    /// Flat cache evictions.
    pub flat_evictions: u64,
}

impl CacheTotals {
    /// Bytes of the encoded record.
    pub(crate) const ENCODED_BYTES: usize = 48;

    fn fields(&self) -> [u64; 6] {
        [
            self.node_hits,
            self.node_misses,
            self.node_evictions,
            self.flat_hits,
            self.flat_misses,
            self.flat_evictions,
        ]
    }

    /// The six counters as `u64` BE, in field order.
    pub(crate) fn encode(&self) -> Vec<u8> {
        self.fields().iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    /// Decode [`CacheTotals::encode`]'s output; `None` for any other length.
    pub(crate) fn decode(bytes: &[u8]) -> Option<CacheTotals> {
        if bytes.len() != Self::ENCODED_BYTES {
            return None;
        }
        let mut v = [0u64; 6];
        for (slot, chunk) in v.iter_mut().zip(bytes.chunks_exact(8)) {
            *slot = u64::from_be_bytes(chunk.try_into().ok()?);
        }
        Some(CacheTotals {
            node_hits: v[0],
            node_misses: v[1],
            node_evictions: v[2],
            flat_hits: v[3],
            flat_misses: v[4],
            flat_evictions: v[5],
        })
    }

    /// These totals plus one session's counters (saturating).
    pub(crate) fn plus(&self, node: &CacheStats, flat: &CacheStats) -> CacheTotals {
        CacheTotals {
            node_hits: self.node_hits.saturating_add(node.hits),
            node_misses: self.node_misses.saturating_add(node.misses),
            node_evictions: self.node_evictions.saturating_add(node.evictions),
            flat_hits: self.flat_hits.saturating_add(flat.hits),
            flat_misses: self.flat_misses.saturating_add(flat.misses),
            flat_evictions: self.flat_evictions.saturating_add(flat.evictions),
        }
    }

    /// Node cache `hits / (hits + misses)`, or 0.0 before the first lookup.
    pub fn node_hit_rate(&self) -> f64 {
        rate(self.node_hits, self.node_misses)
    }

    /// Flat cache `hits / (hits + misses)`, or 0.0 before the first lookup.
    pub fn flat_hit_rate(&self) -> f64 {
        rate(self.flat_hits, self.flat_misses)
    }
}

fn rate(hits: u64, misses: u64) -> f64 {
    let lookups = hits.saturating_add(misses);
    if lookups == 0 {
        0.0
    } else {
        hits as f64 / lookups as f64
    }
}

/// A thread-safe cache from byte keys to values of type `V`, bounded by bytes.
///
/// A capacity of 0 disables it: every `get` is a miss and `admit` does nothing.
pub(crate) struct ByteCache<V: Weigh + Clone> {
    /// `None` when the cache is disabled.
    inner: Option<Inner<V>>,
    bytes_max: u64,
    /// Largest entry weight the cache admits; larger entries would exceed a shard's hot
    /// budget, where quick_cache refuses them.
    entry_bytes_max: u64,
    stripes: Box<[Stripe]>,
}

impl<V: Weigh + Clone> ByteCache<V> {
    /// A cache holding at most `bytes_max` bytes of entries; 0 disables it.
    pub(crate) fn new(bytes_max: u64) -> Self {
        let stripes = (0..STRIPES).map(|_| Stripe::default()).collect();
        if bytes_max == 0 {
            return Self { inner: None, bytes_max, entry_bytes_max: 0, stripes };
        }
        let estimated_items = (bytes_max / ESTIMATED_ENTRY_BYTES).max(1);
        let inner = build_cache(bytes_max, estimated_items);
        let shard_bytes = inner.shard_capacity();
        // Invariant: below quick_cache's hot budget, floor(shard_bytes * HOT_ALLOCATION),
        // so quick_cache never takes its oversized-entry path (which would report the
        // refused entry as an eviction).
        let entry_bytes_max = shard_bytes / 10 * 9;
        Self { inner: Some(inner), bytes_max, entry_bytes_max, stripes }
    }

    /// The cached value for `key`, counting a hit or a miss.
    pub(crate) fn get(&self, key: &[u8]) -> Option<V> {
        let found = self.inner.as_ref().and_then(|c| c.get(key));
        let stripe = self.stripe();
        if found.is_some() {
            stripe.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            stripe.misses.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Caches `value` for `key`, evicting colder entries to stay within the bound.
    ///
    /// Call only after a `get` miss whose value was then read from disk: never for a value
    /// that is being written, and not after an `invalidate` of `key` that ran during the
    /// disk read (see the module docs). An entry too large for the cache is refused (and
    /// any older value for the key dropped).
    pub(crate) fn admit(&self, key: &[u8], value: V) {
        let Some(cache) = &self.inner else { return };
        let weight = entry_weight(key, &value);
        let stripe = self.stripe();
        if weight > self.entry_bytes_max {
            stripe.rejections.fetch_add(1, Ordering::Relaxed);
            if cache.remove(key).is_some() {
                stripe.invalidations.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let mut evicted = EvictState::default();
        cache.insert_with_lifecycle(Box::from(key), value, &mut evicted);
        // quick_cache reports a replaced value through `on_evict` without `before_evict`.
        let replaced = evicted.on_evict > evicted.before_evict;
        if !replaced {
            stripe.admissions.fetch_add(1, Ordering::Relaxed);
        }
        stripe.evictions.fetch_add(evicted.before_evict, Ordering::Relaxed);
        // `evicted` drops here, releasing evicted values outside the shard lock.
    }

    /// Drops any cached value for `key`; call for every key a write changes.
    pub(crate) fn invalidate(&self, key: &[u8]) {
        if let Some(cache) = &self.inner {
            if cache.remove(key).is_some() {
                self.stripe().invalidations.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// [`ByteCache::invalidate`] for each of `keys`; nothing to look up when the cache
    /// holds nothing (the common case on a commit path that reads no cached values). The
    /// caller keeps admissions out meanwhile (see `tiers/reader.rs`), so "empty" stays true.
    pub(crate) fn invalidate_all<'a>(&self, keys: impl IntoIterator<Item = &'a [u8]>) {
        if self.inner.as_ref().is_none_or(|c| c.is_empty()) {
            return;
        }
        for key in keys {
            self.invalidate(key);
        }
    }

    /// Drops every entry (counted as invalidations); counters are kept.
    pub(crate) fn clear(&self) {
        if let Some(cache) = &self.inner {
            let dropped = cache.drain().count() as u64;
            self.stripe().invalidations.fetch_add(dropped, Ordering::Relaxed);
        }
    }

    /// Current counters and size.
    pub(crate) fn stats(&self) -> CacheStats {
        let mut stats = CacheStats { bytes_max: self.bytes_max, ..CacheStats::default() };
        for s in self.stripes.iter() {
            stats.hits += s.hits.load(Ordering::Relaxed);
            stats.misses += s.misses.load(Ordering::Relaxed);
            stats.admissions += s.admissions.load(Ordering::Relaxed);
            stats.evictions += s.evictions.load(Ordering::Relaxed);
            stats.invalidations += s.invalidations.load(Ordering::Relaxed);
            stats.rejections += s.rejections.load(Ordering::Relaxed);
        }
        if let Some(cache) = &self.inner {
            stats.entries = cache.len() as u64;
            stats.bytes = cache.weight();
        }
        stats
    }

    /// This thread's counter stripe.
    fn stripe(&self) -> &Stripe {
        &self.stripes[thread_stripe()]
    }
}

impl<V: Weigh + Clone> std::fmt::Debug for ByteCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteCache").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

/// The quick_cache type behind a [`ByteCache`].
type Inner<V> = Cache<Box<[u8]>, V, EntryWeighter, DefaultHashBuilder, CountEvictions>;

/// Builds the quick_cache with a total capacity of at most `bytes_max`.
fn build_cache<V: Weigh + Clone>(bytes_max: u64, estimated_items: u64) -> Inner<V> {
    let items = usize::try_from(estimated_items).unwrap_or(usize::MAX);
    let build = |shards: usize| {
        // quick_cache gives each shard ceil(total / shards); pass a multiple of the shard
        // count so that the shards sum to at most `bytes_max` rather than up to
        // `bytes_max + shards - 1`.
        let total = bytes_max / shards as u64 * shards as u64;
        let options = OptionsBuilder::new()
            .shards(shards)
            .estimated_items_capacity(items)
            .weight_capacity(total)
            .hot_allocation(HOT_ALLOCATION)
            .build()
            .expect("quick_cache options with capacity and item estimate set always build");
        Cache::with_options(options, EntryWeighter, DefaultHashBuilder::default(), CountEvictions)
    };
    let cache = build(shard_count(items));
    if cache.capacity() <= bytes_max {
        return cache;
    }
    // quick_cache picked another shard count than predicted: size for the one it picked.
    build(cache.num_shards())
}

/// The shard count quick_cache will use: four per core, a power of two, halved until
/// each shard expects at least 32 entries (mirrors `Cache::with_options`).
fn shard_count(estimated_items: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut shards = cores.saturating_mul(4).next_power_of_two();
    while shards > 1 && estimated_items.div_ceil(shards) < 32 {
        shards /= 2;
    }
    shards
}

/// Weight of one entry: overhead + key + value.
fn entry_weight<V: Weigh>(key: &[u8], value: &V) -> u64 {
    ENTRY_OVERHEAD_BYTES.saturating_add(key.len() as u64).saturating_add(value.weight_bytes())
}

/// quick_cache weighter; every weight is at least `ENTRY_OVERHEAD_BYTES` (never 0, which
/// quick_cache would treat as unevictable).
#[derive(Debug, Clone, Copy)]
struct EntryWeighter;

impl<V: Weigh> Weighter<Box<[u8]>, V> for EntryWeighter {
    fn weight(&self, key: &Box<[u8]>, value: &V) -> u64 {
        entry_weight(key, value)
    }
}

/// quick_cache lifecycle hook that counts evictions per request.
///
/// quick_cache calls `before_evict` only when it pushes an entry out to make room (our
/// entries are never oversized and never weigh 0), while `on_evict` also reports a value
/// replaced by an insert for the same key; the difference tells the two apart.
#[derive(Debug, Clone, Copy)]
struct CountEvictions;

/// Per-`admit` eviction record; keeps up to two evicted entries so they are freed after the
/// shard lock is released (as quick_cache's default lifecycle does).
struct EvictState<V> {
    before_evict: u64,
    on_evict: u64,
    released: [Option<(Box<[u8]>, V)>; 2],
}

impl<V> Default for EvictState<V> {
    fn default() -> Self {
        Self { before_evict: 0, on_evict: 0, released: [None, None] }
    }
}

impl<V> Lifecycle<Box<[u8]>, V> for CountEvictions {
    type RequestState = EvictState<V>;

    fn before_evict(&self, state: &mut EvictState<V>, _key: &Box<[u8]>, _value: &mut V) {
        state.before_evict += 1;
    }

    fn on_evict(&self, state: &mut EvictState<V>, key: Box<[u8]>, value: V) {
        state.on_evict += 1;
        if let Some(slot) = state.released.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some((key, value));
        }
    }
}

/// One thread group's counters, on its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    hits: AtomicU64,
    misses: AtomicU64,
    admissions: AtomicU64,
    evictions: AtomicU64,
    invalidations: AtomicU64,
    rejections: AtomicU64,
}

/// The counter stripe of the calling thread, assigned round-robin on first use.
fn thread_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    // During thread-local destruction the slot is gone; any stripe is correct.
    STRIPE.try_with(|stripe| *stripe).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn bytes(data: &[u8]) -> Arc<[u8]> {
        Arc::from(data)
    }

    /// Checks the counter identity that holds whenever no other thread is mid-operation.
    fn assert_balanced(stats: &CacheStats, context: &str) {
        assert!(stats.bytes <= stats.bytes_max, "{context}: {stats:?}");
        assert_eq!(
            stats.entries,
            stats.admissions - stats.evictions - stats.invalidations,
            "{context}: {stats:?}"
        );
    }

    #[test]
    fn weights() {
        assert_eq!(bytes(b"abc").weight_bytes(), 19);
        assert_eq!(Some(bytes(b"abc")).weight_bytes(), 19);
        assert_eq!(None::<Arc<[u8]>>.weight_bytes(), 0);
        assert_eq!(entry_weight(b"key", &None::<Arc<[u8]>>), ENTRY_OVERHEAD_BYTES + 3);
    }

    #[test]
    fn cache_totals_round_trip_and_reject_garbage() {
        let t = CacheTotals {
            node_hits: 1,
            node_misses: 2,
            node_evictions: 3,
            flat_hits: u64::MAX,
            flat_misses: 0,
            flat_evictions: 6,
        };
        assert_eq!(CacheTotals::decode(&t.encode()), Some(t));
        assert_eq!(t.encode().len(), CacheTotals::ENCODED_BYTES);
        for len in [0, 1, 47, 49, 96] {
            assert_eq!(CacheTotals::decode(&vec![7u8; len]), None, "{len} bytes");
        }
        let node = CacheStats { hits: 3, misses: 1, evictions: 2, ..CacheStats::default() };
        let sum = CacheTotals::default().plus(&node, &CacheStats::default());
        assert_eq!((sum.node_hits, sum.node_misses, sum.node_evictions), (3, 1, 2));
        assert!((sum.node_hit_rate() - 0.75).abs() < 1e-12);
        assert_eq!(sum.flat_hit_rate(), 0.0);
        assert_eq!(t.plus(&CacheStats::default(), &node).flat_hits, u64::MAX);
    }

    #[test]
    fn counts_hits_and_misses() {
        let cache = ByteCache::<Arc<[u8]>>::new(1 << 20);
        assert_eq!(cache.stats().hit_rate(), 0.0);
        assert_eq!(cache.get(b"k"), None);
        cache.admit(b"k", bytes(b"v"));
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"v"[..]));
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"v"[..]));
        assert_eq!(cache.get(b"other"), None);
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.admissions, stats.entries), (2, 2, 1, 1));
        assert_eq!(stats.bytes, ENTRY_OVERHEAD_BYTES + 1 + 16 + 1);
        assert_eq!(stats.bytes_max, 1 << 20);
        assert_eq!(cache.stats().hit_rate(), 0.5);
        assert_balanced(&stats, "after hits and misses");
    }

    #[test]
    fn caches_absence() {
        let cache = ByteCache::<Option<Arc<[u8]>>>::new(1 << 20);
        cache.admit(b"gone", None);
        assert_eq!(cache.get(b"gone"), Some(None));
        assert_eq!(cache.stats().bytes, ENTRY_OVERHEAD_BYTES + 4);
    }

    #[test]
    fn zero_capacity_disables() {
        let cache = ByteCache::<Arc<[u8]>>::new(0);
        cache.admit(b"k", bytes(b"v"));
        assert_eq!(cache.get(b"k"), None);
        cache.invalidate(b"k");
        cache.clear();
        let stats = cache.stats();
        assert_eq!(stats, CacheStats { misses: 1, ..CacheStats::default() });
    }

    #[test]
    fn replacing_is_not_an_admission_or_eviction() {
        let cache = ByteCache::<Arc<[u8]>>::new(1 << 20);
        cache.admit(b"k", bytes(b"old"));
        cache.admit(b"k", bytes(b"new"));
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"new"[..]));
        let stats = cache.stats();
        assert_eq!((stats.admissions, stats.evictions, stats.entries), (1, 0, 1));
    }

    #[test]
    fn invalidate_and_clear() {
        let cache = ByteCache::<Arc<[u8]>>::new(1 << 20);
        for i in 0u32..10 {
            cache.admit(&i.to_be_bytes(), bytes(b"v"));
        }
        cache.invalidate(&3u32.to_be_bytes());
        cache.invalidate(&3u32.to_be_bytes()); // already gone: not counted again
        cache.invalidate(b"never cached");
        assert_eq!(cache.get(&3u32.to_be_bytes()), None);
        assert!(cache.get(&4u32.to_be_bytes()).is_some());
        let stats = cache.stats();
        assert_eq!((stats.invalidations, stats.entries), (1, 9));
        assert_balanced(&stats, "after invalidate");

        cache.clear();
        let stats = cache.stats();
        assert_eq!((stats.invalidations, stats.entries, stats.bytes), (10, 0, 0));
        assert_eq!(stats.hits, 1, "counters survive clear");
        assert_balanced(&stats, "after clear");
    }

    #[test]
    fn oversized_entries_are_refused() {
        let cache = ByteCache::<Arc<[u8]>>::new(1000);
        cache.admit(b"k", bytes(b"small"));
        cache.admit(b"k", bytes(&[0u8; 1000]));
        assert_eq!(cache.get(b"k"), None, "the older value must not survive");
        let stats = cache.stats();
        assert_eq!((stats.rejections, stats.evictions, stats.entries), (1, 0, 0));
        assert_balanced(&stats, "after oversized admit");
    }

    #[test]
    fn bound_holds_and_evictions_are_exact() {
        for (case, bytes_max) in
            [1_000u64, 4_097, 100_000, 1 << 20, 7 * (1 << 20) + 13].into_iter().enumerate()
        {
            let seed = 0xa5b0 + case as u64;
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let cache = ByteCache::<Arc<[u8]>>::new(bytes_max);
            let context = format!("seed {seed}, bytes_max {bytes_max}");
            let inserts = (bytes_max / 40).max(200);
            for i in 0..inserts {
                let key_len = rng.gen_range(1..48);
                let key: Vec<u8> = (0..key_len).map(|_| rng.gen()).collect();
                let value = vec![i as u8; rng.gen_range(0..200)];
                cache.admit(&key, Arc::from(value));
                if rng.gen_ratio(1, 4) {
                    let _ = cache.get(&key);
                }
                if i % 97 == 0 {
                    assert_balanced(&cache.stats(), &context);
                }
            }
            let stats = cache.stats();
            assert_balanced(&stats, &context);
            assert!(stats.evictions > 0, "{context}: {stats:?}");
            // The cache should also be reasonably full, not just under the bound.
            assert!(stats.bytes * 2 > bytes_max, "{context}: {stats:?}");
        }
    }

    #[test]
    fn hot_entries_survive_a_scan() {
        let cache = ByteCache::<Arc<[u8]>>::new(64 * 1024);
        let hot: Vec<[u8; 8]> = (0u64..50).map(|i| i.to_be_bytes()).collect();
        for key in &hot {
            cache.admit(key, bytes(&[1; 32]));
        }
        for _ in 0..3 {
            for key in &hot {
                assert!(cache.get(key).is_some());
            }
        }
        // A one-pass scan several times the cache size.
        for i in 1_000u64..5_000 {
            cache.admit(&i.to_be_bytes(), bytes(&[2; 32]));
        }
        let survivors = hot.iter().filter(|key| cache.get(&key[..]).is_some()).count();
        assert!(survivors >= 45, "only {survivors} of 50 hot entries survived a scan");
    }

    #[test]
    fn concurrent_use_from_two_threads() {
        let cache = ByteCache::<Arc<[u8]>>::new(256 * 1024);
        let gets_per_thread = 20_000u64;
        std::thread::scope(|scope| {
            for thread in 0u64..2 {
                let cache = &cache;
                scope.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(thread);
                    for _ in 0..gets_per_thread {
                        // Overlapping key ranges so both threads race on the same entries.
                        let key = rng.gen_range(0u32..8_000).to_be_bytes();
                        match rng.gen_range(0..10) {
                            0 => {
                                cache.invalidate(&key);
                                let _ = cache.get(&key);
                            }
                            _ => {
                                if cache.get(&key).is_none() {
                                    cache.admit(&key, Arc::from(vec![key[3]; 24]));
                                }
                            }
                        }
                    }
                });
            }
        });
        let stats = cache.stats();
        assert_eq!(stats.hits + stats.misses, 2 * gets_per_thread, "{stats:?}");
        assert!(stats.hits > 0 && stats.evictions > 0 && stats.invalidations > 0, "{stats:?}");
        assert_balanced(&stats, "after two threads");
        for i in 0u32..8_000 {
            let key = i.to_be_bytes();
            if let Some(value) = cache.get(&key) {
                assert_eq!(&value[..], &[key[3]; 24][..]);
            }
        }
    }

    #[test]
    fn stats_serialize() {
        let cache = ByteCache::<Arc<[u8]>>::new(1024);
        let _ = cache.get(b"k");
        let text = toml::to_string(&cache.stats()).unwrap();
        assert!(text.contains("misses = 1") && text.contains("bytes_max = 1024"), "{text}");
    }
}
