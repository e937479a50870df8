//! `chain::decode_witness` on arbitrary bytes: errors are fine, panics are not. A witness
//! that decodes re-encodes to exactly the same bytes, and every node is keyed by its hash.
#![no_main]
use chain::{decode_witness, encode_witness};
use libfuzzer_sys::fuzz_target;
use trie::EthLayout;

fuzz_target!(|data: &[u8]| {
    if let Ok(nodes) = decode_witness::<EthLayout>(data) {
        for (hash, node) in &nodes {
            assert_eq!(*hash, trie::keccak256(node), "a witness node keyed by another hash");
        }
        let nodes: Vec<Vec<u8>> = nodes.into_iter().map(|(_, n)| n).collect();
        assert_eq!(encode_witness(&nodes), data, "a decoded witness re-encodes to other bytes");
    }
});
