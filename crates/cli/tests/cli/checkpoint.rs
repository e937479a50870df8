//! `arbor checkpoint create|verify|serve|list|restore` end to end: a round trip through
//! a directory; a restore from three HTTP sources (one genuine, one serving corrupted
//! chunks, one that never answers); SIGKILL during a restore and the resumed run; hostile
//! command lines; the HTTP answers of `checkpoint serve`, read with a raw `TcpStream`;
//! `init` and `checkpoint restore` onto mount points (tmpfs, as root) and finishing an
//! interrupted creation; an account database's contract code through create, list,
//! verify and restore.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use test_support::Mount;

use super::crash::{kill_after, seed};
use super::{arbor, assert_one_line_error, fresh_db, ok, stderr, stdout, testdata, MAINNET_ROOT};

/// Damaged checkpoints and what killed creations leave behind.
#[path = "checkpoint/damage.rs"]
mod damage;

/// Checkpoints of an account database carry its contract code.
#[path = "checkpoint/code.rs"]
mod code;

/// `arbor verify`'s line for a database created but holding no state yet.
const EMPTY_HEAD: &str = "ok 0 0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421";

/// A fresh (absent) path under cargo's per-test-binary temp dir.
fn fresh_dir(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-ckpt-{name}"));
    let _ = std::fs::remove_dir_all(&path);
    let _ = std::fs::remove_file(&path);
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A fresh (absent) database for a restore (its staging directory lives inside it).
fn fresh_restore_db(name: &str) -> String {
    fresh_db(&format!("ckpt-{name}"))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn no_panic(o: &Output) {
    assert!(!stderr(o).contains("panicked"), "panic: {}", stderr(o));
}

/// A loaded database and a checkpoint of its head.
struct Made {
    db: String,
    dir: PathBuf,
    id: String,
    block: u64,
    root: String,
    chunks: u64,
    entries: u64,
}

impl Made {
    fn block(&self) -> String {
        self.block.to_string()
    }

    fn verified_line(&self) -> String {
        format!("ok {} {}\n", self.block, self.root)
    }
}

/// Load `keys` keys and two blocks (seed 1), then cut a checkpoint with `target_entries`.
fn make_checkpoint(name: &str, keys: &str, target_entries: &str) -> Made {
    let db = fresh_db(&format!("ckpt-src-{name}"));
    let out = ok(&[
        "load",
        "--db",
        &db,
        "--blocks",
        "2",
        "--updates-per-block",
        "50",
        "--keys",
        keys,
        "--seed",
        "1",
    ]);
    let (number, root) = out.lines().last().unwrap().split_once(' ').unwrap();
    let stats = json(&ok(&["stats", "--db", &db, "--json"]));
    assert_eq!(stats["block"].as_u64().unwrap().to_string(), number);
    assert_eq!(stats["root"], root);
    let dir = fresh_dir(name);
    let created = json(&ok(&[
        "checkpoint",
        "create",
        "--db",
        &db,
        "--out",
        s(&dir),
        "--json",
        "--target-entries",
        target_entries,
        "--max-chunk-bytes",
        "65536",
    ]));
    assert_eq!(created["block"].as_u64().unwrap().to_string(), number, "{created}");
    assert_eq!(created["root"], root, "{created}");
    let chunks = created["chunks"].as_u64().unwrap();
    assert_eq!(created["chunks_written"], chunks, "{created}");
    assert_eq!(std::fs::read_dir(dir.join("chunks")).unwrap().count() as u64, chunks);
    let id = created["id"].as_str().unwrap().to_string();
    assert!(dir.join("checkpoints").join(&id).join("manifest").is_file());
    Made {
        db,
        dir,
        id,
        block: number.parse().unwrap(),
        root: root.to_string(),
        chunks,
        entries: created["entries"].as_u64().unwrap(),
    }
}

/// `checkpoint restore` arguments.
fn restore_args(db: &str, m: &Made, sources: &[&str], extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> =
        ["checkpoint", "restore", "--db", db, "--block", &m.block(), "--root", &m.root]
            .iter()
            .map(|a| a.to_string())
            .collect();
    for src in sources {
        args.extend(["--source".to_string(), src.to_string()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A running `arbor checkpoint serve` on a free port, killed when dropped.
pub(super) struct Server {
    child: Child,
    pub(super) url: String,
}

impl Server {
    pub(super) fn start(dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
            .args(["checkpoint", "serve", "--dir", s(dir), "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        // The guard first: a failure below still kills the process.
        let mut server = Server { child, url: String::new() };
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        // `serving DIR on http://ADDR`
        let url = line
            .trim_end()
            .rsplit_once(" on ")
            .map(|(_, u)| u.to_string())
            .unwrap_or_else(|| panic!("serve's first line: {line:?}"));
        assert!(url.starts_with("http://127.0.0.1:"), "{line:?}");
        server.url = url;
        server
    }

    /// `HOST:PORT`.
    fn addr(&self) -> &str {
        self.url.trim_start_matches("http://")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP "server" that accepts connections and never answers: its URL. The accepted
/// streams stay open (in a thread that lives as long as the test binary).
fn hanging_source() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            match stream {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
    });
    url
}

/// An HTTP answer.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A `Transfer-Encoding: chunked` body, decoded.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = find(b, b"\r\n").expect("chunk size line");
        let line = std::str::from_utf8(&b[..eol]).unwrap();
        let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16).unwrap();
        b = &b[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        assert_eq!(&b[size..size + 2], b"\r\n", "chunk not followed by CRLF");
        b = &b[size + 2..];
    }
}

/// One HTTP/1.1 request (`Connection: close`) over a raw socket; the whole answer.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let end = find(&raw, b"\r\n\r\n").unwrap_or_else(|| panic!("no header end: {raw:?}"));
    let head = std::str::from_utf8(&raw[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line}");
    let status: u16 = parts.next().unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap_or_else(|| panic!("header {l:?}"));
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let mut reply = Reply { status, headers, body: raw[end + 4..].to_vec() };
    if method != "HEAD" {
        if reply.header("Transfer-Encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            reply.body = dechunk(&reply.body);
        } else if let Some(len) = reply.header("Content-Length") {
            assert_eq!(reply.body.len(), len.parse::<usize>().unwrap(), "{path}: Content-Length");
        }
    }
    reply
}

#[test]
fn create_list_verify_restore_round_trip() {
    let m = make_checkpoint("round-trip", "20000", "256");
    assert!(m.chunks >= 20, "{} chunks: the options should cut many", m.chunks);
    let dir = s(&m.dir);

    // list: JSON and text.
    let listed = json(&ok(&["checkpoint", "list", "--source", dir, "--json"]));
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], m.id.as_str());
    assert_eq!(listed[0]["block"], m.block);
    assert_eq!(listed[0]["root"], m.root.as_str());
    assert_eq!(listed[0]["chunks"], m.chunks);
    assert_eq!(listed[0]["layout"], "ethereum");
    let text = ok(&["checkpoint", "list", "--source", dir]);
    assert!(text.starts_with(&format!("{} block {} root {}", m.id, m.block, m.root)), "{text}");

    // verify: valid against the trusted block and root.
    let b = m.block();
    let out = ok(&["checkpoint", "verify", "--source", dir, "--block", &b, "--root", &m.root]);
    assert!(out.starts_with(&format!("valid {} block {} root {}", m.id, m.block, m.root)), "{out}");
    let v = json(&ok(&[
        "checkpoint",
        "verify",
        "--source",
        dir,
        "--block",
        &b,
        "--root",
        &m.root,
        "--json",
    ]));
    assert_eq!((v["chunks"].as_u64(), v["entries"].as_u64()), (Some(m.chunks), Some(m.entries)));

    // A wrong root, or the right root at another block: refused, no panic.
    let wrong = format!("0x{}", "11".repeat(32));
    let o = arbor(&["checkpoint", "verify", "--source", dir, "--block", &b, "--root", &wrong]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_one_line_error(&o, "offers no checkpoint");
    let other = (m.block + 1).to_string();
    let o = arbor(&["checkpoint", "verify", "--source", dir, "--block", &other, "--root", &m.root]);
    assert_one_line_error(&o, "offers no checkpoint");

    // restore into a new database, with a report.
    let db = fresh_restore_db("round-trip");
    let report = fresh_dir("round-trip-report.json");
    let args = restore_args(&db, &m, &[dir], &["--report", s(&report), "--json"]);
    let o = arbor(&strs(&args));
    assert!(o.status.success(), "restore: {}{}", stdout(&o), stderr(&o));
    no_panic(&o);
    let printed = json(&stdout(&o));
    assert_eq!(printed["outcome"], "restored", "{printed}");
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
    let r = json(&std::fs::read_to_string(&report).unwrap());
    assert_eq!(r["outcome"], "restored", "{r}");
    assert_eq!(r["checkpoint"], m.id.as_str(), "{r}");
    assert_eq!((r["block"].as_u64(), r["root"].as_str()), (Some(m.block), Some(m.root.as_str())));
    assert_eq!(r["chunks"], m.chunks, "{r}");
    assert_eq!(r["fetched_chunks"], m.chunks, "{r}");
    assert_eq!(r["resumed_chunks"], 0, "{r}");
    assert_eq!(r["entries_restored"], m.entries, "{r}");
    let src = &r["sources"][0];
    assert_eq!(src["source"], dir, "{r}");
    assert_eq!(src["chunks_served"], m.chunks, "{r}");
    assert!(src["excluded"].is_null(), "{r}");
    assert!(!Path::new(&db).join("restore-staging").exists(), "staging left behind");
    assert!(!Path::new(&format!("{db}.restore-staging")).exists(), "staging beside the db");

    // The restored state answers like the original.
    let workload = bench::workload::Workload::new(1, 20_000, 50);
    for i in [0u64, 7, 19_999, 20_020] {
        let key = hex::encode(workload.key(i));
        assert_eq!(ok(&["get", "--db", &db, &key]), ok(&["get", "--db", &m.db, &key]), "key {i}");
    }
    let stats = json(&ok(&["stats", "--db", &db, "--json"]));
    assert_eq!(
        (stats["block"].as_u64(), stats["root"].as_str()),
        (Some(m.block), Some(m.root.as_str()))
    );
    assert!(stats["unfinished_bulk_load"].is_null(), "{stats}");

    // Restoring again into the now complete database (a rerun after a kill that landed
    // after the last batch) succeeds at once, asking no source (the only one named is
    // gone), and the database stays as it was; the JSON keeps the report's shape.
    let gone =
        format!("http://{}", TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap());
    let gone = gone.as_str();
    let out = ok(&strs(&restore_args(&db, &m, &[gone], &[])));
    assert_eq!(
        out,
        format!("already restored: block {} root {}; nothing to do\n", m.block, m.root)
    );
    let again = json(&ok(&strs(&restore_args(&db, &m, &[gone], &["--json"]))));
    assert_eq!(again["outcome"], "already restored", "{again}");
    assert_eq!((again["block"].as_u64(), again["root"].as_str()), (Some(m.block), Some(&*m.root)));
    assert_eq!((again["chunks"].as_u64(), again["fetched_chunks"].as_u64()), (Some(0), Some(0)));
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&again), keys(&printed), "{again}");
    assert_eq!(again["sources"][0]["source"], gone, "{again}");
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
    // The trusted root of another state: refused (no source offers it), nothing changes.
    let other = format!("0x{}", "11".repeat(32));
    let args = ["checkpoint", "restore", "--db", &db, "--block", &b, "--root", &other];
    let o = arbor(&[&args[..], &["--source", dir]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

#[test]
fn restore_from_good_corrupt_and_hanging_http_sources() {
    let m = make_checkpoint("three", "20000", "256");
    // The copy: one byte flipped in the chunks whose digest starts below 0x4d (~30%).
    let corrupt = fresh_dir("three-corrupt");
    test_support::copy_tree(&m.dir, &corrupt);
    let mut flipped = 0;
    for e in std::fs::read_dir(corrupt.join("chunks")).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if u8::from_str_radix(&name[..2], 16).unwrap() < 0x4d {
            let mut bytes = std::fs::read(&path).unwrap();
            let at = bytes.len() / 2;
            bytes[at] ^= 0x01;
            std::fs::write(&path, bytes).unwrap();
            flipped += 1;
        }
    }
    assert!(flipped * 5 >= m.chunks && flipped * 5 <= m.chunks * 2, "{flipped}/{}", m.chunks);

    let good = Server::start(&m.dir);
    let bad = Server::start(&corrupt);
    let hang = hanging_source();
    let db = fresh_restore_db("three");
    let report = fresh_dir("three-report.json");
    let args = restore_args(
        &db,
        &m,
        &[&good.url, &bad.url, &hang],
        &["--timeout-ms", "1000", "--report", s(&report)],
    );
    let t0 = Instant::now();
    let o = arbor(&strs(&args));
    let took = t0.elapsed();
    assert!(o.status.success(), "restore: {}{}", stdout(&o), stderr(&o));
    no_panic(&o);
    assert!(took < Duration::from_secs(10), "the hanging source held the restore for {took:?}");
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());

    let r = json(&std::fs::read_to_string(&report).unwrap());
    assert_eq!(r["outcome"], "restored", "{r}");
    assert_eq!(r["chunks"], m.chunks, "{r}");
    let sources = r["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 3, "{r}");
    let (g, b, h) = (&sources[0], &sources[1], &sources[2]);
    assert_eq!((g["source"].as_str(), b["source"].as_str()), (Some(&*good.url), Some(&*bad.url)));
    assert_eq!(h["source"], hang.as_str());
    // The genuine server: never blamed, served chunks.
    assert!(g["excluded"].is_null() && g["bad_chunks"] == 0, "{r}");
    assert!(g["chunks_served"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(g["offered_checkpoint"], true, "{r}");
    // The corrupted copy: named and excluded, with the bad chunks it served.
    assert!(b["excluded"].is_string(), "corrupt source not excluded: {r}");
    assert!(b["bad_chunks"].as_u64().unwrap() >= 1, "{r}");
    // The silent one: excluded or at least charged with timeouts; it served nothing.
    assert!(h["excluded"].is_string() || h["timeouts"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(h["chunks_served"], 0, "{r}");
    assert_eq!(h["offered_checkpoint"], false, "{r}");
    // Every chunk was applied once; a bad chunk cost one more fetch.
    let served: u64 = sources.iter().map(|x| x["chunks_served"].as_u64().unwrap()).sum();
    let bad_chunks: u64 = sources.iter().map(|x| x["bad_chunks"].as_u64().unwrap()).sum();
    assert_eq!(served, m.chunks, "{r}");
    assert_eq!(r["fetched_chunks"].as_u64().unwrap(), m.chunks + bad_chunks, "{r}");

    // verify names the corrupted copy invalid (exit 1), over HTTP and from its directory,
    // and the genuine server valid; list gives up on the silent one after its timeout.
    let b = m.block();
    for src in [bad.url.as_str(), s(&corrupt)] {
        let o = arbor(&["checkpoint", "verify", "--source", src, "--block", &b, "--root", &m.root]);
        no_panic(&o);
        assert_eq!(o.status.code(), Some(1), "{src}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).starts_with(&format!("invalid {}: chunk ", m.id)), "{}", stdout(&o));
    }
    let o =
        arbor(&["checkpoint", "verify", "--source", &good.url, "--block", &b, "--root", &m.root]);
    assert!(stdout(&o).starts_with(&format!("valid {}", m.id)), "{}{}", stdout(&o), stderr(&o));
    let t0 = Instant::now();
    let o = arbor(&["checkpoint", "list", "--source", &hang, "--timeout-ms", "300"]);
    assert_one_line_error(&o, "timed out");
    assert!(t0.elapsed() < Duration::from_secs(5), "list took {:?}", t0.elapsed());
    drop((good, bad));
}

#[test]
fn restore_killed_then_resumed() {
    let mut rng = ChaCha8Rng::seed_from_u64(seed("restore_killed_then_resumed"));
    let m = make_checkpoint("kill", "200000", "512");
    let dir = s(&m.dir);
    let extra = ["--workers", "1"];
    let reference = fresh_restore_db("kill-reference");
    let t0 = Instant::now();
    ok(&strs(&restore_args(&reference, &m, &[dir], &extra)));
    let full = t0.elapsed();
    assert_eq!(ok(&["verify", "--db", &reference]), m.verified_line());

    let key = hex::encode(bench::workload::Workload::new(1, 200_000, 50).key(3));
    let mut seen = Vec::new();
    let mut mid = 0;
    for i in 0..12 {
        let db = fresh_restore_db(&format!("kill-{i}"));
        let args = restore_args(&db, &m, &[dir], &extra);
        let delay = full.mul_f64(rng.gen_range(0.15..0.85));
        let killed = kill_after(&strs(&args), delay);
        // What the kill left: nothing, an empty database, the finished state, or an
        // unfinished restore that verify and get refuse with one line naming it.
        let o = arbor(&["verify", "--db", &db]);
        no_panic(&o);
        let left = if o.status.success() {
            let line = stdout(&o);
            if line.trim() == EMPTY_HEAD {
                "empty"
            } else {
                assert_eq!(line, m.verified_line(), "killed: {killed}");
                "complete"
            }
        } else if stderr(&o).contains("no database at") {
            assert_one_line_error(&o, "no database at");
            "none"
        } else {
            assert_one_line_error(&o, "unfinished bulk load");
            assert_eq!(o.status.code(), Some(3));
            let g = arbor(&["get", "--db", &db, &key]);
            no_panic(&g);
            assert_one_line_error(&g, "unfinished bulk load");
            assert_eq!(g.status.code(), Some(3));
            assert!(stdout(&g).is_empty(), "get printed {}", stdout(&g));
            "unfinished"
        };
        if left == "complete" {
            seen.push((delay, left, 0));
            continue;
        }
        // The same restore again resumes: only the missing chunks are fetched.
        let report = fresh_dir(&format!("kill-{i}-report.json"));
        let mut again = args.clone();
        again.extend(["--report".to_string(), s(&report).to_string()]);
        let o = arbor(&strs(&again));
        assert!(o.status.success(), "resume after {left}: {}{}", stdout(&o), stderr(&o));
        no_panic(&o);
        assert_eq!(ok(&["verify", "--db", &db]), m.verified_line(), "resumed after {left}");
        let r = json(&std::fs::read_to_string(&report).unwrap());
        assert_eq!(r["outcome"], "restored", "{r}");
        assert_eq!(r["chunks"], m.chunks, "{r}");
        let resumed = r["resumed_chunks"].as_u64().unwrap();
        let fetched = r["fetched_chunks"].as_u64().unwrap();
        assert_eq!(resumed + fetched, m.chunks, "only the missing chunks are fetched: {r}");
        if left != "unfinished" {
            assert_eq!(resumed, 0, "{left}: {r}");
        }
        if resumed > 0 && resumed < m.chunks {
            mid += 1;
        }
        seen.push((delay, left, resumed));
        let _ = std::fs::remove_dir_all(&db);
        if mid >= 1 && i >= 2 {
            break;
        }
    }
    eprintln!("restore of {} chunks in {full:?}; kills (delay, left, resumed): {seen:?}", m.chunks);
    assert!(mid >= 1, "no kill landed mid-restore: {seen:?}");

    // SIGTERM instead: the restore stops cleanly (exit 3, `stopped`, the report written)
    // unless it lands before the handler is installed or after the end.
    let db = fresh_restore_db("kill-term");
    let report = fresh_dir("kill-term-report.json");
    let mut args = restore_args(&db, &m, &[dir], &extra);
    args.extend(["--report".to_string(), s(&report).to_string()]);
    let child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(full.mul_f64(0.5));
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let o = child.wait_with_output().unwrap();
    no_panic(&o);
    eprintln!("SIGTERM after {:?}: {:?}", full.mul_f64(0.5), o.status);
    if o.status.code() == Some(3) {
        assert_one_line_error(&o, "stopped; run the restore again to resume");
        let r = json(&std::fs::read_to_string(&report).unwrap());
        assert!(r["outcome"].as_str().unwrap().starts_with("stopped"), "{r}");
        let o = arbor(&strs(&args));
        assert!(o.status.success(), "resume after SIGTERM: {}", stderr(&o));
        let again = json(&std::fs::read_to_string(&report).unwrap());
        let resumed = again["resumed_chunks"].as_u64().unwrap();
        assert_eq!(resumed + again["fetched_chunks"].as_u64().unwrap(), m.chunks, "{again}");
        assert_eq!(resumed, r["fetched_chunks"].as_u64().unwrap(), "stopped {r}, then {again}");
    }
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

#[test]
fn hostile_command_lines() {
    let m = make_checkpoint("hostile", "3000", "64");
    let dir = s(&m.dir);
    let b = m.block();

    // Restore into the database the checkpoint came from: it holds the trusted block and
    // root already, so there is nothing to do (exit 0), and it is left unchanged. (A
    // database at another root is refused: see
    // `a_chunk_longer_than_its_manifest_says_proves_the_checkpoint_bad`.)
    let before = ok(&["stats", "--db", &m.db, "--json"]);
    let o = arbor(&strs(&restore_args(&m.db, &m, &[dir], &[])));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("already restored: "), "{}", stdout(&o));
    let after = ok(&["stats", "--db", &m.db, "--json"]);
    assert_eq!(json(&before)["root"], json(&after)["root"]);
    assert_eq!(json(&before)["block"], json(&after)["block"]);
    assert!(json(&after)["unfinished_bulk_load"].is_null(), "{after}");
    assert_eq!(ok(&["verify", "--db", &m.db]), m.verified_line());

    // Usage errors: exit 2 with one `error:` line, before anything is created.
    let db = fresh_restore_db("hostile");
    let usage = |args: &[&str], mentions: &str| {
        let o = arbor(args);
        assert_one_line_error(&o, mentions);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    };
    let restore = |root: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> =
            ["checkpoint", "restore", "--db", &db, "--block", &b, "--root", root, "--source", dir]
                .iter()
                .map(|x| x.to_string())
                .collect();
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    usage(&strs(&restore("0xzz", &[])), "--root");
    usage(&strs(&restore(&"g".repeat(64), &[])), "--root");
    usage(&strs(&restore("0x1234", &[])), "--root");
    usage(&strs(&restore(&format!("{}00", m.root), &[])), "--root");
    usage(&strs(&restore(&m.root, &["--workers", "0"])), "--workers");
    usage(&strs(&restore(&m.root, &["--workers", "65"])), "--workers");
    usage(&strs(&restore(&m.root, &["--timeout-ms", "0"])), "--timeout-ms");
    usage(&strs(&restore(&m.root, &["--timeout-ms", "-5"])), "'-5'");
    let missing_dir = fresh_dir("hostile-missing");
    let report_in_missing = missing_dir.join("report.json");
    usage(&strs(&restore(&m.root, &["--report", s(&report_in_missing)])), "--report");
    usage(&strs(&restore(&m.root, &["--report", dir])), "--report");
    let mut many = restore(&m.root, &[]);
    for _ in 0..64 {
        many.extend(["--source".to_string(), dir.to_string()]);
    }
    usage(&strs(&many), "--source");
    usage(&["checkpoint", "verify", "--source", dir, "--block", &b, "--root", "0x12"], "--root");
    usage(&["checkpoint", "verify", "--source", dir, "--block", "x", "--root", &m.root], "--block");
    let out = s(&missing_dir);
    let create = |flag: &str, value: &str| -> Vec<String> {
        ["checkpoint", "create", "--db", &m.db, "--out", out, flag, value]
            .iter()
            .map(|x| x.to_string())
            .collect()
    };
    usage(&strs(&create("--threads", "0")), "--threads");
    usage(&strs(&create("--threads", "100000")), "--threads");
    usage(&strs(&create("--target-entries", "0")), "--target-entries");
    usage(&strs(&create("--target-entries", "16777217")), "--target-entries");
    usage(&strs(&create("--max-chunk-bytes", "10")), "--max-chunk-bytes");
    usage(&strs(&create("--max-chunk-bytes", "16777217")), "--max-chunk-bytes");
    usage(&["checkpoint", "serve", "--dir", dir, "--threads", "0"], "--threads");
    usage(&["checkpoint", "serve", "--dir", dir, "--threads", "65"], "--threads");
    assert!(!missing_dir.exists(), "a refused create wrote its output");
    assert!(!Path::new(&db).exists(), "a refused restore created its database");

    // Sources of no supported kind: usage errors (exit 2), one line.
    let o = arbor(&strs(&restore_args(&db, &m, &["ftp://x"], &[])));
    assert_one_line_error(&o, "unsupported source");
    assert!(stderr(&o).contains("ftp://x"), "{}", stderr(&o));
    assert_eq!(o.status.code(), Some(2));
    let o = arbor(&["checkpoint", "list", "--source", "gopher://x/y"]);
    assert_one_line_error(&o, "unsupported source");
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&missing_dir)], &[])));
    assert_one_line_error(&o, "not a directory");
    assert!(!Path::new(&db).exists(), "a refused restore created its database");
    // create on the checkpoint directory (not a database) and on a missing path.
    let o = arbor(&["checkpoint", "create", "--db", dir, "--out", out]);
    assert_one_line_error(&o, "no database");
    let o = arbor(&["checkpoint", "create", "--db", s(&missing_dir), "--out", out]);
    assert_one_line_error(&o, "no database");
    assert!(!missing_dir.exists());
    let o = arbor(&["checkpoint", "serve", "--dir", s(&missing_dir)]);
    assert_one_line_error(&o, "not a directory");
    let o = arbor(&["checkpoint", "serve", "--dir", dir, "--listen", "not-an-address"]);
    assert_one_line_error(&o, "not-an-address");

    // An empty directory: list prints `no checkpoints`; verify and restore find nothing.
    let empty = fresh_dir("hostile-empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert_eq!(ok(&["checkpoint", "list", "--source", s(&empty)]), "no checkpoints\n");
    assert_eq!(json(&ok(&["checkpoint", "list", "--source", s(&empty), "--json"])), json("[]"));
    let o =
        arbor(&["checkpoint", "verify", "--source", s(&empty), "--block", &b, "--root", &m.root]);
    assert_one_line_error(&o, "offers no checkpoint");
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&empty)], &[])));
    assert_one_line_error(&o, "no source offers a checkpoint");
    // A missing directory: an error naming it.
    let o = arbor(&["checkpoint", "list", "--source", s(&missing_dir)]);
    assert_one_line_error(&o, "hostile-missing");
    let v = ["checkpoint", "verify", "--source", s(&missing_dir), "--block", &b, "--root", &m.root];
    assert_one_line_error(&arbor(&v), "hostile-missing");

    // A source holding only garbage manifests (one not hashing to its name, one that does
    // but does not decode) and a truncated copy of the real one: no crash anywhere.
    let garbage = fresh_dir("hostile-garbage");
    let put = |id: &str, bytes: &[u8]| {
        let d = garbage.join("checkpoints").join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("manifest"), bytes).unwrap();
    };
    put(&"ab".repeat(32), b"garbage, not a manifest");
    let junk = b"\x00\x01junk that hashes to its name".to_vec();
    put(&hex::encode(trie::keccak256(&junk).0), &junk);
    let real = std::fs::read(m.dir.join("checkpoints").join(&m.id).join("manifest")).unwrap();
    let cut = &real[..real.len() / 2];
    put(&hex::encode(trie::keccak256(cut).0), cut);
    put("not-an-id", b"ignored");
    let o = arbor(&["checkpoint", "list", "--source", s(&garbage)]);
    no_panic(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "no checkpoints\n");
    assert_eq!(
        stderr(&o).lines().filter(|l| l.starts_with("warning: ")).count(),
        3,
        "{}",
        stderr(&o)
    );
    let o =
        arbor(&["checkpoint", "verify", "--source", s(&garbage), "--block", &b, "--root", &m.root]);
    assert_one_line_error(&o, "offers no checkpoint");
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&garbage)], &[])));
    no_panic(&o);
    assert_one_line_error(&o, "no source offers a checkpoint");
    // Another source next to it still restores.
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&garbage), dir], &[])));
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

