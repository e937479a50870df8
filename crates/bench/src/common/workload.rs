//! The deterministic block workload behind `arbor load` and `arbor bench store`.
//!
//! Key `i` is `keccak256(seed_le ‖ i_le)` (32 bytes). The initial state holds keys
//! `0..M` with 100-byte values drawn from a ChaCha8 stream named by `(seed, i)`. Block `b`
//! (numbered from 1) is derived from `(seed, b)` alone, through a ChaCha8 RNG seeded with
//! `keccak256("arbor/workload/block" ‖ seed_le ‖ b_le)`: `K` operations, each an update
//! (80%) or a deletion (20%) of a uniformly random index below `M + b·K/10`, so the index
//! range grows and new keys keep appearing. An update of index `i` in block `b` writes the
//! 100 bytes of the ChaCha8 stream named by `(seed, b, i)`, so any key's value is known
//! from the block that last wrote it ([`LastWrites`]), as an executor knows the values it
//! read.
//!
//! Invariant: nothing in a block depends on earlier blocks or on the state, so loading
//! `N` blocks in one run or in several runs that continue from the head yields the same
//! state and root. Cost: one keccak per key and per block, a ChaCha8 stream per value.

use std::collections::BTreeMap;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, TrieId};
use trie::keccak256;

/// Bytes per key.
pub const WORKLOAD_KEY_BYTES: usize = 32;
/// Bytes per value.
pub const WORKLOAD_VALUE_BYTES: usize = 100;

/// One operation of a block: the key index and its new value (`None` = delete).
pub type Op = (u64, Option<[u8; WORKLOAD_VALUE_BYTES]>);

/// Percent of a block's operations that are updates; the rest are deletions.
const UPDATE_PERCENT: u32 = 80;

/// The workload of one seed, initial key count and block size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// Seed of every random choice.
    pub seed: u64,
    /// Keys in the initial state (`M`).
    pub keys_initial: u64,
    /// Operations per block (`K`).
    pub updates_per_block: u64,
    /// ChaCha8 key of the initial values (one stream per key index).
    value_seed: [u8; 32],
}

impl Workload {
    /// The workload of `seed` with `keys_initial` initial keys and `updates_per_block`
    /// operations per block.
    pub fn new(seed: u64, keys_initial: u64, updates_per_block: u64) -> Workload {
        let mut tag = b"arbor/workload/value".to_vec();
        tag.extend_from_slice(&seed.to_le_bytes());
        Workload { seed, keys_initial, updates_per_block, value_seed: keccak256(&tag).0 }
    }

    /// Key `i`: `keccak256(seed_le ‖ i_le)`.
    pub fn key(&self, i: u64) -> [u8; WORKLOAD_KEY_BYTES] {
        let mut input = [0u8; 16];
        input[..8].copy_from_slice(&self.seed.to_le_bytes());
        input[8..].copy_from_slice(&i.to_le_bytes());
        keccak256(&input).0
    }

    /// The initial value of key `i` (`i < keys_initial`).
    pub fn initial_value(&self, i: u64) -> [u8; WORKLOAD_VALUE_BYTES] {
        let mut rng = ChaCha8Rng::from_seed(self.value_seed);
        rng.set_stream(i);
        let mut v = [0u8; WORKLOAD_VALUE_BYTES];
        rng.fill_bytes(&mut v);
        v
    }

    /// The value an update of index `i` in block `b` writes.
    pub fn block_value(&self, b: u64, i: u64) -> [u8; WORKLOAD_VALUE_BYTES] {
        let mut tag = [0u8; 32];
        tag[..8].copy_from_slice(&self.seed.to_le_bytes());
        tag[8..16].copy_from_slice(&b.to_le_bytes());
        tag[16..24].copy_from_slice(&i.to_le_bytes());
        let mut rng = ChaCha8Rng::from_seed(keccak256(&tag).0);
        let mut v = [0u8; WORKLOAD_VALUE_BYTES];
        rng.fill_bytes(&mut v);
        v
    }

