//! `arbor bench checkpoint`: checkpoint creation against a plain scan of `flat`, verified
//! restore against a plain bulk load with the bottom-up rebuild, a restore from three
//! local HTTP servers against a local one, and the checkpoint's bytes against the flat
//! bytes. Every round runs every measurement once (rounds interleaved); the figures are
//! medians, and each ratio is the median of the per-round ratios.

pub(crate) mod report;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use alloy_primitives::U256;
use anyhow::{ensure, Context, Result};
use checkpoint::{
    open_source, restore_from_sources, CheckpointDir, CreateOptions, FetchOptions, HttpServer,
    RestoreOptions, SourceOptions, Trusted,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::TrieId;
use store::{StateDb, StoreConfig};
use trie::{keccak256, root_from_sorted, EthLayout};

use crate::checkpoint_bench::report::{CheckpointBenchReport, Target};
use crate::common::timing::{median_sorted, ratio, sorted, Timing};

/// What `arbor bench checkpoint` measures.
#[derive(Debug, Clone)]
pub struct CheckpointBenchOpts {
    /// Entries in the state (accounts and storage slots).
    pub keys: u64,
    /// Rounds.
    pub runs: usize,
    /// Creation threads.
    pub threads: usize,
    /// Seed of the state.
    pub seed: u64,
}

type Entries = Vec<(TrieId, Vec<u8>, Vec<u8>)>;

/// Ethereum-shaped state of about `keys` entries: 80% accounts, 20% storage slots spread
/// over one contract per thousand entries; each contract's storage root is committed to
/// by its account.
fn state(keys: u64, seed: u64) -> (Entries, u64, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let contracts = (keys / 1000).max(1);
    let slots_each = (keys / 5) / contracts;
    let accounts = keys - contracts * slots_each;
    let mut out = Vec::with_capacity(keys as usize);
    for i in 0..accounts {
        let key = keccak256(&i.to_be_bytes());
        let mut a = eth::Account {
            nonce: rng.gen_range(0..1000),
            balance: U256::from(rng.gen::<u64>()),
            ..eth::Account::default()
        };
        if i < contracts && slots_each > 0 {
            let mut slots: Vec<(Vec<u8>, Vec<u8>)> = (0..slots_each)
                .map(|_| {
                    let k = keccak256(&rng.gen::<[u8; 32]>()).0.to_vec();
                    (k, trie::rlp_encode_string(&rng.gen::<[u8; 16]>()))
                })
                .collect();
            slots.sort();
            slots.dedup_by(|a, b| a.0 == b.0);
            a.storage_root = root_from_sorted::<EthLayout, _, _>(&slots)
                .map(|(r, _)| r)
                .unwrap_or(trie::EMPTY_ROOT);
            out.extend(slots.into_iter().map(|(k, v)| (TrieId::Storage(key), k, v)));
        }
        out.push((TrieId::Main, key.0.to_vec(), a.rlp()));
    }
    (out, accounts, contracts.min(accounts))
}

fn bulk_load(dir: &Path, entries: &Entries) -> Result<StateDb> {
    let mut db = StateDb::open(dir, StoreConfig::default())?;
    db.bulk_load("bench", entries.iter().map(|(t, k, v)| (*t, k.as_slice(), v.as_slice())))?;
    db.flush()?;
    Ok(db)
}

fn scan(db: &StateDb) -> Result<(f64, u64)> {
    let h = db.read_handle()?;
    let s = h.persisted()?;
    let t0 = Instant::now();
    let mut cur = s.cursor(&[])?;
    let mut bytes = 0u64;
    while let Some((k, v)) = cur.entry() {
        bytes += (k.len() + v.len()) as u64;
        cur.advance();
    }
    cur.status()?;
    Ok((t0.elapsed().as_secs_f64(), bytes))
}

/// Points of a restore progress curve at most.
const PROGRESS_POINTS: usize = 500;

/// A verified restore: its seconds, and its progress as `(seconds, chunks restored)`.
fn restore(
    dir: &Path,
    staging: &Path,
    urls: &[String],
    trusted: Trusted,
) -> Result<(f64, Vec<(f64, f64)>)> {
    let opts = SourceOptions::default();
    let sources = urls.iter().map(|u| open_source(u, &opts)).collect::<Result<Vec<_>, _>>()?;
    let progress = std::sync::Mutex::new(Vec::new());
    let t0 = Instant::now();
    let mut db = StateDb::open(dir, StoreConfig::default())?;
    let (report, outcome) = restore_from_sources(
        &mut db,
        trusted,
        &sources,
        &RestoreOptions::new(staging),
        &FetchOptions::default(),
        &AtomicBool::new(false),
        &|p| {
            let point = (t0.elapsed().as_secs_f64(), p.restored as f64);
            progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(point);
        },
    );
    outcome.with_context(|| format!("restore: {}", report.outcome))?;
    db.flush()?;
    let secs = t0.elapsed().as_secs_f64();
    ensure!(db.head_root() == trusted.root, "restored root differs");
    db.close()?;
    let mut points = progress.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    points.push((secs, points.last().map_or(0.0, |p| p.1)));
    let step = points.len().div_ceil(PROGRESS_POINTS).max(1);
    let last = points.len() - 1;
    let curve = points.iter().enumerate().filter(|(i, _)| i % step == 0 || *i == last);
    Ok((secs, curve.map(|(_, p)| *p).collect()))
}

/// The manifest's chunk hash over every chunk of `m` (read first, not timed), one thread.
fn digest_seconds(dir: &CheckpointDir, m: &checkpoint::Manifest) -> Result<f64> {
    let chunks = m
        .chunks
        .iter()
        .map(|c| dir.chunk(&c.digest)?.context("chunk missing"))
        .collect::<Result<Vec<_>>>()?;
    let t0 = Instant::now();
    for (c, info) in chunks.iter().zip(&m.chunks) {
        ensure!(m.chunk_hash.digest(c) == info.digest, "chunk does not hash to its id");
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// One round's measurements (seconds) and what it created.
struct Round {
    scan_s: f64,
    create_s: f64,
    digest_s: f64,
    bulk_s: f64,
    restore_s: f64,
    http_s: f64,
    /// Key and value bytes the scan read.
    flat_bytes: u64,
    manifest: checkpoint::Manifest,
    /// Restore progress from the local directory, `(seconds, chunks restored)`.
    local_curve: Vec<(f64, f64)>,
    /// The same from three HTTP sources.
    http_curve: Vec<(f64, f64)>,
}

/// What every round works on: the source database and its entries, in a scratch
/// directory; `tick` is called after each measurement.
struct Rounds<'a> {
    tmp: &'a Path,
    db: &'a StateDb,
    entries: &'a Entries,
    trusted: Trusted,
    create_opts: CreateOptions,
    tick: &'a dyn Fn(),
}

impl Rounds<'_> {
    /// Round `round`: scan, create (and digest), bulk load, restore from the local
    /// directory, restore from three HTTP servers; everything it wrote is removed.
    fn run(&self, round: usize) -> Result<Round> {
        let (tmp, tick) = (self.tmp, self.tick);
        let (scan_s, flat_bytes) = scan(self.db)?;
        tick();
        let out = tmp.join(format!("ckpt-{round}"));
        let h = self.db.read_handle()?;
        let pinned = h.persisted()?;
        let t0 = Instant::now();
        let created = checkpoint::create(
            &pinned,
            &self.create_opts,
            &CheckpointDir::new(&out),
            &AtomicU64::new(0),
        )?;
        let create_s = t0.elapsed().as_secs_f64();
        let digest_s = digest_seconds(&CheckpointDir::new(&out), &created.manifest)?;
        tick();
        let t0 = Instant::now();
        drop(bulk_load(&tmp.join(format!("bulk-{round}")), self.entries)?);
        let bulk_s = t0.elapsed().as_secs_f64();
        std::fs::remove_dir_all(tmp.join(format!("bulk-{round}")))?;
        tick();
        let local = [out.to_string_lossy().into_owned()];
        let (restore_s, local_curve) = self.restore(&format!("dst-{round}"), &local)?;
        tick();
        let servers = (0..3)
            .map(|_| HttpServer::start(CheckpointDir::new(&out), "127.0.0.1:0", 2))
            .collect::<Result<Vec<_>, _>>()?;
        let urls: Vec<String> = servers.iter().map(|s| format!("http://{}", s.addr())).collect();
        let (http_s, http_curve) = self.restore(&format!("http-{round}"), &urls)?;
        servers.into_iter().for_each(HttpServer::shutdown);
        std::fs::remove_dir_all(&out)?;
        tick();
        Ok(Round {
            scan_s,
            create_s,
            digest_s,
            bulk_s,
            restore_s,
            http_s,
            flat_bytes,
            manifest: created.manifest,
            local_curve,
            http_curve,
        })
    }

    /// A verified restore from `urls` into the scratch directory `name`, removed after.
    fn restore(&self, name: &str, urls: &[String]) -> Result<(f64, Vec<(f64, f64)>)> {
        let dst = self.tmp.join(name);
        let restored = restore(&dst, &self.tmp.join("staging"), urls, self.trusted)?;
        std::fs::remove_dir_all(dst)?;
        Ok(restored)
    }
}

/// Run the benchmark; `tick` is called after each measurement.
pub fn checkpoint_bench(
    opts: &CheckpointBenchOpts,
    tick: &dyn Fn(),
) -> Result<CheckpointBenchReport> {
    let tmp = tempfile::Builder::new().prefix("arbor-bench-checkpoint-").tempdir()?;
    let (entries, accounts, storage_tries) = state(opts.keys, opts.seed);
    let db = bulk_load(&tmp.path().join("source"), &entries)?;
    let rounds = Rounds {
        tmp: tmp.path(),
        db: &db,
        entries: &entries,
        trusted: Trusted { block: db.head_number(), root: db.head_root() },
        create_opts: CreateOptions { threads: opts.threads, ..CreateOptions::default() },
        tick,
    };
    let mut t = [(); 6].map(|()| Vec::with_capacity(opts.runs));
    let mut floor = Vec::new();
    let (mut r_create, mut r_restore, mut r_http) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for round in 0..opts.runs {
        let r = rounds.run(round)?;
        floor.push(ratio((r.scan_s + r.digest_s) / opts.threads as f64, r.scan_s));
        let samples = [r.scan_s, r.create_s, r.bulk_s, r.restore_s, r.http_s, r.digest_s];
        for (v, x) in t.iter_mut().zip(samples) {
            v.push(x);
        }
        r_create.push(ratio(r.create_s, r.scan_s));
        r_restore.push(ratio(r.restore_s, r.bulk_s));
        r_http.push(ratio(r.http_s, r.restore_s));
        last = Some(r);
    }
    let Round { manifest, flat_bytes, local_curve, http_curve, .. } = last.context("no rounds")?;
    let [scan_t, create_t, bulk_t, restore_t, http_t, digest_t] =
        t.map(|v| Timing::from_samples(&v));
    Ok(CheckpointBenchReport {
        entries: manifest.entries,
        accounts,
        storage_tries,
        flat_bytes,
        checkpoint_bytes: manifest.chunk_bytes,
        chunks: manifest.chunks.len(),
        threads: opts.threads,
        scan: scan_t,
        create: create_t,
        digest: digest_t,
        create_floor_vs_scan: median_sorted(&sorted(&floor)),
        bulk_load: bulk_t,
        restore_local: restore_t,
        restore_http3: http_t,
        create_vs_scan: Target::new(&r_create, 1.2),
        restore_vs_bulk_load: Target::new(&r_restore, 1.5),
        http3_vs_local: Target::new(&r_http, 1.2),
        bytes_vs_flat: Target::new(&[ratio(manifest.chunk_bytes as f64, flat_bytes as f64)], 1.3),
        runs: opts.runs,
        restore_local_progress: local_curve,
        restore_http3_progress: http_curve,
    })
}
