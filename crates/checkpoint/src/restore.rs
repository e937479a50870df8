//! Restoring a checkpoint into an empty database, chunk by chunk in any order.
//!
//! The only trusted input is `(block, root)`. A chunk offered for index `i` is checked in
//! this order, and nothing of it is written unless every check passes:
//! 1. its digest (the manifest's [`crate::ChunkHash`]) is the manifest's for `i` (else the *source* is to blame);
//! 2. it decodes, names the checkpoint's block and root, and fits the manifest: its
//!    entries, first and last keys, where its first segment starts (right after chunk
//!    `i - 1`'s last key, or at the start of the next trie when that chunk ended its trie),
//!    and the manifest's boundary rule inside it (no content boundary before its last
//!    entry; with several entries, their bytes within the rule's maximum);
//! 3. each segment verifies against its trie's root ([`trie::verify_key_range`], in the
//!    manifest's layout, which must be the database's): the trusted root for the main
//!    trie; for a storage trie, the root its main-trie entry commits to (`keys::binding`:
//!    an Ethereum account's `storage_root`, a Substrate `:child_storage:default:` entry),
//!    read from the restored main trie. A storage segment whose entry's chunk is not
//!    restored yet waits in a bounded on-disk staging directory.
//!
//! Then its `flat` entries, the nodes the verification established (boundary nodes and
//! everything it rebuilt inside the range, so nothing is hashed twice), its storage tries'
//! root records and a progress record go to the database in one atomic batch: a restore
//! killed at any moment resumes with exactly the chunks it had. When every chunk is in,
//! the accounts with storage must match the storage tries restored one to one, the
//! chunks' entry bytes must add up to the manifest's flat bytes and each chunk must end
//! where the rule cuts (its progress record keeps its bytes), and [`Restorer::finish`]
//! makes the block the head.
//!
//! Code chunks (`code.rs`; indices after the state chunks) never wait: each code is
//! checked against its hash and written to the `code` family. A main-trie chunk writes a
//! progress record for each code its accounts refer to (`keys::code_ref`); `finish`
//! refuses the restore unless every one of them was restored
//! ([`RestoreError::CodeMissing`]). Manifests of versions 1 and 2 have no code list
//! ([`Manifest::has_code_list`]): their restores check no code, as before.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use state::{TrieId, H256};
use store::{BulkError, RestoreWriter, StateDb, StoreError};
use trie::{keccak256, Layout, LayoutName, NodeSink, ProofError, WithLayout};

use crate::boundary::{check_cut, check_ends, ChunkBytes};
use crate::code::{check_code_chunk, check_code_ends, CodeChunk, CodeError};
use crate::format::{Chunk, ChunkHash, DecodeError, Manifest, Segment};
use crate::keys::{binding, binding_place, code_ref, successor, unbound, Place};
use crate::progress::{binding_name, code_ref_name, progress_name, Counts};

/// The trusted input of a restore: the block and its state root (from consensus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trusted {
    /// Block number.
    pub block: u64,
    /// State root at that block.
    pub root: H256,
}

/// Default bound on staged chunk bytes.
pub const STAGING_BYTES_DEFAULT: u64 = 256 << 20;

/// How a restore runs.
#[derive(Debug, Clone)]
pub struct RestoreOptions {
    /// Where chunks wait for their accounts: a new or empty directory, or one a restore
    /// staged in before ([`STAGING_MARKER`]); anything else is refused
    /// ([`RestoreError::StagingForeign`]).
    pub staging_dir: PathBuf,
    /// Most bytes staged at once.
    pub staging_bytes_max: u64,
}

/// The staging directory's name inside the database directory
/// ([`RestoreOptions::in_database`]).
pub const STAGING_DIR_NAME: &str = "restore-staging";

/// The file that marks a directory as a restore's staging directory: written when a
/// restore creates the directory or adopts an empty one. A restore stages in a marked
/// directory only, removes nothing there but its staged chunks (and their temporary
/// files), and at the end the marker and the directory if it is then empty.
pub const STAGING_MARKER: &str = "ARBOR-RESTORE-STAGING";

impl RestoreOptions {
    /// Staging in `dir`, with the default bound.
    pub fn new(staging_dir: impl Into<PathBuf>) -> Self {
        RestoreOptions { staging_dir: staging_dir.into(), staging_bytes_max: STAGING_BYTES_DEFAULT }
    }

