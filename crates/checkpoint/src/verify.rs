//! Verifying a whole checkpoint without a database (`arbor checkpoint verify`): every
//! chunk in key order, with the checks a restore makes, in the manifest's layout; storage
//! tries verify against the roots the main-trie entries seen in earlier (or the same)
//! chunks commit to (`keys::binding`), kept in memory. At the end, like a restore, the
//! chunks must bear out the manifest's flat bytes and rule.

use std::collections::HashMap;

use state::{TrieId, H256};
use trie::keccak256;

use crate::boundary::check_ends;
use crate::format::{Chunk, Manifest, Segment};
use crate::keys::{binding, unbound};
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
    /// Chunks.
    pub chunks: usize,
    /// Entries.
    pub entries: u64,
    /// Storage tries.
    pub storage_tries: u64,
    /// Chunk bytes.
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
    bound.finish()?;
    check_ends(&m, &cuts).map_err(RestoreError::Misstated)?;
    Ok(VerifySummary {
        layout: m.layout.to_string(),
        block: m.block,
        root: format!("{}", m.root),
        chunks: m.chunks.len(),
        entries: m.entries,
        storage_tries: bound.tries,
        bytes: m.chunk_bytes,
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

/// Chunk `index` of `m` from `source`, once its bytes hash to the manifest's digest and
/// are as long as it says.
fn fetch_chunk(source: &dyn Source, m: &Manifest, index: usize) -> Result<Vec<u8>, VerifyError> {
    let info = &m.chunks[index];
    let bytes = source
        .chunk(&info.digest, info.len)
        .map_err(|source| VerifyError::Source { what: format!("chunk {index}"), source })?;
    let actual = m.chunk_hash.digest(&bytes);
    if actual != info.digest {
        return Err(Box::new(ChunkError::Digest { index, expected: info.digest, actual }).into());
    }
    check_len(info.len, index, &bytes).map_err(Box::new)?;
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
