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

use crate::format::{BoundaryRule, Chunk, Manifest};

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

/// What a chunk's entries weigh (full flat key plus value, the measure of byte cuts and
/// of the manifest's flat bytes), as a verified chunk proves it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChunkBytes {
    /// All its entries.
    pub(crate) flat: u64,
    /// Its first entry (0 without entries).
    pub(crate) first: u64,
}

/// Check that `chunk` was cut by `rule` inside: no entry but its last is a content
/// boundary, and with more than one entry its entry bytes stay within `max_bytes` (a
/// single entry may exceed them). Returns what its entries weigh. Where it ends is checked
/// with the next chunk ([`check_ends`]).
pub(crate) fn check_cut(rule: &BoundaryRule, chunk: &Chunk<'_>) -> Result<ChunkBytes, String> {
    let n: usize = chunk.segments.iter().map(|s| s.entries.len()).sum();
    let mut bytes = ChunkBytes::default();
    let mut full = Vec::with_capacity(64);
    let mut seen = 0;
    for s in &chunk.segments {
        full.clear();
        s.trie.write_prefix(&mut full);
        let prefix = full.len();
        for (k, v) in &s.entries {
            let size = (prefix + k.len() + v.len()) as u64;
            if seen == 0 {
                bytes.first = size;
            }
            bytes.flat += size;
            seen += 1;
            full.truncate(prefix);
            full.extend_from_slice(k);
            if seen < n && rule.is_boundary(&full) {
                return Err(format!(
                    "entry {seen} of {n} is a content boundary of the manifest's rule, yet the chunk goes on"
                ));
            }
        }
    }
    if n > 1 && bytes.flat > u64::from(rule.max_bytes) {
        return Err(format!(
            "{} bytes of entries, over the manifest's rule of {}",
            bytes.flat, rule.max_bytes
        ));
    }
    Ok(bytes)
}

/// Once every chunk of `manifest` is verified (`bytes[i]` is chunk `i`'s, [`check_cut`]):
/// their entry bytes add up to the manifest's flat bytes, and every chunk but the last
/// ends where the rule cuts, after a content boundary or before an entry that would take
/// it past `max_bytes`. With [`check_cut`], the chunks are exactly those the manifest's
/// rule cuts the state into.
pub(crate) fn check_ends(manifest: &Manifest, bytes: &[ChunkBytes]) -> Result<(), String> {
    let flat = bytes.iter().fold(0u64, |a, b| a.saturating_add(b.flat));
    if flat != manifest.flat_bytes {
        return Err(format!(
            "its chunks hold {flat} bytes of keys and values, the manifest says {}",
            manifest.flat_bytes
        ));
    }
    let rule = &manifest.rule;
    for (i, pair) in bytes.windows(2).enumerate() {
        let cut = pair[0].flat + pair[1].first > u64::from(rule.max_bytes);
        if !cut && !rule.is_boundary(&manifest.chunks[i].last) {
            return Err(format!("chunk {i} ends where the manifest's boundary rule does not cut"));
        }
    }
    Ok(())
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
