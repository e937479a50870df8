//! The seeded benchmark input: random 32-byte keys with random 100-byte values.
//!
//! Pairs are fixed-size arrays in one `Vec`, so ten million of them take 1.3 GB and no
//! per-key allocation; the builders take them directly as `&[(K, V)]`.

use std::time::Instant;

use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use rayon::slice::ParallelSliceMut;

/// Bytes per key.
pub(crate) const KEY_BYTES: usize = 32;
/// Bytes per value.
pub(crate) const VALUE_BYTES: usize = 100;

/// One (key, value) pair of the input.
pub(crate) type Item = ([u8; KEY_BYTES], [u8; VALUE_BYTES]);

/// Sorted, duplicate-free pairs and what preparing them cost.
pub(crate) struct SortedInput {
    pub(crate) items: Vec<Item>,
    pub(crate) sort_seconds: f64,
    pub(crate) duplicates_dropped: usize,
}

/// A random pair.
pub(crate) fn random_item(rng: &mut ChaCha8Rng) -> Item {
    let mut item = ([0u8; KEY_BYTES], [0u8; VALUE_BYTES]);
    rng.fill_bytes(&mut item.0);
    rng.fill_bytes(&mut item.1);
    item
}

/// A random value.
pub(crate) fn random_value(rng: &mut ChaCha8Rng) -> [u8; VALUE_BYTES] {
    let mut v = [0u8; VALUE_BYTES];
    rng.fill_bytes(&mut v);
    v
}

/// A uniformly random index below `len` (which must be positive).
pub(crate) fn random_index(rng: &mut ChaCha8Rng, len: usize) -> usize {
    rng.gen_range(0..len)
}

/// `n` random pairs, sorted by key with duplicate keys dropped (sorting is timed apart).
pub(crate) fn sorted_input(rng: &mut ChaCha8Rng, n: usize) -> SortedInput {
    let mut items: Vec<Item> = Vec::with_capacity(n);
    items.extend((0..n).map(|_| random_item(rng)));
    let start = Instant::now();
    items.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    items.dedup_by(|a, b| a.0 == b.0);
    let sort_seconds = start.elapsed().as_secs_f64();
    let duplicates_dropped = n - items.len();
    SortedInput { items, sort_seconds, duplicates_dropped }
}

/// Sort pairs by key and check that keys are unique (for the incremental cross-check).
pub(crate) fn sort_unique(items: &mut [Item]) -> anyhow::Result<()> {
    items.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = items.windows(2).find(|w| w[0].0 == w[1].0) {
        anyhow::bail!(
            "duplicate key 0x{} in the incremental key set",
            crate::common::text::hex(&w[0].0)
        );
    }
    Ok(())
}
