//! S3-compatible object storage (through the `object_store` crate): a restore source, and
//! `push`, which uploads a local checkpoint.
//!
//! Objects use the layout of `dir.rs` under an optional prefix. Chunks are immutable and
//! uploaded only when absent (a HEAD first, then a create-only PUT); the manifest goes
//! last, create-only, after every chunk upload has completed, so a listed manifest never
//! names a missing chunk and a second push uploads nothing.

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, PutMode, PutOptions, PutPayload};
use state::H256;

use crate::dir::{chunk_path, manifest_path, parse_id, CheckpointDir, DirError};
use crate::format::{ChunkHash, DecodeError, Manifest, MANIFEST_BYTES_MAX};
use crate::source::{Source, SourceError};

/// Uploads in flight at once during a push.
const PUSH_CONCURRENCY: usize = 8;

/// A bucket (and prefix) of an S3-compatible store.
pub struct S3Store {
    name: String,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// The local checkpoint is missing or damaged.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// No manifest with this id in the directory.
    #[error("no checkpoint {0} in the directory")]
    NoCheckpoint(H256),
    /// The local manifest does not decode.
    #[error("manifest: {0}")]
    Manifest(#[from] DecodeError),
    /// A local chunk is missing or does not hash to its name.
    #[error("chunk {0}: missing or damaged in the directory")]
    Chunk(H256),
    /// The object store failed.
    #[error("object store: {0}")]
    Store(#[source] object_store::Error),
}

/// What a push did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PushReport {
    /// Chunks in the checkpoint.
    pub chunks: usize,
    /// Chunks uploaded (the others were there).
    pub uploaded: usize,
    /// Bytes uploaded (chunks and manifest).
    pub uploaded_bytes: u64,
    /// The manifest was uploaded (false: it was there).
    pub manifest_uploaded: bool,
}

impl S3Store {
    /// `bucket[/prefix]`, with the endpoint, region and credentials from the `AWS_*`
    /// environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_REGION`, `AWS_ALLOW_HTTP`), path-style requests.
    pub fn from_env(bucket_and_prefix: &str, timeout: Duration) -> Result<S3Store, SourceError> {
        let (bucket, prefix) = match bucket_and_prefix.split_once('/') {
            Some((b, p)) => (b, p.trim_matches('/')),
            None => (bucket_and_prefix, ""),
        };
        if bucket.is_empty() {
            return Err(SourceError::Url(format!("s3://{bucket_and_prefix}")));
        }
        // Client options replace the ones `from_env` read: carry AWS_ALLOW_HTTP over.
        let allow_http = std::env::var("AWS_ALLOW_HTTP")
            .is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        let options = ClientOptions::new()
            .with_allow_http(allow_http)
            .with_timeout(timeout)
            .with_connect_timeout(timeout.min(Duration::from_secs(10)));
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(false)
            .with_client_options(options)
            .build()
            .map_err(|e| SourceError::ObjectStore(Box::new(e)))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("arbor-s3")
            .enable_all()
            .build()
            .map_err(SourceError::Io)?;
        Ok(S3Store {
            name: format!("s3://{bucket_and_prefix}"),
            store: Arc::new(store),
            prefix: prefix.to_string(),
            rt,
        })
    }

    fn path(&self, rel: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(rel)
        } else {
            ObjectPath::from(format!("{}/{rel}", self.prefix))
        }
    }

    async fn get_capped(&self, rel: &str, max: u64) -> Result<Vec<u8>, SourceError> {
        let r = self.store.get(&self.path(rel)).await.map_err(store_error)?;
        if r.meta.size > max {
            return Err(SourceError::TooLarge { max });
        }
        let bytes = r.bytes().await.map_err(store_error)?;
        if bytes.len() as u64 > max {
            return Err(SourceError::TooLarge { max });
        }
        Ok(bytes.to_vec())
    }

