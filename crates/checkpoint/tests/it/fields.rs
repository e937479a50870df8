//! Every field of a manifest is checked against what the chunks prove: a manifest
//! rewritten with one field changed (and stored under its new id, so that it is the
//! checkpoint a source offers) is `invalid` for `verify` and refused by a restore, which
//! abandons it and leaves an empty database.
//!
//! The flat bytes (the sum of the chunks' key and value bytes) and the boundary rule (no
//! content boundary inside a chunk, chunk bytes within `max_bytes`, every chunk ending
//! after a content boundary or before an entry that would take it past `max_bytes`) are
//! checked once every chunk is verified; the other fields chunk by chunk or on decoding.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::OnceLock;

use checkpoint::{
    restore_from_sources, BoundaryRule, CheckpointDir, Chunk, CreateOptions, FetchError,
    FetchOptions, Manifest, RestoreError, RestoreOptions, Source, SourceError, Trusted,
    VerifyError,
};
use state::H256;
use trie::keccak256;

use crate::common::*;

/// Chunks of about 128 entries, cut at 8 KiB: some chunks end after a content boundary,
/// some before an entry that would take them past the byte bound.
const RULE: BoundaryRule = BoundaryRule { target_entries: 128, max_bytes: 8192 };

struct Fixture {
    trusted: Trusted,
    manifest: Manifest,
    chunks: HashMap<H256, Vec<u8>>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let state = eth_state(61, 1500, 20, 100);
        let tmp = tempfile::tempdir().unwrap();
        let db = load(&tmp.path().join("src"), &state);
        let out = CheckpointDir::new(tmp.path().join("out"));
        let created = create(&db, &out, &CreateOptions { rule: RULE, threads: 2 });
        let m = created.manifest;
        let chunks =
            m.chunks.iter().map(|c| (c.digest, out.chunk(&c.digest).unwrap().unwrap())).collect();
        Fixture { trusted: Trusted { block: m.block, root: m.root }, manifest: m, chunks }
    })
}

/// A source offering one manifest (whatever its bytes) and the fixture's chunks.
struct Offering {
    id: H256,
    manifest: Vec<u8>,
}

impl Source for Offering {
    fn name(&self) -> &str {
        "offering"
    }
    fn ids(&self) -> Result<Vec<H256>, SourceError> {
        Ok(vec![self.id])
    }
    fn is_local(&self) -> bool {
        true
    }
    fn manifest(&self, id: &H256) -> Result<Vec<u8>, SourceError> {
        match *id == self.id {
            true => Ok(self.manifest.clone()),
            false => Err(SourceError::NotFound),
        }
    }
    fn chunk(&self, digest: &H256, max: u64) -> Result<Vec<u8>, SourceError> {
        let c = fixture().chunks.get(digest).ok_or(SourceError::NotFound)?;
        match c.len() as u64 <= max {
            true => Ok(c.clone()),
            false => Err(SourceError::TooLarge { max }),
        }
    }
}

fn offering(m: &Manifest) -> Offering {
    let manifest = m.encode();
    Offering { id: keccak256(&manifest), manifest }
}

/// `checkpoint verify`'s verdict on `m` (served with the genuine chunks).
fn verify(m: &Manifest) -> Result<checkpoint::VerifySummary, VerifyError> {
    let o = offering(m);
    checkpoint::verify_manifest(&o, &o.id, &o.manifest, fixture().trusted, &|_| {})
}

