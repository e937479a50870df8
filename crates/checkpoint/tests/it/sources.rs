//! Restores from untrusted sources: three HTTP servers (one altering 30% of its chunks,
//! one that never answers), and an S3-compatible bucket (the real server that
//! `scripts/s3-server.sh` starts; skipped without it unless `CI=true`).

use std::io::Read;
use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use checkpoint::{
    open_source, restore_from_sources, CheckpointDir, FetchError, FetchOptions, HttpServer,
    RestoreOptions, SourceOptions, Trusted,
};

use crate::common::*;

/// Copy a checkpoint directory, flipping a byte in every chunk `pick` selects.
fn corrupted_copy(
    src: &std::path::Path,
    dst: &std::path::Path,
    mut pick: impl FnMut(usize) -> bool,
) -> usize {
    let mut altered = 0;
    for sub in ["chunks", "checkpoints"] {
        let mut stack = vec![src.join(sub)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(src).unwrap().to_path_buf();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let mut bytes = std::fs::read(&p).unwrap();
                if sub == "chunks" && pick(altered + bytes.len()) {
                    let at = bytes.len() / 2;
                    bytes[at] ^= 0x5a;
                    altered += 1;
                }
                std::fs::create_dir_all(dst.join(&rel).parent().unwrap()).unwrap();
                std::fs::write(dst.join(&rel), bytes).unwrap();
            }
        }
    }
    altered
}

/// The `GET /checkpoints` body for `dir`.
fn listing(dir: &CheckpointDir) -> Vec<u8> {
    let list: Vec<checkpoint::Listed> =
        dir.list().unwrap().into_iter().map(|(id, m)| checkpoint::Listed::new(&id, &m)).collect();
    serde_json::to_vec(&list).unwrap()
}

/// Restore block 0 with `root` into a new database under `tmp` from `sources` (default
/// fetch options but `workers`); the database, the report and the restored head, which
/// must be `root`.
fn restore_block0(
    tmp: &std::path::Path,
    root: state::H256,
    sources: &[Box<dyn checkpoint::Source>],
    workers: Option<usize>,
) -> (store::StateDb, checkpoint::RestoreReport) {
    let mut dst = open(&tmp.join("dst"));
    let mut fetch = FetchOptions::default();
    if let Some(w) = workers {
        fetch.workers = w;
    }
    let (report, outcome) = restore_from_sources(
        &mut dst,
        Trusted { block: 0, root },
        sources,
        &RestoreOptions::new(tmp.join("staging")),
        &fetch,
        &AtomicBool::new(false),
        &|_| {},
    );
    outcome.unwrap_or_else(|e| panic!("{e}: {report:#?}"));
    assert_eq!(dst.head_root(), root);
    (dst, report)
}

/// A TCP server that accepts and never answers.
fn silent_server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    format!("http://{addr}")
}

/// A server that lists `dir`'s checkpoints and serves their manifests, then hangs on
/// every chunk request.
fn hanging_server(dir: &std::path::Path) -> String {
    slow_server(dir, usize::MAX, Duration::from_secs(3600))
}

