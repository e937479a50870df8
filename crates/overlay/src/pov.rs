//! [`PovSession`]: a block's overlay over a recording trie of the parent state, with the
//! exact proof size and the exact state root available after every transaction.
//!
//! The witness of a block (its proof of validity) is every pre-state node that executing
//! the block reads plus every pre-state node that computing its post-state root reads.
//! The session keeps one mutable [`Trie`] over the parent state (the main trie) with a
//! [`Recorder`](trie::Recorder):
//!
//! - Reads that the overlay sends to its backend walk the trie, so the recorder holds
//!   every node on the path of every key read.
//! - [`PovSession::proof_size`] and [`PovSession::storage_root`] first apply the keys
//!   changed since the last call (the overlay's changed-key report) to the trie with their
//!   current values; this walks their paths (recorded) and hashes nothing.
//! - Deletion in the trie is lazy (see the trie's `remove.rs`): a branch left with one
//!   entry stays until a root is needed, so the sibling a collapse needs depends on the
//!   current state only. The session keeps those loads out of the recorder (they may stop
//!   being needed when a later transaction re-fills the branch) and counts the ones the
//!   current state needs: a reference count per collapse node, updated from the single
//!   branches that changed since the last call ([`Trie::collapse_delta`]), and the bytes
//!   of those the recorder lacks, updated from the nodes it recorded since the last call.
//!   A call costs O(keys changed + nodes recorded + branches changed) since the last one.
//!
//! So `proof_size()` equals the size of the witness that executing the same transactions
//! from the parent on a fresh recorder and then computing the root records, and its cost
//! is the walks of the changed keys. [`PovSession::storage_root`] hashes only dirty paths;
//! hashes of unchanged subtrees are kept across calls.
//!
//! Transactions the block builder may drop (one that would take the proof over its limit)
//! run between [`PovSession::begin_candidate`] and [`PovSession::keep`] or
//! [`PovSession::discard`]. Discarding rolls the overlay and the recorder back (nodes
//! first recorded by the candidate are forgotten) and rebuilds the trie from the parent
//! with the kept changes, since nodes the candidate changed and restored would otherwise
//! no longer be known as pre-state nodes. A block discards at most once (the builder
//! stops), so the rebuild is paid at most once per block.
//!
//! Only the main trie is supported; other tries give [`PovError::UnsupportedTrie`].

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use state::{key_bounds, StateReader, TrieId, VecRange, H256};
use trie::{NodeSource, Trie, TrieError};

use crate::overlay::Overlay;
use crate::TransactionError;

/// Why a proof-recording operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PovError {
    /// The parent state's trie failed (a missing or corrupt node, a source error).
    #[error(transparent)]
    Trie(#[from] TrieError),
    /// The session records the main trie only.
    #[error("proof recording covers the main trie only, not {0:?}")]
    UnsupportedTrie(TrieId),
    /// `begin_candidate` while a candidate transaction is open: keep or discard it first.
    #[error(
        "a candidate transaction is already open: keep or discard it before beginning another"
    )]
    CandidateOpen,
    /// `keep` or `discard` without an open candidate transaction.
    #[error("no candidate transaction is open: call begin_candidate first")]
    NoCandidate,
    /// The overlay refused a transaction operation.
    #[error(transparent)]
    Transaction(#[from] TransactionError),
}

struct Inner<S: NodeSource> {
    /// The parent state plus every change applied so far (`None` only while rebuilding).
    trie: Option<Trie<S>>,
    /// The parent's value of every key applied to the trie.
    pre: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Collapse nodes the current state needs: hash → (single branches needing it, length).
    collapse: HashMap<H256, (u32, usize)>,
    /// Bytes of the collapse nodes the recorder does not hold.
    extra: usize,
    /// The recorder's journal length when `extra` was last brought up to date.
    seen: usize,
}

impl<S: NodeSource> Inner<S> {
    fn trie(&mut self) -> &mut Trie<S> {
        self.trie.as_mut().expect("the trie is only absent inside PovSession::discard")
    }
}

/// A key's current value: its newest surviving write, else its parent value (`pre`).
fn current<'a>(
    write: Option<Option<&'a [u8]>>,
    pre: &'a HashMap<Vec<u8>, Option<Vec<u8>>>,
    key: &[u8],
) -> Option<&'a [u8]> {
    write.unwrap_or_else(|| pre.get(key).and_then(|v| v.as_deref()))
}

/// The overlay's backend: reads walk the recording trie, values come from the parent.
pub struct RecordingBackend<S: NodeSource> {
    inner: RefCell<Inner<S>>,
}