    /// Upload the checkpoint `id` of `dir` (see the module docs). `progress` counts the
    /// chunks handled.
    pub fn push(
        &self,
        dir: &CheckpointDir,
        id: &H256,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<PushReport, PushError> {
        let bytes = dir.manifest_bytes(id)?.ok_or(PushError::NoCheckpoint(*id))?;
        let manifest = Manifest::decode(&bytes)?;
        let done = std::sync::atomic::AtomicUsize::new(0);
        self.rt.block_on(async {
            let hash = manifest.chunk_hash;
            let uploads = futures::stream::iter(manifest.chunk_names().map(|(digest, len)| {
                let done = &done;
                async move {
                    let up = self.push_chunk(dir, hash, &digest, len).await;
                    progress(done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1);
                    up
                }
            }))
            .buffer_unordered(PUSH_CONCURRENCY);
            let sizes: Vec<Option<u64>> = uploads.try_collect().await?;
            let mut report = PushReport { chunks: manifest.chunk_count(), ..PushReport::default() };
            for s in sizes.into_iter().flatten() {
                report.uploaded += 1;
                report.uploaded_bytes += s;
            }
            // Every chunk is in the bucket: now the manifest, which makes them visible.
            if self.put_absent(&manifest_path(id), bytes.clone()).await? {
                report.manifest_uploaded = true;
                report.uploaded_bytes += bytes.len() as u64;
            }
            Ok(report)
        })
    }

    /// Upload one chunk unless present; its size when uploaded.
    async fn push_chunk(
        &self,
        dir: &CheckpointDir,
        hash: ChunkHash,
        digest: &H256,
        len: u64,
    ) -> Result<Option<u64>, PushError> {
        let rel = chunk_path(digest);
        match self.store.head(&self.path(&rel)).await {
            Ok(meta) if meta.size == len => return Ok(None),
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(PushError::Store(e)),
        }
        let bytes = dir.chunk(digest)?.ok_or(PushError::Chunk(*digest))?;
        if hash.digest(&bytes) != *digest {
            return Err(PushError::Chunk(*digest));
        }
        let n = bytes.len() as u64;
        Ok(self.put_absent(&rel, bytes).await?.then_some(n))
    }

    /// A create-only PUT; false when the object exists.
    async fn put_absent(&self, rel: &str, bytes: Vec<u8>) -> Result<bool, PushError> {
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match self.store.put_opts(&self.path(rel), PutPayload::from(bytes), opts).await {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(false),
            Err(e) => Err(PushError::Store(e)),
        }
    }
}

/// A failed request as a source's error. A timeout is told by the error's text:
/// `object_store` 0.12 exposes neither its retry error nor the client's timeout flag.
fn store_error(e: object_store::Error) -> SourceError {
    match e {
        object_store::Error::NotFound { .. } => SourceError::NotFound,
        e if says_timeout(&e) => SourceError::Timeout,
        e => SourceError::ObjectStore(Box::new(e)),
    }
}

/// Did the request time out? The cause chain reaches the HTTP client's error, which knows;
/// the message does not (a retried request's message names its `retry_timeout`, whatever
/// failed: a refused connection was reported as a timeout).
fn says_timeout(e: &object_store::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<reqwest::Error>() {
            if r.is_timeout() {
                return true;
            }
        }
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

impl Source for S3Store {
    fn name(&self) -> &str {
        &self.name
    }

    fn ids(&self) -> Result<Vec<H256>, SourceError> {
        self.rt.block_on(async {
            let prefix = self.path("checkpoints");
            let metas: Vec<object_store::ObjectMeta> =
                self.store.list(Some(&prefix)).try_collect().await.map_err(store_error)?;
            let mut ids: Vec<H256> = metas
                .iter()
                .filter_map(|m| {
                    let mut parts = m.location.as_ref().rsplit('/');
                    let name = parts.next()?;
                    let id = parts.next()?;
                    (name == "manifest").then(|| parse_id(id)).flatten()
                })
                .collect();
            ids.sort();
            ids.dedup();
            Ok(ids)
        })
    }

    fn manifest(&self, id: &H256) -> Result<Vec<u8>, SourceError> {
        self.rt.block_on(self.get_capped(&manifest_path(id), MANIFEST_BYTES_MAX))
    }

    fn chunk(&self, digest: &H256, max: u64) -> Result<Vec<u8>, SourceError> {
        self.rt.block_on(self.get_capped(&chunk_path(digest), max))
    }
}
