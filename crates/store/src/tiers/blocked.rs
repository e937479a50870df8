//! The core of the store's blocked Bloom filters (the layers' key filters in `layer.rs`,
//! the resident trie's filter of deeper node keys in `resident/deep.rs`): a key is placed
//! by its [`key_hash`] and sets [`PROBES`] bits of one 64-bit word, so a lookup touches one
//! cache line.

/// Bits a key sets, all in one word.
pub(crate) const PROBES: u32 = 4;

/// The 64-bit hash a key is placed by, every input bit reaching every output bit (node keys
/// of one trie share their first bytes and differ in a few nibbles).
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ key.len() as u64;
    for chunk in key.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 29;
    }
    // The finaliser of MurmurHash3.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The word and the bits of hash `h` in a filter of `words` words (a power of two).
pub(crate) fn place(h: u64, words: usize) -> (usize, u64) {
    // The word from the low bits, the bits from the high.
    let word = (h as usize) & (words - 1);
    let bits = (0..PROBES).fold(0u64, |m, i| m | 1 << ((h >> (40 + 6 * i)) & 63));
    (word, bits)
}
