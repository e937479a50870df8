//! Which node keys below the resident trie may hold a stored node: a Bloom filter over the
//! node keys deeper than the resident depth limit, so that the commit's walk neither reads
//! nor prefetches a path where nothing is stored (a leaf's hash reference, below a branch
//! whose children do not say what they are).
//!
//! It answers "maybe" for every key it was given and never forgets one: a deleted node
//! stays a "maybe", which costs a read that finds nothing, never a wrong answer. A "no" is
//! exact only while the filter has seen every stored node below the limit; the resident
//! trie keeps that invariant (see `mod.rs`) and drops the filter when it fills up.
//!
//! Blocked layout (`tiers/blocked.rs`): a key sets
//! [`PROBES`](crate::tiers::blocked::PROBES) bits in one 64-bit word, so a lookup touches
//! one cache line.

use crate::tiers::blocked::{key_hash, place};
/// The filter counts as full once this many bits in a thousand are set: an absent key is
/// then a "maybe" about once in 16 (1/2 to the power [`PROBES`]).
const FULL_PER_MILLE: u64 = 500;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DeepFilter {
    words: Vec<u64>,
    ones: u64,
}

impl DeepFilter {
    /// The largest filter within `bytes` (a power of two of 8-byte words); `None` when not
    /// even one word fits. It is sized by its budget, not by the keys it starts with: the
    /// state grows under it, and one that filled up is only built again by a fill. With
    /// 16 bits per key an absent key is a "maybe" about once in 200.
    pub(crate) fn within(bytes: u64) -> Option<DeepFilter> {
        let words = usize::try_from(bytes / 8).ok().filter(|&w| w > 0)?;
        let words = 1usize << words.ilog2();
        Some(DeepFilter { words: vec![0; words], ones: 0 })
    }

    /// The word and the bits of a key by its [`key_hash`].
    fn place(&self, h: u64) -> (usize, u64) {
        place(h, self.words.len())
    }

    /// False only when `key` was never added.
    pub(crate) fn may_hold(&self, key: &[u8]) -> bool {
        let (word, bits) = self.place(key_hash(key));
        self.words[word] & bits == bits
    }

    /// Add keys by their [`key_hash`]es. A batch runs as one tight loop, so that the
    /// processor overlaps its memory accesses: a fill adds millions of keys to a filter
    /// many times the caches, and one at a time between steps of the scan each add waited
    /// for its own cache and TLB miss (29% of a fill's samples at 10M keys).
    pub(crate) fn add_hashes(&mut self, hashes: &[u64]) {
        let mut new = 0;
        for &h in hashes {
            let (word, bits) = self.place(h);
            new += (bits & !self.words[word]).count_ones();
            self.words[word] |= bits;
        }
        self.ones += u64::from(new);
    }

    /// True once so many bits are set that most of its answers are "maybe".
    pub(crate) fn is_full(&self) -> bool {
        self.ones.saturating_mul(1000) > self.bits().saturating_mul(FULL_PER_MILLE)
    }

    fn bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// Memory held.
    pub(crate) fn bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn node_key(rng: &mut impl Rng) -> Vec<u8> {
        let depth: u8 = rng.gen_range(4..9);
        let mut key = vec![0u8];
        key.extend((0..depth.div_ceil(2)).map(|_| rng.gen::<u8>()));
        key.push(depth);
        key
    }

    /// Every added key is a "maybe"; absent keys are mostly a "no" at the sized load.
    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let keys: Vec<Vec<u8>> = (0..32_768).map(|_| node_key(&mut rng)).collect();
        // 16 bits per key.
        let mut f = DeepFilter::within(64 << 10).expect("fits");
        let hashes: Vec<u64> = keys.iter().map(|k| key_hash(k)).collect();
        // In batches of every size from 1 up.
        let mut rest = hashes.as_slice();
        for n in 1.. {
            let (batch, tail) = rest.split_at(n.min(rest.len()));
            f.add_hashes(batch);
            rest = tail;
            if rest.is_empty() {
                break;
            }
        }
        assert!(keys.iter().all(|k| f.may_hold(k)));
        assert!(!f.is_full());
        let absent: Vec<Vec<u8>> =
            (0..50_000).map(|_| node_key(&mut rng)).filter(|k| !keys.contains(k)).collect();
        let maybe = absent.iter().filter(|k| f.may_hold(k)).count();
        assert!(maybe * 100 < absent.len(), "{maybe} of {} absent keys", absent.len());
    }

    #[test]
    fn fills_up_and_respects_its_byte_bound() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut f = DeepFilter::within(4096 + 4095).expect("fits");
        assert_eq!(f.bytes(), 4096);
        assert!(DeepFilter::within(7).is_none());
        let mut added = 0;
        while !f.is_full() {
            f.add_hashes(&[key_hash(&node_key(&mut rng))]);
            added += 1;
        }
        // 32k bits fill to half with a few thousand keys of 4 bits each.
        assert!((2_000..8_000).contains(&added), "{added}");
    }
}
