//! Verifying a whole checkpoint without a database (`arbor checkpoint verify`): every
//! chunk in key order, with the checks a restore makes, in the manifest's layout; storage
//! tries verify against the roots the main-trie entries seen in earlier (or the same)
//! chunks commit to (`keys::binding`), kept in memory. Then the code chunks, each code
//! against its hash. At the end, like a restore, the chunks must bear out the manifest's
//! flat and code bytes and rule, and every code an account refers to (`keys::code_ref`,
//! the set of them kept in memory) must have been in a code chunk (version 3; versions 1
//! and 2 carry no code and check none).

use std::collections::{HashMap, HashSet};

use state::{TrieId, H256};
use trie::keccak256;

use crate::boundary::{check_ends, ChunkBytes};
use crate::code::{check_code_chunk, check_code_ends, CodeChunk};
use crate::format::{Chunk, Manifest, Segment};
use crate::keys::{binding, code_ref, unbound};
use crate::restore::{check_fit, check_len, verify_range, ChunkError, RestoreError, Trusted};
use crate::source::{Source, SourceError};

/// What a verified checkpoint holds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifySummary {
    /// The trie layout.
    pub layout: String,
    /// Block.
    pub block: u64,
    /// State root, hex.
    pub root: String,
    /// Chunks (state and code).
    pub chunks: usize,
    /// Entries.
    pub entries: u64,
    /// Storage tries.
    pub storage_tries: u64,
    /// Contract codes.
    pub codes: u64,
    /// Chunk bytes (state and code).
    pub bytes: u64,
}

/// Why a checkpoint does not verify.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The source failed.
    #[error("{what}: {source}")]
    Source {
        /// What was fetched.
        what: String,
        /// Why it failed.
        source: SourceError,
    },
    /// The manifest does not hash to its id.
    #[error("the manifest does not hash to its id {0}")]
    ManifestId(H256),
    /// The manifest is bad or for another block.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// A chunk is bad.
    #[error(transparent)]
    Chunk(#[from] Box<ChunkError>),
}

/// Verify the checkpoint `id` served by `source` against `trusted`; `progress` gets the
/// number of chunks verified.
pub fn verify_checkpoint(
    source: &dyn Source,
    id: &H256,
    trusted: Trusted,
    progress: &dyn Fn(usize),
) -> Result<VerifySummary, VerifyError> {
    let bytes = source
        .manifest(id)
        .map_err(|source| VerifyError::Source { what: format!("manifest {id}"), source })?;
    verify_manifest(source, id, &bytes, trusted, progress)
}

/// [`verify_checkpoint`] with the manifest's bytes already fetched (say, by
/// [`crate::find_manifests`]): they must hash to `id`; the chunks come from `source`.
pub fn verify_manifest(
    source: &dyn Source,
    id: &H256,
    bytes: &[u8],
    trusted: Trusted,
    progress: &dyn Fn(usize),
) -> Result<VerifySummary, VerifyError> {
    let m = trusted_manifest(id, bytes, trusted)?;
    let mut bound = Bindings::default();
    let mut cuts = Vec::with_capacity(m.chunks.len());
    for index in 0..m.chunks.len() {
        let bytes = fetch_chunk(source, &m, index)?;
        let chunk = Chunk::decode(&bytes)
            .map_err(|source| Box::new(ChunkError::Decode { index, source }))?;
        let cut = check_fit(&m, index, &chunk)
            .map_err(|what| Box::new(ChunkError::Mismatch { index, what }))?;
        cuts.push(cut);
        for s in &chunk.segments {
            bound.verify(&m, index, s)?;
        }
        progress(index + 1);
    }
    let code_cuts = verify_code(source, &m, &mut bound.code_refs, progress)?;
    bound.finish()?;
    check_ends(&m, &cuts).map_err(RestoreError::Misstated)?;
    check_code_ends(&m, &code_cuts).map_err(RestoreError::Misstated)?;
    Ok(VerifySummary {
        layout: m.layout.to_string(),
        block: m.block,
        root: format!("{}", m.root),
        chunks: m.chunk_count(),
        entries: m.entries,
        storage_tries: bound.tries,
        codes: m.code.entries,
        bytes: m.chunk_bytes + m.code.chunk_bytes,
    })
}

/// The manifest `bytes`, once they hash to `id`, decode and are of the trusted block and
/// root.
fn trusted_manifest(id: &H256, bytes: &[u8], trusted: Trusted) -> Result<Manifest, VerifyError> {
    if keccak256(bytes) != *id {
        return Err(VerifyError::ManifestId(*id));
    }
    let m = Manifest::decode(bytes).map_err(RestoreError::from)?;
    if (m.block, m.root) != (trusted.block, trusted.root) {
        return Err(RestoreError::OtherCheckpoint {
            block: trusted.block,
            root: trusted.root,
            found_block: m.block,
            found_root: m.root,
        }
        .into());
    }
    Ok(m)
}