    /// The initial state as `(key, value)` pairs in index order (not key order), lazily.
    pub fn initial_entries(
        &self,
    ) -> impl Iterator<Item = ([u8; WORKLOAD_KEY_BYTES], [u8; WORKLOAD_VALUE_BYTES])> + '_ {
        (0..self.keys_initial).map(|i| (self.key(i), self.initial_value(i)))
    }

    /// Key indices block `b` draws from: `0..M + b·K/10`.
    pub fn index_range(&self, b: u64) -> u64 {
        self.keys_initial.saturating_add(b.saturating_mul(self.updates_per_block) / 10)
    }

    /// The operations of block `b`, in order (a later operation on the same index wins).
    pub fn block_ops(&self, b: u64) -> Vec<Op> {
        let mut tag = b"arbor/workload/block".to_vec();
        tag.extend_from_slice(&self.seed.to_le_bytes());
        tag.extend_from_slice(&b.to_le_bytes());
        let mut rng = ChaCha8Rng::from_seed(keccak256(&tag).0);
        let range = self.index_range(b).max(1);
        let mut ops = Vec::with_capacity(usize::try_from(self.updates_per_block).unwrap_or(0));
        for _ in 0..self.updates_per_block {
            let update = rng.gen_range(0..100) < UPDATE_PERCENT;
            let index = rng.gen_range(0..range);
            ops.push((index, update.then(|| self.block_value(b, index))));
        }
        ops
    }

    /// Block `b` as key → new value (`None` = delete), the last operation on a key winning.
    pub fn block_changes(&self, b: u64) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        self.changes_of(&self.block_ops(b))
    }

    /// Operations as key → new value (`None` = delete), the last operation on a key winning.
    pub fn changes_of(&self, ops: &[Op]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        ops.iter().map(|(i, v)| (self.key(*i).to_vec(), v.map(|v| v.to_vec()))).collect()
    }

    /// Block `b` as a store change set on the main trie.
    pub fn change_set(&self, b: u64) -> ChangeSet {
        self.change_set_of(&self.block_ops(b))
    }

    /// Operations as a store change set on the main trie.
    pub fn change_set_of(&self, ops: &[Op]) -> ChangeSet {
        ChangeSet::from([(TrieId::Main, self.changes_of(ops))])
    }
}

/// The block that last wrote each key index (so its current value is known without a
/// read): 4 bytes per index.
#[derive(Debug, Clone, Default)]
pub struct LastWrites {
    /// Per index: [`NEVER`] (never written: the initial value below `M`, else absent),
    /// [`DELETED`], or the block number.
    last: Vec<u32>,
}

/// Never written since the initial state.
const NEVER: u32 = 0;
/// Deleted by its last write.
const DELETED: u32 = u32::MAX;

impl LastWrites {
    /// Apply block `b`'s operations (`b` below `u32::MAX`).
    pub fn apply(&mut self, b: u64, ops: &[Op]) {
        let b = u32::try_from(b).unwrap_or(DELETED - 1).min(DELETED - 1);
        for (i, v) in ops {
            let i = *i as usize;
            if i >= self.last.len() {
                self.last.resize(i + 1, NEVER);
            }
            self.last[i] = if v.is_some() { b } else { DELETED };
        }
    }

    /// The current value of index `i`.
    pub fn value(&self, w: &Workload, i: u64) -> Option<[u8; WORKLOAD_VALUE_BYTES]> {
        match self.last.get(i as usize).copied().unwrap_or(NEVER) {
            NEVER => (i < w.keys_initial).then(|| w.initial_value(i)),
            DELETED => None,
            b => Some(w.block_value(u64::from(b), i)),
        }
    }

    /// The current values of the keys `ops` touch, as a store change set of prior values
    /// (call before [`LastWrites::apply`] of the same block).
    pub fn prior_set(&self, w: &Workload, ops: &[Op]) -> ChangeSet {
        let prior = ops
            .iter()
            .map(|(i, _)| (w.key(*i).to_vec(), self.value(w, *i).map(|v| v.to_vec())))
            .collect();
        ChangeSet::from([(TrieId::Main, prior)])
    }
}

