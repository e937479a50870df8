//! Creating a checkpoint from a pinned persisted state, in parallel, with bytes that do
//! not depend on the thread count.
//!
//! The key space is split into units (one per thread, of about equal bytes by the
//! database's estimates); a unit's worker seeks to its start, skips to the first content
//! boundary at or after it (the first unit starts at the first key), cuts chunks from
//! there by the boundary rule, and stops after the first content boundary at or past its
//! end. So every chunk is cut exactly where one walk from the first key would cut it, and
//! the thread count only changes which worker writes it (`boundary.rs`). The contract
//! code is cut into code chunks by one scan of its own beside them (`code.rs`).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use state::{TrieId, H256};
use store::{PersistedState, StoreError};
use trie::{keccak256, Layout, NodeSource, TrieError, WithLayout};

use crate::code::{code_weight, CodeChunk};
use crate::dir::{CheckpointDir, DirError, Unsynced};
use crate::direct;
use crate::format::{
    put_entry, BoundaryRule, ChunkHash, ChunkInfo, ChunkWriter, CodeChunkInfo, CodeList, Manifest,
    CHUNK_BYTES_MAX, VALUE_BYTES_MAX,
};
use crate::keys::{binding, binding_place, successor, Place};

/// The hash new checkpoints name their chunks by (manifest version 3).
const CHUNK_HASH: ChunkHash = ChunkHash::Blake3;

/// Room for a chunk's framing and boundary proofs beside its entries, reserved in its
/// buffer before it is encoded (more is allocated when a chunk needs it).
const PROOF_ROOM: usize = 64 << 10;

/// Most threads a creation uses.
pub const THREADS_MAX: usize = 256;

/// Why a checkpoint could not be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CreateError {
    /// The options are out of range.
    #[error("invalid checkpoint options: {0}")]
    Options(&'static str),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A boundary proof could not be built from the stored nodes.
    #[error("boundary proof of {trie:?}: {source}")]
    Proof {
        /// The trie.
        trie: TrieId,
        /// The trie's error.
        source: Box<TrieError>,
    },
    /// A `flat` key is not a trie prefix and key.
    #[error("malformed flat key 0x{0}")]
    FlatKey(String),
    /// A `code` key is not a 32-byte hash.
    #[error("malformed code key 0x{0} (not a 32-byte hash)")]
    CodeKey(String),
    /// A value is longer than any checkpoint holds ([`crate::VALUE_BYTES_MAX`], the
    /// store's value limit): only a store written past that limit holds one.
    #[error("entry 0x{key} holds a value of {bytes} bytes, over the {max}-byte limit of values a checkpoint holds")]
    EntryTooLarge {
        /// Its flat key, hex.
        key: String,
        /// Its value's bytes.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// A chunk would be larger than any reader accepts ([`crate::CHUNK_BYTES_MAX`]): its
    /// boundary proof passes several nodes that each hold a large value (keys that are
    /// prefixes of one another, each with megabytes of value). Nothing names the chunks
    /// written so far.
    #[error("the chunk from entry 0x{first} would be {bytes} bytes, over the {max}-byte chunk limit (its boundary proof holds several large values)")]
    ChunkTooLarge {
        /// Its first entry's flat key, hex.
        first: String,
        /// Its encoded size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// A storage trie whose root no entry of the main trie commits to (an Ethereum
    /// account's `storage_root`, a Substrate `:child_storage:default:` entry): a restore
    /// could not verify it.
    #[error(
        "storage trie {trie:?} (root {root}) is not committed to by an account of the main trie"
    )]
    UnboundStorage {
        /// The trie.
        trie: TrieId,
        /// Its root.
        root: H256,
    },
    /// Writing the checkpoint failed.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// The thread pool could not be built.
    #[error("thread pool: {0}")]
    Pool(#[source] rayon::ThreadPoolBuildError),
    /// Stopped on request; the chunks written so far stay (they are named by their
    /// digests), no manifest names them.
    #[error("checkpoint creation cancelled")]
    Cancelled,
}

/// How to create a checkpoint.
#[derive(Debug, Clone, Copy)]
pub struct CreateOptions {
    /// Where chunks end.
    pub rule: BoundaryRule,
    /// Worker threads (1..=[`THREADS_MAX`]).
    pub threads: usize,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions { rule: BoundaryRule::default(), threads: 2 }
    }
}

