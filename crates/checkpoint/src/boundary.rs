//! Content-defined chunk boundaries: where a chunk ends depends on the keys alone, never
//! on how many threads create the checkpoint.
//!
//! Walking `flat` in key order, a chunk ends after a key whose boundary hash (below) is
//! under `u64::MAX / target_entries` (a *content boundary*: on average one key in
//! `target_entries`), or before an entry that would take the chunk's entry bytes (full key
//! plus value) past `max_bytes` (a *byte cut*). Byte cuts are counted from the chunk's
//! start, and every run of chunks starts at a content boundary (or at the first key), so
//! they too follow from the content: a worker that starts at a content boundary cuts
//! exactly where a single walk from the first key would.

use crate::format::BoundaryRule;

/// The boundary hash of a full flat key: FNV-1a over its bytes, then the SplitMix64
/// finaliser (so that keys sharing long prefixes still spread). Fixed by format version 1.
pub fn boundary_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl BoundaryRule {
    /// The boundary-hash threshold: keys hashing below it end a chunk.
    pub fn threshold(&self) -> u64 {
        u64::MAX / u64::from(self.target_entries.max(1))
    }

    /// True when `key` (a full flat key) ends a chunk.
    pub fn is_boundary(&self, key: &[u8]) -> bool {
        boundary_hash(key) < self.threshold()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_pinned() {
        // Format version 1 fixes this function: changing it changes every checkpoint.
        assert_eq!(boundary_hash(b""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(boundary_hash(&[0; 33]), boundary_hash(&[0; 33]));
        assert_ne!(boundary_hash(&[0; 33]), boundary_hash(&[0; 32]));
    }

    #[test]
    fn about_one_key_in_target_is_a_boundary() {
        let rule = BoundaryRule { target_entries: 100, max_bytes: 1 << 20 };
        let n = (0u32..200_000)
            .filter(|i| rule.is_boundary(&trie::keccak256(&i.to_be_bytes()).0))
            .count();
        assert!((1600..2400).contains(&n), "{n} boundaries in 200k keys");
        let seq = (0u32..200_000).filter(|i| rule.is_boundary(&i.to_be_bytes())).count();
        assert!((1600..2400).contains(&seq), "{seq} boundaries in 200k sequential keys");
    }
}
