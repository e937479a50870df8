//! The hashers of the layouts (keccak256 for Ethereum, Blake2-256 for Substrate) and the
//! hashes of their empty tries and of Ethereum's empty code.
//!
//! Every layout Arbor supports commits to 32-byte hashes, so [`H256`] (defined with the
//! state seam, in the `state` crate) is a concrete type rather than an associated one:
//! callers never write `TrieHash<L>`. keccak goes through `keccak-asm`, the fastest keccak
//! available here (~0.3-0.4 µs per 136-byte block); Blake2b through `blake2b_simd`
//! (SIMD compression, one 128-byte block per call for most trie nodes).

use state::H256;

/// keccak256 of `data`.
#[inline]
pub fn keccak256(data: &[u8]) -> H256 {
    let out = keccak_asm::Keccak256::digest(data);
    H256(out.into())
}

/// Blake2b with a 32-byte digest (no key, no salt): Substrate's `blake2_256`.
#[inline]
pub fn blake2_256(data: &[u8]) -> H256 {
    let out = blake2b_simd::Params::new().hash_length(32).hash(data);
    let mut h = [0u8; 32];
    h.copy_from_slice(out.as_bytes());
    H256(h)
}

/// Blake2-256 of the node `[0x00]`: the root of an empty Substrate trie (both layouts).
pub const SUBSTRATE_EMPTY_ROOT: H256 = H256([
    0x03, 0x17, 0x0a, 0x2e, 0x75, 0x97, 0xb7, 0xb7, 0xe3, 0xd8, 0x4c, 0x05, 0x39, 0x1d, 0x13, 0x9a,
    0x62, 0xb1, 0x57, 0xe7, 0x87, 0x86, 0xd8, 0xc0, 0x82, 0xf2, 0x9d, 0xcf, 0x4c, 0x11, 0x13, 0x14,
]);

/// keccak256 of the empty RLP string `0x80`: the root of an empty Ethereum trie.
pub const EMPTY_ROOT: H256 = H256([
    0x56, 0xe8, 0x1f, 0x17, 0x1b, 0xcc, 0x55, 0xa6, 0xff, 0x83, 0x45, 0xe6, 0x92, 0xc0, 0xf8, 0x6e,
    0x5b, 0x48, 0xe0, 0x1b, 0x99, 0x6c, 0xad, 0xc0, 0x01, 0x62, 0x2f, 0xb5, 0xe3, 0x63, 0xb4, 0x21,
]);

/// keccak256 of the empty byte string: the code hash of an account without code.
pub const EMPTY_CODE_HASH: H256 = H256([
    0xc5, 0xd2, 0x46, 0x01, 0x86, 0xf7, 0x23, 0x3c, 0x92, 0x7e, 0x7d, 0xb2, 0xdc, 0xc7, 0x03, 0xc0,
    0xe5, 0x00, 0xb6, 0x53, 0xca, 0x82, 0x27, 0x3b, 0x7b, 0xfa, 0xd8, 0x04, 0x5d, 0x85, 0xa4, 0x70,
]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_constants() {
        assert_eq!(keccak256(&[0x80]), EMPTY_ROOT);
        assert_eq!(keccak256(&[]), EMPTY_CODE_HASH);
        assert_eq!(blake2_256(&[0x00]), SUBSTRATE_EMPTY_ROOT);
        // RFC 7693's test vector is for Blake2b-512; Substrate's blake2_256("") is this.
        assert_eq!(
            blake2_256(&[]).to_string(),
            "0x0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"
        );
    }
}
