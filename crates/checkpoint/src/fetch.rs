//! Restoring from several untrusted sources at once.
//!
//! The manifest is the one for the trusted `(block, root)` that most sources offer (or the
//! one an interrupted restore of the database was using), of the database's trie layout
//! (a caller that creates the database learns the layout to create it in first:
//! [`find_candidates`], then [`Candidates::restore`]). Workers then take the missing
//! chunks in index order (main-trie chunks first, so storage chunks rarely wait; code
//! chunks last), each
//! fetched from a source not yet tried for it, and offer them to the [`Restorer`]:
//! - a chunk whose bytes do not hash to the manifest's digest, or a body longer than the
//!   manifest's length for it (cut off there), proves its source bad: the source is
//!   excluded for this checkpoint and the chunk fetched elsewhere;
//! - a timeout or another fetch error counts against the source, which is excluded after
//!   a few in a row;
//! - a chunk that matches its digest but does not verify, a chunk no source has, or
//!   chunks that all verify but do not add up to the manifest (its flat and code bytes, its
//!   rule, the storage tries, the root, the codes accounts refer to) prove the checkpoint
//!   itself bad: it is abandoned (what it wrote, code included, is deleted) for the next
//!   candidate, or the restore fails with
//!   [`FetchError::BadCheckpoint`] and leaves an empty database. Failures that may pass
//!   (timeouts, I/O, a stop, the local disk) keep the restore resumable.
//!
//! The report names every source with what it served, why it was excluded and which bad
//! checkpoints it offered.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use state::H256;
use store::{BulkError, StateDb};
use trie::{keccak256, LayoutName};

use crate::format::Manifest;
use crate::restore::{ChunkError, Offered, RestoreError, RestoreOptions, Restorer, Trusted};
use crate::source::{Source, SourceError};

/// How a multi-source restore runs.
#[derive(Debug, Clone, Copy)]
pub struct FetchOptions {
    /// Chunks fetched and verified at once.
    pub workers: usize,
    /// Failed fetches in a row (timeouts, errors) after which a source is excluded.
    pub failures_to_exclude: u32,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions { workers: 4, failures_to_exclude: 2 }
    }
}

/// Most fetch workers.
pub const WORKERS_MAX: usize = 64;

/// Rounds over every usable source one chunk may take before the restore gives up on it.
const ROUNDS_MAX: u32 = 5;

/// Why a multi-source restore failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// No source offers a checkpoint of the trusted block and root.
    #[error("no source offers a checkpoint of block {block} with root {root}{refused}")]
    NoCheckpoint {
        /// Trusted block.
        block: u64,
        /// Trusted root.
        root: H256,
        /// Why the manifests that were offered do not qualify (empty, or `" (…)"`).
        refused: String,
    },
    /// No source offers a checkpoint of the trusted block and root, and a source could not
    /// be read (a timeout, I/O, a server error): it may hold one.
    #[error("no source offers a checkpoint of block {block} with root {root}, and {source_name} could not be read: {error}")]
    Unreachable {
        /// Trusted block.
        block: u64,
        /// Trusted root.
        root: H256,
        /// The first source that could not be read.
        source_name: String,
        /// Its failure.
        error: SourceError,
    },
    /// The restore could not start or finish.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// A chunk failed behind its digest (the checkpoint is bad) or the database failed.
    #[error(transparent)]
    Chunk(Box<ChunkError>),
    /// Every source asked for a chunk answered that it does not have it, or served bytes
    /// that are not it (a digest mismatch, a body longer than the manifest's length): the
    /// manifest names a chunk nobody serves (a forged or broken checkpoint).
    #[error("no source serves chunk {index} (each answered that it is not there or served other bytes): the checkpoint names a chunk nobody serves")]
    MissingChunk {
        /// The chunk.
        index: usize,
    },
    /// Every source failed to serve a chunk.
    #[error("no source could serve chunk {index} (every source failed or was excluded)")]
    NoSource {
        /// The chunk.
        index: usize,
    },
    /// Staging stayed full with nothing else to do.
    #[error("staging is full and no chunk it waits for is left to fetch; raise the staging bound")]
    StagingStuck,
    /// Stopped on request; the database keeps what was restored and resumes from there.
    #[error("stopped; run the restore again to resume")]
    Cancelled,
    /// The last candidate checkpoint proved bad (`reason`: a chunk that verifies behind its
    /// digest but not against the checkpoint, a chunk no source has, or chunks that do not
    /// add up to the manifest or the root) and was abandoned like those before it (the
    /// report lists them): what it wrote is deleted and the database is left empty, for a
    /// restore from other sources.
    #[error(
        "checkpoint {} offered by {} is bad and was abandoned: {reason}",
        hex::encode(.checkpoint.0),
        .offered_by.join(", ")
    )]
    BadCheckpoint {
        /// Its manifest id.
        checkpoint: H256,
        /// The sources that offered it.
        offered_by: Vec<String>,
        /// What proved it bad.
        #[source]
        reason: Box<FetchError>,
    },
}

