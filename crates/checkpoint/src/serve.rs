//! `arbor checkpoint serve`: a checkpoint directory over HTTP.
//!
//! - `GET /checkpoints`: JSON list (`id`, `block`, `root`, `chunks`, `bytes`, `codes`,
//!   `layout`, `chunk_hash`: [`crate::Listed`]);
//! - `GET /checkpoints/{id}/manifest`: the manifest's bytes;
//! - `GET /chunks/{digest}`: a chunk's bytes, state and code chunks alike.
//!
//! Manifests and chunks are immutable (named by their digests): each answer carries a
//! strong `ETag` (the name) and honours `If-None-Match` (304) and a single `Range:
//! bytes=…` (206, or 416 when unsatisfiable). `HEAD` answers without a body. Anything else
//! is 404 (unknown path), 400 (a malformed id) or 405 (another method); a request whose
//! target and header fields exceed [`REQUEST_HEAD_BYTES_MAX`] is answered 431 and nothing
//! else is done for it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use state::H256;
use tiny_http::{Header, Method, Request, Response, StatusCode};

use crate::dir::{chunk_path, open_regular, parse_id, CheckpointDir, Opened};
use crate::format::CHUNK_BYTES_MAX;
use crate::source::Listed;

/// The most bytes a request's target and header fields may take (names, values and their
/// separators): more is answered 431 (Request Header Fields Too Large). Clients of a
/// checkpoint send a handful of short fields.
pub const REQUEST_HEAD_BYTES_MAX: usize = 16 * 1024;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Binding the address failed.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        message: String,
    },
}

/// A running server; [`HttpServer::shutdown`] (or dropping it) stops it.
pub struct HttpServer {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    requests: Arc<AtomicU64>,
    /// Set when the listener failed (tiny_http's accept thread ends on an accept error,
    /// such as running out of file descriptors): the server answers nothing any more.
    failed: Arc<AtomicBool>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Serve `dir` on `addr` (`127.0.0.1:0` picks a free port) with `threads` handlers.
    pub fn start(dir: CheckpointDir, addr: &str, threads: usize) -> Result<HttpServer, ServeError> {
        let bind_error = |message: String| ServeError::Bind { addr: addr.to_string(), message };
        let listener = listen(addr).map_err(|e| bind_error(e.to_string()))?;
        let server = tiny_http::Server::from_listener(listener, None)
            .map_err(|e| bind_error(e.to_string()))?;
        let local = server.server_addr().to_ip().ok_or_else(|| ServeError::Bind {
            addr: addr.to_string(),
            message: "not an IP socket".into(),
        })?;
        let server = Arc::new(server);
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicBool::new(false));
        let dir = Arc::new(dir);
        let threads = (0..threads.max(1))
            .map(|_| {
                let (server, stop, dir, requests, failed) =
                    (server.clone(), stop.clone(), dir.clone(), requests.clone(), failed.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match server.recv_timeout(Duration::from_millis(200)) {
                            Ok(Some(req)) => {
                                requests.fetch_add(1, Ordering::Relaxed);
                                handle(&dir, req);
                            }
                            Ok(None) => {}
                            Err(_) => {
                                failed.store(true, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                })
            })
            .collect();
        Ok(HttpServer { server, addr: local, stop, threads, requests, failed })
    }

    /// True once the listener has failed: the server accepts no more connections, and its
    /// owner should stop it (and exit, for a supervisor to restart it).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Stop accepting and wait for the handlers.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.server.unblock();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// A listening socket with `TCP_NODELAY`, which the connections it accepts inherit: the
/// server writes a response's head and body separately, and without it Nagle's algorithm
/// holds the body back until the client's delayed ACK (~40 ms per request on a kept-alive
/// connection).
fn listen(addr: &str) -> std::io::Result<std::net::TcpListener> {
    use std::net::ToSocketAddrs;
    let addr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("the address resolves to nothing"))?;
    let socket =
        socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

fn header(name: &str, value: &str) -> Header {
    // Names and values here are ASCII constants or hex: always valid.
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|()| unreachable!("ASCII header {name}"))
}

fn status(req: Request, code: u16, text: &str) {
    let _ = req.respond(Response::from_string(text).with_status_code(StatusCode(code)));
}

/// The bytes of `req`'s target and header fields, as [`REQUEST_HEAD_BYTES_MAX`] counts them.
fn head_bytes(req: &Request) -> usize {
    let fields = req.headers().iter().map(|h| h.field.as_str().as_str().len() + h.value.len() + 4);
    req.url().len() + fields.sum::<usize>()
}

fn handle(dir: &CheckpointDir, req: Request) {
    if head_bytes(&req) > REQUEST_HEAD_BYTES_MAX {
        return status(req, 431, "request header fields too large\n");
    }
    let head = match req.method() {
        Method::Get => false,
        Method::Head => true,
        _ => return status(req, 405, "only GET and HEAD\n"),
    };
    let url = req.url().split('?').next().unwrap_or("").to_string();
    let parts: Vec<&str> = url.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["checkpoints"] => listing(dir, req, head),
        ["checkpoints", id, "manifest"] => match parse_id(id) {
            Some(id) => {
                object(req, head, &id, dir.manifest_bytes(&id).ok().flatten().map(Body::Bytes))
            }
            None => status(req, 400, "bad checkpoint id\n"),
        },
        ["chunks", digest] => match parse_id(digest) {
            Some(d) => object(req, head, &d, Body::file(&dir.root().join(chunk_path(&d)))),
            None => status(req, 400, "bad chunk digest\n"),
        },
        _ => status(req, 404, "not found\n"),
    }
}