/// What a creation produced.
#[derive(Debug, Clone)]
pub struct Created {
    /// The manifest's id.
    pub id: H256,
    /// The manifest.
    pub manifest: Manifest,
    /// Chunks written (the others were there already).
    pub chunks_written: usize,
    /// Wall time.
    pub elapsed: Duration,
}

/// Create a checkpoint of `state` into `out`: every chunk, then the manifest. `progress`
/// counts the entries written so far (for a progress bar).
pub fn create(
    state: &PersistedState<'_>,
    opts: &CreateOptions,
    out: &CheckpointDir,
    progress: &AtomicU64,
) -> Result<Created, CreateError> {
    create_cancellable(state, opts, out, progress, &std::sync::atomic::AtomicBool::new(false))
}

/// [`create`] that stops with [`CreateError::Cancelled`] once `stop` is set (checked
/// before every chunk). Both first remove the stale temporary files of writers killed
/// mid-write from `out` ([`CheckpointDir::remove_stale_temps`]).
pub fn create_cancellable(
    state: &PersistedState<'_>,
    opts: &CreateOptions,
    out: &CheckpointDir,
    progress: &AtomicU64,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Created, CreateError> {
    opts.rule.validate().map_err(CreateError::Options)?;
    if !(1..=THREADS_MAX).contains(&opts.threads) {
        return Err(CreateError::Options("threads must be 1..=256"));
    }
    let t0 = Instant::now();
    // What an earlier creation killed mid-write left behind.
    out.remove_stale_temps();
    let units = units(state, opts.threads)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .thread_name(|i| format!("checkpoint-{i}"))
        .build()
        .map_err(CreateError::Pool)?;
    let buffers = Buffers::default();
    let (to_syncer, syncer) = spawn_syncer(buffers.clone());
    let ctx = Ctx {
        state,
        ranged: ranged_bindings(state)?,
        rule: opts.rule,
        out,
        progress,
        written: AtomicU64::new(0),
        flat_bytes: AtomicU64::new(0),
        syncer: to_syncer,
        buffers,
        stop,
    };
    // The code's one sequential scan runs beside the state's units.
    let (parts, code): (Vec<Result<Vec<ChunkInfo>, CreateError>>, _) = pool.install(|| {
        rayon::join(
            || units.par_iter().with_max_len(1).map(|u| ctx.unit(u)).collect(),
            || ctx.code(),
        )
    });
    let Ctx { written, flat_bytes, syncer: to_syncer, .. } = ctx;
    if stop.load(Ordering::Relaxed) {
        drop(to_syncer);
        let _ = syncer.join();
        return Err(CreateError::Cancelled);
    }
    drop(to_syncer);
    syncer.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
    let mut chunks = Vec::new();
    for p in parts {
        chunks.extend(p?);
    }
    let code = code?;
    let (block, root) = state.head();
    let manifest = Manifest {
        layout: state.layout(),
        chunk_hash: CHUNK_HASH,
        block,
        root,
        rule: opts.rule,
        entries: chunks.iter().map(|c| c.entries).sum(),
        chunk_bytes: chunks.iter().map(|c| c.len).sum(),
        flat_bytes: flat_bytes.load(Ordering::Relaxed),
        chunks,
        code,
    };
    let bytes = manifest.encode();
    let id = keccak256(&bytes);
    out.put_manifest(&id, &bytes)?;
    let chunks_written = written.load(Ordering::Relaxed) as usize;
    Ok(Created { id, manifest, chunks_written, elapsed: t0.elapsed() })
}

/// Chunk files are written, made durable and renamed into place by one syncer thread
/// while the workers go on cutting chunks (a direct write waits on the device, and so does
/// each fsync; four syncers measured no faster than one).
///
/// At most this many chunks wait for it: a disk slower than the workers holds them back
/// instead of filling memory.
const CHUNKS_IN_FLIGHT: usize = 8;

/// Chunk buffers the syncer has written, for the workers to encode the next chunks into
/// (a fresh megabyte buffer per chunk costs page faults).
type Buffers = std::sync::Arc<parking_lot::Mutex<Vec<Vec<u8>>>>;

/// The syncer's sender, and the thread, which ends with its first error once every sender
/// is gone, after every chunk it was sent.
fn spawn_syncer(
    buffers: Buffers,
) -> (std::sync::mpsc::SyncSender<Unsynced>, std::thread::JoinHandle<Result<(), DirError>>) {
    let (to_syncer, synced) = std::sync::mpsc::sync_channel::<Unsynced>(CHUNKS_IN_FLIGHT);
    let syncer = std::thread::spawn(move || -> Result<(), DirError> {
        let mut first = Ok(());
        for file in synced {
            let (buf, done) = file.finish();
            buffers.lock().push(buf);
            if first.is_ok() {
                first = done;
            }
        }
        first
    });
    (to_syncer, syncer)
}

/// A unit of work: the flat keys `[start, end)`; the first unit starts at the first key.
struct Unit {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    first: bool,
}

/// Parts of `flat` whose sizes [`units`] weighs: each key space (main, storage) by its
/// first key byte after the prefix.
const PARTS_PER_SPACE: usize = 64;

/// The units for `threads` workers: `flat` cut into `threads` runs of about equal bytes by
/// the database's size estimates of [`PARTS_PER_SPACE`] parts of each key space (evenly by
/// key when it has none, as a database still in memory), so that the workers end together.
/// Every unit after the first costs a skip to its first content boundary (about
/// `target_entries` keys read twice), so there are no more units than threads.
fn units(state: &PersistedState<'_>, threads: usize) -> Result<Vec<Unit>, CreateError> {
    let mut bounds = Vec::with_capacity(2 * PARTS_PER_SPACE + 1);
    for prefix in [0u8, 1] {
        for i in 0..PARTS_PER_SPACE {
            bounds.push(vec![prefix, (i * 256 / PARTS_PER_SPACE) as u8]);
        }
    }
    bounds.push(vec![2]);
    let mut sizes = if threads > 1 { state.approximate_flat_bytes(&bounds)? } else { Vec::new() };
    if sizes.iter().all(|s| *s == 0) {
        sizes = vec![1; bounds.len() - 1];
    }
    let total: u64 = sizes.iter().sum();
    let mut out = vec![Unit { start: Vec::new(), end: None, first: true }];
    let mut acc = 0u64;
    for (i, size) in sizes.iter().enumerate().take(sizes.len() - 1) {
        acc += size;
        // Cut after part `i` once the parts so far reach the next unit's share.
        if out.len() < threads && acc * threads as u64 >= total * out.len() as u64 {
            let start = bounds[i + 1].clone();
            out.last_mut().expect("one unit at least").end = Some(start.clone());
            out.push(Unit { start, end: None, first: false });
        }
    }
    Ok(out)
}

/// The storage tries committed to by the main-trie entries of a layout whose rule puts
/// them in a key range ([`Place::Range`]: Substrate's child tries), read once: trie →
/// root. Empty for Ethereum, whose accounts are read by key.
fn ranged_bindings(state: &PersistedState<'_>) -> Result<HashMap<H256, H256>, CreateError> {
    let layout = state.layout();
    // Any trie id: the place depends on the layout only.
    let Place::Range(start, end) = binding_place(layout, &H256::default()) else {
        return Ok(HashMap::new());
    };
    let (mut from, mut to) = (TrieId::Main.prefix(), TrieId::Main.prefix());
    from.extend_from_slice(&start);
    to.extend_from_slice(&end);
    let mut out = HashMap::new();
    let mut cur = state.cursor(&from)?;
    while let Some((k, v)) = cur.entry() {
        if k >= to.as_slice() {
            break;
        }
        if let Some((trie, root)) = binding(layout, &k[1..], v) {
            out.insert(trie, root);
        }
        cur.advance();
    }
    cur.status()?;
    Ok(out)
}

struct Ctx<'a, 's> {
    state: &'a PersistedState<'s>,
    /// [`ranged_bindings`].
    ranged: HashMap<H256, H256>,
    rule: BoundaryRule,
    out: &'a CheckpointDir,
    progress: &'a AtomicU64,
    written: AtomicU64,
    flat_bytes: AtomicU64,
    syncer: std::sync::mpsc::SyncSender<Unsynced>,
    buffers: Buffers,
    stop: &'a std::sync::atomic::AtomicBool,
}

/// The chunk being cut, its entries already in the chunk format's encoding ([`put_entry`]:
/// the key within its trie, then the value) as they are read: one copy of each entry
/// before the chunk's bytes are assembled.
#[derive(Default)]
struct Pending {
    /// Every segment's encoded entries, one after another.
    body: Vec<u8>,
    segments: Vec<PendingSegment>,
    /// The flat-key prefix of the last segment's trie.
    prefix: Vec<u8>,
    /// Its first entry's flat key.
    first: Vec<u8>,
    entries: u64,
    /// Flat bytes of its entries (full keys and values).
    bytes: u64,
}

/// One trie's entries of a [`Pending`] chunk.
struct PendingSegment {
    trie: TrieId,
    /// Its encoded entries in [`Pending::body`].
    body: Range<usize>,
    entries: usize,
    /// Its last entry's key (within the trie) in [`Pending::body`].
    last: Range<usize>,
}

impl Pending {
    fn push(&mut self, k: &[u8], v: &[u8]) -> Result<(), CreateError> {
        if self.segments.is_empty() || !k.starts_with(&self.prefix) {
            let (trie, key) = split(k)?;
            self.prefix.clear();
            self.prefix.extend_from_slice(&k[..k.len() - key.len()]);
            let at = self.body.len();
            self.segments.push(PendingSegment { trie, body: at..at, entries: 0, last: at..at });
        }
        if self.entries == 0 {
            self.first.clear();
            self.first.extend_from_slice(k);
        }
        let key = &k[self.prefix.len()..];
        let at = put_entry(&mut self.body, key, v);
        let end = self.body.len();
        let s = self.segments.last_mut().expect("a segment was opened above");
        s.body.end = end;
        s.entries += 1;
        s.last = at..at + key.len();
        self.entries += 1;
        self.bytes += (k.len() + v.len()) as u64;
        Ok(())
    }

    /// Its last entry's flat key (empty without entries).
    fn last_key(&self) -> Vec<u8> {
        let Some(s) = self.segments.last() else { return Vec::new() };
        let mut k = Vec::with_capacity(self.prefix.len() + s.last.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(&self.body[s.last.clone()]);
        k
    }

    fn clear(&mut self) {
        self.body.clear();
        self.segments.clear();
        self.prefix.clear();
        self.first.clear();
        self.entries = 0;
        self.bytes = 0;
    }
}

impl Ctx<'_, '_> {
    fn unit(&self, unit: &Unit) -> Result<Vec<ChunkInfo>, CreateError> {
        let mut cur = self.state.cursor(&unit.start)?;
        let mut before: Option<Vec<u8>> = None;
        if !unit.first {
            // Skip to the first content boundary at or after the start; none before the
            // end: the previous unit covers this one.
            loop {
                let Some((k, _)) = cur.entry() else {
                    cur.status()?;
                    return Ok(Vec::new());
                };
                if self.rule.is_boundary(k) {
                    if unit.end.as_deref().is_some_and(|e| k >= e) {
                        return Ok(Vec::new());
                    }
                    before = Some(k.to_vec());
                    cur.advance();
                    break;
                }
                cur.advance();
            }
        }
        let mut chunks = Vec::new();
        let mut p = Pending::default();
        // One encoding buffer per unit, reused: fresh megabyte buffers per chunk cost page
        // faults.
        let mut buf = Vec::new();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(CreateError::Cancelled);
            }
            p.clear();
            let mut content_cut = false;
            while let Some((k, v)) = cur.entry() {
                if v.len() > VALUE_BYTES_MAX {
                    return Err(CreateError::EntryTooLarge {
                        key: hex::encode(k),
                        bytes: v.len() as u64,
                        max: VALUE_BYTES_MAX as u64,
                    });
                }
                let size = (k.len() + v.len()) as u64;
                // An entry past `max_bytes` goes alone into a chunk of its own.
                if p.entries > 0 && p.bytes + size > u64::from(self.rule.max_bytes) {
                    break;
                }
                p.push(k, v)?;
                content_cut = self.rule.is_boundary(k);
                cur.advance();
                if content_cut {
                    break;
                }
            }
            cur.status()?;
            let next = cur.entry().map(|(k, _)| k.to_vec());
            if p.entries == 0 {
                if unit.first && chunks.is_empty() {
                    // The empty state: one chunk proving the empty main trie.
                    chunks.push(self.emit(None, &p, None, &mut buf)?);
                }
                break;
            }
            let info = self.emit(before.as_deref(), &p, next.as_deref(), &mut buf)?;
            let past_end = unit.end.as_deref().is_some_and(|e| info.last.as_slice() >= e);
            before = Some(info.last.clone());
            chunks.push(info);
            if next.is_none() || (content_cut && past_end) {
                break;
            }
        }
        Ok(chunks)
    }

    /// Encode and store the chunk of `p`'s entries; `before` is the flat key just before
    /// it, `next` the one just after it.
    fn emit(
        &self,
        before: Option<&[u8]>,
        p: &Pending,
        next: Option<&[u8]>,
        buf: &mut Vec<u8>,
    ) -> Result<ChunkInfo, CreateError> {
        let before = before.map(split).transpose()?;
        let next_trie = next.map(split).transpose()?.map(|(t, _)| t);
        // Without entries: one open segment of the main trie (the empty state).
        let empty = [PendingSegment { trie: TrieId::Main, body: 0..0, entries: 0, last: 0..0 }];
        let segments = if p.segments.is_empty() { &empty[..] } else { &p.segments[..] };
        let n = segments.len();
        let (block, root) = self.state.head();
        if buf.capacity() == 0 {
            *buf = self.buffers.lock().pop().unwrap_or_default();
        }
        let start = direct::prepare(buf, p.body.len() + PROOF_ROOM);
        let mut w = ChunkWriter::appending(std::mem::take(buf), block, &root, n);
        let mut ends_trie = false;
        for (i, s) in segments.iter().enumerate() {
            let start = match before {
                Some((t, k)) if i == 0 && t == s.trie => successor(k),
                _ => Vec::new(),
            };
            let open = i + 1 < n || next_trie != Some(s.trie);
            let last = (!open && s.entries > 0).then(|| &p.body[s.last.clone()]);
            let proof = self.proof(s.trie, &start, last)?;
            w.encoded_segment(&s.trie, &start, open, s.entries, &p.body[s.body.clone()], &proof);
            ends_trie = open;
        }
        *buf = w.finish();
        let len = (buf.len() - start) as u64;
        if len > CHUNK_BYTES_MAX {
            let first = hex::encode(&p.first);
            return Err(CreateError::ChunkTooLarge { first, bytes: len, max: CHUNK_BYTES_MAX });
        }
        let digest = CHUNK_HASH.digest(&buf[start..]);
        self.store(&digest, buf, start)?;
        self.progress.fetch_add(p.entries, Ordering::Relaxed);
        self.flat_bytes.fetch_add(p.bytes, Ordering::Relaxed);
        let (first, last) = (p.first.clone(), p.last_key());
        Ok(ChunkInfo { first, last, entries: p.entries, len, digest, ends_trie })
    }

    /// Cut the pinned `code` family into code chunks (`code.rs`) and store them: one scan
    /// in hash order, a chunk ending before a code that would take it past the rule's
    /// `max_bytes`.
    fn code(&self) -> Result<CodeList, CreateError> {
        let mut list = CodeList::default();
        let Some(mut cur) = self.state.code_cursor(&[])? else { return Ok(list) };
        let max = u64::from(self.rule.max_bytes);
        let mut pending: Vec<(H256, Vec<u8>)> = Vec::new();
        let mut weight = 0u64;
        loop {
            let entry = cur.entry();
            let next = entry.map(|(_, code)| code_weight(code));
            let full = next.is_none_or(|w| weight + w > max);
            if full && !pending.is_empty() {
                if self.stop.load(Ordering::Relaxed) {
                    return Err(CreateError::Cancelled);
                }
                let info = self.emit_code(&pending)?;
                list.entries += info.entries;
                list.chunk_bytes += info.len;
                list.bytes += weight;
                list.chunks.push(info);
                pending.clear();
                weight = 0;
            }
            let Some((k, code)) = entry else { break };
            let hash = H256::from_slice(k).ok_or_else(|| CreateError::CodeKey(hex::encode(k)))?;
            if code.len() > VALUE_BYTES_MAX {
                return Err(CreateError::EntryTooLarge {
                    key: hex::encode(k),
                    bytes: code.len() as u64,
                    max: VALUE_BYTES_MAX as u64,
                });
            }
            weight += code_weight(code);
            pending.push((hash, code.to_vec()));
            cur.advance();
        }
        cur.status()?;
        Ok(list)
    }

    /// Encode and store the code chunk of `codes` (ascending, at least one).
    fn emit_code(&self, codes: &[(H256, Vec<u8>)]) -> Result<CodeChunkInfo, CreateError> {
        let (block, root) = self.state.head();
        let chunk = CodeChunk {
            block,
            root,
            codes: codes.iter().map(|(h, c)| (*h, c.as_slice())).collect(),
        };
        let mut bytes = chunk.encode();
        // Invariant: codes within `max_bytes` (at most a quarter of the bound), or one code
        // of at most VALUE_BYTES_MAX, with a few bytes of framing each, fit a chunk.
        assert!(bytes.len() as u64 <= CHUNK_BYTES_MAX, "a code chunk over the chunk bound");
        let digest = CHUNK_HASH.digest(&bytes);
        let len = bytes.len() as u64;
        self.store(&digest, &mut bytes, 0)?;
        let (first, last) = (codes[0].0, codes[codes.len() - 1].0);
        let entries = codes.len() as u64;
        Ok(CodeChunkInfo { first, last, entries, len, digest })
    }

    /// Hand the chunk `buf[start..]` named `digest` to the syncer (`buf` moved to it),
    /// unless the directory holds it already.
    fn store(&self, digest: &H256, buf: &mut Vec<u8>, start: usize) -> Result<(), CreateError> {
        if let Some(file) = self.out.put_chunk_unsynced(digest, buf, start)? {
            self.written.fetch_add(1, Ordering::Relaxed);
            // The syncer ends only after every sender is gone: it cannot be closed here.
            let _ = self.syncer.send(file);
        }
        Ok(())
    }

    /// The boundary proof of one segment (and, at a storage trie's first segment, the
    /// check that its account commits to it). `last` is the segment's last key when it is
    /// closed.
    fn proof(
        &self,
        trie: TrieId,
        start: &[u8],
        last: Option<&[u8]>,
    ) -> Result<Vec<Vec<u8>>, CreateError> {
        let root = self.state.trie_root(&trie)?;
        if let TrieId::Storage(account) = trie {
            if start.is_empty() {
                self.check_bound(&trie, &account, &root)?;
            }
        }
        let source = self.state.node_source(trie);
        let prove = ProveRange { source: &source, root: &root, start, last };
        self.state
            .layout()
            .dispatch(prove)
            .map_err(|e| CreateError::Proof { trie, source: Box::new(e) })
    }

    /// A storage trie must be committed to by its main-trie entry (`keys::binding`).
    fn check_bound(&self, trie: &TrieId, account: &H256, root: &H256) -> Result<(), CreateError> {
        let layout = self.state.layout();
        let committed = match binding_place(layout, account) {
            Place::Key(k) => self
                .state
                .get(&TrieId::Main, &k)?
                .and_then(|v| binding(layout, &k, &v))
                .filter(|(t, _)| t == account)
                .map(|(_, r)| r),
            Place::Range(..) => self.ranged.get(account).copied(),
        };
        if committed == Some(*root) {
            Ok(())
        } else {
            Err(CreateError::UnboundStorage { trie: *trie, root: *root })
        }
    }
}

/// [`trie::prove_key_range`] in the layout it is dispatched to.
struct ProveRange<'a, S> {
    source: &'a S,
    root: &'a H256,
    start: &'a [u8],
    last: Option<&'a [u8]>,
}

impl<S: NodeSource> WithLayout for ProveRange<'_, S> {
    type Output = Result<Vec<Vec<u8>>, TrieError>;
    fn run<L: Layout>(self) -> Self::Output {
        trie::prove_key_range::<L, S>(self.source, self.root, self.start, self.last)
    }
}

fn split(k: &[u8]) -> Result<(TrieId, &[u8]), CreateError> {
    TrieId::split(k).ok_or_else(|| CreateError::FlatKey(hex::encode(k)))
}