    /// Staging inside the database directory `db` ([`STAGING_DIR_NAME`]), with the default
    /// bound: on the database's own volume, even when the database directory is a mount
    /// point (a sibling directory would be on another filesystem, or not writable).
    /// RocksDB ignores the subdirectory; [`Restorer::finish`] removes it.
    pub fn in_database(db: &Path) -> Self {
        RestoreOptions::new(db.join(STAGING_DIR_NAME))
    }
}

/// Why a chunk was refused. Nothing of a refused chunk is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// No chunk of the manifest has this index.
    #[error("chunk index {index} out of range (the manifest has {len})")]
    Index {
        /// The index.
        index: usize,
        /// Chunks in the manifest.
        len: usize,
    },
    /// The bytes are not the chunk the manifest names: the source served something else.
    #[error("chunk {index}: bytes hash to {actual}, the manifest says {expected}")]
    Digest {
        /// The index.
        index: usize,
        /// The manifest's digest.
        expected: H256,
        /// The bytes' digest.
        actual: H256,
    },
    /// The chunk the manifest names does not decode.
    #[error("chunk {index}: {source}")]
    Decode {
        /// The index.
        index: usize,
        /// The decoder's error.
        source: DecodeError,
    },
    /// The chunk does not fit the manifest or the checkpoint.
    #[error("chunk {index}: {what}")]
    Mismatch {
        /// The index.
        index: usize,
        /// What does not fit.
        what: String,
    },
    /// A segment does not verify against its trie's root.
    #[error("chunk {index}, {trie:?}: {source}")]
    Proof {
        /// The index.
        index: usize,
        /// The segment's trie.
        trie: TrieId,
        /// Why.
        source: ProofError,
    },
    /// A code chunk holds a code that does not hash to its key, or is not the code chunk
    /// the manifest describes.
    #[error("chunk {index}: {source}")]
    Code {
        /// The index.
        index: usize,
        /// Why.
        source: CodeError,
    },
    /// The chunk must wait for its accounts, and the staging directory is full.
    #[error("chunk {index} must wait for its accounts and staging is full")]
    StagingFull {
        /// The index.
        index: usize,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The staging directory failed.
    #[error("staging {path}: {source}")]
    Staging {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl ChunkError {
    /// True when the source that served the bytes is at fault (they are not the chunk
    /// the manifest names); otherwise the checkpoint itself is bad or the local database
    /// failed.
    pub fn blames_source(&self) -> bool {
        matches!(self, ChunkError::Digest { .. })
    }
}

/// Why a restore could not start or finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The manifest does not decode.
    #[error("manifest: {0}")]
    Manifest(#[from] DecodeError),
    /// The manifest is for another block or root than the trusted one.
    #[error("the manifest is for block {found_block} root {found_root}, not the trusted block {block} root {root}")]
    OtherCheckpoint {
        /// Trusted block.
        block: u64,
        /// Trusted root.
        root: H256,
        /// The manifest's block.
        found_block: u64,
        /// The manifest's root.
        found_root: H256,
    },
    /// The checkpoint's trie layout is not the database's.
    #[error("the checkpoint holds {checkpoint} tries but the database holds {database} tries; restore into a new directory (it is created in the checkpoint's layout)")]
    Layout {
        /// The database's layout.
        database: LayoutName,
        /// The checkpoint's (its manifest's) layout.
        checkpoint: LayoutName,
    },
    /// The database refused the restore (not empty, another restore unfinished) or failed.
    #[error(transparent)]
    Store(#[from] BulkError),
    /// A progress record on disk does not decode.
    #[error("progress record {0} is corrupt")]
    Progress(String),
    /// `finish` before every chunk is in.
    #[error("{missing} chunk(s) still missing")]
    Incomplete {
        /// Chunks not restored.
        missing: usize,
    },
    /// Every chunk verified, but the manifest misstates what they hold (its flat bytes) or
    /// how they were cut (its boundary rule).
    #[error("the manifest misstates its chunks: {0}")]
    Misstated(String),
    /// Accounts commit to storage tries that no chunk held (or the reverse).
    #[error("{accounts} account(s) have storage but {tries} storage trie(s) were restored")]
    StorageMismatch {
        /// Accounts whose storage root is not empty.
        accounts: u64,
        /// Storage tries restored.
        tries: u64,
    },
    /// Accounts refer to contract code that no code chunk held: the checkpoint lacks code
    /// a node needs to execute.
    #[error("{missing} contract code(s) that accounts refer to are not in the checkpoint (one: {first})")]
    CodeMissing {
        /// Code hashes referred to and not restored.
        missing: u64,
        /// One of them.
        first: H256,
    },
    /// The staging directory failed.
    #[error("staging {path}: {source}")]
    Staging {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The staging directory holds files a restore did not put there (it would remove
    /// what it stages there, and must never remove anything else).
    #[error("staging directory {path} is not empty and was not created by a restore; name an empty or new directory")]
    StagingForeign {
        /// The directory.
        path: PathBuf,
    },
}

/// What happened to an offered chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// Verified and written.
    Applied {
        /// Its entries.
        entries: u64,
    },
    /// Verified as the manifest's bytes, waiting in staging for its accounts.
    Staged,
    /// Restored before.
    AlreadyDone,
}

struct Staging {
    dir: PathBuf,
    max: u64,
    bytes: u64,
    files: BTreeMap<usize, Staged>,
}

struct Staged {
    path: PathBuf,
    len: u64,
    /// Chunks to restore before this one can verify (empty after a restart: unknown).
    waits_for: Vec<usize>,
    /// Taken by a [`Restorer::retry_staged`] that is reading and offering it.
    claimed: bool,
}

/// A restore in progress; see the module docs. Methods take `&self`, so chunks can be
/// verified on several threads at once.
pub struct Restorer<'db> {
    restore: store::Restore<'db>,
    writer: RestoreWriter,
    manifest: Manifest,
    id: H256,
    done: Vec<AtomicBool>,
    counts: Mutex<Counts>,
    /// Each restored chunk's entry bytes, for [`check_ends`] at the end.
    bytes: Mutex<Vec<ChunkBytes>>,
    staging: Mutex<Staging>,
    /// Entries written by this restorer, whether their chunk came straight from a source
    /// or out of staging.
    entries_written: AtomicU64,
    /// In layouts whose bindings lie in a key range ([`Place::Range`]): storage trie →
    /// root, from every restored chunk's main-trie entries.
    ranged: Mutex<HashMap<H256, H256>>,
}

impl<'db> Restorer<'db> {
    /// Start (or resume) restoring the checkpoint whose manifest is `manifest` into `db`,
    /// which must be empty or hold an unfinished restore of the same manifest, and have
    /// the manifest's layout ([`RestoreError::Layout`]; open a new database with
    /// `StoreConfig::layout` set to [`Manifest::layout`]).
    pub fn begin(
        db: &'db mut StateDb,
        trusted: Trusted,
        manifest: &[u8],
        opts: &RestoreOptions,
    ) -> Result<Restorer<'db>, RestoreError> {
        let id = keccak256(manifest);
        let manifest = Manifest::decode(manifest)?;
        if manifest.block != trusted.block || manifest.root != trusted.root {
            return Err(RestoreError::OtherCheckpoint {
                block: trusted.block,
                root: trusted.root,
                found_block: manifest.block,
                found_root: manifest.root,
            });
        }
        if db.layout() != manifest.layout {
            return Err(RestoreError::Layout {
                database: db.layout(),
                checkpoint: manifest.layout,
            });
        }
        // Before the database is touched: a refused directory leaves it as it was.
        claim(&opts.staging_dir)?;
        let restore = db.begin_restore(&format!("checkpoint {}", hex::encode(id.0)))?;
        let done: Vec<AtomicBool> =
            (0..manifest.chunk_count()).map(|_| AtomicBool::new(false)).collect();
        let mut counts = Counts::default();
        let mut bytes = vec![ChunkBytes::default(); done.len()];
        let mut ranged = HashMap::new();
        for (name, value) in restore.progress().map_err(BulkError::from)? {
            let bad = || RestoreError::Progress(hex::encode(&name));
            let i = match name.as_slice() {
                [b'c', rest @ ..] => u64::from_be_bytes(rest.try_into().map_err(|_| bad())?),
                [b'b', rest @ ..] => {
                    let trie = H256::from_slice(rest).ok_or_else(bad)?;
                    ranged.insert(trie, H256::from_slice(&value).ok_or_else(bad)?);
                    continue;
                }
                [b'n', ..] => continue,
                _ => return Err(bad()),
            };
            // A record of the earlier layout (counts only): the chunk is restored again
            // (the same writes), so that its bytes are known.
            if value.len() == 16 {
                continue;
            }
            let (c, b) = Counts::decode(&value).ok_or_else(bad)?;
            let flag = done.get(i as usize).ok_or_else(bad)?;
            flag.store(true, Ordering::Relaxed);
            bytes[i as usize] = b;
            counts.accounts_with_storage += c.accounts_with_storage;
            counts.storage_tries += c.storage_tries;
        }
        let staging = Staging::open(opts, &manifest, &done)?;
        let writer = restore.writer();
        Ok(Restorer {
            restore,
            writer,
            manifest,
            id,
            done,
            counts: Mutex::new(counts),
            bytes: Mutex::new(bytes),
            staging: Mutex::new(staging),
            entries_written: AtomicU64::new(0),
            ranged: Mutex::new(ranged),
        })
    }

    /// Entries written by this restorer (this run of a resumed restore).
    pub fn entries_written(&self) -> u64 {
        self.entries_written.load(Ordering::Relaxed)
    }

    /// The manifest being restored.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Its id.
    pub fn id(&self) -> H256 {
        self.id
    }

    /// True when chunk `i` is restored.
    pub fn is_done(&self, i: usize) -> bool {
        self.done.get(i).is_some_and(|d| d.load(Ordering::Acquire))
    }

    /// Chunks neither restored nor staged, in index order.
    pub fn missing(&self) -> Vec<usize> {
        let staging = self.staging.lock();
        (0..self.done.len())
            .filter(|i| !self.is_done(*i) && !staging.files.contains_key(i))
            .collect()
    }

    /// Chunks restored so far.
    pub fn restored(&self) -> usize {
        (0..self.done.len()).filter(|i| self.is_done(*i)).count()
    }

    /// Offer the bytes of chunk `index`. See the module docs for the checks.
    pub fn offer(&self, index: usize, bytes: &[u8]) -> Result<Offered, ChunkError> {
        let (expected, len) = self
            .manifest
            .chunk_name(index)
            .ok_or(ChunkError::Index { index, len: self.done.len() })?;
        let actual = self.manifest.chunk_hash.digest(bytes);
        if actual != expected {
            return Err(ChunkError::Digest { index, expected, actual });
        }
        check_len(len, index, bytes)?;
        if self.is_done(index) {
            return Ok(Offered::AlreadyDone);
        }
        if let Some(j) = index.checked_sub(self.manifest.chunks.len()) {
            return Ok(Offered::Applied { entries: self.apply_code(index, j, bytes)? });
        }
        let chunk = Chunk::decode(bytes).map_err(|source| ChunkError::Decode { index, source })?;
        let cut = check_fit(&self.manifest, index, &chunk)
            .map_err(|what| ChunkError::Mismatch { index, what })?;
        let mut roots = Vec::with_capacity(chunk.segments.len());
        let mut waiting = Vec::new();
        for s in &chunk.segments {
            match self.trie_root(index, &chunk, s)? {
                Ok(root) => roots.push(root),
                Err(deps) => waiting.extend(deps),
            }
        }
        if !waiting.is_empty() {
            self.staging.lock().put(index, bytes, waiting)?;
            return Ok(Offered::Staged);
        }
        let entries = self.apply(index, &chunk, &roots, cut)?;
        self.entries_written.fetch_add(entries, Ordering::Relaxed);
        self.staging.lock().remove(index);
        Ok(Offered::Applied { entries })
    }

    /// Offer every staged chunk whose accounts are now restored; returns how many were
    /// applied.
    pub fn retry_staged(&self) -> Result<usize, ChunkError> {
        // Each staged chunk is claimed under the lock, by one caller. Several workers call
        // this at once (after each chunk they apply): when the choice was made under the
        // lock but the file read after it, two of them took the same chunk, the first read
        // and deleted its file (`remove`) and the second failed on the vanished file
        // ("staging …: No such file or directory"), which ended the restore unfinished.
        let staged: Vec<(usize, PathBuf)> = self
            .staging
            .lock()
            .files
            .iter_mut()
            .filter(|(_, f)| !f.claimed && f.waits_for.iter().all(|d| self.is_done(*d)))
            .map(|(i, f)| {
                f.claimed = true;
                (*i, f.path.clone())
            })
            .collect();
        let mut applied = 0;
        for (n, &(i, ref path)) in staged.iter().enumerate() {
            let read = std::fs::read(path);
            self.staging.lock().remove(i);
            let bytes = match read {
                Ok(bytes) => bytes,
                // Applied meanwhile through an offer of the same bytes, which deleted it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.is_done(i) => continue,
                Err(source) => {
                    self.unclaim(&staged[n + 1..]);
                    return Err(ChunkError::Staging { path: path.clone(), source });
                }
            };
            let offered = self.offer(i, &bytes);
            if offered.is_err() {
                self.unclaim(&staged[n + 1..]);
            }
            match offered? {
                Offered::Applied { .. } => applied += 1,
                Offered::Staged | Offered::AlreadyDone => {}
            }
        }
        Ok(applied)
    }

    /// Give back the claims of staged chunks a failed [`Restorer::retry_staged`] did not
    /// get to, so that a later call retries them.
    fn unclaim(&self, staged: &[(usize, PathBuf)]) {
        let mut staging = self.staging.lock();
        for (i, _) in staged {
            if let Some(f) = staging.files.get_mut(i) {
                f.claimed = false;
            }
        }
    }

    /// Make the checkpoint's block the database's head, once every chunk is in, the
    /// storage bookkeeping balances and the chunks bear out the manifest's flat bytes and
    /// boundary rule.
    pub fn finish(self) -> Result<Trusted, RestoreError> {
        let missing = self.done.len() - self.restored();
        if missing > 0 {
            return Err(RestoreError::Incomplete { missing });
        }
        let c = *self.counts.lock();
        if c.accounts_with_storage != c.storage_tries {
            return Err(RestoreError::StorageMismatch {
                accounts: c.accounts_with_storage,
                tries: c.storage_tries,
            });
        }
        let n = self.manifest.chunks.len();
        let bytes = self.bytes.lock().clone();
        check_ends(&self.manifest, &bytes[..n]).map_err(RestoreError::Misstated)?;
        check_code_ends(&self.manifest, &bytes[n..]).map_err(RestoreError::Misstated)?;
        self.check_code_refs()?;
        let (block, root) = (self.manifest.block, self.manifest.root);
        self.restore.finish(block, root)?;
        self.staging.into_inner().close();
        Ok(Trusted { block, root })
    }

    /// The root segment `s` verifies against, or the chunks that must be restored first
    /// (those that prove the main-trie entry committing to its trie).
    #[allow(clippy::type_complexity)]
    fn trie_root(
        &self,
        index: usize,
        chunk: &Chunk<'_>,
        s: &Segment<'_>,
    ) -> Result<Result<H256, Vec<usize>>, ChunkError> {
        let TrieId::Storage(account) = s.trie else { return Ok(Ok(self.manifest.root)) };
        let layout = self.manifest.layout;
        let root = match binding_place(layout, &account) {
            Place::Key(key) => match self.root_at_key(index, chunk, &account, &key)? {
                Ok(root) => root,
                Err(deps) => return Ok(Err(deps)),
            },
            Place::Range(start, end) => {
                // The entry lies in this chunk's own main-trie segment (verified with it)...
                let own = chunk.segments.first().filter(|m| m.trie == TrieId::Main).and_then(|m| {
                    m.entries
                        .iter()
                        .filter_map(|(k, v)| binding(layout, k, v))
                        .find(|(t, _)| *t == account)
                        .map(|(_, r)| r)
                });
                match own {
                    Some(r) => Some(r),
                    None => {
                        // ... or in a restored chunk holding part of the range.
                        let waiting = self.waiting_for(index, &start, &end);
                        if !waiting.is_empty() {
                            return Ok(Err(waiting));
                        }
                        self.ranged.lock().get(&account).copied()
                    }
                }
            }
        };
        root.map(Ok).ok_or_else(|| ChunkError::Mismatch { index, what: unbound(layout, &account) })
    }

    /// The root the main-trie entry under `key` commits to storage trie `account`, or
    /// the chunks that must be restored first.
    #[allow(clippy::type_complexity)]
    fn root_at_key(
        &self,
        index: usize,
        chunk: &Chunk<'_>,
        account: &H256,
        key: &[u8],
    ) -> Result<Result<Option<H256>, Vec<usize>>, ChunkError> {
        let own = chunk.segments.first().filter(|m| {
            m.trie == TrieId::Main && key >= m.start && m.last().is_none_or(|l| key <= l)
        });
        let value = match own {
            // The key lies in this chunk's own main-trie range (verified with it).
            Some(main) => main
                .entries
                .binary_search_by(|(k, _)| (*k).cmp(key))
                .ok()
                .map(|i| main.entries[i].1.to_vec()),
            None => {
                let mut flat = TrieId::Main.prefix();
                flat.extend_from_slice(key);
                let j = self.manifest.chunks.partition_point(|c| c.last < flat);
                let deps = [j.checked_sub(1), (j < self.manifest.chunks.len()).then_some(j)];
                let waiting: Vec<usize> = deps
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|d| *d != index && !self.is_done(*d))
                    .collect();
                if !waiting.is_empty() {
                    return Ok(Err(waiting));
                }
                self.writer.get(&TrieId::Main, key)?
            }
        };
        let bound = value.and_then(|v| binding(self.manifest.layout, key, &v));
        Ok(Ok(bound.filter(|(t, _)| t == account).map(|(_, r)| r)))
    }

    /// The chunks other than `index` not restored yet that hold main-trie keys in
    /// `[start, end)`: chunk `j` holds the keys after chunk `j - 1`'s last one up to its
    /// own last one.
    fn waiting_for(&self, index: usize, start: &[u8], end: &[u8]) -> Vec<usize> {
        let flat = |k: &[u8]| [&TrieId::Main.prefix()[..], k].concat();
        let (start, end) = (flat(start), flat(end));
        let first = self.manifest.chunks.partition_point(|c| c.last < start);
        let last = self.manifest.chunks.partition_point(|c| c.last < end);
        (first..=last.min(self.manifest.chunks.len() - 1))
            .filter(|d| *d != index && !self.is_done(*d))
            .collect()
    }

    /// Verify every segment against its root and write the chunk in one batch.
    fn apply(
        &self,
        index: usize,
        chunk: &Chunk<'_>,
        roots: &[H256],
        bytes: ChunkBytes,
    ) -> Result<u64, ChunkError> {
        let layout = self.manifest.layout;
        // Where this layout's bindings lie (the same for every trie).
        let ranged = matches!(binding_place(layout, &H256::default()), Place::Range(..));
        let mut batch = self.writer.batch()?;
        let mut counts = Counts::default();
        let mut entries = 0u64;
        let mut bound = Vec::new();
        let mut codes = std::collections::BTreeSet::new();
        let code_refs = self.manifest.has_code_list();
        for (s, root) in chunk.segments.iter().zip(roots) {
            let mut sink = batch.nodes(s.trie);
            verify_range(layout, root, s, &mut sink).map_err(|source| ChunkError::Proof {
                index,
                trie: s.trie,
                source,
            })?;
            sink.finish()?;
            for (k, v) in &s.entries {
                batch.put_flat(&s.trie, k, v)?;
            }
            entries += s.entries.len() as u64;
            match s.trie {
                TrieId::Main => {
                    for (k, v) in &s.entries {
                        if code_refs {
                            codes.extend(code_ref(layout, k, v));
                        }
                        if let Some((trie, root)) = binding(layout, k, v) {
                            counts.accounts_with_storage += 1;
                            if ranged {
                                batch.put_progress(&binding_name(&trie), &root.0);
                                bound.push((trie, root));
                            }
                        }
                    }
                }
                TrieId::Storage(_) => {
                    batch.put_root(&s.trie, root);
                    counts.storage_tries += u64::from(s.start.is_empty());
                }
            }
        }
        for hash in &codes {
            batch.put_progress(&code_ref_name(hash), &[]);
        }
        batch.put_progress(&progress_name(index), &counts.encode(bytes));
        // Two threads verifying the same chunk write the same bytes; count it once.
        self.writer.write(batch)?;
        // Known before the chunk is marked done: a storage chunk waiting for it reads them.
        self.ranged.lock().extend(bound);
        self.bytes.lock()[index] = bytes;
        if !self.done[index].swap(true, Ordering::AcqRel) {
            let mut c = self.counts.lock();
            c.accounts_with_storage += counts.accounts_with_storage;
            c.storage_tries += counts.storage_tries;
        }
        Ok(entries)
    }
}

/// The code chunks: their writes, and the check of the codes accounts refer to.
impl Restorer<'_> {
    /// Verify code chunk `j` (chunk `index`) and write its codes in one batch; returns
    /// how many.
    fn apply_code(&self, index: usize, j: usize, bytes: &[u8]) -> Result<u64, ChunkError> {
        let chunk =
            CodeChunk::decode(bytes).map_err(|source| ChunkError::Decode { index, source })?;
        let weight = check_code_chunk(&self.manifest, j, &chunk)
            .map_err(|source| ChunkError::Code { index, source })?;
        let mut batch = self.writer.batch()?;
        for (hash, code) in &chunk.codes {
            batch.put_code(hash, code);
        }
        batch.put_progress(&progress_name(index), &Counts::default().encode(weight));
        self.writer.write(batch)?;
        self.bytes.lock()[index] = weight;
        self.done[index].store(true, Ordering::Release);
        Ok(chunk.codes.len() as u64)
    }

    /// Every code a restored account refers to (its progress record) is restored.
    fn check_code_refs(&self) -> Result<(), RestoreError> {
        let (mut missing, mut first) = (0u64, None);
        for (name, _) in self.restore.progress().map_err(BulkError::from)? {
            let Some(hash) = name.strip_prefix(b"n").and_then(H256::from_slice) else {
                continue;
            };
            if !self.writer.has_code(&hash).map_err(BulkError::from)? {
                missing += 1;
                first.get_or_insert(hash);
            }
        }
        match first {
            None => Ok(()),
            Some(first) => Err(RestoreError::CodeMissing { missing, first }),
        }
    }
}