/// What one source did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SourceReport {
    /// Its address.
    pub source: String,
    /// It offered the chosen checkpoint's manifest.
    pub offered_checkpoint: bool,
    /// Chunks it served that verified.
    pub chunks_served: u64,
    /// Chunks it served that did not hash to their names or were longer than the manifest
    /// says.
    pub bad_chunks: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Other failed requests.
    pub errors: u64,
    /// Why it was first excluded, if it ever was. A source excluded for timeouts or errors
    /// is admitted again when a chunk has no other source left; the reason stays here.
    pub excluded: Option<String>,
    /// Times it was admitted again after an exclusion for timeouts or errors.
    pub readmitted: u32,
    /// The checkpoints it offered that proved bad and were abandoned (ids, hex).
    pub bad_checkpoints: Vec<String>,
}

/// What a multi-source restore did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RestoreReport {
    /// The manifest id, hex.
    pub checkpoint: String,
    /// The block restored.
    pub block: u64,
    /// Its state root, hex.
    pub root: String,
    /// Chunks in the checkpoint.
    pub chunks: usize,
    /// Chunks already restored when this run started (a resumed restore).
    pub resumed_chunks: usize,
    /// Chunks fetched by this run (including refetches after bad sources).
    pub fetched_chunks: u64,
    /// Bytes fetched.
    pub fetched_bytes: u64,
    /// Entries written by this run.
    pub entries_restored: u64,
    /// Chunks that waited in staging for their accounts.
    pub staged_chunks: u64,
    /// Wall time in seconds.
    pub elapsed_s: f64,
    /// `restored`; [`ALREADY_RESTORED`] when the database already held the trusted
    /// block and root (nothing fetched, no checkpoint chosen); or the error.
    pub outcome: String,
    /// Checkpoints given up (each `id (offered by …): why`): one whose chunk nobody
    /// serves, whose chunk does not verify behind its digest, or whose verified chunks do
    /// not add up to its manifest or root is abandoned (everything it wrote deleted) for
    /// the next candidate. When the last one is, the restore fails with
    /// [`FetchError::BadCheckpoint`] about it.
    pub abandoned: Vec<String>,
    /// Every source.
    pub sources: Vec<SourceReport>,
}

/// Progress of a restore, for a progress bar.
#[derive(Debug, Clone, Copy, Default)]
pub struct FetchProgress {
    /// Chunks restored.
    pub restored: usize,
    /// Chunks in the checkpoint.
    pub total: usize,
    /// Bytes fetched by this run.
    pub bytes: u64,
}

/// The [`RestoreReport::outcome`] of a restore that found the work done.
pub const ALREADY_RESTORED: &str = "already restored";

/// Restore the checkpoint of `trusted` into `db` from `sources`; see the module docs.
/// Returns the report whatever happens, and the outcome. Only checkpoints of `db`'s trie
/// layout are restored ([`RestoreError::Layout`] when the sources offer others only); a
/// caller creating the database asks [`find_candidates`] first, for the layout. A
/// database that already holds `trusted` ([`already_restored`]) is left as it is, and
/// no source is asked.
pub fn restore_from_sources(
    db: &mut StateDb,
    trusted: Trusted,
    sources: &[Box<dyn Source>],
    restore: &RestoreOptions,
    opts: &FetchOptions,
    stop: &AtomicBool,
    progress: &(dyn Fn(FetchProgress) + Sync),
) -> (RestoreReport, Result<Trusted, FetchError>) {
    if let Some(report) = already_restored(db, trusted, sources) {
        return (report, Ok(trusted));
    }
    find_candidates(trusted, sources, stop).restore(db, restore, opts, stop, progress)
}

