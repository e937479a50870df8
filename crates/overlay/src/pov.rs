//! [`PovSession`]: a block's overlay over a recording trie of the parent state, with the
//! exact proof size and the exact state root available after every transaction, in the
//! trie layout its caller names (`PovSession::<_, SubstrateV1>::new(source, root)`).
//!
//! The witness of a block (its proof of validity) is every pre-state node that executing
//! the block reads plus every pre-state node that computing its post-state root reads.
//! The session keeps one mutable [`Trie`] over the parent state (the main trie) with a
//! [`Recorder`](trie::Recorder):
//!
//! - Reads that the overlay sends to its backend walk the trie, so the recorder holds
//!   every node on the path of every key read (and, in Substrate V1, the value node of
//!   every value read).
//! - [`PovSession::proof_size`] and [`PovSession::storage_root`] first apply the keys
//!   changed since the last call (the overlay's changed-key report) to the trie with their
//!   current values; this walks their paths (recorded) and hashes nothing. Applying a key
//!   learns its parent value as its node holds it ([`Trie::get_stored`]): a V1 value node
//!   by its hash only, as Substrate's trie overwrites a value without reading it, so a
//!   value node is in the witness only where a value was read.
//! - Deletion in the trie is lazy (see the trie's `remove.rs`): a branch left with one
//!   entry stays until a root is needed, so the sibling a collapse needs depends on the
//!   current state only. The session keeps those loads out of the recorder (they may stop
//!   being needed when a later transaction re-fills the branch) and counts the ones the
//!   current state needs: a reference count per collapse node, updated from the single
//!   branches that changed since the last call ([`Trie::collapse_delta`]), and the size
//!   of those the recorder lacks, updated from the nodes it recorded since the last call.
//!   A call costs O(keys changed + nodes recorded + branches changed) since the last one.
//!
//! Sizes are counted by the layout's rule ([`trie::Layout::PROOF_SIZE`]): encoded bytes in
//! Ethereum's layout; in Substrate's, each unique node and value node's SCALE encoding
//! (compact length + bytes), as a parachain's proof recorder counts a storage proof.
//! So `proof_size()` equals the size of the witness that executing the same transactions
//! from the parent on a fresh recorder and then computing the root records, and its cost
//! is the walks of the changed keys. [`PovSession::storage_root`] hashes only dirty paths;
//! hashes of unchanged subtrees are kept across calls. An empty value is a value in
//! Substrate's layouts and a removal in Ethereum's (the overlay is set from
//! [`trie::Layout::ALLOW_EMPTY_VALUE`]); keys enter the trie as given, unhashed.
//!
//! Transactions the block builder may drop (one that would take the proof over its limit)
//! run between [`PovSession::begin_candidate`] and [`PovSession::keep`] or
//! [`PovSession::discard`]. Discarding rolls the overlay and the recorder back (nodes
//! first recorded by the candidate are forgotten, so the size loses what the candidate
//! added) and rebuilds the trie from the parent with the kept changes, since nodes the
//! candidate changed and restored would otherwise no longer be known as pre-state nodes.
//! A block discards at most once (the builder stops), so the rebuild is paid at most once
//! per block. A size or root asked for inside a transaction that is then rolled back makes
//! the next call restore the parent values of the keys it applied: a V1 value node is read
//! (and recorded) for that.
//!
//! Only the main trie is supported; other tries give [`PovError::UnsupportedTrie`].

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};

use state::{key_bounds, StateReader, TransactionError, TrieId, VecRange, H256};
use trie::{Layout, NodeSource, StoredValue, Trie, TrieError};

use crate::stack::Overlay;
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

/// A key's value in the parent state, as the session learnt it walking to the key.
#[derive(Debug, Clone)]
enum Parent {
    /// The parent state lacks the key.
    Absent,
    /// The value's bytes.
    Bytes(Vec<u8>),
    /// A value node (Substrate V1) known by its hash, with its bytes once read. Every read
    /// records it: a discarded candidate may have made the recorder forget it.
    Node { hash: H256, bytes: Option<Vec<u8>> },
}

impl Parent {
    fn of(stored: Option<StoredValue>) -> Parent {
        match stored {
            None => Parent::Absent,
            Some(StoredValue::Bytes(b)) => Parent::Bytes(b),
            Some(StoredValue::Node(hash)) => Parent::Node { hash, bytes: None },
        }
    }

    fn is_some(&self) -> bool {
        !matches!(self, Parent::Absent)
    }
}

/// Whether a key is present now: by its newest surviving write, else in the parent.
fn present(write: Option<Option<&[u8]>>, pre: &HashMap<Vec<u8>, Parent>, key: &[u8]) -> bool {
    match write {
        Some(w) => w.is_some(),
        None => pre.get(key).is_some_and(Parent::is_some),
    }
}

