//! The keccak bound of a full root build: the time the hashes alone would take.
//!
//! The nodes a root build must hash are found exactly: every leaf (its encoding length
//! follows from its neighbours' common prefixes) and every branch or extension the builder
//! emits with a hash reference. That gives a histogram of input lengths; the bound is the
//! time of `trie::keccak256` replayed over the same number of calls with the same lengths,
//! in the same run as the builds. Keccak cost is a step function of length (one
//! permutation per 136-byte block), so lengths matter, not just totals.
//!
//! The replay groups equal lengths together and reads a small hot buffer, so it is a lower
//! bound: no encoding, no cache misses, perfect branch prediction. It runs interleaved with
//! the builds (see `roots`), so the ratio compares like with like on a drifting machine.

use std::hint::black_box;
use std::time::Instant;

use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use trie::{
    ChildRef, EmittedKind, EthLayout, HashStats, Layout, NibbleSlice, NodeSink, RootBuilder,
    INLINE_MAX,
};

use crate::common::timing::{median_sorted, ratio, sorted, Timing};
use crate::trie_bench::input::{Item, KEY_BYTES};
use crate::trie_bench::report::{BoundReport, HashClass};

/// Hashed-input counts indexed by length in bytes.
#[derive(Default)]
struct LengthHistogram(Vec<u64>);

impl LengthHistogram {
    fn add(&mut self, len: usize) {
        if self.0.len() <= len {
            self.0.resize(len + 1, 0);
        }
        self.0[len] += 1;
    }

    fn calls(&self) -> u64 {
        self.0.iter().sum()
    }

    fn bytes(&self) -> u64 {
        self.0.iter().enumerate().map(|(len, c)| len as u64 * c).sum()
    }
}

impl NodeSink for LengthHistogram {
    fn node(&mut self, _: EmittedKind, _: NibbleSlice<'_>, encoded: &[u8], reference: &ChildRef) {
        if reference.as_hash().is_some() {
            self.add(encoded.len());
        }
    }
}

/// Lengths of the leaf encodings that a build of `items` hashes.
fn leaf_lengths(items: &[Item]) -> LengthHistogram {
    let mut hist = LengthHistogram::default();
    let mut buf = Vec::with_capacity(256);
    let cp = |a: &Item, b: &Item| trie::common_prefix_nibbles(&a.0, &b.0);
    for (i, item) in items.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| cp(&items[p], item));
        let next = items.get(i + 1).map(|n| cp(item, n));
        // The leaf hangs below the deeper of the branches it shares with its neighbours;
        // a lone key is the root leaf, which is hashed whatever its length.
        let start = prev.max(next).map_or(0, |d| d + 1);
        buf.clear();
        EthLayout::encode_leaf(
            NibbleSlice::range(&item.0, start, KEY_BYTES * 2),
            &item.1,
            &mut buf,
        );
        if buf.len() > INLINE_MAX || items.len() == 1 {
            hist.add(buf.len());
        }
    }
    hist
}

/// Lengths of the hashed branch and extension encodings, as the builder emits them.
fn interior_lengths(items: &[Item]) -> anyhow::Result<LengthHistogram> {
    let mut b = RootBuilder::<EthLayout, LengthHistogram>::with_sink(LengthHistogram::default());
    for (k, v) in items {
        b.add(k, v)?;
    }
    let (_, hist, _) = b.finish_with();
    Ok(hist)
}

/// Hash `hist.0[len]` inputs of each length `len`; returns seconds.
fn replay(hist: &LengthHistogram, scratch: &[u8], window: usize) -> f64 {
    let mut acc = 0u8;
    let mut offset = 0usize;
    let start = Instant::now();
    for (len, &count) in hist.0.iter().enumerate() {
        for _ in 0..count {
            acc ^= trie::keccak256(&scratch[offset..offset + len]).0[0];
            offset = (offset + 64) % window;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    black_box(acc);
    seconds
}

fn class(hist: &LengthHistogram, seconds: &[f64]) -> HashClass {
    let (calls, bytes) = (hist.calls(), hist.bytes());
    HashClass {
        calls,
        bytes,
        bytes_mean: ratio(bytes as f64, calls as f64),
        single_block_calls: hist.0.iter().take(136).sum(),
        ns_per_call: ratio(median_sorted(&sorted(seconds)) * 1e9, calls as f64),
    }
}

/// The hash inputs of a build of one input, ready to replay.
pub(crate) struct Replay {
    leaves: LengthHistogram,
    interior: LengthHistogram,
    scratch: Vec<u8>,
    window: usize,
}

/// Seconds of each replay run, per class.
#[derive(Default)]
pub(crate) struct ReplaySamples {
    pub(crate) leaf: Vec<f64>,
    pub(crate) interior: Vec<f64>,
}

impl ReplaySamples {
    /// Total seconds per run.
    pub(crate) fn totals(&self) -> Vec<f64> {
        self.leaf.iter().zip(&self.interior).map(|(l, i)| l + i).collect()
    }
}

impl Replay {
    /// Find the length of every input a build of `items` must hash (untimed).
    pub(crate) fn prepare(items: &[Item], rng: &mut ChaCha8Rng) -> anyhow::Result<Replay> {
        let leaves = leaf_lengths(items);
        let interior = interior_lengths(items)?;
        let window = 64 * 1024;
        let mut scratch = vec![0u8; window + leaves.0.len().max(interior.0.len())];
        rng.fill_bytes(&mut scratch);
        Ok(Replay { leaves, interior, scratch, window })
    }

    /// Replay every hash once, recording the time per class.
    pub(crate) fn run(&self, samples: &mut ReplaySamples) {
        samples.leaf.push(replay(&self.leaves, &self.scratch, self.window));
        samples.interior.push(replay(&self.interior, &self.scratch, self.window));
    }

    /// The report for these samples; the caller fills in the ratios to the builds.
    pub(crate) fn report(&self, serial_stats: HashStats, samples: &ReplaySamples) -> BoundReport {
        BoundReport {
            builder_hashes: serial_stats.hashes,
            builder_bytes: serial_stats.bytes,
            nodes_hashed: self.leaves.calls() + self.interior.calls(),
            nodes_bytes: self.leaves.bytes() + self.interior.bytes(),
            leaf: class(&self.leaves, &samples.leaf),
            interior: class(&self.interior, &samples.interior),
            bound: Timing::from_samples(&samples.totals()),
            serial_over_bound: 0.0,
            serial_over_bound_fastest: 0.0,
            parallel_over_bound_per_thread: 0.0,
        }
    }
}