/// Verify the code chunks of `m` (chunks `m.chunks.len()..`; `progress` goes on
/// counting), striking each code from `refs`, the codes accounts refer to; returns what
/// each chunk's codes weigh.
fn verify_code(
    source: &dyn Source,
    m: &Manifest,
    refs: &mut HashSet<H256>,
    progress: &dyn Fn(usize),
) -> Result<Vec<ChunkBytes>, VerifyError> {
    let mut cuts = Vec::with_capacity(m.code.chunks.len());
    for j in 0..m.code.chunks.len() {
        let index = m.chunks.len() + j;
        let bytes = fetch_chunk(source, m, index)?;
        let chunk = CodeChunk::decode(&bytes)
            .map_err(|source| Box::new(ChunkError::Decode { index, source }))?;
        let cut = check_code_chunk(m, j, &chunk)
            .map_err(|source| Box::new(ChunkError::Code { index, source }))?;
        cuts.push(cut);
        for (hash, _) in &chunk.codes {
            refs.remove(hash);
        }
        progress(index + 1);
    }
    // The one hash the report names: the least, so that it does not depend on the set.
    if let Some(first) = refs.iter().min() {
        let missing = refs.len() as u64;
        return Err(RestoreError::CodeMissing { missing, first: *first }.into());
    }
    Ok(cuts)
}

/// Chunk `index` of `m` (state chunks, then code chunks) from `source`, once its bytes
/// hash to the manifest's digest and are as long as it says.
fn fetch_chunk(source: &dyn Source, m: &Manifest, index: usize) -> Result<Vec<u8>, VerifyError> {
    let (expected, len) = m
        .chunk_name(index)
        .ok_or_else(|| Box::new(ChunkError::Index { index, len: m.chunk_count() }))?;
    let bytes = source
        .chunk(&expected, len)
        .map_err(|source| VerifyError::Source { what: format!("chunk {index}"), source })?;
    let actual = m.chunk_hash.digest(&bytes);
    if actual != expected {
        return Err(Box::new(ChunkError::Digest { index, expected, actual }).into());
    }
    check_len(len, index, &bytes).map_err(Box::new)?;
    Ok(bytes)
}

/// The storage tries the chunks verified so far commit to, in key order: main-trie
/// segments add accounts with storage, each storage trie's segments verify against its
/// account's root until its last one.
#[derive(Default)]
struct Bindings {
    /// Account → the storage root its value commits to, until its trie's last segment.
    storage: HashMap<H256, H256>,
    /// Storage tries begun (segments that start their trie).
    tries: u64,
    /// The codes accounts refer to.
    code_refs: HashSet<H256>,
}

impl Bindings {
    /// Verify segment `s` of chunk `index` against its trie's root, then take in what it
    /// binds (the accounts of a main-trie segment) or begins (a storage trie).
    fn verify(
        &mut self,
        m: &Manifest,
        index: usize,
        s: &Segment<'_>,
    ) -> Result<(), Box<ChunkError>> {
        let root = self.root_of(m, index, s)?;
        verify_range(m.layout, &root, s, &mut ())
            .map_err(|source| Box::new(ChunkError::Proof { index, trie: s.trie, source }))?;
        match s.trie {
            TrieId::Main => {
                for (k, v) in &s.entries {
                    if m.has_code_list() {
                        self.code_refs.extend(code_ref(m.layout, k, v));
                    }
                    if let Some((h, root)) = binding(m.layout, k, v) {
                        self.storage.insert(h, root);
                    }
                }
            }
            TrieId::Storage(_) => self.tries += u64::from(s.start.is_empty()),
        }
        Ok(())
    }

    /// The root segment `s` must prove against: the manifest's for the main trie, its
    /// account's for a storage trie (forgotten at the trie's last segment: every later one
    /// would be unbound).
    fn root_of(
        &mut self,
        m: &Manifest,
        index: usize,
        s: &Segment<'_>,
    ) -> Result<H256, Box<ChunkError>> {
        let TrieId::Storage(account) = s.trie else {
            return Ok(m.root);
        };
        let Some(root) = self.storage.get(&account).copied() else {
            let what = unbound(m.layout, &account);
            return Err(Box::new(ChunkError::Mismatch { index, what }));
        };
        if s.open {
            self.storage.remove(&account);
        }
        Ok(root)
    }

    /// Every account with storage met its trie, all chunks verified.
    fn finish(&self) -> Result<(), RestoreError> {
        if self.storage.is_empty() {
            return Ok(());
        }
        Err(RestoreError::StorageMismatch {
            accounts: self.storage.len() as u64 + self.tries,
            tries: self.tries,
        })
    }
}
