//! Where a restore fetches checkpoints from: local directories, HTTP servers (`arbor
//! checkpoint serve`, or any server of the layout in `dir.rs`) and S3-compatible buckets.
//! Every source is untrusted: what it serves is checked by the caller (manifest bytes
//! against their id, chunk bytes against the manifest's digest).
//!
//! This module owns the [`Source`] trait and its error, and holds the directory and HTTP
//! kinds; `s3.rs` holds the S3 kind and `open.rs` picks a kind by address.

use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use state::H256;

use crate::dir::{
    chunk_path, manifest_path, not_regular, open_regular, parse_id, CheckpointDir, DirError, Opened,
};
use crate::format::MANIFEST_BYTES_MAX;

/// Why a source could not serve a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The source's address is not one this build understands.
    #[error("unsupported source {0:?} (use a directory, http://HOST[:PORT][/PATH] or s3://BUCKET[/PREFIX])")]
    Url(String),
    /// The object is not there.
    #[error("not found")]
    NotFound,
    /// No answer within the timeout.
    #[error("timed out")]
    Timeout,
    /// The body is larger than the request allows (cut off).
    #[error("body larger than {max} bytes")]
    TooLarge {
        /// The limit.
        max: u64,
    },
    /// The server answered with an error status.
    #[error("HTTP status {0}")]
    Status(u16),
    /// Reading failed: a local file, a body, or starting the client's runtime.
    #[error("{0}")]
    Io(#[source] io::Error),
    /// The HTTP client failed (to connect, to send, to read a body).
    #[error("{0}")]
    Http(#[source] reqwest::Error),
    /// The object store failed (a request, or the store's configuration). Boxed, as is
    /// [`SourceError::Dir`], to keep every source's `Result` small.
    #[error("{0}")]
    ObjectStore(#[source] Box<object_store::Error>),
    /// The checkpoint directory could not be read.
    #[error("{0}")]
    Dir(#[source] Box<DirError>),
    /// The listing does not parse.
    #[error("bad listing: {0}")]
    Listing(String),
}

impl SourceError {
    /// A failure that says nothing about what the source holds (a timeout, I/O, a server
    /// error): the object may be there.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            SourceError::Timeout
                | SourceError::Io(_)
                | SourceError::Http(_)
                | SourceError::ObjectStore(_)
                | SourceError::Dir(_)
                | SourceError::Status(500..)
        )
    }
}

impl From<DirError> for SourceError {
    fn from(e: DirError) -> Self {
        SourceError::Dir(Box::new(e))
    }
}

/// A place that serves checkpoints.
pub trait Source: Send + Sync {
    /// How reports name it (its address).
    fn name(&self) -> &str;
    /// The ids of the checkpoints it offers.
    fn ids(&self) -> Result<Vec<H256>, SourceError>;
    /// The ids of the checkpoints it says are of `block` and `root` (a hint: the manifest
    /// is checked when fetched); all of [`Source::ids`] when its listing does not say.
    fn ids_of(&self, block: u64, root: &H256) -> Result<Vec<H256>, SourceError> {
        let _ = (block, root);
        self.ids()
    }
    /// True for a source on this machine (a directory): its listing is read whole and
    /// its failures are fast, so the bounds that keep a remote listing from holding a
    /// restore do not apply (they would let junk names that sort first hide a checkpoint).
    fn is_local(&self) -> bool {
        false
    }
    /// A manifest's bytes (unchecked).
    fn manifest(&self, id: &H256) -> Result<Vec<u8>, SourceError>;
    /// A chunk's bytes (unchecked); more than `max` bytes is an error, cut off early.
    fn chunk(&self, digest: &H256, max: u64) -> Result<Vec<u8>, SourceError>;
}

/// Options for opening sources.
#[derive(Debug, Clone, Copy)]
pub struct SourceOptions {
    /// Per-request timeout (a chunk's whole transfer).
    pub timeout: Duration,
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions { timeout: Duration::from_secs(30) }
    }
}

/// A local directory.
pub(crate) struct DirSource {
    name: String,
    dir: CheckpointDir,
}

impl DirSource {
    /// The directory at `path`, named `addr` in reports.
    pub(crate) fn open(addr: &str, path: &str) -> Result<Self, SourceError> {
        let p = Path::new(path);
        if !p.is_dir() {
            let e =
                io::Error::new(io::ErrorKind::NotADirectory, format!("{path} is not a directory"));
            return Err(SourceError::Io(e));
        }
        Ok(DirSource { name: addr.to_string(), dir: CheckpointDir::new(p) })
    }
}