#[test]
fn three_http_sources_one_bad_one_hanging() {
    let state = eth_state(51, 3000, 30, 100);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let good_dir = tmp.path().join("good");
    let created = create(&src, &CheckpointDir::new(&good_dir), &small_chunks(2));
    let n = created.manifest.chunks.len();
    assert!(n >= 40, "{n} chunks");
    let bad_dir = tmp.path().join("bad");
    let mut k = 0usize;
    let altered = corrupted_copy(&good_dir, &bad_dir, |_| {
        k += 1;
        k % 10 < 3
    });
    assert!(altered * 10 >= n * 2, "{altered} of {n} altered");
    let good = HttpServer::start(CheckpointDir::new(&good_dir), "127.0.0.1:0", 2).unwrap();
    let bad = HttpServer::start(CheckpointDir::new(&bad_dir), "127.0.0.1:0", 2).unwrap();
    let hang = hanging_server(&good_dir);
    let silent = silent_server();
    let urls = [
        format!("http://{}", bad.addr()),
        hang.clone(),
        format!("http://{}", good.addr()),
        silent.clone(),
    ];
    let opts = SourceOptions { timeout: Duration::from_millis(500) };
    let sources: Vec<_> = urls.iter().map(|u| open_source(u, &opts).unwrap()).collect();
    let t0 = Instant::now();
    let (dst, report) = restore_block0(tmp.path(), src.head_root(), &sources, None);
    assert!(t0.elapsed() < Duration::from_secs(60));
    assert_eq!(dump(&dst), dump(&src));
    let by = |u: &str| report.sources.iter().find(|s| s.source == u).unwrap();
    let bad_report = by(&urls[0]);
    assert!(bad_report.bad_chunks >= 1 && bad_report.excluded.is_some(), "{report:#?}");
    let hang_report = by(&urls[1]);
    assert!(hang_report.timeouts >= 1 && hang_report.excluded.is_some(), "{report:#?}");
    assert!(by(&urls[2]).chunks_served > 0);
    let silent_report = by(&urls[3]);
    assert!(silent_report.timeouts >= 1 && silent_report.chunks_served == 0, "{report:#?}");
    assert_eq!(report.outcome, "restored");
    // The report serialises for `--report`.
    let json = serde_json::to_string(&report).unwrap();
    assert!(json.contains(&urls[0]));
    good.shutdown();
    bad.shutdown();
}

#[test]
fn an_oversized_body_is_cut_off() {
    let state = eth_state(52, 200, 0, 1);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let dir = tmp.path().join("ckpt");
    let created = create(&src, &CheckpointDir::new(&dir), &small_chunks(1));
    let digest = created.manifest.chunks[0].digest;
    let path = dir.join(checkpoint::chunk_path(&digest));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend(std::iter::repeat_n(0u8, 1 << 20));
    std::fs::write(&path, &bytes).unwrap();
    let server = HttpServer::start(CheckpointDir::new(&dir), "127.0.0.1:0", 1).unwrap();
    let s = open_source(&format!("http://{}", server.addr()), &SourceOptions::default()).unwrap();
    let r = s.chunk(&digest, created.manifest.chunks[0].len);
    assert!(matches!(r, Err(checkpoint::SourceError::TooLarge { .. })), "{r:?}");
    let local = open_source(dir.to_str().unwrap(), &SourceOptions::default()).unwrap();
    assert!(matches!(local.chunk(&digest, 10), Err(checkpoint::SourceError::TooLarge { .. })));
}

/// A server that answers every request with a chunked body dripped one byte at a time,
/// forever: each read returns in time, the body never ends.
fn dripping_server() -> String {
    use std::io::Write;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                if s.write_all(head.as_bytes()).is_err() {
                    return;
                }
                while s.write_all(b"1\r\n \r\n").and_then(|()| s.flush()).is_ok() {
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_dripped_body_times_out_as_a_whole() {
    let opts = SourceOptions { timeout: Duration::from_millis(800) };
    let s = open_source(&dripping_server(), &opts).unwrap();
    let t0 = Instant::now();
    // A failure within the bound: a timeout, or under load an I/O or client error of a
    // connection the client gave up on (the point is that it ends).
    let r = s.chunk(&state::H256::ZERO, 1 << 20);
    let ended = |e: Option<&checkpoint::SourceError>| {
        use checkpoint::SourceError::{Http, Io, Timeout};
        matches!(e, Some(Timeout | Io(_) | Http(_)))
    };
    assert!(ended(r.as_ref().err()), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // The listing too.
    let t0 = Instant::now();
    let r = s.ids();
    assert!(ended(r.as_ref().err()), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}: {r:?}", t0.elapsed());
}

/// The S3 test server's bucket, once a listing of it answers, or `None` (then the test is
/// skipped; under `CI=true` that is a failure).
pub(crate) fn s3_bucket() -> Option<String> {
    let bucket = std::env::var("ARBOR_S3_BUCKET").ok();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").ok();
    match (bucket, endpoint) {
        (Some(b), Some(_)) => {
            wait_for_s3(&b);
            Some(b)
        }
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but no S3 test server (AWS_ENDPOINT_URL, ARBOR_S3_BUCKET): run scripts/s3-server.sh start")
        }
        _ => {
            eprintln!("skipped: no S3 test server (eval \"$(bash scripts/s3-server.sh start)\")");
            None
        }
    }
}

#[test]
fn s3_push_then_restore() {
    let Some(bucket) = s3_bucket() else { return };
    // The client retries a failing server for minutes: bound the whole test so a stuck
    // server fails it with the server's log instead of hanging the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    let body = std::thread::spawn(move || {
        push_then_restore(&bucket);
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(300)) {
        Ok(()) => body.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(body.join().unwrap_err())
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("push and restore ran past 300 s{}", s3_log_tail())
        }
    }
}