fn listing(dir: &CheckpointDir, req: Request, head: bool) {
    let list: Vec<Listed> = match dir.list_readable() {
        Ok(l) => l.into_iter().map(|(id, m)| Listed::new(&id, &m)).collect(),
        Err(e) => return status(req, 500, &format!("{e}\n")),
    };
    let body = serde_json::to_vec(&list).unwrap_or_default();
    let len = body.len();
    let resp = Response::from_data(if head { Vec::new() } else { body })
        .with_header(header("Content-Type", "application/json"));
    let resp =
        if head { resp.with_header(header("Content-Length", &len.to_string())) } else { resp };
    let _ = req.respond(resp);
}

/// What an object is served from: bytes in memory, or a file streamed as it is read (a
/// chunk: no megabyte buffer per request).
enum Body {
    Bytes(Vec<u8>),
    File(std::fs::File, u64),
}

impl Body {
    fn file(path: &std::path::Path) -> Option<Body> {
        // Only a regular file: a FIFO would hold the request in `open`.
        match open_regular(path).ok()? {
            Opened::File(f, len) => (len <= CHUNK_BYTES_MAX).then_some(Body::File(f, len)),
            Opened::Absent | Opened::Other(_) => None,
        }
    }

    fn len(&self) -> u64 {
        match self {
            Body::Bytes(b) => b.len() as u64,
            Body::File(_, len) => *len,
        }
    }

    /// A reader of `range`.
    fn reader(self, range: std::ops::Range<u64>) -> Box<dyn std::io::Read + Send> {
        use std::io::{Read, Seek};
        match self {
            Body::Bytes(mut b) => {
                b.truncate(range.end as usize);
                let mut c = std::io::Cursor::new(b);
                c.set_position(range.start);
                Box::new(c)
            }
            Body::File(mut f, _) => match f.seek(std::io::SeekFrom::Start(range.start)) {
                Ok(_) => Box::new(f.take(range.end - range.start)),
                Err(_) => Box::new(std::io::empty()),
            },
        }
    }
}

/// An immutable object named `name`, with ETag, conditional and range requests.
fn object(req: Request, head: bool, name: &H256, body: Option<Body>) {
    let Some(body) = body else { return status(req, 404, "not found\n") };
    let etag = format!("\"{}\"", hex::encode(name.0));
    let hdr = |n: &'static str| {
        req.headers().iter().find(|h| h.field.equiv(n)).map(|h| h.value.as_str().to_string())
    };
    if hdr("If-None-Match")
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        let resp = Response::empty(StatusCode(304)).with_header(header("ETag", &etag));
        let _ = req.respond(resp);
        return;
    }
    let total = body.len();
    let (code, range) = match hdr("Range") {
        None => (200, 0..total),
        Some(r) => match parse_range(&r, total) {
            Some(range) => (206, range),
            None => {
                let resp = Response::empty(StatusCode(416))
                    .with_header(header("Content-Range", &format!("bytes */{total}")));
                let _ = req.respond(resp);
                return;
            }
        },
    };
    let len = range.end - range.start;
    let reader: Box<dyn std::io::Read + Send> =
        if head { Box::new(std::io::empty()) } else { body.reader(range.clone()) };
    let headers = vec![
        header("ETag", &etag),
        header("Accept-Ranges", "bytes"),
        header("Content-Type", "application/octet-stream"),
        header("Cache-Control", "public, max-age=31536000, immutable"),
    ];
    let mut resp = Response::new(StatusCode(code), headers, reader, Some(len as usize), None);
    if code == 206 {
        let cr = format!("bytes {}-{}/{total}", range.start, range.end - 1);
        resp = resp.with_header(header("Content-Range", &cr));
    }
    let _ = req.respond(resp);
}

/// One `bytes=a-b`, `bytes=a-` or `bytes=-n` range within `total` bytes.
fn parse_range(v: &str, total: u64) -> Option<std::ops::Range<u64>> {
    let spec = v.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let range = if a.is_empty() {
        let n: u64 = b.parse().ok()?;
        total.saturating_sub(n)..total
    } else {
        let start: u64 = a.parse().ok()?;
        let end =
            if b.is_empty() { total } else { b.parse::<u64>().ok()?.saturating_add(1).min(total) };
        start..end
    };
    (range.start < range.end && range.start < total).then_some(range)
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Some(0..10));
        assert_eq!(parse_range("bytes=90-", 100), Some(90..100));
        assert_eq!(parse_range("bytes=-5", 100), Some(95..100));
        assert_eq!(parse_range("bytes=95-200", 100), Some(95..100));
        assert_eq!(parse_range("bytes=100-", 100), None);
        assert_eq!(parse_range("bytes=5-2", 100), None);
        assert_eq!(parse_range("bytes=0-1,3-4", 100), None);
        assert_eq!(parse_range("items=0-1", 100), None);
        assert_eq!(parse_range("bytes=-0", 100), None);
    }
}
