//! The witness recorder: every pre-state node the trie reads, deduplicated, with the exact
//! total encoded size available at any time, and nested scopes.
//!
//! A scope ([`Recorder::start`]) remembers which nodes were *first* recorded inside it;
//! [`Recorder::rollback`] forgets exactly those, [`Recorder::commit`] hands them to the
//! enclosing scope. The trie records on every visit (not only on load), so a node forgotten
//! by a rollback is recorded again the next time anything reads it.
//!
//! The size is counted by a [`ProofSizeRule`]: the nodes' encoded lengths (Ethereum's
//! witness size, the default), or their SCALE encodings (compact length + bytes) as a
//! Substrate parachain's recorder counts a storage proof ([`Recorder::for_layout`] picks
//! the layout's rule). A V1 value node is recorded like a node, under its hash.
//!
//! Cost: one hash-map probe per visited node; an encoding copy on first record.

use std::collections::HashMap;

use state::H256;

use crate::node::{Layout, ProofSizeRule};

/// Records pre-state nodes. See the module docs.
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    nodes: HashMap<H256, Vec<u8>>,
    /// Every recorded hash in first-record order; a scope is the journal length at its
    /// start, so the nodes first recorded inside the innermost scope are the journal's tail.
    journal: Vec<H256>,
    scopes: Vec<usize>,
    bytes: usize,
    rule: ProofSizeRule,
}

impl Recorder {
    /// An empty recorder with no open scope, counting encoded lengths.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty recorder counting sizes by `rule`.
    pub fn with_rule(rule: ProofSizeRule) -> Self {
        Recorder { rule, ..Self::default() }
    }

    /// An empty recorder counting sizes as layout `L`'s proofs are counted.
    pub fn for_layout<L: Layout>() -> Self {
        Self::with_rule(L::PROOF_SIZE)
    }

    /// The rule sizes are counted by.
    pub fn rule(&self) -> ProofSizeRule {
        self.rule
    }

    /// True if `hash` is already recorded.
    #[inline]
    pub fn contains(&self, hash: &H256) -> bool {
        self.nodes.contains_key(hash)
    }

    /// Record a node (no-op if already recorded).
    pub fn record(&mut self, hash: H256, encoded: &[u8]) {
        if self.nodes.contains_key(&hash) {
            return;
        }
        self.bytes += self.rule.item_size(encoded.len());
        self.nodes.insert(hash, encoded.to_vec());
        self.journal.push(hash);
    }

    /// Open a nested scope.
    pub fn start(&mut self) {
        self.scopes.push(self.journal.len());
    }

    /// Close the innermost scope, keeping what it recorded.
    pub fn commit(&mut self) {
        self.scopes.pop().expect("Recorder::commit without an open scope");
    }

    /// Close the innermost scope, forgetting the nodes first recorded inside it.
    pub fn rollback(&mut self) {
        let start = self.scopes.pop().expect("Recorder::rollback without an open scope");
        for h in self.journal.drain(start..) {
            if let Some(n) = self.nodes.remove(&h) {
                self.bytes -= self.rule.item_size(n.len());
            }
        }
    }

    /// Number of first records so far (rolled-back ones excluded): a mark for
    /// [`Recorder::recorded_since`].
    pub fn journal_len(&self) -> usize {
        self.journal.len()
    }

    /// The hashes first recorded after `mark` (a [`Recorder::journal_len`] value), in order.
    pub fn recorded_since(&self, mark: usize) -> &[H256] {
        self.journal.get(mark..).unwrap_or(&[])
    }

    /// Depth of open scopes.
    pub fn depth(&self) -> usize {
        self.scopes.len()
    }

    /// Number of distinct nodes recorded.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Exact total size of the recorded nodes, by the recorder's [`ProofSizeRule`].
    pub fn encoded_bytes(&self) -> usize {
        self.bytes
    }

    /// The recorded nodes by hash, in no particular order.
    pub fn nodes(&self) -> impl Iterator<Item = (&H256, &[u8])> {
        self.nodes.iter().map(|(h, n)| (h, n.as_slice()))
    }

    /// The recorded nodes, sorted by hash (a deterministic witness).
    pub fn witness(&self) -> Vec<Vec<u8>> {
        let mut v: Vec<(&H256, &Vec<u8>)> = self.nodes.iter().collect();
        v.sort_by_key(|(h, _)| **h);
        v.into_iter().map(|(_, n)| n.clone()).collect()
    }

    /// Take the recorded nodes, leaving the recorder empty.
    pub fn take(&mut self) -> HashMap<H256, Vec<u8>> {
        self.scopes.clear();
        self.journal.clear();
        self.bytes = 0;
        std::mem::take(&mut self.nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_scopes() {
        let mut r = Recorder::new();
        r.record(H256([1; 32]), &[0u8; 40]);
        r.start();
        r.record(H256([2; 32]), &[0u8; 50]);
        r.start();
        r.record(H256([3; 32]), &[0u8; 60]);
        r.record(H256([1; 32]), &[0u8; 40]);
        r.rollback();
        assert_eq!(r.encoded_bytes(), 90);
        r.commit();
        assert_eq!(r.len(), 2);
        r.start();
        r.record(H256([4; 32]), &[0u8; 10]);
        r.rollback();
        assert_eq!(r.encoded_bytes(), 90);
    }

    #[test]
    fn scale_rule_counts_compact_prefixes() {
        let mut r = Recorder::with_rule(ProofSizeRule::ScaleEncoded);
        r.record(H256([1; 32]), &[0u8; 63]);
        assert_eq!(r.encoded_bytes(), 64);
        r.start();
        r.record(H256([2; 32]), &[0u8; 64]);
        assert_eq!(r.encoded_bytes(), 64 + 66);
        r.rollback();
        assert_eq!(r.encoded_bytes(), 64);
        assert_eq!(r.rule(), ProofSizeRule::ScaleEncoded);
    }
}