#[test]
fn serve_answers_http() {
    let m = make_checkpoint("serve", "3000", "64");
    let server = Server::start(&m.dir);
    let addr = server.addr();

    let r = http(addr, "GET", "/checkpoints", &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("Content-Type").is_some_and(|t| t.contains("json")), "{:?}", r.headers);
    let listed = json(std::str::from_utf8(&r.body).unwrap());
    assert_eq!(listed[0]["id"], m.id.as_str(), "{listed}");
    assert_eq!(listed[0]["block"], m.block, "{listed}");
    assert_eq!(listed[0]["root"], m.root.as_str(), "{listed}");
    assert_eq!(listed[0]["chunks"], m.chunks, "{listed}");
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // The manifest, named by its hash.
    let r = http(addr, "GET", &format!("/checkpoints/{}/manifest", m.id), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(hex::encode(trie::keccak256(&r.body).0), m.id);

    // A chunk: its bytes and a strong ETag; then conditional and range requests.
    let digest = std::fs::read_dir(m.dir.join("chunks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .min()
        .unwrap();
    let bytes = std::fs::read(m.dir.join("chunks").join(&digest)).unwrap();
    assert!(bytes.len() > 10);
    let path = format!("/chunks/{digest}");
    let r = http(addr, "GET", &path, &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, bytes);
    assert_eq!(hex::encode(checkpoint::ChunkHash::Blake3.digest(&r.body).0), digest);
    let etag = r.header("ETag").expect("ETag").to_string();
    assert_eq!(etag, format!("\"{digest}\""));
    // The digest with a 0x prefix names the same chunk.
    assert_eq!(http(addr, "GET", &format!("/chunks/0x{digest}"), &[]).body, bytes);

    let r = http(addr, "GET", &path, &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("ETag"), Some(etag.as_str()));
    let other = format!("\"{}\"", "0".repeat(64));
    let r = http(addr, "GET", &path, &[("If-None-Match", &other)]);
    assert_eq!((r.status, &r.body), (200, &bytes));

    let r = http(addr, "GET", &path, &[("Range", "bytes=0-9")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, bytes[..10]);
    assert_eq!(r.header("Content-Range"), Some(format!("bytes 0-9/{}", bytes.len()).as_str()));
    let r = http(addr, "GET", &path, &[("Range", "bytes=-4")]);
    assert_eq!((r.status, &r.body[..]), (206, &bytes[bytes.len() - 4..]));
    let r = http(addr, "GET", &path, &[("Range", &format!("bytes={}-", bytes.len()))]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("Content-Range"), Some(format!("bytes */{}", bytes.len()).as_str()));

    let r = http(addr, "HEAD", &path, &[]);
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty(), "HEAD with a body");

    // Unknown, malformed, other methods.
    assert_eq!(http(addr, "GET", &format!("/chunks/{}", "0".repeat(64)), &[]).status, 404);
    assert_eq!(
        http(addr, "GET", &format!("/checkpoints/{}/manifest", "0".repeat(64)), &[]).status,
        404
    );
    assert_eq!(http(addr, "GET", "/chunks/not-a-digest", &[]).status, 400);
    assert_eq!(http(addr, "GET", &format!("/chunks/{}", &digest[..63]), &[]).status, 400);
    assert_eq!(http(addr, "GET", "/checkpoints/xyz/manifest", &[]).status, 400);
    assert_eq!(http(addr, "GET", "/chunks/../checkpoints", &[]).status, 404);
    assert_eq!(http(addr, "GET", "/nothing", &[]).status, 404);
    assert_eq!(http(addr, "POST", "/checkpoints", &[]).status, 405);
    assert_eq!(http(addr, "DELETE", &path, &[]).status, 405);
    assert!(m.dir.join("chunks").join(&digest).is_file(), "DELETE removed the chunk");

    // The same server is a restore source.
    let db = fresh_restore_db("serve");
    let out = ok(&strs(&restore_args(&db, &m, &[&server.url], &[])));
    assert!(out.contains("restored block"), "{out}");
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

// A damaged manifest file next to a good checkpoint (disk corruption, an interrupted
// copy) is skipped by `checkpoint list` and `checkpoint verify`, and must not stop a
// restore from the good checkpoint beside it. Both tests below FAIL today; see the
// comments at the failing assertions.

/// A copy of `m`'s directory with a stray manifest that does not hash to its name.
fn with_damaged_manifest(m: &Made, name: &str) -> PathBuf {
    let dir = fresh_dir(name);
    test_support::copy_tree(&m.dir, &dir);
    let stray = dir.join("checkpoints").join("ab".repeat(32));
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("manifest"), b"garbage, not a manifest").unwrap();
    dir
}

#[test]
fn restore_ignores_a_damaged_manifest_beside_the_good_one() {
    let m = make_checkpoint("damaged-dir", "3000", "64");
    let dir = with_damaged_manifest(&m, "damaged-dir-copy");
    let d = s(&dir);
    let b = m.block();
    let o = arbor(&["checkpoint", "list", "--source", d]);
    assert!(o.status.success() && stdout(&o).starts_with(&m.id), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("warning: manifest"), "{}", stderr(&o));
    ok(&["checkpoint", "verify", "--source", d, "--block", &b, "--root", &m.root]);

    let db = fresh_restore_db("damaged-dir");
    let report = fresh_dir("damaged-dir-report.json");
    let o = arbor(&strs(&restore_args(&db, &m, &[d], &["--report", s(&report)])));
    no_panic(&o);
    // A stray damaged manifest must not exclude the source: chunks are checked against
    // the chosen manifest's digests one by one.
    assert!(
        o.status.success(),
        "restore refused a source with one damaged manifest: {}{}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

#[test]
fn serve_refuses_oversized_request_heads_with_431() {
    let m = make_checkpoint("serve-431", "500", "4");
    let server = Server::start(&m.dir);
    let addr = server.addr();
    let path = format!("/checkpoints/{}/manifest", m.id);
    // A header of 64 kB, and many small ones adding up to more than the bound.
    let big = "a".repeat(64 * 1024);
    let r = http(addr, "GET", &path, &[("X-Padding", &big)]);
    assert_eq!(r.status, 431, "{}", String::from_utf8_lossy(&r.body));
    let small = "b".repeat(1000);
    let many: Vec<(String, &str)> =
        (0..20).map(|i| (format!("X-Pad-{i}"), small.as_str())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(http(addr, "GET", &path, &many).status, 431);
    let long_target = format!("/chunks/{}", "c".repeat(20 * 1024));
    assert_eq!(http(addr, "HEAD", &long_target, &[]).status, 431);
    // Below the bound, the same request is answered.
    let r = http(addr, "GET", &path, &[("X-Padding", &small)]);
    assert_eq!(r.status, 200);
    assert_eq!(hex::encode(trie::keccak256(&r.body).0), m.id);
}

#[test]
fn serve_lists_despite_a_damaged_manifest() {
    let m = make_checkpoint("damaged-serve", "3000", "64");
    let dir = with_damaged_manifest(&m, "damaged-serve-copy");
    let server = Server::start(&dir);
    let r = http(server.addr(), "GET", "/checkpoints", &[]);
    // A manifest that does not hash to its name (or does not decode) is left out of the
    // listing, as the directory source skips it; it does not fail the whole listing.
    assert_eq!(r.status, 200, "GET /checkpoints: {}", String::from_utf8_lossy(&r.body).trim_end());
    let listed = json(std::str::from_utf8(&r.body).unwrap());
    assert_eq!(listed[0]["id"], m.id.as_str(), "{listed}");
    let db = fresh_restore_db("damaged-serve");
    ok(&strs(&restore_args(&db, &m, &[&server.url], &[])));
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

/// Read one HTTP response with a `Content-Length` body from a kept-alive connection.
fn read_response(r: &mut BufReader<TcpStream>) -> (u16, Vec<u8>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
    let mut len = None;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        if k.trim().eq_ignore_ascii_case("Content-Length") {
            len = Some(v.trim().parse::<usize>().unwrap());
        }
    }
    let mut body = vec![0u8; len.expect("Content-Length on a small answer")];
    r.read_exact(&mut body).unwrap();
    (status, body)
}

#[test]
fn serve_answers_kept_alive_requests_without_stalls() {
    let m = make_checkpoint("keep-alive", "3000", "64");
    let server = Server::start(&m.dir);
    let stream = TcpStream::connect(server.addr()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let path = format!("/checkpoints/{}/manifest", m.id);
    let mut took = Vec::new();
    for _ in 0..6 {
        let t0 = Instant::now();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", server.addr());
        writer.write_all(req.as_bytes()).unwrap();
        let (status, body) = read_response(&mut reader);
        took.push(t0.elapsed());
        assert_eq!(status, 200);
        assert_eq!(hex::encode(trie::keccak256(&body).0), m.id);
    }
    took.sort();
    // Answers on a kept-alive connection (what every HTTP restore worker uses) must not
    // wait for the client's delayed ACK: the server writes head and body separately, so
    // without TCP_NODELAY Nagle held each body ~40 ms (measured 44 ms per request).
    assert!(took[3] < Duration::from_millis(20), "kept-alive answers took {took:?}");
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// `checkpoint verify` checks the candidates in a restore's order until one is valid: a
/// bad checkpoint of the same block and root whose id sorts first (the order of a tie)
/// does not hide the good one; and junk names that sort first (4,097 of them, or three
/// whose manifest is a directory) do not hide it in a directory source either.
#[test]
fn verify_finds_the_valid_checkpoint_behind_bad_ones() {
    let a = make_checkpoint("behind-a", "2000", "64");
    let b = make_checkpoint("behind-b", "2000", "100");
    assert_eq!((a.block, &a.root), (b.block, &b.root));
    let (bad, good) = if a.id < b.id { (&a, &b) } else { (&b, &a) };
    let good_files = files_under(&good.dir);
    let bad_files = files_under(&bad.dir);
    let spoiled = bad_files
        .iter()
        .find(|f| f.starts_with("chunks") && !good_files.contains(f))
        .expect("a chunk of its own");
    for f in &bad_files {
        let to = good.dir.join(f);
        if !to.exists() {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let mut bytes = std::fs::read(bad.dir.join(f)).unwrap();
            if f == spoiled {
                let at = bytes.len() / 2;
                bytes[at] ^= 0x5a;
            }
            std::fs::write(&to, bytes).unwrap();
        }
    }
    let verify = |dir: &Path| {
        let root = good.root.as_str();
        ok(&["checkpoint", "verify", "--source", s(dir), "--block", &good.block(), "--root", root])
    };
    let out = verify(&good.dir);
    assert!(out.starts_with(&format!("valid {} ", good.id)), "{out}");
    // Junk names sorting before it.
    for i in 0..4097u32 {
        let d = good.dir.join("checkpoints").join(format!("{:064x}", i + 1));
        std::fs::create_dir_all(&d).unwrap();
        if i < 3 {
            std::fs::create_dir_all(d.join("manifest")).unwrap();
        } else {
            std::fs::write(d.join("manifest"), b"x").unwrap();
        }
    }
    let out = verify(&good.dir);
    assert!(out.starts_with(&format!("valid {} ", good.id)), "{out}");
}

/// Operators mount a dedicated volume at the database path: `init` creates the database on
/// the mount point (it was refused: "Device or resource busy"), and `checkpoint restore`
/// into another mount point stages inside the database, not beside it.
#[test]
fn init_and_restore_onto_mount_points() {
    let test = "init_and_restore_onto_mount_points";
    let base = fresh_dir("mounts");
    let (a, b) = (base.join("a"), base.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let Some(_a) = Mount::tmpfs(&a, test) else { return };
    let Some(_b) = Mount::tmpfs(&b, test) else { return };
    let genesis = testdata("genesis/mainnet.json");
    assert_eq!(ok(&["init", "--db", s(&a), "--genesis", &genesis]), format!("{MAINNET_ROOT}\n"));
    assert_eq!(ok(&["verify", "--db", s(&a)]), format!("ok 0 {MAINNET_ROOT}\n"));
    let out = base.join("checkpoint");
    let created = json(&ok(&[
        "checkpoint",
        "create",
        "--db",
        s(&a),
        "--out",
        s(&out),
        "--json",
        "--target-entries",
        "64",
    ]));
    assert_eq!(created["root"], MAINNET_ROOT, "{created}");
    let o = arbor(&[
        "checkpoint",
        "restore",
        "--db",
        s(&b),
        "--block",
        "0",
        "--root",
        MAINNET_ROOT,
        "--source",
        s(&out),
    ]);
    assert!(o.status.success(), "restore onto a mount point: {}{}", stdout(&o), stderr(&o));
    assert_eq!(ok(&["verify", "--db", s(&b)]), format!("ok 0 {MAINNET_ROOT}\n"));
    assert!(!b.join("restore-staging").exists(), "staging left behind");
    assert!(!base.join("b.restore-staging").exists(), "staging beside the mount point");
    assert_one_line_error(&arbor(&["init", "--db", s(&b), "--genesis", &genesis]), "not empty");
}

/// What a kill during creation leaves (the marker, and RocksDB files beside it) holds no
/// database for the commands that read one, and `init` finishes it.
#[test]
fn init_finishes_an_interrupted_creation() {
    let db = fresh_dir("interrupted-creation");
    std::fs::create_dir_all(&db).unwrap();
    std::fs::write(db.join("ARBOR-CREATING"), b"").unwrap();
    std::fs::write(db.join("CURRENT"), b"MANIFEST-000001\n").unwrap();
    std::fs::write(db.join("LOG"), b"half a creation").unwrap();
    let o = arbor(&["verify", "--db", s(&db)]);
    assert_one_line_error(&o, "no database at");
    assert!(stderr(&o).contains("creation"), "{}", stderr(&o));
    let genesis = testdata("genesis/mainnet.json");
    assert_eq!(ok(&["init", "--db", s(&db), "--genesis", &genesis]), format!("{MAINNET_ROOT}\n"));
    assert_eq!(ok(&["verify", "--db", s(&db)]), format!("ok 0 {MAINNET_ROOT}\n"));
    assert!(!db.join("ARBOR-CREATING").exists());
    // A non-empty directory without the marker is still refused.
    let other = fresh_dir("not-a-db");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"hello").unwrap();
    let o = arbor(&["init", "--db", s(&other), "--genesis", &genesis]);
    assert_one_line_error(&o, "not empty and holds no database");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);
}

/// A copy of `m`'s chunks with its manifest changed by `edit` (which may add chunks) and
/// stored under its new id, the genuine manifest left out: the directory and the id.
fn rewritten_checkpoint(
    m: &Made,
    name: &str,
    edit: impl FnOnce(&mut checkpoint::Manifest, &checkpoint::CheckpointDir),
) -> (PathBuf, String) {
    let dir = fresh_dir(name);
    test_support::copy_tree(m.dir.join("chunks"), dir.join("chunks"));
    let genuine = std::fs::read(m.dir.join("checkpoints").join(&m.id).join("manifest")).unwrap();
    let mut manifest = checkpoint::Manifest::decode(&genuine).unwrap();
    let out = checkpoint::CheckpointDir::new(&dir);
    edit(&mut manifest, &out);
    let bytes = manifest.encode();
    let id = trie::keccak256(&bytes);
    out.put_manifest(&id, &bytes).unwrap();
    (dir, hex::encode(id.0))
}

/// A checkpoint proven bad is abandoned, not kept for a resume. The only checkpoint a
/// source offers, forged consistently (a chunk's value altered, the chunk stored under its
/// new digest, a manifest naming it stored under its own hash): the restore exits 1 with
/// one `error:` line naming it and its source, and leaves an empty database that a
/// restore from the honest source then takes (it was left marked with the forged
/// checkpoint, exit 3, and the honest restore was refused). A manifest misstating its flat
/// bytes (never checked before) is `invalid` for `verify` and refused the same way.
#[test]
fn a_bad_checkpoint_is_abandoned_and_an_honest_restore_follows() {
    let m = make_checkpoint("forged", "3000", "64");
    let (forged, forged_id) = rewritten_checkpoint(&m, "forged-copy", |manifest, out| {
        let k = manifest.chunks.len() / 2;
        let bytes = out.chunk(&manifest.chunks[k].digest).unwrap().unwrap();
        let mut chunk = checkpoint::Chunk::decode(&bytes).unwrap();
        let seg = chunk.segments.iter_mut().find(|s| !s.entries.is_empty()).unwrap();
        let mut value = seg.entries.last().unwrap().1.to_vec();
        *value.last_mut().unwrap() ^= 0x01;
        seg.entries.last_mut().unwrap().1 = &value;
        let altered = chunk.encode();
        manifest.chunks[k].digest = manifest.chunk_hash.digest(&altered);
        out.put_chunk(&manifest.chunks[k].digest, &altered).unwrap();
    });
    let db = fresh_restore_db("forged");
    let report = fresh_dir("forged-report.json");
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&forged)], &["--report", s(&report)])));
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert_one_line_error(&o, &format!("checkpoint {forged_id} offered by {}", s(&forged)));
    assert!(stderr(&o).contains("range entries disagree with the trie"), "{}", stderr(&o));
    let r = json(&std::fs::read_to_string(&report).unwrap());
    assert!(r["abandoned"][0].as_str().unwrap().starts_with(&forged_id), "{r}");
    assert_eq!(r["sources"][0]["bad_checkpoints"], serde_json::json!([forged_id]), "{r}");
    assert_eq!(ok(&["verify", "--db", &db]), format!("{EMPTY_HEAD}\n"));
    // The honest source, into the same database.
    ok(&strs(&restore_args(&db, &m, &[s(&m.dir)], &[])));
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());

    // The flat bytes: `verify` says invalid (exit 1), the restore fetches and verifies
    // every chunk, finds that they do not add up, abandons it (exit 1).
    let (misstated, misstated_id) =
        rewritten_checkpoint(&m, "flat-bytes-copy", |manifest, _| manifest.flat_bytes = 0);
    let b = m.block();
    let v = ["checkpoint", "verify", "--source", s(&misstated), "--block", &b, "--root", &m.root];
    let o = arbor(&v);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with(&format!("invalid {misstated_id}: ")), "{out}");
    assert!(out.contains("the manifest says 0"), "{out}");
    let db = fresh_restore_db("flat-bytes");
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&misstated)], &[])));
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert_one_line_error(&o, &format!("checkpoint {misstated_id} offered by"));
    assert!(stderr(&o).contains("misstates"), "{}", stderr(&o));
    ok(&strs(&restore_args(&db, &m, &[s(&m.dir)], &[])));
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