/// Verify segment `s` against `root` in `layout` ([`trie::verify_key_range`]), reporting
/// the nodes it establishes to `sink`.
pub(crate) fn verify_range<S: NodeSink>(
    layout: LayoutName,
    root: &H256,
    s: &Segment<'_>,
    sink: &mut S,
) -> Result<trie::RangeStats, ProofError> {
    layout.dispatch(VerifyRange { root, s, sink })
}

/// [`verify_range`] in the layout it is dispatched to.
struct VerifyRange<'a, 'b, S> {
    root: &'a H256,
    s: &'a Segment<'b>,
    sink: &'a mut S,
}

impl<S: NodeSink> WithLayout for VerifyRange<'_, '_, S> {
    type Output = Result<trie::RangeStats, ProofError>;
    fn run<L: Layout>(self) -> Self::Output {
        let s = self.s;
        trie::verify_key_range::<L, _, _, _>(
            self.root,
            s.start,
            s.last(),
            &s.entries,
            &s.proof,
            self.sink,
        )
    }
}

/// The chunk's length against the manifest's: the digest matched, so a difference is the
/// manifest's fault (a manifest that misstates a size is refused, not believed).
pub(crate) fn check_len(len: u64, index: usize, bytes: &[u8]) -> Result<(), ChunkError> {
    if bytes.len() as u64 != len {
        let what = format!("{} bytes, the manifest says {len}", bytes.len());
        return Err(ChunkError::Mismatch { index, what });
    }
    Ok(())
}

