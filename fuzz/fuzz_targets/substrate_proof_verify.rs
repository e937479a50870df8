//! Single-key and multiproof verification in Substrate's layouts on arbitrary proofs.
//! Input: 32-byte root, 1-byte key length, key, then nodes as (2-byte length, bytes).
#![no_main]
use libfuzzer_sys::fuzz_target;
use trie::{blake2_256, verify_multiproof, verify_proof, SubstrateV0, SubstrateV1, H256};

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

fuzz_target!(|data: &[u8]| {
    if let Some((root, key, nodes)) = split(data) {
        // Anchor the root to the first node half of the time so the walk goes deeper.
        let anchored = nodes.first().map_or(root, |n| blake2_256(n));
        let root = if data.len() % 2 == 0 { anchored } else { root };
        let _ = verify_proof::<SubstrateV0>(&root, key, &nodes);
        let _ = verify_multiproof::<SubstrateV1>(&root, &[key], &nodes);
    }
});
