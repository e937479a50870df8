//! Verifying a whole checkpoint without a database (`arbor checkpoint verify`): every
//! chunk in key order, with the checks a restore makes; storage tries verify against the
//! storage roots of the accounts seen in earlier (or the same) chunks, kept in memory.

use std::collections::HashMap;

use trie::{keccak256, EthLayout, TrieId, H256};

use crate::format::{Chunk, Manifest};
use crate::restore::{check_fit, check_len, storage_root_of, ChunkError, RestoreError, Trusted};
use crate::source::{Source, SourceError};

/// What a verified checkpoint holds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifySummary {
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
    let mut storage: HashMap<H256, H256> = HashMap::new();
    let mut tries = 0u64;
    for (index, info) in m.chunks.iter().enumerate() {
        let bytes = source
            .chunk(&info.digest, info.len)
            .map_err(|source| VerifyError::Source { what: format!("chunk {index}"), source })?;
        let actual = keccak256(&bytes);
        if actual != info.digest {
            return Err(
                Box::new(ChunkError::Digest { index, expected: info.digest, actual }).into()
            );
        }
        check_len(info.len, index, &bytes).map_err(Box::new)?;
        let chunk = Chunk::decode(&bytes)
            .map_err(|source| Box::new(ChunkError::Decode { index, source }))?;
        check_fit(&m, index, &chunk)
            .map_err(|what| Box::new(ChunkError::Mismatch { index, what }))?;
        for s in &chunk.segments {
            let root = match s.trie {
                TrieId::Main => m.root,
                TrieId::Storage(account) => {
                    let Some(r) = storage.get(&account).copied() else {
                        let what = format!("storage trie {account} has no account with storage");
                        return Err(Box::new(ChunkError::Mismatch { index, what }).into());
                    };
                    // The trie's last segment: every later one would be unbound.
                    if s.open {
                        storage.remove(&account);
                    }
                    r
                }
            };
            trie::verify_key_range::<EthLayout, _, _, _>(
                &root,
                s.start,
                s.last(),
                &s.entries,
                &s.proof,
                &mut (),
            )
            .map_err(|source| Box::new(ChunkError::Proof { index, trie: s.trie, source }))?;
            match s.trie {
                TrieId::Main => {
                    for (k, v) in &s.entries {
                        if let (Some(root), Some(h)) = (storage_root_of(v), H256::from_slice(k)) {
                            storage.insert(h, root);
                        }
                    }
                }
                TrieId::Storage(_) => tries += u64::from(s.start.is_empty()),
            }
        }
        progress(index + 1);
    }
    if !storage.is_empty() {
        return Err(RestoreError::StorageMismatch {
            accounts: storage.len() as u64 + tries,
            tries,
        }
        .into());
    }
    Ok(VerifySummary {
        block: m.block,
        root: format!("{}", m.root),
        chunks: m.chunks.len(),
        entries: m.entries,
        storage_tries: tries,
        bytes: m.chunk_bytes,
    })
}
