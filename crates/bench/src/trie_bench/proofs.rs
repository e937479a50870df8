//! Proof throughput: single-key inclusion proofs for random existing keys, generated from
//! the in-memory trie and then each verified against its root.
//!
//! Keys are drawn before timing; generation and verification are timed as two batches.
//! Every verified value must equal the stored one, or the phase fails.

use std::hint::black_box;
use std::time::Instant;

use rand_chacha::ChaCha8Rng;
use trie::{verify_proof, Layout};

use crate::common::text::hex;
use crate::common::timing::ratio;
use crate::trie_bench::incremental::IncrementalState;
use crate::trie_bench::input::{random_index, Item};
use crate::trie_bench::report::ProofReport;

/// Generate and verify `count` proofs for random keys of `state`.
pub(crate) fn measure<L: Layout>(
    state: &mut IncrementalState<L>,
    count: usize,
    rng: &mut ChaCha8Rng,
    pb: &indicatif::ProgressBar,
) -> anyhow::Result<ProofReport> {
    if count > 0 && state.contents.is_empty() {
        anyhow::bail!("cannot prove keys of an empty trie (incremental_keys and rounds are 0)");
    }
    let picks: Vec<Item> =
        (0..count).map(|_| state.contents[random_index(rng, state.contents.len())]).collect();
    let root = state.trie.root()?;

    let mut proofs = Vec::with_capacity(count);
    let start = Instant::now();
    for (k, _) in &picks {
        proofs.push(state.trie.prove(k)?);
    }
    let generate_seconds = start.elapsed().as_secs_f64();
    pb.inc(count as u64 / 2);

    let mut wrong = None;
    let start = Instant::now();
    for ((k, v), proof) in picks.iter().zip(&proofs) {
        let proven = black_box(verify_proof::<L>(&root, k, proof)?);
        if wrong.is_none() && proven.as_deref() != Some(&v[..]) {
            wrong = Some(k);
        }
    }
    let verify_seconds = start.elapsed().as_secs_f64();
    pb.inc(count as u64 - count as u64 / 2);
    if let Some(k) = wrong {
        anyhow::bail!("proof for key 0x{} verified to a different value", hex(k));
    }

    let nodes: usize = proofs.iter().map(Vec::len).sum();
    let bytes: usize = proofs.iter().flatten().map(Vec::len).sum();
    Ok(ProofReport {
        proofs: count,
        generate_seconds,
        verify_seconds,
        generated_per_second: ratio(count as f64, generate_seconds),
        verified_per_second: ratio(count as f64, verify_seconds),
        nodes_per_proof_mean: ratio(nodes as f64, count as f64),
        bytes_per_proof_mean: ratio(bytes as f64, count as f64),
    })
}