/// The report of a restore with nothing to do, when `db` already holds `trusted`: its
/// head is the trusted block and root, no restore or bulk load is unfinished, and it is
/// not empty (an empty database is filled as usual). So a completed restore run again
/// (say, after a kill that landed after its last batch) succeeds without asking
/// `sources` (named in the report, which has no checkpoint and no chunks) instead of
/// being refused as not empty. A database at another block or root is not restored into
/// (the restore refuses it).
pub fn already_restored(
    db: &StateDb,
    trusted: Trusted,
    sources: &[Box<dyn Source>],
) -> Option<RestoreReport> {
    let holds = db.unfinished_bulk_load().is_none()
        && db.head_number() == trusted.block
        && db.head_root() == trusted.root
        && db.is_empty().ok() == Some(false);
    holds.then(|| RestoreReport {
        block: trusted.block,
        root: format!("{}", trusted.root),
        outcome: ALREADY_RESTORED.to_string(),
        sources: sources
            .iter()
            .map(|s| SourceReport { source: s.name().to_string(), ..Default::default() })
            .collect(),
        ..RestoreReport::default()
    })
}

/// The first half of [`restore_from_sources`]: the checkpoints of `trusted` that `sources`
/// offer, found before a database is opened, so that a caller that creates the database
/// creates it in the checkpoint's layout ([`Candidates::layout`]); then
/// [`Candidates::restore`] (the sources are not asked again for the manifests).
pub fn find_candidates<'s>(
    trusted: Trusted,
    sources: &'s [Box<dyn Source>],
    stop: &AtomicBool,
) -> Candidates<'s> {
    let t0 = Instant::now();
    let mut report = RestoreReport {
        block: trusted.block,
        root: format!("{}", trusted.root),
        sources: sources
            .iter()
            .map(|s| SourceReport { source: s.name().to_string(), ..Default::default() })
            .collect(),
        ..RestoreReport::default()
    };
    let found = choose_manifests(trusted, sources, None, stop, &mut report.sources);
    Candidates { trusted, sources, t0, report, found }
}

/// The checkpoints the sources offer, best first, or why none qualifies
/// ([`find_candidates`]).
pub struct Candidates<'s> {
    trusted: Trusted,
    sources: &'s [Box<dyn Source>],
    t0: Instant,
    report: RestoreReport,
    found: Result<Vec<OfferedManifest>, FetchError>,
}

impl std::fmt::Debug for Candidates<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidates")
            .field("trusted", &self.trusted)
            .field(
                "found",
                &self.found.as_ref().map(|c| c.iter().map(|o| o.id).collect::<Vec<_>>()),
            )
            .finish_non_exhaustive()
    }
}

impl Candidates<'_> {
    /// The trie layout of the checkpoint a restore into a new database takes first (the
    /// layout to create that database in); `None` when none qualifies.
    pub fn layout(&self) -> Option<LayoutName> {
        let first = self.found.as_ref().ok()?.first()?;
        Manifest::layout_of(&first.bytes).ok()
    }

    /// Restore one of the checkpoints into `db` (the second half of
    /// [`restore_from_sources`]). Returns the report whatever happens, and the outcome.
    pub fn restore(
        self,
        db: &mut StateDb,
        restore: &RestoreOptions,
        opts: &FetchOptions,
        stop: &AtomicBool,
        progress: &(dyn Fn(FetchProgress) + Sync),
    ) -> (RestoreReport, Result<Trusted, FetchError>) {
        let Candidates { trusted, sources, t0, mut report, found } = self;
        if let Some(mut done) = already_restored(db, trusted, sources) {
            done.elapsed_s = t0.elapsed().as_secs_f64();
            return (done, Ok(trusted));
        }
        let job = Job { trusted, sources, restore, opts, stop, progress };
        let outcome = found.and_then(|found| run(db, &job, found, &mut report));
        report.elapsed_s = t0.elapsed().as_secs_f64();
        report.outcome = match &outcome {
            Ok(_) => "restored".to_string(),
            Err(e) => e.to_string(),
        };
        (report, outcome)
    }
}

/// What a multi-source restore was asked to do.
struct Job<'a> {
    trusted: Trusted,
    sources: &'a [Box<dyn Source>],
    restore: &'a RestoreOptions,
    opts: &'a FetchOptions,
    stop: &'a AtomicBool,
    progress: &'a (dyn Fn(FetchProgress) + Sync),
}

/// Candidate checkpoints a restore tries at most (each one abandoned costs what it fetched).
const RESTORE_CANDIDATES_MAX: usize = 8;