/// Check that `chunk` is the one the manifest describes at `index`, cut inside by its rule
/// ([`check_cut`]); returns what its entries weigh.
pub(crate) fn check_fit(
    manifest: &Manifest,
    index: usize,
    chunk: &Chunk<'_>,
) -> Result<ChunkBytes, String> {
    let info = &manifest.chunks[index];
    if chunk.block != manifest.block || chunk.root != manifest.root {
        return Err(format!("belongs to block {} root {}", chunk.block, chunk.root));
    }
    let entries: usize = chunk.segments.iter().map(|s| s.entries.len()).sum();
    if entries as u64 != info.entries {
        return Err(format!("{entries} entries, the manifest says {}", info.entries));
    }
    let flat = |s: &Segment<'_>, k: &[u8]| {
        let mut f = s.trie.prefix();
        f.extend_from_slice(k);
        f
    };
    let first = chunk.segments.iter().find_map(|s| s.entries.first().map(|(k, _)| flat(s, k)));
    let last = chunk.segments.iter().rev().find_map(|s| s.entries.last().map(|(k, _)| flat(s, k)));
    if first.unwrap_or_default() != info.first || last.unwrap_or_default() != info.last {
        return Err("first or last key differs from the manifest".into());
    }
    let n = chunk.segments.len();
    for (i, s) in chunk.segments.iter().enumerate() {
        if i + 1 < n && !s.open {
            return Err("a segment before the last does not end its trie".into());
        }
        if i > 0 && !s.start.is_empty() {
            return Err("a segment after the first does not start its trie".into());
        }
        if s.entries.is_empty() && !(manifest.entries == 0 && s.trie == TrieId::Main) {
            return Err("a segment without entries".into());
        }
    }
    if chunk.segments.last().is_some_and(|s| s.open) != info.ends_trie {
        return Err("its last segment's end differs from the manifest".into());
    }
    let s0 = &chunk.segments[0];
    let expected_start = match index.checked_sub(1).map(|p| &manifest.chunks[p]) {
        None => (s0.trie == TrieId::Main).then(Vec::new),
        Some(prev) => {
            let (pt, pk) = TrieId::split(&prev.last)
                .ok_or_else(|| "the previous chunk's last key is malformed".to_string())?;
            match prev.ends_trie {
                true => (s0.trie > pt).then(Vec::new),
                false => (s0.trie == pt).then(|| successor(pk)),
            }
        }
    };
    match expected_start {
        Some(start) if start == s0.start => check_cut(&manifest.rule, chunk),
        _ => Err("does not start where the previous chunk ends".into()),
    }
}

