//! Temporary: serial builder (or alloy) repeatedly, for perf.
use rand::{RngCore, SeedableRng};
fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut items: Vec<([u8; 32], [u8; 100])> = (0..1_000_000)
        .map(|_| {
            let mut it = ([0u8; 32], [0u8; 100]);
            rng.fill_bytes(&mut it.0);
            rng.fill_bytes(&mut it.1);
            it
        })
        .collect();
    items.sort_unstable_by_key(|i| i.0);
    for _ in 0..8 {
        let t = std::time::Instant::now();
        if which == "alloy" {
            let mut hb = alloy_trie::HashBuilder::default();
            for (k, v) in &items {
                hb.add_leaf(alloy_trie::Nibbles::unpack_array(k), v);
            }
            std::hint::black_box(hb.root());
        } else {
            std::hint::black_box(
                trie::root_from_sorted::<trie::EthLayout, _, _>(&items).expect("sorted"),
            );
        }
        eprintln!("{which} {:.3}", t.elapsed().as_secs_f64());
    }
}