fn run(
    db: &mut StateDb,
    job: &Job<'_>,
    mut candidates: Vec<OfferedManifest>,
    report: &mut RestoreReport,
) -> Result<Trusted, FetchError> {
    let resume = db
        .unfinished_bulk_load()
        .and_then(|l| l.strip_prefix("checkpoint "))
        .and_then(crate::dir::parse_id);
    // An interrupted restore's manifest first (as `choose_manifests` orders it).
    if let Some(at) = resume.and_then(|r| candidates.iter().position(|o| o.id == r)) {
        let resumed = candidates.remove(at);
        candidates.insert(0, resumed);
    }
    // Only checkpoints of the database's layout can be restored into it.
    let layout = db.layout();
    let other =
        candidates.iter().find_map(|c| Manifest::layout_of(&c.bytes).ok().filter(|l| *l != layout));
    candidates.retain(|c| Manifest::layout_of(&c.bytes).ok() == Some(layout));
    if let (true, Some(checkpoint)) = (candidates.is_empty(), other) {
        return Err(RestoreError::Layout { database: layout, checkpoint }.into());
    }
    let mut last_bad = None;
    for chosen in candidates.into_iter().take(RESTORE_CANDIDATES_MAX) {
        let (id, offering) = (chosen.id, chosen.offering.clone());
        match restore_one(db, job, report, chosen) {
            Err(e) if checkpoint_is_bad(&e) => {
                // Evidence, not a job to resume: what it wrote goes, and the database is
                // left to the next candidate (or to another restore).
                db.abandon_restore(&format!("checkpoint {}", hex::encode(id.0)))
                    .map_err(RestoreError::from)?;
                let hex_id = hex::encode(id.0);
                let offered_by: Vec<String> =
                    offering.iter().map(|i| report.sources[*i].source.clone()).collect();
                report
                    .abandoned
                    .push(format!("{hex_id} (offered by {}): {e}", offered_by.join(", ")));
                for i in offering {
                    report.sources[i].bad_checkpoints.push(hex_id.clone());
                }
                for s in &mut report.sources {
                    s.offered_checkpoint = false;
                }
                last_bad = Some(FetchError::BadCheckpoint {
                    checkpoint: id,
                    offered_by,
                    reason: Box::new(e),
                });
            }
            outcome => return outcome,
        }
    }
    Err(last_bad.expect("choose_manifests returns at least one candidate"))
}

/// A failure that proves the checkpoint itself bad, whatever the sources or the database
/// do: a chunk nobody has; one that verifies behind its digest but not against the
/// checkpoint (it does not decode, fit the manifest or prove its range, or a code does not
/// hash to its key); or, every chunk verified, storage tries, flat or code bytes,
/// boundary rule, root or the codes accounts refer to that do not add up. Not: a
/// source's wrong bytes (a digest mismatch, also what a damaged staged file gives), time
/// outs, I/O, a stop, the local database or staging directory.
fn checkpoint_is_bad(e: &FetchError) -> bool {
    match e {
        FetchError::MissingChunk { .. } => true,
        FetchError::Chunk(c) => matches!(
            c.as_ref(),
            ChunkError::Decode { .. }
                | ChunkError::Mismatch { .. }
                | ChunkError::Proof { .. }
                | ChunkError::Code { .. }
        ),
        FetchError::Restore(r) => matches!(
            r,
            RestoreError::StorageMismatch { .. }
                | RestoreError::CodeMissing { .. }
                | RestoreError::Misstated(_)
                | RestoreError::Store(BulkError::RestoredRoot { .. })
        ),
        _ => false,
    }
}

/// Restore one candidate checkpoint.
fn restore_one(
    db: &mut StateDb,
    job: &Job<'_>,
    report: &mut RestoreReport,
    chosen: OfferedManifest,
) -> Result<Trusted, FetchError> {
    let Job { trusted, sources, restore, opts, stop, progress } = *job;
    let OfferedManifest { id, bytes, offering } = chosen;
    for i in offering {
        report.sources[i].offered_checkpoint = true;
    }
    report.checkpoint = hex::encode(id.0);
    let r = Restorer::begin(db, trusted, &bytes, restore)?;
    report.chunks = r.manifest().chunk_count();
    report.resumed_chunks = r.restored();
    let pool = Pool::new(&r, sources, opts, stop, progress, report);
    pool.run()?;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(FetchError::Cancelled);
        }
        if r.retry_staged().map_err(|e| FetchError::Chunk(Box::new(e)))? == 0 {
            break;
        }
    }
    // Chunks applied out of staging count too (the pool counted only its own offers).
    report.entries_restored = r.entries_written();
    Ok(r.finish()?)
}

/// Checkpoint ids of one source's listing that a restore asks for, at most.
const LISTED_IDS_MAX: usize = 4096;
/// Failed manifest requests in a row after which a source's other ids are skipped.
const MANIFEST_FAILURES_MAX: usize = 3;

/// A manifest of the trusted block and root that sources offer (see [`find_manifests`]).
#[derive(Debug, Clone)]
pub struct OfferedManifest {
    /// Its id (the keccak of its bytes).
    pub id: H256,
    /// Its bytes, decoded once and found of the trusted block and root.
    pub bytes: Vec<u8>,
    /// The indices of the sources that offer it.
    pub offering: Vec<usize>,
}