struct Inner<S: NodeSource, L: Layout> {
    /// The parent state plus every change applied so far (`None` only while rebuilding).
    trie: Option<Trie<S, L>>,
    /// The parent's value of every key applied to the trie.
    pre: HashMap<Vec<u8>, Parent>,
    /// Collapse nodes the current state needs: hash → (single branches needing it, size
    /// by the layout's proof-size rule).
    collapse: HashMap<H256, (u32, usize)>,
    /// Size of the collapse nodes the recorder does not hold.
    extra: usize,
    /// The recorder's journal length when `extra` was last brought up to date.
    seen: usize,
}

impl<S: NodeSource, L: Layout> Inner<S, L> {
    fn trie(&mut self) -> &mut Trie<S, L> {
        self.trie.as_mut().expect("the trie is only absent inside PovSession::discard")
    }

    /// The parent value of applied key `key`, read as a read of the parent state reads it:
    /// a value node is fetched the first time and recorded on every read.
    fn parent_value(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, PovError> {
        let t = self.trie.as_mut().expect("present outside discard");
        Ok(match self.pre.get_mut(key) {
            None | Some(Parent::Absent) => None,
            Some(Parent::Bytes(b)) => Some(b.clone()),
            Some(Parent::Node { hash, bytes: Some(b) }) => {
                if let Some(r) = t.recorder_mut() {
                    r.record(*hash, b);
                }
                Some(b.clone())
            }
            Some(Parent::Node { hash, bytes }) => {
                let b = t.read_value_node(key, hash)?;
                *bytes = Some(b.clone());
                Some(b)
            }
        })
    }

    /// Write applied key `key`'s current value to the trie: its newest surviving write,
    /// else (a rollback took its writes back) its parent value.
    fn write_current(&mut self, key: &[u8], write: Option<Option<&[u8]>>) -> Result<(), PovError> {
        let parent;
        let value = match write {
            Some(w) => w,
            None => {
                parent = self.parent_value(key)?;
                parent.as_deref()
            }
        };
        self.trie().write(key, value)?;
        Ok(())
    }

    /// Take the collapse nodes the recorder recorded since the last call out of `extra`.
    fn note_recorded(&mut self) {
        let t = self.trie.as_ref().expect("present outside discard");
        let rec = t.recorder().expect("the session always records");
        for h in rec.recorded_since(self.seen) {
            if let Some((_, size)) = self.collapse.get(h) {
                self.extra -= size;
            }
        }
        self.seen = rec.journal_len();
    }

    /// Bring `collapse` and `extra` up to date with the single branches that changed since
    /// the last call.
    fn note_collapse_changes(&mut self) -> Result<(), PovError> {
        let t = self.trie.as_mut().expect("present outside discard");
        let deltas = t.collapse_delta()?;
        let rec = t.recorder().expect("the session always records");
        let rule = rec.rule();
        for d in deltas {
            if let Some((h, _)) = d.before {
                if let Some(e) = self.collapse.get_mut(&h) {
                    e.0 -= 1;
                    if e.0 == 0 {
                        let size = e.1;
                        self.collapse.remove(&h);
                        if !rec.contains(&h) {
                            self.extra -= size;
                        }
                    }
                }
            }
            if let Some((h, len)) = d.now {
                let e = self.collapse.entry(h).or_insert((0, rule.item_size(len)));
                e.0 += 1;
                if e.0 == 1 && !rec.contains(&h) {
                    self.extra += e.1;
                }
            }
        }
        Ok(())
    }
}

/// The overlay's backend: reads walk the recording trie, values come from the parent.
pub struct RecordingBackend<S: NodeSource, L: Layout> {
    inner: RefCell<Inner<S, L>>,
}

impl<S: NodeSource, L: Layout> StateReader for RecordingBackend<S, L> {
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
        if inner.pre.contains_key(key) {
            return inner.parent_value(key);
        }
        Ok(current)
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
        let mut entries: BTreeMap<Vec<u8>, Vec<u8>> =
            inner.trie().entries(start, end)?.into_iter().collect();
        let within = |k: &[u8]| k >= start && end.is_none_or(|end| k < end);
        let applied: Vec<Vec<u8>> = inner.pre.keys().filter(|k| within(k)).cloned().collect();
        for k in applied {
            match inner.parent_value(&k)? {
                Some(v) => entries.insert(k, v),
                None => entries.remove(&k),
            };
        }
        Ok(entries.into_iter().map(Ok).collect::<Vec<_>>().into_iter())
    }
}

/// A block being built or verified with proof recording, in trie layout `L`. See the
/// module docs.
pub struct PovSession<S: NodeSource, L: Layout> {
    overlay: Overlay<RecordingBackend<S, L>>,
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

impl<S: NodeSource, L: Layout> PovSession<S, L> {
    /// A session over the parent state `root` served by `source`, in layout `L`:
    /// `PovSession::<_, SubstrateV1>::new(source, root)`.
    pub fn new(source: S, root: H256) -> Self {
        let mut t: Trie<S, L> = Trie::from_root(source, root);
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
            overlay: Overlay::new(backend).keep_empty_values(L::ALLOW_EMPTY_VALUE),
            parent_root: root,
            applied: HashMap::new(),
            deferred: HashSet::new(),
            candidate_open: false,
        }
    }