fn push_then_restore(bucket: &str) {
    let state = eth_state(53, 2000, 20, 80);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let dir = CheckpointDir::new(tmp.path().join("ckpt"));
    let created = create(&src, &dir, &small_chunks(2));
    // A fresh prefix per run: the bucket outlives test runs.
    let prefix =
        format!("t{}-{}", std::process::id(), Instant::now().elapsed().as_nanos() ^ rand_suffix());
    let url = format!("{bucket}/{prefix}");
    let store = checkpoint::S3Store::from_env(&url, Duration::from_secs(30)).unwrap();

    // A lister polls the bucket during the push: whenever it sees the manifest, every
    // chunk must already be there.
    let stop = AtomicBool::new(false);
    let watcher_store = checkpoint::S3Store::from_env(&url, Duration::from_secs(30)).unwrap();
    let seen = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut checks = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                use checkpoint::Source;
                if watcher_store.ids().unwrap().contains(&created.id) {
                    for c in &created.manifest.chunks {
                        watcher_store
                            .chunk(&c.digest, c.len)
                            .expect("a listed manifest names a missing chunk");
                    }
                    checks += 1;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            checks
        });
        let first = store
            .push(&dir, &created.id, &|_| {})
            .unwrap_or_else(|e| panic!("push: {e}{}", s3_log_tail()));
        assert_eq!(first.uploaded, created.manifest.chunks.len());
        assert!(first.manifest_uploaded);
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        watcher.join().unwrap()
    });
    assert!(seen >= 1, "the watcher never saw the manifest");

    let second = store
        .push(&dir, &created.id, &|_| {})
        .unwrap_or_else(|e| panic!("second push: {e}{}", s3_log_tail()));
    assert_eq!((second.uploaded, second.manifest_uploaded, second.uploaded_bytes), (0, false, 0));

    let source = open_source(&format!("s3://{url}"), &SourceOptions::default()).unwrap();
    let (dst, _) = restore_block0(tmp.path(), src.head_root(), &[source], None);
    assert_eq!(dump(&dst), dump(&src));
}