/// The checkpoint manifests of `trusted` that `sources` offer, in a restore's order of
/// preference (most sources first, then the smaller id; see `choose_manifests`);
/// `reports` (one per source) count each source's failed requests. Never empty:
/// [`FetchError::NoCheckpoint`] when none qualifies, [`FetchError::Unreachable`] when none
/// does and a source could not be read.
pub fn find_manifests(
    trusted: Trusted,
    sources: &[Box<dyn Source>],
    stop: &AtomicBool,
    reports: &mut [SourceReport],
) -> Result<Vec<OfferedManifest>, FetchError> {
    choose_manifests(trusted, sources, None, stop, reports)
}

/// The manifests a restore may take, best first: an interrupted restore's, then the ones
/// most sources offer (ties: the smaller id).
///
/// A source's listing (of the trusted block and root, where the listing says) counts once
/// per id (one vote per source). A remote source is asked for at most [`LISTED_IDS_MAX`]
/// of its ids and for no more after [`MANIFEST_FAILURES_MAX`] timeouts in a row: a hostile
/// listing of many ids, each answered slowly, cannot hold the restore (a local directory
/// is read whole: its names are not a reason to skip what follows them). `stop` is
/// checked before every request.
fn choose_manifests(
    trusted: Trusted,
    sources: &[Box<dyn Source>],
    resume: Option<H256>,
    stop: &AtomicBool,
    reports: &mut [SourceReport],
) -> Result<Vec<OfferedManifest>, FetchError> {
    let mut tally = Tally::default();
    for (si, s) in sources.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Err(FetchError::Cancelled);
        }
        tally.poll(trusted, si, s.as_ref(), stop, &mut reports[si])?;
    }
    tally.into_offered(trusted, sources, resume)
}

/// What the sources' listings and manifests showed so far (see `choose_manifests`).
#[derive(Default)]
struct Tally {
    /// The manifests of the trusted block and root: bytes, and the sources offering each.
    found: BTreeMap<H256, (Vec<u8>, Vec<usize>)>,
    /// Ids whose manifests do not qualify (not asked for again).
    refused: Vec<H256>,
    /// The first failure that says nothing about what its source holds.
    unreachable: Option<(usize, SourceError)>,
    /// Why offered manifests do not qualify, for the error when none does.
    reasons: Vec<String>,
}

impl Tally {
    /// Take in source `si`'s listing of `trusted`, fetching each manifest not seen yet.
    fn poll(
        &mut self,
        trusted: Trusted,
        si: usize,
        s: &dyn Source,
        stop: &AtomicBool,
        report: &mut SourceReport,
    ) -> Result<(), FetchError> {
        let mut ids = match s.ids_of(trusted.block, &trusted.root) {
            Ok(ids) => ids,
            Err(e) => {
                self.failed(si, e, report);
                return Ok(());
            }
        };
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > LISTED_IDS_MAX && !s.is_local() {
            self.reasons.push(format!(
                "{}: lists {} checkpoints, over {LISTED_IDS_MAX}",
                s.name(),
                ids.len()
            ));
            ids.truncate(LISTED_IDS_MAX);
        }
        let mut failures = 0;
        for id in ids {
            if let Some((_, who)) = self.found.get_mut(&id) {
                who.push(si);
                continue;
            }
            if self.refused.contains(&id) {
                continue;
            }
            if stop.load(Ordering::Relaxed) {
                return Err(FetchError::Cancelled);
            }
            let bytes = match s.manifest(&id) {
                Ok(b) => b,
                Err(e) => {
                    let timeout = matches!(e, SourceError::Timeout);
                    self.failed(si, e, report);
                    failures = if timeout { failures + 1 } else { 0 };
                    if failures >= MANIFEST_FAILURES_MAX && !s.is_local() {
                        let why = format!("{}: {failures} manifest requests timed out", s.name());
                        self.reasons.push(why);
                        break;
                    }
                    continue;
                }
            };
            failures = 0;
            self.judge(trusted, si, s.name(), id, bytes, report);
        }
        Ok(())
    }

    /// A failed request of source `si`: counted, and kept when it is the first that says
    /// nothing about what the source holds.
    fn failed(&mut self, si: usize, e: SourceError, report: &mut SourceReport) {
        note_failure(report, &e);
        if e.is_unreachable() && self.unreachable.is_none() {
            self.unreachable = Some((si, e));
        }
    }