impl<S: NodeSource> StateReader for RecordingBackend<S> {
    type Error = PovError;
    type Range<'a>
        = VecRange<PovError>
    where
        S: 'a;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, PovError> {
        if *trie != TrieId::Main {
            return Err(PovError::UnsupportedTrie(*trie));
        }
        let mut inner = self.inner.borrow_mut();
        // Walk for the witness even when the parent value is known: a discarded candidate
        // may have made the recorder forget this path.
        let current = inner.trie().get(key)?;
        Ok(match inner.pre.get(key) {
            Some(v) => v.clone(),
            None => current,
        })
    }

    /// The parent's entries in the range: the trie's (walked, so recorded), with every key
    /// applied since replaced by its parent value.
    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<Self::Range<'a>, PovError> {
        if *trie != TrieId::Main {
            return Err(PovError::UnsupportedTrie(*trie));
        }
        let mut inner = self.inner.borrow_mut();
        if key_bounds(start, end).is_none() {
            return Ok(Vec::new().into_iter());
        }
        let mut entries: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
            inner.trie().entries(start, end)?.into_iter().collect();
        let within = |k: &[u8]| k >= start && end.is_none_or(|end| k < end);
        for (k, v) in inner.pre.iter().filter(|(k, _)| within(k)) {
            match v {
                Some(v) => entries.insert(k.clone(), v.clone()),
                None => entries.remove(k),
            };
        }
        Ok(entries.into_iter().map(Ok).collect::<Vec<_>>().into_iter())
    }
}

/// A block being built or verified with proof recording. See the module docs.
pub struct PovSession<S: NodeSource> {
    overlay: Overlay<RecordingBackend<S>>,
    parent_root: H256,
    /// Keys applied to the trie (the keys of `Inner::pre`), each with whether the trie
    /// holds it now.
    applied: HashMap<Vec<u8>, bool>,
    /// Keys whose newest value is not in the trie yet: value changes of keys the trie holds
    /// and keeps holding. They change no structure, so the witness does not depend on them;
    /// they are applied before a root or a witness is computed.
    deferred: HashSet<Vec<u8>>,
    candidate_open: bool,
}

impl<S: NodeSource> PovSession<S> {
    /// A session over the parent state `root` served by `source`.
    pub fn new(source: S, root: H256) -> Self {
        let mut t = Trie::from_root(source, root);
        t.start_recording();
        t.set_record_collapse_loads(false);
        let backend = RecordingBackend {
            inner: RefCell::new(Inner {
                trie: Some(t),
                pre: HashMap::new(),
                collapse: HashMap::new(),
                extra: 0,
                seen: 0,
            }),
        };
        PovSession {
            overlay: Overlay::new(backend),
            parent_root: root,
            applied: HashMap::new(),
            deferred: HashSet::new(),
            candidate_open: false,
        }
    }

    /// The overlay executors read and write (main trie only), with nested transactions.
    pub fn overlay(&mut self) -> &mut Overlay<RecordingBackend<S>> {
        &mut self.overlay
    }

    /// The parent state's root.
    pub fn parent_root(&self) -> H256 {
        self.parent_root
    }

    /// Apply the keys changed since the last call to the trie, with their current values.
    /// With `structure_only`, value changes of keys the trie holds and keeps holding are
    /// deferred instead (see `deferred`).
    fn sync(&mut self, structure_only: bool) -> Result<(), PovError> {
        let changed = self.overlay.take_changed();
        for (trie_id, key) in changed {
            if trie_id != TrieId::Main {
                return Err(PovError::UnsupportedTrie(trie_id));
            }
            let write = self.overlay.newest_write(&trie_id, &key);
            let mut inner = self.overlay.backend().inner.borrow_mut();
            let inner = &mut *inner;
            let held = match self.applied.get(&key) {
                Some(&held) => held,
                None => {
                    let parent = inner.trie().get(&key)?;
                    let held = parent.is_some();
                    inner.pre.insert(key.clone(), parent);
                    self.applied.insert(key.clone(), held);
                    held
                }
            };
            let value = current(write, &inner.pre, &key);
            if structure_only && held && value.is_some() {
                self.deferred.insert(key);
                continue;
            }
            inner.trie.as_mut().expect("present outside discard").write(&key, value)?;
            self.applied.insert(key.clone(), value.is_some());
            self.deferred.remove(&key);
        }
        if !structure_only {
            self.flush_deferred()?;
        }
        Ok(())
    }

    /// Apply the deferred value changes.
    fn flush_deferred(&mut self) -> Result<(), PovError> {
        let mut inner = self.overlay.backend().inner.borrow_mut();
        let inner = &mut *inner;
        for key in self.deferred.drain() {
            let value = current(self.overlay.newest_write(&TrieId::Main, &key), &inner.pre, &key);
            inner.trie.as_mut().expect("present outside discard").write(&key, value)?;
            self.applied.insert(key, value.is_some());
        }
        Ok(())
    }

