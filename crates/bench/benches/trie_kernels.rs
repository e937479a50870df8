//! Criterion kernels under the trie: keccak256 at the node sizes that matter, node
//! encoding, a 10,000-key streaming root (Arbor serial and parallel, alloy-trie), and
//! 10 updates + `root()` on a 100,000-key trie. Each group measures for about 2 s, so
//! `cargo bench -p bench` finishes in a few minutes.

#![allow(missing_docs, reason = "criterion_group! generates undocumented public items")]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::H256;
use trie::{ChildRef, EthLayout, Layout, MemoryNodeSource, NibbleSlice, Trie};

type Item = ([u8; 32], [u8; 100]);

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(0xA5B0)
}

fn random_items(rng: &mut ChaCha8Rng, n: usize) -> Vec<Item> {
    (0..n)
        .map(|_| {
            let mut item = ([0u8; 32], [0u8; 100]);
            rng.fill_bytes(&mut item.0);
            rng.fill_bytes(&mut item.1);
            item
        })
        .collect()
}

fn keccak(c: &mut Criterion) {
    let mut g = c.benchmark_group("keccak256");
    let mut data = vec![0u8; 532];
    rng().fill_bytes(&mut data);
    // 135 bytes is the largest single-permutation input; 136 needs two; 532 is a full branch.
    for len in [135usize, 136, 532] {
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::from_parameter(len), &data[..len], |b, d| {
            b.iter(|| trie::keccak256(black_box(d)))
        });
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    let mut r = rng();
    let (key, value) = random_items(&mut r, 1)[0];
    let mut out = Vec::with_capacity(600);
    // A leaf below a depth-5 branch: 58 path nibbles, 100-byte value (135 bytes).
    g.bench_function("leaf_58_nibbles_100_bytes", |b| {
        b.iter(|| {
            out.clear();
            EthLayout::encode_leaf(NibbleSlice::range(black_box(&key), 6, 64), &value, &mut out);
            out.len()
        })
    });
    let mut children = [ChildRef::EMPTY; 16];
    for c in &mut children {
        let mut h = [0u8; 32];
        r.fill_bytes(&mut h);
        *c = ChildRef::hash(H256(h));
    }
    g.bench_function("branch_16_hashes", |b| {
        b.iter(|| {
            out.clear();
            EthLayout::encode_branch(black_box(&children), None, &mut out);
            out.len()
        })
    });
    g.finish();
}

fn alloy_root(items: &[Item]) -> alloy_primitives::B256 {
    let mut hb = alloy_trie::HashBuilder::default();
    for (k, v) in items {
        hb.add_leaf(alloy_trie::Nibbles::unpack_array(k), v);
    }
    hb.root()
}

fn root_10k(c: &mut Criterion) {
    let mut items = random_items(&mut rng(), 10_000);
    items.sort_unstable_by_key(|item| item.0);
    let mut g = c.benchmark_group("root_10k");
    g.sample_size(10).throughput(Throughput::Elements(items.len() as u64));
    g.bench_function("arbor_serial", |b| {
        b.iter(|| trie::root_from_sorted::<EthLayout, _, _>(black_box(&items)).expect("sorted"))
    });
    g.bench_function("arbor_parallel", |b| {
        b.iter(|| trie::parallel_root::<EthLayout, _, _>(black_box(&items)).expect("sorted"))
    });
    g.bench_function("alloy_hash_builder", |b| b.iter(|| alloy_root(black_box(&items))));
    g.finish();
}

fn incremental(c: &mut Criterion) {
    let mut r = rng();
    let items = random_items(&mut r, 100_000);
    let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::new());
    for (k, v) in &items {
        t.insert(k, v).expect("in-memory insert");
    }
    t.root().expect("in-memory root");
    // Updates to existing keys only, so the trie keeps its size across iterations.
    let updates: Vec<(usize, [u8; 100])> = (0..4096)
        .map(|_| {
            let mut v = [0u8; 100];
            r.fill_bytes(&mut v);
            (r.gen_range(0..items.len()), v)
        })
        .collect();
    let mut next = 0usize;
    let mut g = c.benchmark_group("incremental_100k");
    g.bench_function("10_updates_then_root", |b| {
        b.iter(|| {
            for _ in 0..10 {
                let (i, v) = &updates[next % updates.len()];
                next += 1;
                t.insert(&items[*i].0, v).expect("in-memory insert");
            }
            t.root().expect("in-memory root")
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = kernels;
    config = config();
    targets = keccak, encode, root_10k, incremental
}
criterion_main!(kernels);