    /// Manifest `id` as source `si` (named `name`) served it: found when it hashes to its
    /// id and is of the trusted block and root, else a reason.
    fn judge(
        &mut self,
        trusted: Trusted,
        si: usize,
        name: &str,
        id: H256,
        bytes: Vec<u8>,
        report: &mut SourceReport,
    ) {
        // A damaged manifest is skipped; the source may still serve good chunks (each is
        // checked against its digest).
        if keccak256(&bytes) != id {
            report.errors += 1;
            self.reasons.push(format!("{name}: manifest {id} does not hash to its id"));
            return;
        }
        match Manifest::decode(&bytes) {
            Ok(m) if m.block == trusted.block && m.root == trusted.root => {
                self.found.insert(id, (bytes, vec![si]));
            }
            Ok(m) => {
                self.reasons.push(format!("manifest {id} is of block {} root {}", m.block, m.root));
                self.refused.push(id);
            }
            Err(e) => {
                self.reasons.push(format!("manifest {id} does not decode: {e}"));
                self.refused.push(id);
            }
        }
    }

    /// The manifests found, best first; none is [`FetchError::Unreachable`] when a source
    /// could not be read, else [`FetchError::NoCheckpoint`] with the first reasons.
    fn into_offered(
        self,
        trusted: Trusted,
        sources: &[Box<dyn Source>],
        resume: Option<H256>,
    ) -> Result<Vec<OfferedManifest>, FetchError> {
        let mut offered: Vec<OfferedManifest> = self
            .found
            .into_iter()
            .map(|(id, (bytes, offering))| OfferedManifest { id, bytes, offering })
            .collect();
        // Most sources first, then the smaller id; an interrupted restore's manifest first.
        offered.sort_by(|a, b| b.offering.len().cmp(&a.offering.len()).then(a.id.cmp(&b.id)));
        if let Some(at) = resume.and_then(|r| offered.iter().position(|o| o.id == r)) {
            let resumed = offered.remove(at);
            offered.insert(0, resumed);
        }
        if !offered.is_empty() {
            return Ok(offered);
        }
        if let Some((si, error)) = self.unreachable {
            return Err(FetchError::Unreachable {
                block: trusted.block,
                root: trusted.root,
                source_name: sources[si].name().to_owned(),
                error,
            });
        }
        let shown: Vec<&str> = self.reasons.iter().take(3).map(String::as_str).collect();
        let more = self.reasons.len().saturating_sub(shown.len());
        let refused = match (shown.is_empty(), more) {
            (true, _) => String::new(),
            (false, 0) => format!(" ({})", shown.join("; ")),
            (false, n) => format!(" ({}; and {n} more)", shown.join("; ")),
        };
        Err(FetchError::NoCheckpoint { block: trusted.block, root: trusted.root, refused })
    }
}

fn note_failure(r: &mut SourceReport, e: &SourceError) {
    match e {
        SourceError::Timeout => r.timeouts += 1,
        _ => r.errors += 1,
    }
}

struct Work {
    queue: VecDeque<usize>,
    in_flight: usize,
    /// Sources tried per chunk (bit per source index, for at most 64 tracked sources).
    tried: BTreeMap<usize, Vec<bool>>,
    /// Rounds over every usable source a chunk has had (each failed for transient reasons).
    rounds: BTreeMap<usize, u32>,
    fatal: Option<FetchError>,
    /// Chunks some source failed to serve for another reason than "not found".
    uncertain: std::collections::BTreeSet<usize>,
    /// StagingFull answers since the last chunk applied.
    stalls: usize,
}

impl Work {
    /// Mark source `si` (of `n`) as tried for chunk `index`.
    fn mark_tried(&mut self, n: usize, index: usize, si: usize) {
        self.tried.entry(index).or_insert_with(|| vec![false; n])[si] = true;
    }

    /// The error for chunk `index` when no source is left for it: if each said "not
    /// found" or served other bytes, no one has it; a source that failed for another
    /// reason may.
    fn no_source_left(&self, index: usize) -> FetchError {
        match self.uncertain.contains(&index) {
            true => FetchError::NoSource { index },
            false => FetchError::MissingChunk { index },
        }
    }
}

struct SourceState {
    report: SourceReport,
    failures_in_a_row: u32,
    /// It served bytes that are not the chunk it was asked for: excluded for good.
    proven_bad: bool,
    /// Excluded now (the report keeps the first reason across re-admissions).
    out: bool,
}

