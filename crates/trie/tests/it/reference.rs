//! A deliberately simple reference trie: recursive over a sorted map, with its own RLP
//! encoder, no caching, no streaming. Slow and obviously right.
//!
//! The `eth` crate's tests include this file too (`#[path]`), for the TrieTests vectors:
//! it may only use `trie`'s public API.

use std::collections::BTreeMap;

use state::H256;
use trie::keccak256;

fn rlp_str(s: &[u8]) -> Vec<u8> {
    if s.len() == 1 && s[0] < 0x80 {
        return s.to_vec();
    }
    let mut out = rlp_header(s.len(), 0x80);
    out.extend_from_slice(s);
    out
}

fn rlp_header(len: usize, base: u8) -> Vec<u8> {
    if len < 56 {
        vec![base + len as u8]
    } else {
        let be: Vec<u8> = len.to_be_bytes().iter().copied().skip_while(|b| *b == 0).collect();
        let mut out = vec![base + 55 + be.len() as u8];
        out.extend(be);
        out
    }
}

fn rlp_list(items: &[Vec<u8>]) -> Vec<u8> {
    let payload: Vec<u8> = items.concat();
    let mut out = rlp_header(payload.len(), 0xc0);
    out.extend(payload);
    out
}

fn hex_prefix(path: &[u8], leaf: bool) -> Vec<u8> {
    let flag = if leaf { 2 } else { 0 } + (path.len() % 2) as u8;
    let mut nibbles = vec![flag];
    if path.len().is_multiple_of(2) {
        nibbles.push(0);
    }
    nibbles.extend_from_slice(path);
    nibbles.chunks(2).map(|c| (c[0] << 4) | c[1]).collect()
}

fn reference(encoded: Vec<u8>) -> Vec<u8> {
    if encoded.len() < 32 {
        encoded
    } else {
        rlp_str(keccak256(&encoded).as_bytes())
    }
}

fn encode(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    if entries.len() == 1 {
        let (path, value) = &entries[0];
        return rlp_list(&[rlp_str(&hex_prefix(path, true)), rlp_str(value)]);
    }
    let first = &entries[0].0;
    let last = &entries[entries.len() - 1].0;
    let lcp = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    if lcp > 0 {
        let stripped: Vec<_> =
            entries.iter().map(|(p, v)| (p[lcp..].to_vec(), v.clone())).collect();
        return rlp_list(&[
            rlp_str(&hex_prefix(&first[..lcp], false)),
            reference(encode(&stripped)),
        ]);
    }
    let mut items = Vec::new();
    for n in 0..16u8 {
        let sub: Vec<_> = entries
            .iter()
            .filter(|(p, _)| p.first() == Some(&n))
            .map(|(p, v)| (p[1..].to_vec(), v.clone()))
            .collect();
        items.push(if sub.is_empty() { vec![0x80] } else { reference(encode(&sub)) });
    }
    let value =
        entries.iter().find(|(p, _)| p.is_empty()).map(|(_, v)| v.clone()).unwrap_or_default();
    items.push(rlp_str(&value));
    rlp_list(&items)
}

/// Root of a map of keys to non-empty values (empty values are treated as absent).
pub(crate) fn reference_root(map: &BTreeMap<Vec<u8>, Vec<u8>>) -> H256 {
    let entries: Vec<(Vec<u8>, Vec<u8>)> = map
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.iter().flat_map(|b| [b >> 4, b & 15]).collect(), v.clone()))
        .collect();
    if entries.is_empty() {
        return keccak256(&[0x80]);
    }
    keccak256(&encode(&entries))
}
