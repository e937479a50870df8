//! The reference engine of the full-root phase in Substrate's layouts: trie-db 0.32 with
//! reference-trie 0.29's `SubstrateV0`/`SubstrateV1` (Substrate's node codec and layouts,
//! copied there from Substrate) over a Blake2-256 `hash_db::Hasher`.
//!
//! The root is trie-db's streaming computation over sorted input, `trie_visit` into a
//! `TrieRoot` callback (reference-trie's `calc_root`, trie-db's default
//! `TrieConfiguration::trie_root`): it takes the sorted pairs as they are, like Arbor's
//! builders. Substrate's own `LayoutV0/V1::trie_root` (trie-root's recursive
//! `trie_root_no_extension` over Substrate's `TrieStream`) gives the same root but first
//! copies every pair into a `BTreeMap` and every key into a nibble vector, and was about
//! 1.5x slower on 50,000 sorted pairs (23 ms against 34 ms on the 2-core development host,
//! either layout); the unit tests check that both agree with Arbor. A `TrieDBMut` over a
//! `MemoryDB` would also store every node, so it is not the oracle's fastest root either.
//!
//! The hasher is the trie crate's `blake2_256` (`blake2b_simd`, as Substrate's
//! `sp-crypto-hashing`), so both engines pay the same price per hash and the ratio
//! compares the trie code. (The trie crate's own oracle tests hash with the RustCrypto
//! `blake2` crate instead, to keep the hash function independent too.)

use reference_trie::{SubstrateV0, SubstrateV1};
use state::H256;
use trie::LayoutName;
use trie_db::TrieLayout;

use crate::trie_bench::input::Item;

/// Blake2b with a 32-byte digest, as Substrate's `BlakeTwo256`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Blake2Hasher;

impl hash_db::Hasher for Blake2Hasher {
    type Out = [u8; 32];
    type StdHasher = hash256_std_hasher::Hash256StdHasher;
    const LENGTH: usize = 32;

    fn hash(x: &[u8]) -> [u8; 32] {
        trie::blake2_256(x).0
    }
}

/// A root computation of the reference engine, and what it is (for the report).
#[derive(Clone, Copy)]
pub(crate) struct Oracle {
    /// The engine and the call, as the report names it.
    pub(crate) engine: &'static str,
    /// Root of sorted, duplicate-free pairs.
    pub(crate) root: fn(&[Item]) -> H256,
}

/// The oracle of `layout`, or `None` when the layout has no reference engine here
/// (Ethereum's is alloy-trie, measured separately).
pub(crate) fn for_layout(layout: LayoutName) -> Option<Oracle> {
    match layout {
        LayoutName::SubstrateV0 => Some(Oracle {
            engine: "trie-db 0.32 trie_visit + TrieRoot (reference-trie 0.29 SubstrateV0, \
                     calc_root)",
            root: streaming_root::<SubstrateV0<Blake2Hasher>>,
        }),
        LayoutName::SubstrateV1 => Some(Oracle {
            engine: "trie-db 0.32 trie_visit + TrieRoot (reference-trie 0.29 SubstrateV1, \
                     calc_root)",
            root: streaming_root::<SubstrateV1<Blake2Hasher>>,
        }),
        _ => None,
    }
}

/// trie-db's streaming root of sorted pairs in layout `O` (reference-trie's `calc_root`).
fn streaming_root<O: TrieLayout<Hash = Blake2Hasher>>(items: &[Item]) -> H256 {
    H256(reference_trie::calc_root::<O, _, _, _>(items.iter().map(|(k, v)| (k, v))))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use trie_db::TrieConfiguration;

    use super::*;
    use crate::trie_bench::input::sorted_input;

    /// Substrate's own closed-form root (trie-root over Substrate's `TrieStream`).
    fn closed_form_root<O: TrieConfiguration<Hash = Blake2Hasher>>(items: &[Item]) -> H256 {
        H256(O::trie_root(items.iter().map(|(k, v)| (k, v))))
    }

    fn check<A: trie::Layout, O: TrieConfiguration<Hash = Blake2Hasher>>(layout: LayoutName) {
        let oracle = for_layout(layout).unwrap();
        for n in [0, 1, 2, 17, 300] {
            let input = sorted_input(&mut ChaCha8Rng::seed_from_u64(n as u64), n);
            let arbor = trie::root_from_sorted::<A, _, _>(&input.items).unwrap().0;
            assert_eq!((oracle.root)(&input.items), arbor, "{layout}, {n} keys");
            assert_eq!(closed_form_root::<O>(&input.items), arbor, "{layout}, {n} keys");
        }
    }

    #[test]
    fn oracle_roots_equal_arbor_roots() {
        check::<trie::SubstrateV0, SubstrateV0<Blake2Hasher>>(LayoutName::SubstrateV0);
        check::<trie::SubstrateV1, SubstrateV1<Blake2Hasher>>(LayoutName::SubstrateV1);
        assert!(for_layout(LayoutName::Ethereum).is_none());
    }
}