struct Pool<'a, 'r> {
    r: &'a Restorer<'r>,
    sources: &'a [Box<dyn Source>],
    opts: &'a FetchOptions,
    stop: &'a AtomicBool,
    progress: &'a (dyn Fn(FetchProgress) + Sync),
    work: Mutex<Work>,
    wake: Condvar,
    states: Mutex<Vec<SourceState>>,
    fetched: AtomicU64,
    bytes: AtomicU64,
    staged: AtomicU64,
    report: Mutex<&'a mut RestoreReport>,
}

impl<'a, 'r> Pool<'a, 'r> {
    fn new(
        r: &'a Restorer<'r>,
        sources: &'a [Box<dyn Source>],
        opts: &'a FetchOptions,
        stop: &'a AtomicBool,
        progress: &'a (dyn Fn(FetchProgress) + Sync),
        report: &'a mut RestoreReport,
    ) -> Self {
        let states = report
            .sources
            .iter()
            .map(|s| SourceState {
                report: s.clone(),
                failures_in_a_row: 0,
                proven_bad: false,
                out: false,
            })
            .collect();
        Pool {
            r,
            sources,
            opts,
            stop,
            progress,
            work: Mutex::new(Work {
                queue: r.missing().into(),
                in_flight: 0,
                tried: BTreeMap::new(),
                rounds: BTreeMap::new(),
                fatal: None,
                uncertain: std::collections::BTreeSet::new(),
                stalls: 0,
            }),
            wake: Condvar::new(),
            states: Mutex::new(states),
            fetched: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            staged: AtomicU64::new(0),
            report: Mutex::new(report),
        }
    }

