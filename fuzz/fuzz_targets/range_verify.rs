//! Range-proof verification on arbitrary proofs and entries.
//! Input: start (1-byte length + bytes), entry count (1 byte), entries as (1-byte key len,
//! key, 1-byte value len, value), then nodes as (2-byte length, bytes); root = keccak of
//! the first node.
#![no_main]
use libfuzzer_sys::fuzz_target;
use trie::{verify_range_proof, EthLayout};

fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let out = rest.get(..n)?;
    *rest = &rest[n..];
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let Some(slen) = take(&mut rest, 1) else { return };
    let Some(start) = take(&mut rest, slen[0] as usize) else { return };
    let Some(count) = take(&mut rest, 1) else { return };
    let mut entries = Vec::new();
    for _ in 0..count[0] {
        let Some(kl) = take(&mut rest, 1) else { return };
        let Some(k) = take(&mut rest, kl[0] as usize) else { return };
        let Some(vl) = take(&mut rest, 1) else { return };
        let Some(v) = take(&mut rest, vl[0] as usize) else { return };
        entries.push((k.to_vec(), v.to_vec()));
    }
    let mut nodes = Vec::new();
    while rest.len() >= 2 {
        let n = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let Some(node) = rest.get(2..2 + n) else { return };
        nodes.push(node);
        rest = &rest[2 + n..];
    }
    let root = nodes.first().map_or(trie::EMPTY_ROOT, |n| trie::keccak256(n));
    let _ = verify_range_proof::<EthLayout>(&root, start, &entries, &nodes);
});