    /// The exact encoded size of the witness so far: the unique pre-state nodes that the
    /// reads so far and computing the current root need. Walks only the paths of keys
    /// changed since the last call; hashes nothing.
    pub fn proof_size(&mut self) -> Result<usize, PovError> {
        self.sync(true)?;
        let mut inner = self.overlay.backend().inner.borrow_mut();
        let inner = &mut *inner;
        let t = inner.trie.as_mut().expect("present outside discard");
        // Invariant: extra = Σ length over `collapse` hashes the recorder lacks. Nodes the
        // walks recorded since the last call first, then the changed singles.
        let rec = t.recorder().expect("the session always records");
        for h in rec.recorded_since(inner.seen) {
            if let Some((_, len)) = inner.collapse.get(h) {
                inner.extra -= len;
            }
        }
        inner.seen = rec.journal_len();
        for d in t.collapse_delta()? {
            let rec = t.recorder().expect("the session always records");
            if let Some((h, len)) = d.before {
                if let Some(e) = inner.collapse.get_mut(&h) {
                    e.0 -= 1;
                    if e.0 == 0 {
                        inner.collapse.remove(&h);
                        if !rec.contains(&h) {
                            inner.extra -= len;
                        }
                    }
                }
            }
            if let Some((h, len)) = d.now {
                let e = inner.collapse.entry(h).or_insert((0, len));
                e.0 += 1;
                if e.0 == 1 && !rec.contains(&h) {
                    inner.extra += len;
                }
            }
        }
        let rec = t.recorder().expect("the session always records");
        Ok(rec.encoded_bytes() + inner.extra)
    }

    /// The exact post-state root of the main trie now. Rehashes only the paths changed
    /// since the last call.
    pub fn storage_root(&mut self) -> Result<H256, PovError> {
        self.sync(false)?;
        Ok(self.overlay.backend().inner.borrow_mut().trie().root()?)
    }

    /// Keccak calls spent by root computations so far.
    pub fn hashes(&self) -> u64 {
        let mut inner = self.overlay.backend().inner.borrow_mut();
        inner.trie().hash_stats().hashes
    }

    /// The witness so far: every recorded node plus the collapse nodes the current state
    /// needs, deduplicated, sorted by hash.
    pub fn witness(&mut self) -> Result<Vec<Vec<u8>>, PovError> {
        self.sync(false)?;
        let mut inner = self.overlay.backend().inner.borrow_mut();
        let t = inner.trie();
        let extra = t.collapse_nodes()?;
        let rec = t.recorder().expect("the session always records");
        // The recorder keys its nodes by hash already: no re-hashing.
        let mut nodes: HashMap<H256, &[u8]> = rec.nodes().map(|(h, n)| (*h, n)).collect();
        for (h, enc) in &extra {
            nodes.entry(*h).or_insert(enc);
        }
        let mut v: Vec<(H256, &[u8])> = nodes.into_iter().collect();
        v.sort_unstable_by_key(|(h, _)| *h);
        Ok(v.into_iter().map(|(_, n)| n.to_vec()).collect())
    }

    /// Start a transaction the caller may still drop ([`PovSession::discard`]).
    pub fn begin_candidate(&mut self) -> Result<(), PovError> {
        if self.candidate_open {
            return Err(PovError::CandidateOpen);
        }
        // Earlier changes go into the trie now, so that a discard only drops the
        // candidate's own.
        self.sync(true)?;
        self.overlay.start_transaction();
        let mut inner = self.overlay.backend().inner.borrow_mut();
        if let Some(r) = inner.trie().recorder_mut() {
            r.start();
        }
        drop(inner);
        self.candidate_open = true;
        Ok(())
    }

    /// Keep the candidate transaction.
    pub fn keep(&mut self) -> Result<(), PovError> {
        if !self.candidate_open {
            return Err(PovError::NoCandidate);
        }
        self.overlay.commit_transaction()?;
        let mut inner = self.overlay.backend().inner.borrow_mut();
        if let Some(r) = inner.trie().recorder_mut() {
            r.commit();
        }
        drop(inner);
        self.candidate_open = false;
        Ok(())
    }

    /// Drop the candidate transaction: its writes, its reads' contribution to the witness
    /// and its changes to the trie. Nested transactions it left open are closed first.
    pub fn discard(&mut self) -> Result<(), PovError> {
        if !self.candidate_open {
            return Err(PovError::NoCandidate);
        }
        while self.overlay.transaction_depth() > 1 {
            self.overlay.rollback_transaction()?;
        }
        self.overlay.rollback_transaction()?;
        self.candidate_open = false;
        // Forget the changes the candidate reported; the rebuild below applies the
        // surviving writes. Forget the cached reads too: the recorder forgets the nodes
        // the candidate's reads recorded first, so a later read must walk again.
        self.overlay.take_changed();
        self.overlay.forget_backend_reads();
        let mut inner = self.overlay.backend().inner.borrow_mut();
        let mut old = inner.trie.take().expect("present outside discard");
        let mut recorder = old.take_recorder().unwrap_or_default();
        recorder.rollback();
        let mut t = Trie::from_root(old.into_source(), self.parent_root);
        t.set_recorder(recorder);
        t.set_record_collapse_loads(false);
        inner.seen = t.recorder().map_or(0, |r| r.journal_len());
        inner.trie = Some(t);
        inner.collapse.clear();
        inner.extra = 0;
        // Re-apply every kept write, in key order.
        self.deferred.clear();
        let mut keys: Vec<Vec<u8>> = self.applied.keys().cloned().collect();
        keys.sort_unstable();
        for key in keys {
            let write = self.overlay.newest_write(&TrieId::Main, &key);
            if let Some(v) = write {
                inner.trie().write(&key, v)?;
            }
            let held = current(write, &inner.pre, &key).is_some();
            self.applied.insert(key, held);
        }
        Ok(())
    }
}
