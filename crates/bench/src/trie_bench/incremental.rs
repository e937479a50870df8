//! Incremental roots: small batches of updates to a large in-memory trie (in the
//! benchmark's layout), each followed by `root()`, which re-hashes only the dirty paths.
//!
//! The trie is built by `insert` (untimed) and hashed once. Each round then writes
//! `updates_per_round` pairs, alternately a new value for a random existing key and a new
//! random key, and calls `root()`; a round's time covers the inserts and the root. At the
//! end the trie's root must equal a streaming rebuild of the same pairs.

use std::hint::black_box;
use std::time::Instant;

use rand_chacha::ChaCha8Rng;
use trie::{Layout, MemoryNodeSource, Trie};

use crate::common::timing::{median_sorted, percentile_sorted, ratio, sorted};
use crate::trie_bench::input::{random_index, random_item, random_value, sort_unique, Item};
use crate::trie_bench::opts::TrieBenchOpts;
use crate::trie_bench::report::IncrementalReport;

/// The trie after the rounds and every pair it holds (for the proof phase).
pub(crate) struct IncrementalState<L: Layout> {
    pub(crate) trie: Trie<MemoryNodeSource, L>,
    pub(crate) contents: Vec<Item>,
}

/// Per-round samples.
#[derive(Default)]
struct Samples {
    round_us: Vec<f64>,
    root_us: Vec<f64>,
    hashes: Vec<f64>,
    bytes: Vec<f64>,
}

/// Build a trie of `n` random pairs by insertion and hash it once (untimed).
pub(crate) fn build<L: Layout>(
    rng: &mut ChaCha8Rng,
    n: usize,
    pb: &indicatif::ProgressBar,
) -> anyhow::Result<IncrementalState<L>> {
    let mut trie = Trie::new(MemoryNodeSource::new());
    let mut contents = Vec::with_capacity(n);
    for i in 0..n {
        let item = random_item(rng);
        trie.insert(&item.0, &item.1)?;
        contents.push(item);
        if i % 4096 == 4095 {
            pb.inc(4096);
        }
    }
    trie.root()?;
    Ok(IncrementalState { trie, contents })
}

/// Fill `batch` with one round's updates, applying them to `contents` as well.
fn next_batch(rng: &mut ChaCha8Rng, contents: &mut Vec<Item>, batch: &mut Vec<Item>, n: usize) {
    batch.clear();
    for i in 0..n {
        let existing = i & 1 == 0;
        if existing && !contents.is_empty() {
            let at = random_index(rng, contents.len());
            contents[at].1 = random_value(rng);
            batch.push(contents[at]);
        } else {
            let item = random_item(rng);
            contents.push(item);
            batch.push(item);
        }
    }
}

/// Run the rounds on `state` and check the final root against a rebuild.
pub(crate) fn measure<L: Layout>(
    state: &mut IncrementalState<L>,
    opts: &TrieBenchOpts,
    rng: &mut ChaCha8Rng,
    pb: &indicatif::ProgressBar,
) -> anyhow::Result<IncrementalReport> {
    let keys_initial = state.contents.len();
    let mut samples = Samples::default();
    let mut batch = Vec::with_capacity(opts.updates_per_round);
    for _ in 0..opts.incremental_rounds {
        next_batch(rng, &mut state.contents, &mut batch, opts.updates_per_round);
        let before = state.trie.hash_stats();
        let start = Instant::now();
        for (k, v) in &batch {
            state.trie.insert(k, v)?;
        }
        let rooting = Instant::now();
        black_box(state.trie.root()?);
        let end = Instant::now();
        let after = state.trie.hash_stats();
        samples.round_us.push((end - start).as_secs_f64() * 1e6);
        samples.root_us.push((end - rooting).as_secs_f64() * 1e6);
        samples.hashes.push((after.hashes - before.hashes) as f64);
        samples.bytes.push((after.bytes - before.bytes) as f64);
        pb.inc(1);
    }
    check_against_rebuild(state)?;
    Ok(report(&samples, keys_initial, opts))
}

fn check_against_rebuild<L: Layout>(state: &mut IncrementalState<L>) -> anyhow::Result<()> {
    let mut pairs = state.contents.clone();
    sort_unique(&mut pairs)?;
    let (expected, _) = trie::root_from_sorted::<L, _, _>(&pairs)?;
    let actual = state.trie.root()?;
    if actual != expected {
        anyhow::bail!(
            "incremental root {actual} differs from the streaming rebuild {expected} over {} keys",
            pairs.len()
        );
    }
    Ok(())
}

fn report(samples: &Samples, keys_initial: usize, opts: &TrieBenchOpts) -> IncrementalReport {
    let mean = |v: &[f64]| ratio(v.iter().sum(), v.len() as f64);
    let (round, root, hashes) =
        (sorted(&samples.round_us), sorted(&samples.root_us), sorted(&samples.hashes));
    IncrementalReport {
        keys_initial,
        rounds: opts.incremental_rounds,
        updates_per_round: opts.updates_per_round,
        round_us_p50: median_sorted(&round),
        round_us_p99: percentile_sorted(&round, 99.0),
        round_us_max: round.last().copied().unwrap_or(0.0),
        root_us_p50: median_sorted(&root),
        root_us_p99: percentile_sorted(&root, 99.0),
        hashes_per_round_p50: median_sorted(&hashes),
        hashes_per_round_mean: mean(&samples.hashes),
        hashed_bytes_per_round_mean: mean(&samples.bytes),
        root_matches_rebuild: true,
    }
}
