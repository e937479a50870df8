//! `cargo test --release -p trie --lib -- --ignored pass_speed --nocapture`: the walk's
//! own cost on an in-memory pre-state of 1M keys (no RocksDB), for profiling, in each
//! layout (Blake2 has no multi-lane batch here; keccak hashes eight at a time).
use std::time::Instant;

use crate::ethereum::EthLayout;
use crate::hash::keccak256;
use crate::node::Layout;
use crate::substrate::{SubstrateV0, SubstrateV1};

use super::mem::{Known, Mem};
use super::{update_trie, Change};

#[test]
#[ignore]
fn pass_speed() {
    run::<EthLayout>("ethereum");
    run::<SubstrateV0>("substrate-v0");
    run::<SubstrateV1>("substrate-v1");
}

fn run<L: Layout>(name: &str) {
    let key = |i: u32| keccak256(&i.to_be_bytes()).0.to_vec();
    let mut mem = Mem { known: Known::Everything, ..Mem::default() };
    let n = 1_000_000u32;
    let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    let value = vec![7u8; 100];
    let mut sorted: Vec<&Vec<u8>> = keys.iter().collect();
    sorted.sort();
    let changes: Vec<Change<'_>> =
        sorted.iter().map(|k| Change { key: k, old: None, new: Some(&value) }).collect();
    let u = update_trie::<L, _>(&mem, L::empty_root(), &changes, false).unwrap();
    for (p, v) in u.writes {
        mem.nodes.insert(p, v.unwrap());
    }
    for k in &keys {
        mem.flat.insert(k.clone(), value.clone());
    }
    let root = u.root;
    let new_value = vec![9u8; 100];
    let mut block: Vec<&Vec<u8>> = (0..10_000).map(|i| &keys[(i * 97) as usize]).collect();
    block.sort();
    for verify in [false, true] {
        let changes: Vec<Change<'_>> = block
            .iter()
            .map(|k| Change { key: k, old: Some(&value), new: Some(&new_value) })
            .collect();
        for _ in 0..3 {
            let start = Instant::now();
            let u = update_trie::<L, _>(&mem, root, &changes, verify).unwrap();
            eprintln!(
                "{name}, verify {verify}: {:?} for 10k updates, {} hashes, {} writes",
                start.elapsed(),
                u.hashes,
                u.writes.len()
            );
        }
    }
}