impl Staging {
    /// Take up the chunks staged in the ([`claim`]ed) directory before that are still
    /// wanted; the other staged chunks and temporary files are removed.
    fn open(
        opts: &RestoreOptions,
        manifest: &Manifest,
        done: &[AtomicBool],
    ) -> Result<Staging, RestoreError> {
        let dir = opts.staging_dir.clone();
        let io = |source| RestoreError::Staging { path: dir.clone(), source };
        let mut s = Staging {
            dir: dir.clone(),
            max: opts.staging_bytes_max,
            bytes: 0,
            files: BTreeMap::new(),
        };
        for e in std::fs::read_dir(&dir).map_err(io)? {
            let e = e.map_err(io)?;
            let path = e.path();
            // Invariant: only regular files named as staged chunks are ever removed.
            let Some(name) = staged_name(&path) else { continue };
            if !e.file_type().map_err(io)?.is_file() {
                continue;
            }
            let keep = match name {
                StagedName::Chunk(i, d) => (manifest.chunk_name(i).is_some_and(|(c, _)| c == d)
                    && !done[i].load(Ordering::Relaxed))
                .then_some(i),
                StagedName::Tmp => None,
            };
            match keep {
                Some(i) => {
                    let len = e.metadata().map_err(io)?.len();
                    s.bytes += len;
                    s.files.insert(i, Staged { path, len, waits_for: Vec::new(), claimed: false });
                }
                None => std::fs::remove_file(&path).map_err(io)?,
            }
        }
        Ok(s)
    }

