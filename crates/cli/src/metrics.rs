//! `--metrics ADDR` on the long-running commands (`load`, `import`): Prometheus text
//! exposition on `GET /metrics`, served from a background thread while the command runs.
//!
//! Series (Prometheus conventions: base units, `_total` counters, a histogram):
//! - `arbor_blocks_committed_total`, `arbor_block_changes_total` (changes for `load`,
//!   transactions for `import`), `arbor_head_block`;
//! - `arbor_commit_duration_seconds` (histogram of one block's commit);
//! - `arbor_store_persisted_block`, `arbor_store_unpersisted_layers`,
//!   `arbor_store_unpersisted_bytes`, `arbor_store_written_bytes_total`,
//!   `arbor_store_commit_waits_total`;
//! - `arbor_cache_hits_total{cache="node"|"flat"}`, `arbor_cache_misses_total{…}`,
//!   `arbor_cache_evictions_total{…}`, `arbor_cache_bytes{…}`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use store::ReadHandle;

/// Upper bounds (seconds) of the commit-duration histogram's buckets.
const BUCKETS: [f64; 12] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// What the command records as it commits.
#[derive(Default)]
pub(crate) struct Counters {
    blocks: AtomicU64,
    changes: AtomicU64,
    head: AtomicU64,
    /// Per bucket (cumulative counts are computed when scraped), then +Inf.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    /// Sum of the commit durations, in nanoseconds.
    sum_ns: AtomicU64,
    /// Held while a block's counters change and while they are read for a scrape, so a
    /// scrape never sees one block counted by some series and not by others.
    consistent: std::sync::Mutex<()>,
}

impl Counters {
    /// One committed block.
    pub(crate) fn block(&self, number: u64, changes: u64, commit: Duration) {
        let _consistent = self.consistent.lock().unwrap_or_else(|e| e.into_inner());
        self.blocks.fetch_add(1, Ordering::Relaxed);
        self.changes.fetch_add(changes, Ordering::Relaxed);
        self.head.store(number, Ordering::Relaxed);
        let secs = commit.as_secs_f64();
        let i = BUCKETS.iter().position(|b| secs <= *b).unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(commit.as_nanos().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }
}

/// The metrics endpoint; stops when dropped.
pub(crate) struct Endpoint {
    pub(crate) counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A bound metrics listener, not serving yet: commands bind before they touch the
/// database, so an address in use fails before any work.
pub(crate) struct Listener(tiny_http::Server);

/// Bind the metrics listener on `addr`, if any.
pub(crate) fn bind(addr: Option<&SocketAddr>) -> Result<Option<Listener>> {
    let Some(addr) = addr else { return Ok(None) };
    let server = tiny_http::Server::http(addr)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot serve metrics on {addr}"))?;
    Ok(Some(Listener(server)))
}

/// Serve the metrics of `store` (and of the returned counters) on `addr`; the bound
/// address is printed to stderr (`127.0.0.1:0` picks a free port).
pub(crate) fn serve(server: Listener, store: ReadHandle) -> Result<Endpoint> {
    let Listener(server) = server;
    if let Some(a) = server.server_addr().to_ip() {
        errln!("metrics on http://{a}/metrics");
    }
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (counters.clone(), stop.clone());
    let thread = std::thread::Builder::new()
        .name("arbor-metrics".into())
        .spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok(Some(req)) = server.recv_timeout(Duration::from_millis(100)) else {
                    continue;
                };
                let resp = if req.url() == "/metrics" {
                    let ct = "text/plain; version=0.0.4; charset=utf-8";
                    let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], ct.as_bytes());
                    let r = tiny_http::Response::from_string(render(&c, &store));
                    match header {
                        Ok(h) => r.with_header(h),
                        Err(()) => r,
                    }
                } else {
                    tiny_http::Response::from_string("see /metrics\n").with_status_code(404)
                };
                let _ = req.respond(resp);
            }
        })
        .context("cannot start the metrics thread")?;
    Ok(Endpoint { counters, stop, thread: Some(thread) })
}

/// The exposition text.
fn render(c: &Counters, store: &ReadHandle) -> String {
    let _consistent = c.consistent.lock().unwrap_or_else(|e| e.into_inner());
    let m = store.metrics();
    let mut out = String::with_capacity(4096);
    let mut one = |name: &str, kind: &str, help: &str, value: String| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
    one(
        "arbor_blocks_committed_total",
        "counter",
        "Blocks committed by this process.",
        load(&c.blocks),
    );
    one(
        "arbor_block_changes_total",
        "counter",
        "Changes (load) or transactions (import) committed.",
        load(&c.changes),
    );
    one("arbor_head_block", "gauge", "Number of the newest committed block.", load(&c.head));
    one(
        "arbor_store_persisted_block",
        "gauge",
        "Newest block on disk.",
        m.persisted_number.to_string(),
    );
    one(
        "arbor_store_unpersisted_layers",
        "gauge",
        "Committed blocks waiting for the writer.",
        m.unpersisted_layers.to_string(),
    );
    one(
        "arbor_store_unpersisted_bytes",
        "gauge",
        "Bytes held by unpersisted layers.",
        m.unpersisted_bytes.to_string(),
    );
    one(
        "arbor_store_written_bytes_total",
        "counter",
        "Bytes the background writer wrote.",
        m.bytes_written.to_string(),
    );
    one(
        "arbor_store_commit_waits_total",
        "counter",
        "Commits that waited for the writer.",
        m.commit_waits.to_string(),
    );
    render_histogram(&mut out, c);
    render_caches(&mut out, &m);
    out
}

/// The commit-duration histogram: cumulative buckets, the sum and the count.
fn render_histogram(out: &mut String, c: &Counters) {
    let name = "arbor_commit_duration_seconds";
    let _ = writeln!(out, "# HELP {name} Time one block's commit took.\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (i, bound) in BUCKETS.iter().enumerate() {
        cumulative += c.buckets[i].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    cumulative += c.buckets[BUCKETS.len()].load(Ordering::Relaxed);
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
    let sum = c.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
    let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {cumulative}");
}

/// The node and flat caches' series, one line per cache.
fn render_caches(out: &mut String, m: &store::StoreMetrics) {
    for (series, help, value) in [
        (
            "arbor_cache_hits_total",
            "Cache lookups that found a value.",
            [m.node_cache.hits, m.flat_cache.hits],
        ),
        (
            "arbor_cache_misses_total",
            "Cache lookups that found nothing.",
            [m.node_cache.misses, m.flat_cache.misses],
        ),
        (
            "arbor_cache_evictions_total",
            "Entries evicted to stay within the budget.",
            [m.node_cache.evictions, m.flat_cache.evictions],
        ),
        ("arbor_cache_bytes", "Bytes cached.", [m.node_cache.bytes, m.flat_cache.bytes]),
    ] {
        let kind = if series.ends_with("_total") { "counter" } else { "gauge" };
        let _ = writeln!(out, "# HELP {series} {help}\n# TYPE {series} {kind}");
        let _ = writeln!(
            out,
            "{series}{{cache=\"node\"}} {}\n{series}{{cache=\"flat\"}} {}",
            value[0], value[1]
        );
    }
}