impl Source for DirSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_local(&self) -> bool {
        true
    }

    fn ids(&self) -> Result<Vec<H256>, SourceError> {
        Ok(self.dir.ids()?)
    }

    fn manifest(&self, id: &H256) -> Result<Vec<u8>, SourceError> {
        let path = self.dir.root().join(manifest_path(id));
        read_capped(&path, MANIFEST_BYTES_MAX)
    }

    fn chunk(&self, digest: &H256, max: u64) -> Result<Vec<u8>, SourceError> {
        read_capped(&self.dir.root().join(chunk_path(digest)), max)
    }
}

/// A file of a directory source, read whole up to `max`. Only regular files are read
/// ([`open_regular`]: a FIFO in a chunk's place is refused at once instead of holding the
/// restore).
fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, SourceError> {
    match open_regular(path).map_err(SourceError::Io)? {
        Opened::File(f, len) => capped(f, max, len),
        Opened::Absent => Err(SourceError::NotFound),
        Opened::Other(t) => {
            let what = format!("{} is {}", path.display(), not_regular(t));
            Err(SourceError::Io(io::Error::new(io::ErrorKind::InvalidInput, what)))
        }
    }
}

/// Read at most `max` bytes; more is [`SourceError::TooLarge`] (reading stops there, and
/// memory stays within about 1.5 times `max`: [`store::read_capped`]). `hint` is the
/// expected length (a buffer of that size is reserved, up to `max`).
pub(crate) fn capped(r: impl Read, max: u64, hint: u64) -> Result<Vec<u8>, SourceError> {
    let out = store::read_capped(r, max, hint).map_err(io_error)?;
    if out.len() as u64 > max {
        return Err(SourceError::TooLarge { max });
    }
    Ok(out)
}

fn io_error(e: io::Error) -> SourceError {
    if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) {
        return SourceError::Timeout;
    }
    // reqwest wraps its timeout inside an io::Error when a body read times out.
    let timed_out = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
        .is_some_and(reqwest::Error::is_timeout);
    if timed_out {
        SourceError::Timeout
    } else {
        SourceError::Io(e)
    }
}

/// An HTTP server of the layout.
pub(crate) struct HttpSource {
    base: String,
    client: reqwest::blocking::Client,
    /// The whole request's time limit (the client's own timeout bounds each read of a body
    /// without a declared length, not the body: a server dripping a byte at a time would
    /// never time out).
    timeout: Duration,
}

impl HttpSource {
    /// The server at `addr` (`http://HOST[:PORT][/PATH]`, or `https://`).
    pub(crate) fn new(addr: &str, opts: &SourceOptions) -> Result<Self, SourceError> {
        // An address that names no host (`http://`, `http://[::1`, `http://256.0.0.1/`) is
        // refused here, before any request.
        let url =
            reqwest::Url::parse(addr).map_err(|e| SourceError::Url(format!("{addr}: {e}")))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err(SourceError::Url(format!("{addr}: no host")));
        }
        let client = reqwest::blocking::Client::builder()
            .timeout(opts.timeout)
            .connect_timeout(opts.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(SourceError::Http)?;
        let base = addr.trim_end_matches('/').to_string();
        Ok(HttpSource { base, client, timeout: opts.timeout })
    }

    fn get(&self, rel: &str, max: u64) -> Result<Vec<u8>, SourceError> {
        let deadline = std::time::Instant::now() + self.timeout;
        let resp = self.client.get(format!("{}/{rel}", self.base)).send().map_err(http_error)?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Err(SourceError::NotFound),
            s => return Err(SourceError::Status(s)),
        }
        match resp.content_length() {
            Some(n) if n > max => Err(SourceError::TooLarge { max }),
            // A declared length within the limit: the body in one piece (the client
            // refuses a body longer than declared), without a hop to the client's runtime
            // thread for every frame.
            Some(_) => Ok(resp.bytes().map_err(http_error)?.into()),
            None => capped(Deadline { inner: resp, deadline }, max, 0),
        }
    }
}

/// A reader that fails with [`std::io::ErrorKind::TimedOut`] once `deadline` has passed
/// (checked before every read, each of which the client bounds by itself).
struct Deadline<R> {
    inner: R,
    deadline: std::time::Instant,
}