    /// The overlay executors read and write (main trie only), with nested transactions.
    pub fn overlay(&mut self) -> &mut Overlay<RecordingBackend<S, L>> {
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
            self.apply_key(key, structure_only)?;
        }
        if !structure_only {
            self.flush_deferred()?;
        }
        Ok(())
    }

    /// Apply changed key `key` (see [`PovSession::sync`]). The first time, walk to it to
    /// learn its parent value (its path is recorded; a value node is not read).
    fn apply_key(&mut self, key: Vec<u8>, structure_only: bool) -> Result<(), PovError> {
        let write = self.overlay.newest_write(&TrieId::Main, &key);
        let mut inner = self.overlay.backend().inner.borrow_mut();
        let inner = &mut *inner;
        let held = match self.applied.get(&key) {
            Some(&held) => held,
            None => {
                let parent = Parent::of(inner.trie().get_stored(&key)?);
                let held = parent.is_some();
                inner.pre.insert(key.clone(), parent);
                self.applied.insert(key.clone(), held);
                held
            }
        };
        let now = present(write, &inner.pre, &key);
        if structure_only && held && now {
            self.deferred.insert(key);
            return Ok(());
        }
        inner.write_current(&key, write)?;
        self.deferred.remove(&key);
        self.applied.insert(key, now);
        Ok(())
    }

    /// Apply the deferred value changes.
    fn flush_deferred(&mut self) -> Result<(), PovError> {
        let mut inner = self.overlay.backend().inner.borrow_mut();
        let inner = &mut *inner;
        for key in self.deferred.drain() {
            let write = self.overlay.newest_write(&TrieId::Main, &key);
            inner.write_current(&key, write)?;
            self.applied.insert(key.clone(), present(write, &inner.pre, &key));
        }
        Ok(())
    }

    /// The exact size of the witness so far, by the layout's proof-size rule: the unique
    /// pre-state nodes (and V1 value nodes) that the reads so far and computing the current
    /// root need. Walks only the paths of keys changed since the last call; hashes nothing.
    pub fn proof_size(&mut self) -> Result<usize, PovError> {
        self.sync(true)?;
        let mut inner = self.overlay.backend().inner.borrow_mut();
        // Invariant: extra = Σ size over `collapse` hashes the recorder lacks. Nodes the
        // walks recorded since the last call first, then the changed singles.
        inner.note_recorded();
        inner.note_collapse_changes()?;
        let recorded = inner.trie().recorder().expect("the session always records");
        Ok(recorded.encoded_bytes() + inner.extra)
    }

    /// The exact post-state root of the main trie now. Rehashes only the paths changed
    /// since the last call.
    pub fn storage_root(&mut self) -> Result<H256, PovError> {
        self.sync(false)?;
        Ok(self.overlay.backend().inner.borrow_mut().trie().root()?)
    }

    /// Hash calls (keccak, or Blake2-256 in Substrate's layouts) spent by root
    /// computations so far.
    pub fn hashes(&self) -> u64 {
        let mut inner = self.overlay.backend().inner.borrow_mut();
        inner.trie().hash_stats().hashes
    }

    /// The witness so far: every recorded node (and V1 value node) plus the collapse nodes
    /// the current state needs, deduplicated, sorted by hash.
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
        self.rebuild()
    }

    /// Replace the trie by a fresh one over the parent with every kept write applied, in
    /// key order, keeping the recorder (its candidate scope rolled back).
    fn rebuild(&mut self) -> Result<(), PovError> {
        let mut inner = self.overlay.backend().inner.borrow_mut();
        let inner = &mut *inner;
        let mut old = inner.trie.take().expect("present outside discard");
        let mut recorder = old.take_recorder().unwrap_or_default();
        recorder.rollback();
        let mut t: Trie<S, L> = Trie::from_root(old.into_source(), self.parent_root);
        t.set_recorder(recorder);
        t.set_record_collapse_loads(false);
        inner.seen = t.recorder().map_or(0, |r| r.journal_len());
        inner.trie = Some(t);
        inner.collapse.clear();
        inner.extra = 0;
        self.deferred.clear();
        let mut keys: Vec<Vec<u8>> = self.applied.keys().cloned().collect();
        keys.sort_unstable();
        for key in keys {
            let write = self.overlay.newest_write(&TrieId::Main, &key);
            if let Some(v) = write {
                inner.trie().write(&key, v)?;
            }
            let held = present(write, &inner.pre, &key);
            self.applied.insert(key, held);
        }
        Ok(())
    }
}