    /// Remove what the restore staged (nothing is left once every chunk is in, but for a
    /// temporary file of a failed write), then the marker, then the directory if it is
    /// empty: anything else in it stays. Best effort: the restore is complete.
    fn close(self) {
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let file = e.file_type().is_ok_and(|t| t.is_file());
                if file && staged_name(&e.path()).is_some() {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let _ = std::fs::remove_file(self.dir.join(STAGING_MARKER));
        let _ = std::fs::remove_dir(&self.dir);
    }

    fn put(&mut self, index: usize, bytes: &[u8], waits_for: Vec<usize>) -> Result<(), ChunkError> {
        if self.files.contains_key(&index) {
            return Ok(());
        }
        if self.bytes + bytes.len() as u64 > self.max {
            return Err(ChunkError::StagingFull { index });
        }
        let path =
            self.dir.join(format!("{index}-{}", hex::encode(ChunkHash::Blake3.digest(bytes).0)));
        let tmp = path.with_extension("tmp");
        let io = |source| ChunkError::Staging { path: path.clone(), source };
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        self.bytes += bytes.len() as u64;
        self.files
            .insert(index, Staged { path, len: bytes.len() as u64, waits_for, claimed: false });
        Ok(())
    }

    fn remove(&mut self, index: usize) {
        if let Some(f) = self.files.remove(&index) {
            self.bytes -= f.len;
            let _ = std::fs::remove_file(f.path);
        }
    }
}

/// A file name a restore gives what it stages.
enum StagedName {
    /// `<index>-<digest hex>`: a staged chunk.
    Chunk(usize, H256),
    /// `<index>-<digest hex>.tmp`: one being written.
    Tmp,
}

/// What the file at `path` is, when its name is one [`Staging::put`] gives.
fn staged_name(path: &Path) -> Option<StagedName> {
    let name = path.file_name()?.to_str()?;
    let (stem, tmp) = name.strip_suffix(".tmp").map_or((name, false), |stem| (stem, true));
    let (i, d) = stem.split_once('-')?;
    // Exactly as `put` spells them: a decimal index, 64 hex digits.
    if d.len() != 64 || i.is_empty() || !i.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (i, d) = (i.parse().ok()?, crate::dir::parse_id(d)?);
    Some(if tmp { StagedName::Tmp } else { StagedName::Chunk(i, d) })
}

/// Make `dir` a restore's staging directory, or refuse it. A marked one ([`STAGING_MARKER`])
/// is used as it is (a restore resumed). A new or empty one is marked. So is one holding
/// nothing but staged chunks (a restore resumed from one by a version that wrote no
/// marker): nothing else is there to lose. Anything else is someone's directory
/// ([`RestoreError::StagingForeign`]). A database directory is never empty, so staging
/// in it (or around it) is refused unless marked, and then only staged files are removed.
fn claim(dir: &Path) -> Result<(), RestoreError> {
    let io = |source| RestoreError::Staging { path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let marker = dir.join(STAGING_MARKER);
    if std::fs::symlink_metadata(&marker).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    for e in std::fs::read_dir(dir).map_err(io)? {
        let e = e.map_err(io)?;
        let staged = e.file_type().is_ok_and(|t| t.is_file()) && staged_name(&e.path()).is_some();
        if !staged {
            return Err(RestoreError::StagingForeign { path: dir.to_path_buf() });
        }
    }
    std::fs::write(&marker, b"staging directory of an Arbor checkpoint restore\n").map_err(io)
}