impl<R: Read> Read for Deadline<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if std::time::Instant::now() >= self.deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.inner.read(buf)
    }
}

fn http_error(e: reqwest::Error) -> SourceError {
    if e.is_timeout() {
        SourceError::Timeout
    } else {
        SourceError::Http(e)
    }
}

/// Longest checkpoint listing accepted from a server.
const LISTING_BYTES_MAX: u64 = 16 << 20;

impl Source for HttpSource {
    fn name(&self) -> &str {
        &self.base
    }

    fn ids(&self) -> Result<Vec<H256>, SourceError> {
        Ok(self.listing()?.into_iter().map(|(id, _)| id).collect())
    }

    fn ids_of(&self, block: u64, root: &H256) -> Result<Vec<H256>, SourceError> {
        // A root that does not parse keeps its entry: the listing is only a hint.
        let of = |l: &Listed| {
            l.block == block && state::decode_hex(&l.root).map_or(true, |r| r == root.0)
        };
        Ok(self.listing()?.into_iter().filter(|(_, l)| of(l)).map(|(id, _)| id).collect())
    }

    fn manifest(&self, id: &H256) -> Result<Vec<u8>, SourceError> {
        self.get(&manifest_path(id), MANIFEST_BYTES_MAX)
    }

    fn chunk(&self, digest: &H256, max: u64) -> Result<Vec<u8>, SourceError> {
        self.get(&chunk_path(digest), max)
    }
}

/// One entry of `GET /checkpoints`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Listed {
    /// Manifest id, hex.
    pub id: String,
    /// Block.
    pub block: u64,
    /// State root, hex.
    pub root: String,
    /// Chunks (state and code).
    pub chunks: usize,
    /// Chunk bytes (state and code).
    pub bytes: u64,
    /// Contract codes (absent from servers of earlier versions: 0).
    #[serde(default)]
    pub codes: u64,
    /// The trie layout (absent from servers of earlier versions: ethereum).
    #[serde(default = "ethereum")]
    pub layout: String,
    /// The hash naming its chunks (absent from servers of earlier versions: keccak256).
    #[serde(default = "keccak256")]
    pub chunk_hash: String,
}

fn ethereum() -> String {
    trie::LayoutName::Ethereum.as_str().to_string()
}

fn keccak256() -> String {
    crate::ChunkHash::Keccak256.as_str().to_string()
}

impl Listed {
    /// The entry of manifest `m`, whose id is `id`.
    pub fn new(id: &H256, m: &crate::Manifest) -> Listed {
        Listed {
            id: hex::encode(id.0),
            block: m.block,
            root: m.root.to_string(),
            chunks: m.chunk_count(),
            bytes: m.chunk_bytes + m.code.chunk_bytes,
            codes: m.code.entries,
            layout: m.layout.as_str().to_string(),
            chunk_hash: m.chunk_hash.as_str().to_string(),
        }
    }
}

impl HttpSource {
    /// `GET /checkpoints`, each entry with its parsed id.
    fn listing(&self) -> Result<Vec<(H256, Listed)>, SourceError> {
        parse_listing(&self.get("checkpoints", LISTING_BYTES_MAX)?)
    }
}

fn parse_listing(body: &[u8]) -> Result<Vec<(H256, Listed)>, SourceError> {
    let listed: Vec<Listed> =
        serde_json::from_slice(body).map_err(|e| SourceError::Listing(e.to_string()))?;
    listed
        .into_iter()
        .map(|l| match parse_id(&l.id) {
            Some(id) => Ok((id, l)),
            None => Err(SourceError::Listing(format!("bad id {:?}", l.id))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_source_reads_only_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("chunk");
        std::fs::write(&file, b"bytes").unwrap();
        assert_eq!(read_capped(&file, 5).unwrap(), b"bytes");
        assert!(matches!(read_capped(&file, 4), Err(SourceError::TooLarge { max: 4 })));
        assert!(matches!(read_capped(&dir.path().join("none"), 9), Err(SourceError::NotFound)));
        // A FIFO with no writer: refused at once instead of blocking in `open`.
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        for odd in [fifo.as_path(), dir.path()] {
            match read_capped(odd, 9) {
                Err(SourceError::Io(e)) => {
                    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
                    assert!(e.to_string().contains("not a regular file"), "{e}");
                }
                other => panic!("{}: {other:?}", odd.display()),
            }
        }
    }
}