/// Restore `m` (served with the genuine chunks) into a new database: the report, the
/// outcome, and whether the database is left empty and unmarked.
fn restore(m: &Manifest) -> (checkpoint::RestoreReport, Result<Trusted, FetchError>, bool) {
    let tmp = tempfile::tempdir().unwrap();
    let mut db = open(&tmp.path().join("db"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(offering(m))];
    let (report, outcome) = restore_from_sources(
        &mut db,
        fixture().trusted,
        &sources,
        &RestoreOptions::new(tmp.path().join("staging")),
        &FetchOptions::default(),
        &AtomicBool::new(false),
        &|_| {},
    );
    let left_empty = db.unfinished_bulk_load().is_none() && db.is_empty().unwrap();
    (report, outcome, left_empty)
}

/// `m` (a changed copy of the fixture's manifest) is invalid for `verify` and refused by
/// a restore, which leaves the database empty; `verify`'s error is returned.
#[track_caller]
fn refused(what: &str, m: &Manifest) -> VerifyError {
    assert_ne!(*m, fixture().manifest, "{what}: nothing changed");
    let e = match verify(m) {
        Ok(s) => panic!("{what}: verify says valid: {s:?}"),
        Err(e) => e,
    };
    assert!(!matches!(e, VerifyError::Source { .. }), "{what}: {e}");
    let (report, outcome, left_empty) = restore(m);
    match outcome {
        Err(FetchError::BadCheckpoint { .. }) => {
            assert_eq!(report.abandoned.len(), 1, "{what}: {report:#?}");
            assert_eq!(report.sources[0].bad_checkpoints.len(), 1, "{what}: {report:#?}");
        }
        // Refused before anything was written (it does not decode, or names another
        // checkpoint).
        Err(FetchError::NoCheckpoint { .. }) => {}
        other => panic!("{what}: the restore ended {other:?}: {report:#?}"),
    }
    assert!(left_empty, "{what}: the restore left the database marked or not empty");
    e
}

/// The fixture holds both kinds of cuts, and its genuine manifest verifies and restores.
#[test]
fn the_genuine_manifest_is_valid() {
    let fx = fixture();
    let m = &fx.manifest;
    assert!(m.chunks.len() >= 20, "{} chunks", m.chunks.len());
    // Chunks but the last: those ending after a content boundary, and the others (byte cuts).
    let ends = &m.chunks[..m.chunks.len() - 1];
    let content = ends.iter().filter(|c| RULE.is_boundary(&c.last)).count();
    let bytes = ends.len() - content;
    assert!(content >= 3 && bytes >= 3, "{content} content cuts, {bytes} byte cuts");
    verify(m).unwrap();
    let (report, outcome, _) = restore(m);
    outcome.unwrap_or_else(|e| panic!("{e}: {report:#?}"));
}

fn misstated(e: &VerifyError) -> bool {
    matches!(e, VerifyError::Restore(RestoreError::Misstated(_)))
}

fn chunk_mismatch(e: &VerifyError) -> bool {
    matches!(e, VerifyError::Chunk(c) if matches!(c.as_ref(), checkpoint::ChunkError::Mismatch { .. }))
}

/// The manifest's flat bytes were never checked: 0, 1, `u64::MAX` or one off verified and
/// restored.
#[test]
fn a_manifest_misstating_its_flat_bytes_is_invalid() {
    let flat = fixture().manifest.flat_bytes;
    for value in [0, 1, u64::MAX, flat - 1, flat + 1] {
        let mut m = fixture().manifest.clone();
        m.flat_bytes = value;
        let e = refused(&format!("flat bytes {value}"), &m);
        assert!(misstated(&e), "flat bytes {value}: {e:?}");
        assert!(e.to_string().contains(&format!("the manifest says {value}")), "{e}");
    }
}

/// The boundary rule was never checked: any other rule verified and restored. (A rule
/// that cuts these keys exactly as this one does, say `max_bytes` one more where no chunk
/// comes to it, is as true of them.)
#[test]
fn a_manifest_misstating_its_boundary_rule_is_invalid() {
    let max_t = BoundaryRule::TARGET_ENTRIES_MAX;
    let (min_b, max_b) = (BoundaryRule::MAX_BYTES_MIN, BoundaryRule::MAX_BYTES_MAX);
    let rules = [
        (1, 8192),
        (64, 8192),
        (256, 8192),
        (max_t, 8192),
        (128, min_b),
        (128, 16384),
        (128, max_b),
    ];
    for (target_entries, max_bytes) in rules {
        let mut m = fixture().manifest.clone();
        m.rule = BoundaryRule { target_entries, max_bytes };
        let what = format!("rule {target_entries}/{max_bytes}");
        let e = refused(&what, &m);
        assert!(misstated(&e) || chunk_mismatch(&e), "{what}: {e:?}");
    }
}

/// Every other field, each changed on its own (with the totals kept adding up where the
/// decoder checks them): refused as well.
#[test]
fn every_other_manifest_field_is_checked() {
    let fx = fixture();
    let n = fx.manifest.chunks.len();
    let mid = n / 2;
    type Edit = Box<dyn Fn(&mut Manifest)>;
    let edits: Vec<(&str, Edit)> = vec![
        ("block", Box::new(|m| m.block += 1)),
        ("root", Box::new(|m| m.root.0[5] ^= 1)),
        ("entries total", Box::new(|m| m.entries += 1)),
        ("chunk bytes total", Box::new(|m| m.chunk_bytes += 1)),
        (
            "a chunk's entries",
            Box::new(move |m| {
                m.chunks[mid].entries += 1;
                m.entries += 1;
            }),
        ),
        (
            "a chunk's length",
            Box::new(move |m| {
                m.chunks[mid].len += 1;
                m.chunk_bytes += 1;
            }),
        ),
        ("a chunk's first key", Box::new(move |m| *m.chunks[mid].first.last_mut().unwrap() ^= 1)),
        ("a chunk's last key", Box::new(move |m| *m.chunks[mid].last.last_mut().unwrap() ^= 1)),
        ("a chunk's trie end", Box::new(move |m| m.chunks[mid].ends_trie ^= true)),
        ("the last chunk's trie end", Box::new(move |m| m.chunks[n - 1].ends_trie = false)),
        ("two chunks swapped", Box::new(move |m| m.chunks.swap(mid, mid + 1))),
        (
            "a chunk dropped",
            Box::new(move |m| {
                let c = m.chunks.remove(mid);
                m.entries -= c.entries;
                m.chunk_bytes -= c.len;
            }),
        ),
    ];
    for (what, edit) in edits {
        let mut m = fx.manifest.clone();
        edit(&mut m);
        refused(what, &m);
    }
    // A chunk's digest naming other bytes of the same length (a chunk of the checkpoint
    // that decodes: the one before): refused behind the digest.
    let mut m = fx.manifest.clone();
    let other = m.chunks[mid - 1].clone();
    m.chunks[mid].digest = other.digest;
    m.chunks[mid].len = other.len;
    m.chunk_bytes = fx.manifest.chunk_bytes - fx.manifest.chunks[mid].len + other.len;
    refused("a chunk's digest", &m);
    // The genuine chunk bytes still decode: nothing above came from a chunk that does not.
    assert!(fx.chunks.values().all(|c| Chunk::decode(c).is_ok()));
}
