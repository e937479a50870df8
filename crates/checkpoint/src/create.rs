//! Creating a checkpoint from a pinned persisted state, in parallel, with bytes that do
//! not depend on the thread count.
//!
//! The key space is split into units (the main and the storage key spaces each in as many
//! parts as threads); a unit's worker seeks to its start, skips to the first content
//! boundary at or after it (the first unit starts at the first key), cuts chunks from
//! there by the boundary rule, and stops after the first content boundary at or past its
//! end. So every chunk is cut exactly where one walk from the first key would cut it, and
//! the thread count only changes which worker writes it (`boundary.rs`). The contract
//! code is cut into code chunks by one scan of its own beside them (`code.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use state::{TrieId, H256};
use store::{PersistedState, StoreError};
use trie::{keccak256, Layout, NodeSource, TrieError, WithLayout};

use crate::code::{code_weight, CodeChunk};
use crate::dir::{CheckpointDir, DirError, Unsynced};
use crate::format::{
    BoundaryRule, ChunkHash, ChunkInfo, ChunkWriter, CodeChunkInfo, CodeList, Manifest,
    CHUNK_BYTES_MAX, VALUE_BYTES_MAX,
};
use crate::keys::{binding, binding_place, successor, Place};

/// The hash new checkpoints name their chunks by (manifest version 3).
const CHUNK_HASH: ChunkHash = ChunkHash::Blake3;

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
    let units = units(opts.threads);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .thread_name(|i| format!("checkpoint-{i}"))
        .build()
        .map_err(CreateError::Pool)?;
    let (to_syncer, syncer) = spawn_syncer();
    let ctx = Ctx {
        state,
        ranged: ranged_bindings(state)?,
        rule: opts.rule,
        out,
        progress,
        written: AtomicU64::new(0),
        flat_bytes: AtomicU64::new(0),
        syncer: to_syncer,
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

/// Chunk files are made durable and renamed into place by one syncer thread while the
/// workers go on cutting chunks (each fsync waits ~0.5 ms on the disk): its sender, and
/// the thread, which ends with the first error once every sender is gone.
fn spawn_syncer(
) -> (std::sync::mpsc::Sender<Unsynced>, std::thread::JoinHandle<Result<(), DirError>>) {
    let (to_syncer, synced) = std::sync::mpsc::channel::<Unsynced>();
    let syncer = std::thread::spawn(move || -> Result<(), DirError> {
        let mut first = Ok(());
        for file in synced {
            let r = file.finish();
            if first.is_ok() {
                first = r;
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

/// The units for `threads` workers: the main and the storage key spaces each split evenly
/// by their first key byte into twice as many parts as threads, taken one at a time by
/// whichever worker is free (one unit for one thread). A unit costs a skip to its first
/// content boundary (about `target_entries` keys read, their boundary hashes computed).
fn units(threads: usize) -> Vec<Unit> {
    if threads == 1 {
        return vec![Unit { start: Vec::new(), end: None, first: true }];
    }
    let parts = (2 * threads).min(256);
    let mut starts = Vec::new();
    for prefix in [0u8, 1] {
        for i in 0..parts {
            starts.push(vec![prefix, (i * 256 / parts) as u8]);
        }
    }
    starts.dedup();
    let mut out = Vec::with_capacity(starts.len());
    for (i, s) in starts.iter().enumerate() {
        out.push(Unit {
            start: if i == 0 { Vec::new() } else { s.clone() },
            end: starts.get(i + 1).cloned(),
            first: i == 0,
        });
    }
    out
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
    syncer: std::sync::mpsc::Sender<Unsynced>,
    stop: &'a std::sync::atomic::AtomicBool,
}

/// A chunk's entries, packed: full flat keys and values in one buffer.
#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    /// (key start, key length, value length) in `buf`.
    spans: Vec<(usize, usize, usize)>,
    bytes: u64,
}

impl Pending {
    fn push(&mut self, k: &[u8], v: &[u8]) {
        self.spans.push((self.buf.len(), k.len(), v.len()));
        self.buf.extend_from_slice(k);
        self.buf.extend_from_slice(v);
        self.bytes += (k.len() + v.len()) as u64;
    }

    fn get(&self, i: usize) -> (&[u8], &[u8]) {
        let (s, kl, vl) = self.spans[i];
        (&self.buf[s..s + kl], &self.buf[s + kl..s + kl + vl])
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
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
                if !p.spans.is_empty() && p.bytes + size > u64::from(self.rule.max_bytes) {
                    break;
                }
                p.push(k, v);
                content_cut = self.rule.is_boundary(k);
                cur.advance();
                if content_cut {
                    break;
                }
            }
            cur.status()?;
            let next = cur.entry().map(|(k, _)| k.to_vec());
            if p.spans.is_empty() {
                if unit.first && chunks.is_empty() {
                    // The empty state: one chunk proving the empty main trie.
                    chunks.push(self.emit(None, &p, None, &mut buf)?);
                }
                break;
            }
            chunks.push(self.emit(before.as_deref(), &p, next.as_deref(), &mut buf)?);
            let last = p.get(p.spans.len() - 1).0.to_vec();
            let past_end = unit.end.as_deref().is_some_and(|e| last.as_slice() >= e);
            before = Some(last);
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
        let mut groups: Vec<(TrieId, Entries<'_>)> = Vec::new();
        for i in 0..p.spans.len() {
            let (k, v) = p.get(i);
            let (trie, key) = split(k)?;
            match groups.last_mut() {
                Some((t, g)) if *t == trie => g.push((key, v)),
                _ => groups.push((trie, vec![(key, v)])),
            }
        }
        if groups.is_empty() {
            groups.push((TrieId::Main, Vec::new()));
        }
        let n = groups.len();
        let mut starts: Vec<Vec<u8>> = Vec::with_capacity(n);
        for (i, (trie, _)) in groups.iter().enumerate() {
            starts.push(match before {
                Some((t, k)) if i == 0 && t == *trie => successor(k),
                _ => Vec::new(),
            });
        }
        let (block, root) = self.state.head();
        let mut w = ChunkWriter::new_in(std::mem::take(buf), block, &root, n);
        let mut ends_trie = false;
        for (i, (trie, entries)) in groups.iter().enumerate() {
            let open = i + 1 < n || next_trie != Some(*trie);
            let proof = self.proof(*trie, &starts[i], open, entries)?;
            w.segment(trie, &starts[i], open, entries, &proof);
            ends_trie = open;
        }
        let bytes = w.finish();
        if bytes.len() as u64 > CHUNK_BYTES_MAX {
            let first = p.spans.first().map(|_| hex::encode(p.get(0).0)).unwrap_or_default();
            let len = bytes.len() as u64;
            return Err(CreateError::ChunkTooLarge { first, bytes: len, max: CHUNK_BYTES_MAX });
        }
        let digest = CHUNK_HASH.digest(&bytes);
        if let Some(file) = self.out.put_chunk_unsynced(&digest, &bytes)? {
            self.written.fetch_add(1, Ordering::Relaxed);
            // The syncer ends only after every sender is gone: it cannot be closed here.
            let _ = self.syncer.send(file);
        }
        let len = bytes.len() as u64;
        *buf = bytes;
        self.progress.fetch_add(p.spans.len() as u64, Ordering::Relaxed);
        self.flat_bytes.fetch_add(p.bytes, Ordering::Relaxed);
        let (first, last) = match p.spans.len() {
            0 => (Vec::new(), Vec::new()),
            n => (p.get(0).0.to_vec(), p.get(n - 1).0.to_vec()),
        };
        Ok(ChunkInfo { first, last, entries: p.spans.len() as u64, len, digest, ends_trie })
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
        let bytes = chunk.encode();
        // Invariant: codes within `max_bytes` (at most a quarter of the bound), or one code
        // of at most VALUE_BYTES_MAX, with a few bytes of framing each, fit a chunk.
        assert!(bytes.len() as u64 <= CHUNK_BYTES_MAX, "a code chunk over the chunk bound");
        let digest = CHUNK_HASH.digest(&bytes);
        if let Some(file) = self.out.put_chunk_unsynced(&digest, &bytes)? {
            self.written.fetch_add(1, Ordering::Relaxed);
            // The syncer ends only after every sender is gone: it cannot be closed here.
            let _ = self.syncer.send(file);
        }
        let (first, last) = (codes[0].0, codes[codes.len() - 1].0);
        let entries = codes.len() as u64;
        Ok(CodeChunkInfo { first, last, entries, len: bytes.len() as u64, digest })
    }

    /// The boundary proof of one segment (and, at a storage trie's first segment, the
    /// check that its account commits to it).
    fn proof(
        &self,
        trie: TrieId,
        start: &[u8],
        open: bool,
        entries: &[(&[u8], &[u8])],
    ) -> Result<Vec<Vec<u8>>, CreateError> {
        let root = self.state.trie_root(&trie)?;
        if let TrieId::Storage(account) = trie {
            if start.is_empty() {
                self.check_bound(&trie, &account, &root)?;
            }
        }
        let last = if open { None } else { entries.last().map(|(k, _)| *k) };
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

/// A segment's entries, borrowed.
type Entries<'a> = Vec<(&'a [u8], &'a [u8])>;

fn split(k: &[u8]) -> Result<(TrieId, &[u8]), CreateError> {
    TrieId::split(k).ok_or_else(|| CreateError::FlatKey(hex::encode(k)))
}