/// Which key indices are live, tracked from the operations (for exact key counts).
#[derive(Debug, Clone, Default)]
pub struct LiveKeys {
    words: Vec<u64>,
    count: u64,
}

impl LiveKeys {
    /// The initial state: indices `0..keys_initial` live.
    pub fn initial(keys_initial: u64) -> LiveKeys {
        let mut live = LiveKeys::default();
        for i in 0..keys_initial {
            live.set(i, true);
        }
        live
    }

    /// Apply a block's operations in order.
    pub fn apply(&mut self, ops: &[Op]) {
        for (i, v) in ops {
            self.set(*i, v.is_some());
        }
    }

    fn set(&mut self, i: u64, live: bool) {
        let (word, bit) = ((i / 64) as usize, i % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let was = (self.words[word] >> bit) & 1 == 1;
        if was != live {
            self.words[word] ^= 1 << bit;
            if live {
                self.count += 1;
            } else {
                self.count -= 1;
            }
        }
    }

    /// Live keys.
    pub fn count(&self) -> u64 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_depend_only_on_seed_and_number() {
        let w = Workload::new(7, 1000, 50);
        assert_eq!(w.block_ops(3), Workload::new(7, 1000, 50).block_ops(3));
        assert_ne!(w.block_ops(3), w.block_ops(4));
        assert_ne!(w.block_ops(3), Workload::new(8, 1000, 50).block_ops(3));
        assert_eq!(w.block_ops(3).len(), 50);
        assert!(w.block_ops(3).iter().all(|(i, _)| *i < w.index_range(3)));
        assert_eq!(w.index_range(10), 1050);
    }

    #[test]
    fn keys_follow_the_documented_formula() {
        let w = Workload::new(5, 10, 1);
        let mut input = 5u64.to_le_bytes().to_vec();
        input.extend_from_slice(&3u64.to_le_bytes());
        assert_eq!(w.key(3), keccak256(&input).0);
        assert_eq!(w.initial_value(3), Workload::new(5, 99, 2).initial_value(3));
        assert_ne!(w.initial_value(3), w.initial_value(4));
        assert_eq!(w.initial_entries().count(), 10);
    }

    #[test]
    fn mix_of_updates_and_deletes() {
        let ops = Workload::new(1, 100, 10_000).block_ops(1);
        let deletes = ops.iter().filter(|(_, v)| v.is_none()).count();
        assert!((1500..2500).contains(&deletes), "{deletes} deletions of 10,000");
        let changes = Workload::new(1, 100, 10_000).block_changes(1);
        assert!(changes.len() <= 1_100, "keys come from a range of 100 + 10,000/10");
    }

    #[test]
    fn last_writes_know_every_value() {
        let w = Workload::new(3, 50, 40);
        let mut last = LastWrites::default();
        let mut model: BTreeMap<u64, [u8; WORKLOAD_VALUE_BYTES]> =
            (0..50).map(|i| (i, w.initial_value(i))).collect();
        for b in 1..=20 {
            let ops = w.block_ops(b);
            let prior = last.prior_set(&w, &ops);
            for (i, _) in &ops {
                let want = model.get(i).map(|v| v.to_vec());
                assert_eq!(prior[&TrieId::Main][&w.key(*i).to_vec()], want, "block {b} index {i}");
            }
            last.apply(b, &ops);
            for (i, v) in &ops {
                match v {
                    Some(v) => model.insert(*i, *v),
                    None => model.remove(i),
                };
            }
        }
        for i in 0..w.index_range(20) {
            assert_eq!(last.value(&w, i), model.get(&i).copied(), "index {i}");
        }
    }

    #[test]
    fn live_keys_follow_the_ops() {
        let mut live = LiveKeys::initial(3);
        assert_eq!(live.count(), 3);
        live.apply(&[(1, None), (1, None), (200, Some([0; 100])), (0, Some([1; 100]))]);
        assert_eq!(live.count(), 3);
    }
}