/// Wait (up to 60 s) until a listing of `bucket` answers: the server may still be starting
/// or busy with another suite's requests. A server that never answers fails the test
/// with the end of its log.
fn wait_for_s3(bucket: &str) {
    use checkpoint::Source;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let err = match checkpoint::S3Store::from_env(bucket, Duration::from_secs(5)) {
            Ok(store) => match store.ids() {
                Ok(_) => return,
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            panic!("the S3 test server does not answer: {err}{}", s3_log_tail());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The last lines of the S3 test server's log (`ARBOR_S3_LOG`, which `scripts/s3-server.sh`
/// exports), for a failure message: the client's retries say only that they ran out.
fn s3_log_tail() -> String {
    let Ok(path) = std::env::var("ARBOR_S3_LOG") else { return String::new() };
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    format!(
        "\n--- last lines of {path} ---\n{}",
        lines[lines.len().saturating_sub(40)..].join("\n")
    )
}

pub(crate) fn rand_suffix() -> u128 {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).unwrap();
    u128::from(u64::from_le_bytes(b))
}

/// A server of `dir` whose first `slow` chunk answers take `delay`.
fn slow_server(dir: &std::path::Path, slow: usize, delay: Duration) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    let dir = CheckpointDir::new(dir);
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn(move || {
        for req in server.incoming_requests() {
            let url = req.url().to_string();
            let dir = dir.clone();
            let served = served.clone();
            std::thread::spawn(move || {
                let body = if url == "/checkpoints" {
                    listing(&dir)
                } else if let Some(d) = url.strip_prefix("/chunks/").and_then(checkpoint::parse_id)
                {
                    if served.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < slow {
                        std::thread::sleep(delay);
                    }
                    dir.chunk(&d).unwrap().unwrap()
                } else {
                    let id = url.split('/').nth(2).and_then(checkpoint::parse_id).unwrap();
                    dir.manifest_bytes(&id).unwrap().unwrap()
                };
                let _ = req.respond(tiny_http::Response::from_data(body));
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_single_slow_source_is_retried_not_abandoned() {
    let state = eth_state(54, 600, 5, 20);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let dir = tmp.path().join("ckpt");
    create(&src, &CheckpointDir::new(&dir), &small_chunks(1));
    // Its first six chunk answers come after the timeout: it is excluded, then admitted
    // again as the only source left, and the restore completes.
    let url = slow_server(&dir, 6, Duration::from_millis(700));
    let opts = SourceOptions { timeout: Duration::from_millis(300) };
    let sources = vec![open_source(&url, &opts).unwrap()];
    let (dst, report) = restore_block0(tmp.path(), src.head_root(), &sources, Some(2));
    assert!(report.sources[0].timeouts >= 2, "{report:#?}");
    assert_eq!(dump(&dst), dump(&src));
}

/// A source that lists its one checkpoint `copies` times.
struct Repeating {
    inner: Box<dyn checkpoint::Source>,
    id: state::H256,
    copies: usize,
}

impl checkpoint::Source for Repeating {
    fn name(&self) -> &str {
        "repeating"
    }
    fn ids(&self) -> Result<Vec<state::H256>, checkpoint::SourceError> {
        Ok(vec![self.id; self.copies])
    }
    fn manifest(&self, id: &state::H256) -> Result<Vec<u8>, checkpoint::SourceError> {
        self.inner.manifest(id)
    }
    fn chunk(&self, d: &state::H256, max: u64) -> Result<Vec<u8>, checkpoint::SourceError> {
        self.inner.chunk(d, max)
    }
}

/// A source's listing counts once per id: one source listing a forged manifest (of the
/// trusted block and root, naming a chunk nobody has) three times does not outvote two
/// honest sources.
#[test]
fn a_listing_votes_once_per_source() {
    let state = eth_state(55, 300, 2, 10);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let good = tmp.path().join("good");
    let created = create(&src, &CheckpointDir::new(&good), &small_chunks(1));
    let mut forged = created.manifest.clone();
    let last = forged.chunks.len() - 1;
    forged.chunks[last].digest.0[0] ^= 1;
    let bytes = forged.encode();
    let forged_id = trie::keccak256(&bytes);
    let forged_dir = tmp.path().join("forged");
    CheckpointDir::new(&forged_dir).put_manifest(&forged_id, &bytes).unwrap();
    let opts = SourceOptions::default();
    let repeating = Repeating {
        inner: open_source(forged_dir.to_str().unwrap(), &opts).unwrap(),
        id: forged_id,
        copies: 3,
    };
    let sources: Vec<Box<dyn checkpoint::Source>> = vec![
        Box::new(repeating),
        open_source(good.to_str().unwrap(), &opts).unwrap(),
        open_source(good.to_str().unwrap(), &opts).unwrap(),
    ];
    let (dst, report) = restore_block0(tmp.path(), src.head_root(), &sources, None);
    assert_eq!(report.checkpoint, hex::encode(created.id.0));
    assert_eq!(dump(&dst), dump(&src));
}

/// A source that lists one checkpoint and fails every request with `error`.
struct Failing {
    id: state::H256,
    error: fn() -> checkpoint::SourceError,
}

impl checkpoint::Source for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn ids(&self) -> Result<Vec<state::H256>, checkpoint::SourceError> {
        Ok(vec![self.id])
    }
    fn manifest(&self, _: &state::H256) -> Result<Vec<u8>, checkpoint::SourceError> {
        Err((self.error)())
    }
    fn chunk(&self, _: &state::H256, _: u64) -> Result<Vec<u8>, checkpoint::SourceError> {
        Err((self.error)())
    }
}

/// `find_manifests` (the restore's and `checkpoint verify`'s choice): a source that cannot
/// be read is reported as such (it may hold the checkpoint), one that answers "not found"
/// offers none, and a good source beside either is chosen.
#[test]
fn find_manifest_tells_unreachable_from_absent() {
    use checkpoint::{find_manifests, FetchError, SourceError, SourceReport};
    let state = eth_state(56, 200, 1, 5);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let good = tmp.path().join("good");
    let created = create(&src, &CheckpointDir::new(&good), &small_chunks(1));
    let trusted = Trusted { block: 0, root: src.head_root() };
    let stop = AtomicBool::new(false);
    let find = |sources: &[Box<dyn checkpoint::Source>]| {
        let mut reports = vec![SourceReport::default(); sources.len()];
        (find_manifests(trusted, sources, &stop, &mut reports).map(|mut v| v.remove(0)), reports)
    };
    let failing =
        |error| -> Box<dyn checkpoint::Source> { Box::new(Failing { id: created.id, error }) };
    let (r, reports) = find(&[failing(|| SourceError::Timeout)]);
    assert!(
        matches!(r, Err(FetchError::Unreachable { ref source_name, .. }) if source_name == "failing"),
        "{r:?}"
    );
    assert_eq!(reports[0].timeouts, 1);
    let (r, _) = find(&[failing(|| SourceError::Status(503))]);
    assert!(matches!(r, Err(FetchError::Unreachable { .. })), "{r:?}");
    let (r, _) = find(&[failing(|| SourceError::NotFound)]);
    assert!(matches!(r, Err(FetchError::NoCheckpoint { .. })), "{r:?}");
    let opts = SourceOptions::default();
    let sources =
        [failing(|| SourceError::Timeout), open_source(good.to_str().unwrap(), &opts).unwrap()];
    let (r, reports) = find(&sources);
    let found = r.unwrap();
    assert_eq!((found.id, found.offering), (created.id, vec![1]));
    assert_eq!(trie::keccak256(&found.bytes), created.id);
    assert_eq!(reports[0].timeouts, 1);
}

/// One hostile source offering a forged manifest of the trusted block and root (one chunk
/// digest nobody serves) ties with one honest source and sorts first: the restore finds
/// that no source has the chunk, abandons the forged checkpoint (deleting what it wrote)
/// and restores the honest one, in the same run.
#[test]
fn a_forged_manifest_that_sorts_first_is_abandoned() {
    let state = eth_state(57, 300, 2, 10);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let good = tmp.path().join("good");
    let created = create(&src, &CheckpointDir::new(&good), &small_chunks(1));
    let last = created.manifest.chunks.len() - 1;
    let (forged_id, bytes) = (0u8..=255)
        .map(|b| {
            let mut forged = created.manifest.clone();
            forged.chunks[last].digest.0[31] = b;
            let bytes = forged.encode();
            (trie::keccak256(&bytes), bytes)
        })
        .find(|(id, _)| *id < created.id)
        .expect("a forged id below the genuine one");
    let forged_dir = tmp.path().join("forged");
    CheckpointDir::new(&forged_dir).put_manifest(&forged_id, &bytes).unwrap();
    let opts = SourceOptions::default();
    let sources = vec![
        open_source(forged_dir.to_str().unwrap(), &opts).unwrap(),
        open_source(good.to_str().unwrap(), &opts).unwrap(),
    ];
    let (dst, report) = restore_block0(tmp.path(), src.head_root(), &sources, None);
    assert_eq!(report.checkpoint, hex::encode(created.id.0));
    assert_eq!(report.abandoned.len(), 1, "{report:#?}");
    assert!(report.abandoned[0].starts_with(&hex::encode(forged_id.0)), "{report:#?}");
    assert_eq!(dump(&dst), dump(&src));
    assert!(dst.verify().unwrap().ok());
}

/// A copy of the checkpoint `created` in `good` as it would be forged consistently: chunk
/// `k`'s last value of its first segment altered, the chunk stored under its new digest,
/// and a manifest naming it stored under its own hash (the genuine manifest left out).
/// Returns the directory and the forged manifest's id.
pub(crate) fn forged_copy(
    good: &std::path::Path,
    created: &checkpoint::Created,
    k: usize,
    to: &std::path::Path,
) -> state::H256 {
    corrupted_copy(good, to, |_| false);
    let dir = CheckpointDir::new(to);
    std::fs::remove_dir_all(to.join("checkpoints")).unwrap();
    let mut m = created.manifest.clone();
    let bytes = dir.chunk(&m.chunks[k].digest).unwrap().unwrap();
    let mut chunk = checkpoint::Chunk::decode(&bytes).unwrap();
    let seg = chunk.segments.iter_mut().find(|s| !s.entries.is_empty()).unwrap();
    let mut value = seg.entries.last().unwrap().1.to_vec();
    *value.last_mut().unwrap() ^= 0x01;
    seg.entries.last_mut().unwrap().1 = &value;
    let forged = chunk.encode();
    assert_eq!(forged.len(), bytes.len());
    m.chunks[k].digest = m.chunk_hash.digest(&forged);
    dir.put_chunk(&m.chunks[k].digest, &forged).unwrap();
    let manifest = m.encode();
    let id = trie::keccak256(&manifest);
    dir.put_manifest(&id, &manifest).unwrap();
    id
}

/// The only checkpoint offered for the trusted block and root is forged consistently (a
/// chunk altered, its digest updated in a manifest stored under its own hash): the restore
/// proves it bad, abandons it (what it wrote is deleted), fails with the typed error naming
/// it and its source, and leaves an empty database that a restore from an honest source
/// then takes. It used to stop resumable, the database marked with the forged checkpoint,
/// which refused the honest one.
#[test]
fn a_consistently_forged_single_checkpoint_is_abandoned_and_the_database_left_usable() {
    let state = eth_state(58, 400, 4, 20);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let good = tmp.path().join("good");
    let created = create(&src, &CheckpointDir::new(&good), &small_chunks(1));
    let n = created.manifest.chunks.len();
    assert!(n >= 8, "{n} chunks");
    let forged_dir = tmp.path().join("forged");
    let forged_id = forged_copy(&good, &created, n / 2, &forged_dir);
    let opts = SourceOptions::default();
    let forged_name = forged_dir.to_str().unwrap();
    let forged_source = vec![open_source(forged_name, &opts).unwrap()];
    let root = src.head_root();
    let trusted = Trusted { block: 0, root };
    let mut dst = open(&tmp.path().join("dst"));
    let staging = RestoreOptions::new(tmp.path().join("staging"));
    let run = |dst: &mut store::StateDb, sources: &[Box<dyn checkpoint::Source>]| {
        let fetch = FetchOptions { workers: 1, ..FetchOptions::default() };
        let stop = AtomicBool::new(false);
        restore_from_sources(dst, trusted, sources, &staging, &fetch, &stop, &|_| {})
    };
    let (report, outcome) = run(&mut dst, &forged_source);
    match &outcome {
        Err(FetchError::BadCheckpoint { checkpoint, offered_by, reason }) => {
            assert_eq!(*checkpoint, forged_id);
            assert_eq!(offered_by, &[forged_name.to_string()]);
            assert!(
                matches!(reason.as_ref(), FetchError::Chunk(c) if matches!(c.as_ref(), checkpoint::ChunkError::Proof { index, .. } if *index == n / 2)),
                "{reason:?}"
            );
        }
        other => panic!("{other:?}: {report:#?}"),
    }
    let line = outcome.unwrap_err().to_string();
    assert!(line.contains(&hex::encode(forged_id.0)) && line.contains(forged_name), "{line}");
    assert_eq!(report.abandoned.len(), 1, "{report:#?}");
    assert!(report.abandoned[0].starts_with(&hex::encode(forged_id.0)), "{report:#?}");
    assert_eq!(report.sources[0].bad_checkpoints, vec![hex::encode(forged_id.0)]);
    assert!(report.entries_restored > 0, "nothing was written before the bad chunk: {report:#?}");
    // Nothing of it is left: no marker, no entries.
    assert_eq!(dst.unfinished_bulk_load(), None);
    assert!(dst.is_empty().unwrap());
    // The honest checkpoint restores into the same database.
    let good_source = vec![open_source(good.to_str().unwrap(), &opts).unwrap()];
    let (report, outcome) = run(&mut dst, &good_source);
    outcome.unwrap_or_else(|e| panic!("{e}: {report:#?}"));
    assert_eq!(report.checkpoint, hex::encode(created.id.0));
    assert_eq!(dst.head_root(), root);
    assert_eq!(dump(&dst), dump(&src));
    assert!(dst.verify().unwrap().ok());
}

/// Failures that say nothing about the checkpoint keep the restore resumable: a stop
/// leaves the database marked with the checkpoint and its progress, and the next run
/// finishes it.
#[test]
fn a_stopped_restore_is_not_abandoned() {
    let state = eth_state(59, 300, 2, 10);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let good = tmp.path().join("good");
    let created = create(&src, &CheckpointDir::new(&good), &small_chunks(1));
    let opts = SourceOptions::default();
    let sources = vec![open_source(good.to_str().unwrap(), &opts).unwrap()];
    let trusted = Trusted { block: 0, root: src.head_root() };
    let mut dst = open(&tmp.path().join("dst"));
    let staging = RestoreOptions::new(tmp.path().join("staging"));
    let stop = AtomicBool::new(false);
    let fetch = FetchOptions { workers: 1, ..FetchOptions::default() };
    let (_, outcome) =
        restore_from_sources(&mut dst, trusted, &sources, &staging, &fetch, &stop, &|p| {
            if p.restored >= 2 {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        });
    assert!(matches!(outcome, Err(FetchError::Cancelled)), "{outcome:?}");
    let label = format!("checkpoint {}", hex::encode(created.id.0));
    assert_eq!(dst.unfinished_bulk_load(), Some(label.as_str()));
    stop.store(false, std::sync::atomic::Ordering::Relaxed);
    let (report, outcome) =
        restore_from_sources(&mut dst, trusted, &sources, &staging, &fetch, &stop, &|_| {});
    outcome.unwrap_or_else(|e| panic!("{e}: {report:#?}"));
    assert!(report.resumed_chunks >= 2, "{report:#?}");
    assert!(report.abandoned.is_empty(), "{report:#?}");
    assert_eq!(dump(&dst), dump(&src));
}