/// An S3 endpoint that refuses connections is unreachable, not "timed out": the client's
/// retried error names its `retry_timeout`, which a match on the message took for one.
#[test]
fn a_refused_s3_endpoint_is_not_reported_as_a_timeout() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let o = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["checkpoint", "list", "--source", "s3://bucket"])
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ACCESS_KEY_ID", "k")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_one_line_error(&o, "s3://bucket");
    assert!(!stderr(&o).contains("timed out"), "{}", stderr(&o));
}

/// A Substrate V1 database (a chain spec with two child tries, values of 10, 32, 33 and 100
/// bytes): its checkpoint records the layout, verifies, and restores into a new directory
/// created in that layout (same head, deep verify, key proofs that verify); a restore into
/// an existing database of another layout is a usage error that writes nothing.
#[test]
fn a_substrate_checkpoint_restores_in_its_layout() {
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let hex = |b: &[u8]| format!("0x{}", hex::encode(b));
    let mut entries = |n: usize| -> serde_json::Map<String, Value> {
        (0..n)
            .map(|i| {
                let key: Vec<u8> = (0..rng.gen_range(4..40)).map(|_| rng.gen()).collect();
                let value: Vec<u8> = (0..[10, 32, 33, 100][i % 4]).map(|_| rng.gen()).collect();
                (hex(&key), Value::String(hex(&value)))
            })
            .collect()
    };
    let top = entries(400);
    let (child, other) = (entries(200), entries(3));
    let spec = serde_json::json!({"genesis": {"raw": {
        "top": top,
        "childrenDefault": {hex(b"child"): child, hex(b"other"): other},
    }}});
    let spec_file = fresh_dir("substrate-spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let src = fresh_db("ckpt-substrate-src");
    ok(&["init", "--db", &src, "--chain-spec", s(&spec_file), "--layout", "substrate-v1"]);
    let line = ok(&["verify", "--db", &src, "--deep"]);
    let root = line.split_whitespace().nth(2).unwrap().to_string();
    let dir = fresh_dir("substrate");
    let created = json(&ok(&[
        "checkpoint",
        "create",
        "--db",
        &src,
        "--out",
        s(&dir),
        "--json",
        "--target-entries",
        "32",
    ]));
    assert_eq!(created["root"], root, "{created}");
    assert!(created["chunks"].as_u64().unwrap() > 5, "{created}");
    let verified = json(&ok(&[
        "checkpoint",
        "verify",
        "--source",
        s(&dir),
        "--block",
        "0",
        "--root",
        &root,
        "--json",
    ]));
    assert_eq!(verified["valid"], true, "{verified}");
    assert_eq!(verified["layout"], "substrate-v1", "{verified}");
    assert_eq!(verified["storage_tries"], 2, "{verified}");
    let listed = json(&ok(&["checkpoint", "list", "--source", s(&dir), "--json"]));
    assert_eq!(listed[0]["layout"], "substrate-v1", "{listed}");
    let text = ok(&["checkpoint", "list", "--source", s(&dir)]);
    assert!(text.trim_end().ends_with(" substrate-v1 blake3"), "{text}");
    let restore = |db: &str| {
        let args = ["checkpoint", "restore", "--db", db, "--block", "0", "--root", &root];
        arbor(&[&args[..], &["--source", s(&dir)]].concat())
    };
    let dst = fresh_restore_db("substrate");
    let o = restore(&dst);
    no_panic(&o);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(ok(&["verify", "--db", &dst, "--deep"]), line);
    assert_eq!(json(&ok(&["stats", "--db", &dst, "--json"]))["layout"], "substrate-v1");
    for key in top.keys().take(3) {
        let proof = ok(&["prove", "--db", &dst, key]);
        assert_eq!(json(&proof)["layout"], "substrate-v1");
        let file = fresh_dir("substrate-proof.json");
        std::fs::write(&file, &proof).unwrap();
        assert_eq!(ok(&["verify-proof", "--root", &root, s(&file)]).trim(), "valid");
    }
    // A restore that finds no checkpoint leaves a new, empty Ethereum database; the
    // Substrate checkpoint is then refused for it, and nothing is written.
    let eth = fresh_restore_db("substrate-into-eth");
    let zero = format!("0x{}", "00".repeat(32));
    let args = ["checkpoint", "restore", "--db", &eth, "--block", "0", "--root", &zero];
    let o = arbor(&[&args[..], &["--source", s(&dir)]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let o = restore(&eth);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert_one_line_error(&o, "the checkpoint holds substrate-v1 tries");
    assert!(stderr(&o).contains("ethereum"), "{}", stderr(&o));
    assert_eq!(ok(&["verify", "--db", &eth]), format!("{EMPTY_HEAD}\n"));
}