    fn run(self) -> Result<(), FetchError> {
        let workers = self.opts.workers.clamp(1, WORKERS_MAX);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| self.worker());
            }
        });
        let mut report = self.report.lock();
        for (dst, st) in report.sources.iter_mut().zip(self.states.lock().iter()) {
            *dst = st.report.clone();
        }
        report.fetched_chunks = self.fetched.load(Ordering::Relaxed);
        report.fetched_bytes = self.bytes.load(Ordering::Relaxed);
        report.entries_restored = self.r.entries_written();
        report.staged_chunks = self.staged.load(Ordering::Relaxed);
        drop(report);
        let fatal = self.work.lock().fatal.take();
        match fatal {
            Some(e) => Err(e),
            None if self.stop.load(Ordering::Relaxed) => Err(FetchError::Cancelled),
            None => Ok(()),
        }
    }

    /// The next chunk to fetch, or `None` when the work is over.
    fn next(&self) -> Option<usize> {
        let mut w = self.work.lock();
        loop {
            if w.fatal.is_some() || self.stop.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(i) = w.queue.pop_front() {
                w.in_flight += 1;
                return Some(i);
            }
            if w.in_flight == 0 {
                return None;
            }
            self.wake.wait_for(&mut w, Duration::from_millis(100));
        }
    }

    fn worker(&self) {
        while let Some(index) = self.next() {
            let requeue = self.one(index);
            let mut w = self.work.lock();
            w.in_flight -= 1;
            match requeue {
                Ok(None) => {}
                Ok(Some(front)) => {
                    if front {
                        w.queue.push_front(index);
                    } else {
                        w.queue.push_back(index);
                    }
                }
                Err(e) => {
                    w.fatal.get_or_insert(e);
                }
            }
            drop(w);
            self.wake.notify_all();
        }
    }

    /// Fetch and offer chunk `index`: `Ok(Some(front))` to queue it again.
    fn one(&self, index: usize) -> Result<Option<bool>, FetchError> {
        let Some(si) = self.pick_source(index) else {
            // Every source was asked, more than once.
            return Err(self.work.lock().no_source_left(index));
        };
        let Some((digest, len)) = self.r.manifest().chunk_name(index) else {
            let len = self.r.manifest().chunk_count();
            return Err(FetchError::Chunk(Box::new(ChunkError::Index { index, len })));
        };
        let bytes = match self.sources[si].chunk(&digest, len) {
            Ok(b) => b,
            // More bytes than the manifest gives the chunk: as sure a sign as a digest
            // mismatch that the source serves something else under that digest.
            Err(e @ SourceError::TooLarge { .. }) => {
                self.proven_bad(si, index, &format!("a body larger than chunk {index} ({e})"));
                return Ok(Some(true));
            }
            Err(e) => {
                self.failed(si, index, &e);
                return Ok(Some(true));
            }
        };
        self.fetched.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        match self.r.offer(index, &bytes) {
            Ok(o) => {
                self.served(si);
                match o {
                    Offered::Applied { .. } => {
                        self.work.lock().stalls = 0;
                        self.r.retry_staged().map_err(|e| FetchError::Chunk(Box::new(e)))?;
                    }
                    Offered::Staged => {
                        self.staged.fetch_add(1, Ordering::Relaxed);
                    }
                    Offered::AlreadyDone => {}
                }
                (self.progress)(FetchProgress {
                    restored: self.r.restored(),
                    total: self.r.manifest().chunk_count(),
                    bytes: self.bytes.load(Ordering::Relaxed),
                });
                Ok(None)
            }
            Err(e) if e.blames_source() => {
                self.proven_bad(si, index, &format!("bytes that are not chunk {index} ({e})"));
                Ok(Some(true))
            }
            Err(ChunkError::StagingFull { .. }) => {
                self.served(si);
                let mut w = self.work.lock();
                w.stalls += 1;
                if w.stalls > 2 * self.r.manifest().chunk_count() + 16 {
                    return Err(FetchError::StagingStuck);
                }
                drop(w);
                std::thread::sleep(Duration::from_millis(5));
                Ok(Some(false))
            }
            Err(e) => Err(FetchError::Chunk(Box::new(e))),
        }
    }

    /// A source not yet tried for `index` and not excluded, spreading chunks over them.
    /// When none is left for the chunk, it starts another round after a pause (up to
    /// [`ROUNDS_MAX`]), with the sources excluded for timeouts or errors admitted again (a
    /// slow source may be the only good one); a source that served wrong bytes stays out.
    fn pick_source(&self, index: usize) -> Option<usize> {
        for attempt in 0..2 {
            let mut states = self.states.lock();
            let mut w = self.work.lock();
            let tried = w.tried.get(&index);
            let n = self.sources.len();
            let pick = (0..n)
                .map(|k| (index + k) % n)
                .filter(|si| !states[*si].out)
                .filter(|si| !tried.is_some_and(|t| t.get(*si).copied().unwrap_or(false)))
                .min_by_key(|si| {
                    (!states[*si].report.offered_checkpoint, states[*si].failures_in_a_row)
                });
            if pick.is_some() || attempt == 1 || states.iter().all(|s| s.proven_bad) {
                return pick;
            }
            let rounds = w.rounds.entry(index).or_insert(0);
            *rounds += 1;
            if *rounds > ROUNDS_MAX {
                return None;
            }
            let pause = Duration::from_millis(100 << (*rounds).min(5));
            w.tried.remove(&index);
            for s in states.iter_mut().filter(|s| !s.proven_bad) {
                if s.out {
                    s.out = false;
                    s.report.readmitted += 1;
                }
                s.failures_in_a_row = 0;
            }
            drop(w);
            drop(states);
            std::thread::sleep(pause);
        }
        None
    }

    /// Source `si` served `what` for chunk `index`: not the chunk the manifest names, so
    /// it is excluded for this checkpoint. When every source is, the chunk is one nobody
    /// serves and the checkpoint is bad (unless some source failed for another reason),
    /// and the restore ends here naming chunk `index`. That error is set under the two
    /// locks `pick_source` takes, so that a worker that finds no source left for another
    /// chunk (because this one was just excluded) cannot name that chunk first (a
    /// multi-worker restore from one bad source named a chunk the source had never been
    /// asked for, now and then).
    fn proven_bad(&self, si: usize, index: usize, what: &str) {
        let mut st = self.states.lock();
        st[si].proven_bad = true;
        st[si].out = true;
        st[si].report.bad_chunks += 1;
        st[si].report.excluded.get_or_insert_with(|| format!("served {what}"));
        let mut w = self.work.lock();
        w.mark_tried(self.sources.len(), index, si);
        if st.iter().all(|s| s.proven_bad) {
            let e = w.no_source_left(index);
            w.fatal.get_or_insert(e);
        }
    }

    fn tried(&self, index: usize, si: usize) {
        self.work.lock().mark_tried(self.sources.len(), index, si);
    }

    fn served(&self, si: usize) {
        let mut st = self.states.lock();
        st[si].report.chunks_served += 1;
        st[si].failures_in_a_row = 0;
    }

    fn failed(&self, si: usize, index: usize, e: &SourceError) {
        let mut st = self.states.lock();
        let s = &mut st[si];
        note_failure(&mut s.report, e);
        s.failures_in_a_row += 1;
        let failures = s.failures_in_a_row;
        if failures >= self.opts.failures_to_exclude.max(1) && !s.out {
            s.out = true;
            s.report
                .excluded
                .get_or_insert_with(|| format!("{failures} failed requests in a row (last: {e})"));
        }
        drop(st);
        if !matches!(e, SourceError::NotFound) {
            self.work.lock().uncertain.insert(index);
        }
        self.tried(index, si);
    }
}
