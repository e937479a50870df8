//! Single-key and multiproof verification on arbitrary proofs, in every layout (Ethereum's,
//! Substrate's V0 and V1).
//! Input: 32-byte root, 1-byte key length, key, then nodes as (2-byte length, bytes).
#![no_main]
use libfuzzer_sys::fuzz_target;
use state::H256;
use trie::{
    blake2_256, keccak256, verify_multiproof, verify_proof, EthLayout, Layout, SubstrateV0,
    SubstrateV1,
};

fn split(data: &[u8]) -> Option<(H256, &[u8], Vec<&[u8]>)> {
    let root = H256::from_slice(data.get(..32)?)?;
    let klen = *data.get(32)? as usize;
    let key = data.get(33..33 + klen)?;
    let mut rest = &data[33 + klen..];
    let mut nodes = Vec::new();
    while rest.len() >= 2 {
        let n = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let node = rest.get(2..2 + n)?;
        nodes.push(node);
        rest = &rest[2 + n..];
    }
    Some((root, key, nodes))
}

/// Verify in layout `L`, the root anchored to the first node (hashed by `hash`) when
/// `anchor`, so that the walk goes deeper.
fn check<L: Layout>(
    root: H256,
    key: &[u8],
    nodes: &[&[u8]],
    anchor: bool,
    hash: fn(&[u8]) -> H256,
) {
    let root = if anchor { nodes.first().map_or(root, |n| hash(n)) } else { root };
    let _ = verify_proof::<L>(&root, key, nodes);
    let _ = verify_multiproof::<L>(&root, &[key], nodes);
}

fuzz_target!(|data: &[u8]| {
    if let Some((root, key, nodes)) = split(data) {
        let anchor = data.len() % 2 == 0;
        check::<EthLayout>(root, key, &nodes, anchor, keccak256);
        check::<SubstrateV0>(root, key, &nodes, anchor, blake2_256);
        check::<SubstrateV1>(root, key, &nodes, anchor, blake2_256);
    }
});
