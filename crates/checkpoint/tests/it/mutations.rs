//! Adversarial chunks and manifests: every mutation of a genuine chunk is refused, and a
//! refused chunk leaves nothing behind (the genuine chunks still restore exactly the
//! source).
//!
//! Two roads into the restorer:
//! - the true manifest: a mutated chunk fails the digest check, the source's fault;
//! - a manifest rewritten to name the mutated chunk (its digest and length, and where the
//!   mutation changes it, its entry count), with the trusted block and root unchanged: the
//!   chunk passes the digest check and must fail one of the checks behind it (decoding,
//!   fit with the manifest, boundary proofs).
//!
//! Also the decoders on random, truncated and edited bytes: typed errors, never a panic,
//! and `Ok` only for bytes that are an encoding (they re-encode to themselves).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use checkpoint::{
    CheckpointDir, Chunk, ChunkError, ChunkInfo, Manifest, Offered, RestoreError, RestoreOptions,
    Restorer, Segment, Trusted,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{TrieId, H256};
use store::StateDb;
use tempfile::TempDir;
use trie::keccak256;

use crate::common::*;

// ---------------------------------------------------------------------------------------
// The fixture: one checkpoint of a state whose storage tries span several chunks, and one
// of the same state a block later.

struct Fixture {
    trusted: Trusted,
    manifest: Manifest,
    manifest_bytes: Vec<u8>,
    chunks: Vec<Vec<u8>>,
    /// The source's flat state.
    source: State,
    /// The checkpoint of the next block (some accounts changed).
    next: Manifest,
    next_chunks: Vec<Vec<u8>>,
    /// A chunk of one closed main-trie segment, not the first, with at least 3 entries and
    /// 2 proof nodes.
    main_mid: usize,
    /// A chunk whose first segment continues a storage trie (non-empty start), with at
    /// least 3 entries and 2 proof nodes.
    storage_mid: usize,
    /// A chunk of several segments.
    multi: usize,
    /// The shortest chunk.
    small: usize,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(build_fixture)
}

fn read_chunks(dir: &CheckpointDir, m: &Manifest) -> Vec<Vec<u8>> {
    m.chunks.iter().map(|c| dir.chunk(&c.digest).unwrap().unwrap()).collect()
}

fn build_fixture() -> Fixture {
    let state = eth_state(21, 160, 12, 150);
    let tmp = tempfile::tempdir().unwrap();
    let mut db = load(&tmp.path().join("src"), &state);
    let out = CheckpointDir::new(tmp.path().join("a"));
    let created = create(&db, &out, &small_chunks(2));
    let source = dump(&db);
    let manifest_bytes = out.manifest_bytes(&created.id).unwrap().unwrap();
    let chunks = read_chunks(&out, &created.manifest);

    // The next block: every fourth account's nonce bumped.
    let mut changes = state::ChangeSet::new();
    let main = changes.entry(TrieId::Main).or_default();
    for (k, v) in state[&TrieId::Main].iter().step_by(4) {
        let mut a = eth::Account::decode(v).unwrap();
        a.nonce += 1;
        main.insert(k.clone(), Some(a.rlp()));
    }
    db.commit(&changes).unwrap();
    let out_next = CheckpointDir::new(tmp.path().join("b"));
    let next = create(&db, &out_next, &small_chunks(2));
    assert_eq!(next.manifest.block, 1);
    assert_ne!(next.manifest.root, created.manifest.root);
    let next_chunks = read_chunks(&out_next, &next.manifest);

    let decoded: Vec<Chunk<'_>> = chunks.iter().map(|c| Chunk::decode(c).unwrap()).collect();
    // The middle one of the chunks that fit.
    let find = |what: &str, f: &dyn Fn(usize, &Chunk<'_>) -> bool| -> usize {
        let fit: Vec<usize> = (0..decoded.len()).filter(|i| f(*i, &decoded[*i])).collect();
        assert!(!fit.is_empty(), "the fixture has no {what} chunk");
        fit[fit.len() / 2]
    };
    let main_mid = find("middle main-trie", &|i, c| {
        let s = &c.segments[0];
        i > 0
            && c.segments.len() == 1
            && s.trie == TrieId::Main
            && !s.open
            && s.entries.len() >= 3
            && s.proof.len() >= 2
    });
    let storage_mid = find("middle storage-trie", &|_, c| {
        let s = &c.segments[0];
        c.segments.len() == 1
            && matches!(s.trie, TrieId::Storage(_))
            && !s.start.is_empty()
            && s.entries.len() >= 3
            && s.proof.len() >= 2
    });
    let multi = find("multi-segment", &|_, c| {
        c.segments.len() >= 2 && c.segments.iter().all(|s| matches!(s.trie, TrieId::Storage(_)))
    });
    let small = (0..chunks.len()).min_by_key(|i| chunks[*i].len()).unwrap();
    drop(decoded);
    Fixture {
        trusted: Trusted { block: created.manifest.block, root: created.manifest.root },
        manifest: created.manifest,
        manifest_bytes,
        chunks,
        source,
        next: next.manifest,
        next_chunks,
        main_mid,
        storage_mid,
        multi,
        small,
    }
}

#[test]
fn the_fixture_spans_storage_tries_over_several_chunks() {
    let fx = fixture();
    let n = fx.chunks.len();
    assert!(n >= 30, "{n} chunks");
    // Some storage trie spans at least three chunks.
    let mut per_trie = std::collections::BTreeMap::<TrieId, usize>::new();
    for c in &fx.chunks {
        for s in Chunk::decode(c).unwrap().segments {
            *per_trie.entry(s.trie).or_default() += 1;
        }
    }
    let storage = per_trie.iter().filter(|(t, _)| matches!(t, TrieId::Storage(_)));
    assert!(storage.clone().count() >= 10);
    assert!(storage.filter(|(_, n)| **n >= 3).count() >= 2, "{per_trie:?}");
    let picks = [fx.main_mid, fx.storage_mid, fx.multi, fx.small];
    assert!(picks.iter().all(|i| *i < n), "{picks:?}");
}

// ---------------------------------------------------------------------------------------
// Chunks as owned, editable values.

#[derive(Debug, Clone, PartialEq, Eq)]
struct Seg {
    trie: TrieId,
    start: Vec<u8>,
    open: bool,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    proof: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    block: u64,
    root: H256,
    segments: Vec<Seg>,
}

impl Owned {
    fn decode(bytes: &[u8]) -> Owned {
        let c = Chunk::decode(bytes).unwrap();
        Owned {
            block: c.block,
            root: c.root,
            segments: c
                .segments
                .iter()
                .map(|s| Seg {
                    trie: s.trie,
                    start: s.start.to_vec(),
                    open: s.open,
                    entries: s.entries.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                    proof: s.proof.iter().map(|n| n.to_vec()).collect(),
                })
                .collect(),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let segments = self
            .segments
            .iter()
            .map(|s| Segment {
                trie: s.trie,
                start: &s.start,
                open: s.open,
                entries: s.entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect(),
                proof: s.proof.iter().map(Vec::as_slice).collect(),
            })
            .collect();
        Chunk { block: self.block, root: self.root, segments }.encode()
    }
}

/// Chunk `i` of the fixture with `f` applied, re-encoded.
fn edited(i: usize, f: impl FnOnce(&mut Owned)) -> Vec<u8> {
    let mut c = Owned::decode(&fixture().chunks[i]);
    f(&mut c);
    let bytes = c.encode();
    assert_ne!(bytes, fixture().chunks[i], "the edit of chunk {i} changed nothing");
    bytes
}

/// The key right after `k` as a number of the same length (`None` on overflow).
fn increment(k: &[u8]) -> Option<Vec<u8>> {
    let mut k = k.to_vec();
    for b in k.iter_mut().rev() {
        let (v, carry) = b.overflowing_add(1);
        *b = v;
        if !carry {
            return Some(k);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// The two roads into a restorer.

/// An empty database and a staging directory beside it.
struct Dst {
    _tmp: TempDir,
    db: StateDb,
    opts: RestoreOptions,
}

fn fresh() -> Dst {
    let tmp = tempfile::tempdir().unwrap();
    let db = open(&tmp.path().join("db"));
    let opts = RestoreOptions::new(tmp.path().join("staging"));
    Dst { _tmp: tmp, db, opts }
}

/// Offer the genuine chunks `order` (retrying the staged ones after each), then the staged
/// ones until none moves.
fn offer_genuine(r: &Restorer<'_>, order: &[usize]) {
    let fx = fixture();
    for &i in order {
        let o = r.offer(i, &fx.chunks[i]).unwrap_or_else(|e| panic!("genuine chunk {i}: {e}"));
        assert!(matches!(o, Offered::Applied { .. } | Offered::Staged), "chunk {i}: {o:?}");
        r.retry_staged().unwrap();
    }
    while r.retry_staged().unwrap() > 0 {}
}

/// The finished database holds exactly the source.
fn assert_source(db: &StateDb) {
    let fx = fixture();
    assert_eq!(db.head_root(), fx.trusted.root);
    assert!(dump(db) == fx.source, "the restored state differs from the source");
    let report = db.verify().unwrap();
    assert!(report.ok(), "{report:?}");
}

fn shuffle(mut v: Vec<usize>, seed: u64) -> Vec<usize> {
    let order = shuffled(v.len(), seed);
    let orig = v.clone();
    for (slot, j) in v.iter_mut().zip(order) {
        *slot = orig[j];
    }
    v
}

/// The true manifest: each of `bad` (index, bytes) is refused as the source's fault and
/// leaves its index missing; then the genuine chunks in a shuffled order restore exactly
/// the source.
fn refused_by_digest(bad: &[(usize, Vec<u8>)], seed: u64) {
    let fx = fixture();
    let n = fx.chunks.len();
    let mut dst = fresh();
    let r = Restorer::begin(&mut dst.db, fx.trusted, &fx.manifest_bytes, &dst.opts).unwrap();
    for (i, bytes) in bad {
        assert_ne!(*bytes, fx.chunks[*i], "not a mutation of chunk {i}");
        match r.offer(*i, bytes) {
            Err(e) => assert!(e.blames_source(), "chunk {i}: {e}"),
            Ok(o) => panic!("a mutated chunk {i} ({} bytes) was accepted: {o:?}", bytes.len()),
        }
        assert!(r.missing().contains(i));
    }
    assert_eq!(r.restored(), 0);
    assert_eq!(r.missing(), (0..n).collect::<Vec<_>>());
    offer_genuine(&r, &shuffled(n, seed));
    assert!(r.missing().is_empty());
    assert_eq!(r.finish().unwrap(), fx.trusted);
    assert_source(&dst.db);
}

/// The fixture's manifest naming `bytes` as chunk `i`: its digest and length, and, with
/// `counts` and when the bytes decode, its entry count (so that only the proofs can tell).
fn rewritten(i: usize, bytes: &[u8], counts: bool) -> Manifest {
    let mut m = fixture().manifest.clone();
    let old = m.chunks[i].clone();
    m.chunk_bytes = m.chunk_bytes - old.len + bytes.len() as u64;
    m.chunks[i].len = bytes.len() as u64;
    m.chunks[i].digest = m.chunk_hash.digest(bytes);
    if counts {
        if let Ok(c) = Chunk::decode(bytes) {
            let entries: u64 = c.segments.iter().map(|s| s.entries.len() as u64).sum();
            if entries > 0 {
                m.entries = m.entries - old.entries + entries;
                m.chunks[i].entries = entries;
            }
        }
    }
    m
}

/// The (trie, key) pairs of chunk `i`'s key range that `bytes` (when it decodes) or the
/// genuine chunk hold: only chunk `i` could have written them.
fn keys_of_range(i: usize, bytes: &[u8]) -> Vec<(TrieId, Vec<u8>)> {
    let fx = fixture();
    let after = i.checked_sub(1).map(|p| fx.manifest.chunks[p].last.clone());
    let before = fx.manifest.chunks.get(i + 1).map(|c| c.first.clone());
    let mut out = Vec::new();
    for b in [bytes, fx.chunks[i].as_slice()] {
        let Ok(c) = Chunk::decode(b) else { continue };
        for s in &c.segments {
            for (k, _) in &s.entries {
                let mut flat = s.trie.prefix();
                flat.extend_from_slice(k);
                if after.as_ref().is_none_or(|a| flat > *a)
                    && before.as_ref().is_none_or(|b| flat < *b)
                {
                    out.push((s.trie, k.to_vec()));
                }
            }
        }
    }
    out
}

/// How a chunk offered behind the digest fared.
#[derive(Debug)]
enum Fate {
    /// Verified and applied; the rest of the genuine chunks then restored the source.
    Accepted,
    /// Refused, nothing of it written.
    Refused(ChunkError),
}

/// A rewritten manifest naming `bytes` as chunk `i` (see [`rewritten`]): the chunks before
/// `i` are restored first (so that every account chunk `i`'s storage segments need is in
/// and it is verified at once), then `bytes` is offered.
///
/// Refused: not the source's fault; `i` onwards still missing; no progress record but the
/// earlier chunks', no flat entry of `i`'s key range in the database; a resumed restore
/// still takes every other genuine chunk around it. Accepted: the other genuine chunks
/// complete a restore that equals the source.
fn behind_digest(i: usize, bytes: &[u8], counts: bool) -> Fate {
    let fx = fixture();
    let n = fx.chunks.len();
    let manifest = rewritten(i, bytes, counts).encode();
    let mut dst = fresh();
    let r = Restorer::begin(&mut dst.db, fx.trusted, &manifest, &dst.opts).unwrap();
    for k in 0..i {
        let o = r.offer(k, &fx.chunks[k]).unwrap();
        assert!(matches!(o, Offered::Applied { .. }), "genuine chunk {k}: {o:?}");
    }
    let refused = match r.offer(i, bytes) {
        Ok(Offered::Applied { .. }) => {
            let rest = shuffle((i + 1..n).collect(), i as u64);
            offer_genuine(&r, &rest);
            assert!(r.missing().is_empty());
            assert_eq!(r.finish().unwrap(), fx.trusted);
            assert_source(&dst.db);
            return Fate::Accepted;
        }
        Ok(o) => panic!("chunk {i} offered after its predecessors: {o:?}"),
        Err(e) => e,
    };
    assert!(!refused.blames_source(), "chunk {i}: the digest matches, yet {refused}");
    assert_eq!(r.missing(), (i..n).collect::<Vec<_>>(), "chunk {i}: {refused}");
    assert_eq!(r.restored(), i);
    drop(r);
    nothing_written(&mut dst, &manifest, i, bytes, &refused);
    Fate::Refused(refused)
}

/// After chunks `0..i` were restored and `bytes` was refused as chunk `i` (under
/// `manifest`): no progress record but those of `0..i`, no flat entry of `i`'s key range in
/// the database, and a resumed restore still takes every other genuine chunk around `i`.
fn nothing_written(dst: &mut Dst, manifest: &[u8], i: usize, bytes: &[u8], refused: &ChunkError) {
    let fx = fixture();
    let n = fx.chunks.len();
    {
        // The store's own view of the unfinished restore (its label is the restorer's:
        // "checkpoint <manifest id>").
        let label = format!("checkpoint {}", hex::encode(keccak256(manifest).0));
        let raw = dst.db.begin_restore(&label).unwrap();
        let mut names: Vec<Vec<u8>> = raw.progress().unwrap().into_iter().map(|(k, _)| k).collect();
        names.sort();
        let expected: Vec<Vec<u8>> =
            (0..i as u64).map(|k| [&b"c"[..], &k.to_be_bytes()].concat()).collect();
        assert_eq!(names, expected, "progress records after refusing chunk {i}");
        let w = raw.writer();
        for (trie, key) in keys_of_range(i, bytes) {
            let found = w.get(&trie, &key).unwrap();
            assert_eq!(found, None, "chunk {i} ({refused}) wrote {trie:?} {}", hex::encode(&key));
        }
    }
    let r = Restorer::begin(&mut dst.db, fx.trusted, manifest, &dst.opts).unwrap();
    assert_eq!(r.restored(), i);
    assert_eq!(r.missing(), (i..n).collect::<Vec<_>>());
    offer_genuine(&r, &shuffle((i + 1..n).collect(), i as u64 + 1));
    assert_eq!(r.missing(), vec![i]);
}

/// [`behind_digest`] must refuse, with an error `kind` accepts.
#[track_caller]
fn refused_behind(what: &str, i: usize, bytes: &[u8], counts: bool, kind: fn(&ChunkError) -> bool) {
    match behind_digest(i, bytes, counts) {
        Fate::Refused(e) => {
            assert!(kind(&e), "{what} (chunk {i}): refused with an unexpected error: {e:?}")
        }
        Fate::Accepted => panic!("{what} (chunk {i}): a mutated chunk was accepted"),
    }
}

fn decode_err(e: &ChunkError) -> bool {
    matches!(e, ChunkError::Decode { .. })
}

fn mismatch(e: &ChunkError) -> bool {
    matches!(e, ChunkError::Mismatch { .. })
}

fn proof(e: &ChunkError) -> bool {
    matches!(e, ChunkError::Proof { .. })
}

fn any_error(_: &ChunkError) -> bool {
    true
}

// ---------------------------------------------------------------------------------------
// The true manifest: the digest refuses.

#[test]
fn every_flipped_byte_is_blamed_on_the_source() {
    let fx = fixture();
    let mut bad = Vec::new();
    // Every byte of the shortest chunk.
    let s = &fx.chunks[fx.small];
    for p in 0..s.len() {
        let mut b = s.clone();
        b[p] ^= 0x01;
        bad.push((fx.small, b));
    }
    // And random bytes of every chunk, with random masks.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..400 {
        let i = rng.gen_range(0..fx.chunks.len());
        let mut b = fx.chunks[i].clone();
        let p = rng.gen_range(0..b.len());
        b[p] ^= rng.gen_range(1..=255u8);
        bad.push((i, b));
    }
    refused_by_digest(&bad, 1);
}

#[test]
fn truncated_extended_misplaced_and_stale_chunks_are_blamed_on_the_source() {
    let fx = fixture();
    let n = fx.chunks.len();
    let mut bad = Vec::new();
    // Every prefix of the shortest chunk.
    let s = &fx.chunks[fx.small];
    for len in 0..s.len() {
        bad.push((fx.small, s[..len].to_vec()));
    }
    // Trailing bytes.
    for i in [fx.small, fx.main_mid, fx.storage_mid, fx.multi] {
        bad.push((i, [fx.chunks[i].as_slice(), &[0]].concat()));
        bad.push((i, [fx.chunks[i].as_slice(), &fx.chunks[(i + 1) % n]].concat()));
    }
    // Every chunk offered as every other index.
    for i in 0..n {
        for j in (0..n).filter(|j| *j != i) {
            bad.push((i, fx.chunks[j].clone()));
        }
    }
    // The next block's chunks, where they differ.
    for (i, c) in fx.next_chunks.iter().enumerate().take(n) {
        if *c != fx.chunks[i] {
            bad.push((i, c.clone()));
        }
    }
    refused_by_digest(&bad, 2);
}

/// A manifest that names a genuine chunk's digest but misstates its length (and the total
/// to match) is refused at that chunk, as the manifest's fault, with nothing written.
#[test]
fn a_manifest_misstating_a_chunk_length_is_refused() {
    let fx = fixture();
    let i = fx.main_mid;
    for delta in [1i64, -1, 100] {
        let mut m = fx.manifest.clone();
        let len = m.chunks[i].len.checked_add_signed(delta).unwrap();
        m.chunk_bytes = m.chunk_bytes - m.chunks[i].len + len;
        m.chunks[i].len = len;
        let manifest = m.encode();
        let mut dst = fresh();
        let r = Restorer::begin(&mut dst.db, fx.trusted, &manifest, &dst.opts).unwrap();
        for k in 0..i {
            r.offer(k, &fx.chunks[k]).unwrap();
        }
        let e = r.offer(i, &fx.chunks[i]).unwrap_err();
        assert!(mismatch(&e) && !e.blames_source(), "{delta}: {e:?}");
        assert!(e.to_string().contains("the manifest says"), "{e}");
        drop(r);
        nothing_written(&mut dst, &manifest, i, &fx.chunks[i], &e);
    }
}

// ---------------------------------------------------------------------------------------
// Behind the digest: a manifest that names the mutated chunk.

#[test]
fn behind_the_digest_a_dropped_entry_is_refused() {
    let fx = fixture();
    for i in [fx.main_mid, fx.storage_mid] {
        let len = Chunk::decode(&fx.chunks[i]).unwrap().segments[0].entries.len();
        for at in [0, len / 2, len - 1] {
            let b = edited(i, |c| {
                c.segments[0].entries.remove(at);
            });
            // The manifest's entry count refuses it...
            if at == len / 2 {
                refused_behind("dropped entry, manifest count", i, &b, false, mismatch);
            }
            // ...and with the count matching, the fit (first and last keys) or the proof.
            let kind: fn(&ChunkError) -> bool = if at == len / 2 { proof } else { mismatch };
            refused_behind("dropped entry, chunk count", i, &b, true, kind);
        }
    }
}

#[test]
fn behind_the_digest_an_added_entry_is_refused() {
    let fx = fixture();
    for i in [fx.main_mid, fx.storage_mid] {
        let b = edited(i, |c| {
            let e = &mut c.segments[0].entries;
            let at = e.len() / 2;
            let key = increment(&e[at].0).unwrap();
            assert!(key < e[at + 1].0);
            let value = e[at].1.clone();
            e.insert(at + 1, (key, value));
        });
        refused_behind("added entry, manifest count", i, &b, false, mismatch);
        refused_behind("added entry, chunk count", i, &b, true, proof);
        // A longer key right after an existing one (`k ‖ 0x00`), also inside the range.
        let b = edited(i, |c| {
            let e = &mut c.segments[0].entries;
            let at = e.len() / 2;
            let key = [e[at].0.as_slice(), &[0]].concat();
            let value = e[at].1.clone();
            e.insert(at + 1, (key, value));
        });
        refused_behind("added longer key, chunk count", i, &b, true, proof);
    }
}

#[test]
fn behind_the_digest_a_reordered_pair_of_entries_is_refused() {
    let fx = fixture();
    for i in [fx.main_mid, fx.storage_mid] {
        let b = edited(i, |c| {
            let e = &mut c.segments[0].entries;
            let at = e.len() / 2;
            e.swap(at, at + 1);
        });
        refused_behind("swapped entries", i, &b, false, decode_err);
        // Swapping the values only: keys still ascending.
        let b = edited(i, |c| {
            let e = &mut c.segments[0].entries;
            let at = e.len() / 2;
            let v = std::mem::take(&mut e[at].1);
            e[at].1 = std::mem::replace(&mut e[at + 1].1, v);
        });
        refused_behind("swapped values", i, &b, false, proof);
    }
}

#[test]
fn behind_the_digest_a_changed_value_is_refused() {
    let fx = fixture();
    for i in [fx.main_mid, fx.storage_mid] {
        for at in [0, usize::MAX] {
            let b = edited(i, |c| {
                let e = &mut c.segments[0].entries;
                let at = at.min(e.len() - 1);
                let v = &mut e[at].1;
                let last = v.len() - 1;
                v[last] ^= 0x01;
            });
            refused_behind("changed value", i, &b, false, proof);
        }
        // A longer value.
        let b = edited(i, |c| c.segments[0].entries[1].1.push(0x80));
        refused_behind("longer value", i, &b, false, proof);
    }
    // The last segment of a chunk of several.
    let b = edited(fx.multi, |c| {
        let s = c.segments.last_mut().unwrap();
        s.entries[0].1[0] ^= 0x40;
    });
    refused_behind("changed value, last segment", fx.multi, &b, false, proof);
}

#[test]
fn behind_the_digest_a_dropped_proof_node_is_refused() {
    let fx = fixture();
    for i in [fx.main_mid, fx.storage_mid] {
        let nodes = Chunk::decode(&fx.chunks[i]).unwrap().segments[0].proof.len();
        for at in [0, nodes - 1] {
            let b = edited(i, |c| {
                c.segments[0].proof.remove(at);
            });
            refused_behind("dropped proof node", i, &b, false, proof);
        }
        let b = edited(i, |c| c.segments[0].proof.clear());
        refused_behind("no proof nodes", i, &b, false, proof);
    }
}

#[test]
fn behind_the_digest_an_added_proof_node_is_refused() {
    let fx = fixture();
    let foreign_of = |i: usize, j: usize| {
        let own = Owned::decode(&fx.chunks[i]).segments[0].proof.clone();
        Owned::decode(&fx.chunks[j])
            .segments
            .into_iter()
            .flat_map(|s| s.proof)
            .find(|n| !own.contains(n))
            .unwrap()
    };
    for (i, j) in [(fx.main_mid, fx.storage_mid), (fx.storage_mid, fx.main_mid)] {
        // The same node twice.
        let b = edited(i, |c| {
            let p = &mut c.segments[0].proof;
            p.push(p[0].clone());
        });
        refused_behind("duplicate proof node", i, &b, false, proof);
        // A node of another chunk's proof.
        let foreign = foreign_of(i, j);
        let b = edited(i, |c| c.segments[0].proof.insert(1, foreign));
        refused_behind("foreign proof node", i, &b, false, proof);
        // A node of no trie.
        let b = edited(i, |c| c.segments[0].proof.push(vec![0xc2, 0x80, 0x80]));
        refused_behind("junk proof node", i, &b, false, proof);
    }
}

#[test]
fn behind_the_digest_reordered_proof_nodes_are_accepted() {
    // `verify_key_range` looks proof nodes up by hash: their order is free, and a chunk
    // whose nodes are reordered proves the same range.
    let fx = fixture();
    for i in [fx.main_mid, fx.storage_mid] {
        let b = edited(i, |c| c.segments[0].proof.reverse());
        let fate = behind_digest(i, &b, false);
        assert!(matches!(fate, Fate::Accepted), "reversed proof nodes (chunk {i}): {fate:?}");
    }
}

#[test]
fn behind_the_digest_a_chunk_of_another_index_is_refused() {
    let fx = fixture();
    let n = fx.chunks.len();
    for i in [fx.main_mid, fx.storage_mid, fx.multi] {
        for j in [i - 1, (i + 1) % n] {
            refused_behind("chunk of another index", i, &fx.chunks[j].clone(), true, mismatch);
        }
    }
}

#[test]
fn behind_the_digest_a_chunk_of_another_block_is_refused() {
    let fx = fixture();
    let n = fx.chunks.len().min(fx.next_chunks.len());
    // As they are: another block and root.
    for i in [fx.main_mid, fx.storage_mid] {
        refused_behind("chunk of the next block", i, &fx.next_chunks[i].clone(), true, mismatch);
    }
    // Claiming the trusted block and root: the entries or proofs of the next block do not
    // verify against this one's root.
    let mut tried = 0;
    for i in 0..n {
        let mut c = Owned::decode(&fx.next_chunks[i]);
        c.block = fx.trusted.block;
        c.root = fx.trusted.root;
        let b = c.encode();
        if b == fx.chunks[i] {
            continue; // the same chunk in both blocks (storage tries did not change)
        }
        refused_behind("chunk of the next block, relabelled", i, &b, true, any_error);
        tried += 1;
        if tried == 3 {
            break;
        }
    }
    assert_eq!(tried, 3);
    assert_ne!(fx.next.root, fx.trusted.root);
}

#[test]
fn behind_the_digest_truncated_and_extended_chunks_are_refused() {
    let fx = fixture();
    let s = &fx.chunks[fx.small];
    let len = s.len();
    assert!(len > 60, "{len}");
    // Inside the magic bytes, the header, the segment count, a segment; one byte short.
    for cut in [1, 9, 49, 50, len / 2, len - 1] {
        refused_behind("truncated chunk", fx.small, &s[..cut], false, decode_err);
    }
    for i in [fx.small, fx.main_mid] {
        let b = [fx.chunks[i].as_slice(), &[0]].concat();
        refused_behind("trailing byte", i, &b, false, decode_err);
    }
    let b = [s.as_slice(), s].concat();
    refused_behind("chunk twice", fx.small, &b, false, decode_err);
}

#[test]
fn behind_the_digest_changed_framing_is_refused() {
    let fx = fixture();
    let (m, s) = (fx.main_mid, fx.storage_mid);
    let b = edited(m, |c| c.block += 1);
    refused_behind("other block in the header", m, &b, false, mismatch);
    let b = edited(m, |c| c.root.0[31] ^= 1);
    refused_behind("other root in the header", m, &b, false, mismatch);
    let b = edited(s, |c| {
        let st = &mut c.segments[0].start;
        let last = st.len() - 1;
        st[last] ^= 1;
    });
    refused_behind("moved start", s, &b, false, mismatch);
    let b = edited(s, |c| c.segments[0].start.clear());
    refused_behind("start at the trie's start", s, &b, false, mismatch);
    let b = edited(m, |c| c.segments[0].open = true);
    refused_behind("closed segment claims the trie's end", m, &b, false, mismatch);
    // Another storage trie's name on the segment.
    let b = edited(s, |c| c.segments[0].trie = TrieId::Storage(H256([0x55; 32])));
    refused_behind("other storage trie", s, &b, true, mismatch);
    // Segments of a chunk of several, swapped: not in trie order.
    let b = edited(fx.multi, |c| c.segments.swap(0, 1));
    refused_behind("segments swapped", fx.multi, &b, false, decode_err);
    // An extra empty segment after the last.
    let ends = (0..fx.chunks.len())
        .find(|i| fx.manifest.chunks[*i].ends_trie && *i + 1 < fx.chunks.len())
        .unwrap();
    let b = edited(ends, |c| {
        c.segments.push(Seg {
            trie: TrieId::Storage(H256([0xff; 32])),
            start: Vec::new(),
            open: true,
            entries: Vec::new(),
            proof: Vec::new(),
        })
    });
    refused_behind("extra empty segment", ends, &b, false, mismatch);
    // The multi-segment chunk without its last segment.
    let b = edited(fx.multi, |c| {
        c.segments.pop();
    });
    refused_behind("dropped segment", fx.multi, &b, true, mismatch);
}

#[test]
fn behind_the_digest_a_staged_chunk_is_refused_when_its_accounts_arrive() {
    // Offered before the chunks of its accounts, a storage chunk is only checked against
    // the manifest and waits in staging; its proofs are checked when they arrive.
    let fx = fixture();
    let n = fx.chunks.len();
    let i = fx.storage_mid;
    let b = edited(i, |c| c.segments[0].entries[1].1[0] ^= 0x01);
    let manifest = rewritten(i, &b, false).encode();
    let mut dst = fresh();
    let r = Restorer::begin(&mut dst.db, fx.trusted, &manifest, &dst.opts).unwrap();
    assert_eq!(r.offer(i, &b).unwrap(), Offered::Staged);
    assert!(!r.missing().contains(&i));
    let mut refused = None;
    for k in 0..i {
        let o = r.offer(k, &fx.chunks[k]).unwrap();
        assert!(matches!(o, Offered::Applied { .. }), "genuine chunk {k}: {o:?}");
        match r.retry_staged() {
            Ok(applied) => assert_eq!(applied, 0, "the staged mutated chunk was applied"),
            Err(e) => {
                assert!(refused.is_none());
                refused = Some(e);
            }
        }
    }
    let refused = refused.expect("the staged mutated chunk was never checked");
    assert!(proof(&refused), "{refused:?}");
    assert_eq!(r.missing(), (i..n).collect::<Vec<_>>());
    assert_eq!(r.restored(), i);
    drop(r);
    nothing_written(&mut dst, &manifest, i, &b, &refused);
}

#[test]
fn a_checkpoint_leaving_out_a_whole_storage_trie_does_not_finish() {
    // A chunk holding a whole storage trie, not as its last segment, re-encoded without it
    // (and a manifest to match): every chunk verifies, but the accounts with storage then
    // outnumber the storage tries restored.
    let fx = fixture();
    let n = fx.chunks.len();
    let (i, k) = (0..n)
        .find_map(|i| {
            let c = Chunk::decode(&fx.chunks[i]).unwrap();
            let last = c.segments.len() - 1;
            (0..last)
                .find(|k| {
                    let s = &c.segments[*k];
                    matches!(s.trie, TrieId::Storage(_)) && s.start.is_empty() && s.open
                })
                .map(|k| (i, k))
        })
        .expect("the fixture has a chunk with a whole storage trie before its last segment");
    let mut c = Owned::decode(&fx.chunks[i]);
    c.segments.remove(k);
    let b = c.encode();
    let mut m = rewritten(i, &b, true);
    let s0 = &c.segments[0];
    m.chunks[i].first = [s0.trie.prefix(), s0.entries[0].0.clone()].concat();
    let manifest = m.encode();
    assert_eq!(Manifest::decode(&manifest).unwrap(), m);
    let mut dst = fresh();
    let r = Restorer::begin(&mut dst.db, fx.trusted, &manifest, &dst.opts).unwrap();
    for j in shuffled(n, 5) {
        let bytes = if j == i { &b } else { &fx.chunks[j] };
        let o = r.offer(j, bytes).unwrap_or_else(|e| panic!("chunk {j}: {e}"));
        assert!(matches!(o, Offered::Applied { .. } | Offered::Staged), "chunk {j}: {o:?}");
        r.retry_staged().unwrap();
    }
    while r.retry_staged().unwrap() > 0 {}
    assert!(r.missing().is_empty());
    match r.finish() {
        Err(RestoreError::StorageMismatch { accounts, tries }) => assert_eq!(accounts, tries + 1),
        other => panic!("a restore without a storage trie finished: {other:?}"),
    }
}

#[test]
fn a_checkpoint_claiming_the_empty_state_or_one_chunk_of_it_is_refused() {
    let fx = fixture();
    let (block, root) = (fx.trusted.block, fx.trusted.root);
    // The empty main trie; the first chunk's entries as the whole main trie (no proof).
    let empty = Owned {
        block,
        root,
        segments: vec![Seg {
            trie: TrieId::Main,
            start: Vec::new(),
            open: true,
            entries: Vec::new(),
            proof: Vec::new(),
        }],
    };
    let mut first = Owned::decode(&fx.chunks[0]);
    first.segments.truncate(1);
    first.segments[0].open = true;
    first.segments[0].proof.clear();
    for (what, c) in [("empty state", empty), ("first chunk only", first)] {
        let bytes = c.encode();
        let s = &c.segments[0];
        let flat = |k: Option<&(Vec<u8>, Vec<u8>)>| {
            k.map(|(k, _)| [s.trie.prefix(), k.clone()].concat()).unwrap_or_default()
        };
        let m = Manifest {
            layout: fx.manifest.layout,
            chunk_hash: fx.manifest.chunk_hash,
            block,
            root,
            rule: fx.manifest.rule,
            entries: s.entries.len() as u64,
            chunk_bytes: bytes.len() as u64,
            flat_bytes: 0,
            chunks: vec![ChunkInfo {
                first: flat(s.entries.first()),
                last: flat(s.entries.last()),
                entries: s.entries.len() as u64,
                len: bytes.len() as u64,
                digest: fx.manifest.chunk_hash.digest(&bytes),
                ends_trie: true,
            }],
            code: checkpoint::CodeList::default(),
        };
        let manifest = m.encode();
        let mut dst = fresh();
        let r = Restorer::begin(&mut dst.db, fx.trusted, &manifest, &dst.opts).unwrap();
        let e = r.offer(0, &bytes).map(|o| panic!("{what}: accepted: {o:?}")).unwrap_err();
        assert!(proof(&e), "{what}: {e:?}");
        assert_eq!(r.missing(), vec![0]);
        assert!(matches!(r.finish(), Err(RestoreError::Incomplete { missing: 1 })), "{what}");
    }
}

// ---------------------------------------------------------------------------------------
// Manifests.

#[test]
fn a_manifest_of_another_checkpoint_or_garbage_is_refused_before_anything_is_written() {
    let fx = fixture();
    let mut dst = fresh();
    let other = |m: &Manifest| m.encode();
    let mut m = fx.manifest.clone();
    m.block += 1;
    let mut m2 = fx.manifest.clone();
    m2.root.0[0] ^= 1;
    for (what, bytes) in
        [("block", other(&m)), ("root", other(&m2)), ("next block", other(&fx.next))]
    {
        let r = Restorer::begin(&mut dst.db, fx.trusted, &bytes, &dst.opts);
        assert!(matches!(r, Err(RestoreError::OtherCheckpoint { .. })), "{what}: {:?}", r.err());
    }
    // The true manifest against another trusted root.
    let wrong = Trusted { block: fx.trusted.block, root: fx.next.root };
    let r = Restorer::begin(&mut dst.db, wrong, &fx.manifest_bytes, &dst.opts);
    assert!(matches!(r, Err(RestoreError::OtherCheckpoint { .. })), "{:?}", r.err());

    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let random: Vec<u8> = (0..500).map(|_| rng.gen()).collect();
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("random", random),
        ("magic only", b"ARBMANIF".to_vec()),
        ("a chunk", fx.chunks[0].clone()),
        ("truncated", fx.manifest_bytes[..fx.manifest_bytes.len() - 1].to_vec()),
        ("trailing", [fx.manifest_bytes.as_slice(), &[0]].concat()),
    ];
    for (what, bytes) in garbage {
        let r = Restorer::begin(&mut dst.db, fx.trusted, &bytes, &dst.opts);
        assert!(matches!(r, Err(RestoreError::Manifest(_))), "{what}: {:?}", r.err());
    }
    assert!(dst.db.is_empty().unwrap());
    assert_eq!(dst.db.unfinished_bulk_load(), None);
    // Nothing was written: the true checkpoint restores into the same database.
    let r = Restorer::begin(&mut dst.db, fx.trusted, &fx.manifest_bytes, &dst.opts).unwrap();
    offer_genuine(&r, &shuffled(fx.chunks.len(), 4));
    r.finish().unwrap();
    assert_source(&dst.db);
}

// ---------------------------------------------------------------------------------------
// Property tests of the restorer.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(8)))]

    /// Any changed byte, behind the digest, is refused and leaves nothing.
    #[test]
    fn any_changed_byte_behind_the_digest_is_refused(
        chunk in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        mask in 1u8..,
    ) {
        let fx = fixture();
        let i = chunk.index(fx.chunks.len());
        let mut b = fx.chunks[i].clone();
        let p = at.index(b.len());
        b[p] ^= mask;
        match behind_digest(i, &b, true) {
            Fate::Refused(_) => {}
            Fate::Accepted => panic!("chunk {i} with byte {p} xor {mask:#04x} was accepted"),
        }
    }

    /// Proof nodes in any order prove the same range.
    #[test]
    fn any_order_of_proof_nodes_is_accepted(chunk in any::<prop::sample::Index>(), seed in any::<u64>()) {
        let fx = fixture();
        let i = chunk.index(fx.chunks.len());
        let mut c = Owned::decode(&fx.chunks[i]);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for s in &mut c.segments {
            for k in (1..s.proof.len()).rev() {
                s.proof.swap(k, rng.gen_range(0..=k));
            }
        }
        let fate = behind_digest(i, &c.encode(), false);
        prop_assert!(matches!(fate, Fate::Accepted), "chunk {}: {:?}", i, fate);
    }

    /// Random edits of random chunks under the true manifest: all blamed on the source,
    /// nothing written.
    #[test]
    fn random_edits_are_blamed_on_the_source(seed in any::<u64>()) {
        let fx = fixture();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut bad = Vec::new();
        for _ in 0..50 {
            let i = rng.gen_range(0..fx.chunks.len());
            let b = random_edit(&fx.chunks[i], &mut rng);
            if b != fx.chunks[i] {
                bad.push((i, b));
            }
        }
        refused_by_digest(&bad, seed);
    }
}

/// One to four random edits: a changed byte, an inserted byte, a removed byte, a cut.
fn random_edit(bytes: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        let p = rng.gen_range(0..=b.len());
        match rng.gen_range(0..4) {
            0 if p < b.len() => b[p] ^= rng.gen_range(1..=255u8),
            1 => b.insert(p, rng.gen()),
            2 if p < b.len() => {
                b.remove(p);
            }
            _ => b.truncate(p),
        }
    }
    b
}

// ---------------------------------------------------------------------------------------
// The decoders: typed errors, never a panic; `Ok` only for an encoding.

/// Decode `bytes` as a chunk and as a manifest: no panic (the input is reported if one
/// happens), and whatever decodes re-encodes to exactly `bytes`. Returns whether each
/// decoded.
fn decode_both(bytes: &[u8]) -> (bool, bool) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let chunk = Chunk::decode(bytes).map(|c| c.encode());
        let manifest = Manifest::decode(bytes).map(|m| m.encode());
        (chunk, manifest)
    }));
    let Ok((chunk, manifest)) = r else {
        panic!("a decoder panicked on {} bytes: {}", bytes.len(), hex::encode(bytes));
    };
    if let Ok(e) = &chunk {
        assert!(e == bytes, "a decoded chunk re-encodes to other bytes: {}", hex::encode(bytes));
    }
    if let Ok(e) = &manifest {
        assert!(e == bytes, "a decoded manifest re-encodes to other bytes: {}", hex::encode(bytes));
    }
    (chunk.is_ok(), manifest.is_ok())
}

#[test]
fn genuine_encodings_round_trip() {
    let fx = fixture();
    for c in fx.chunks.iter().chain(&fx.next_chunks) {
        assert_eq!(decode_both(c), (true, false));
    }
    assert_eq!(decode_both(&fx.manifest_bytes), (false, true));
    assert_eq!(Manifest::decode(&fx.manifest_bytes).unwrap(), fx.manifest);
}

#[test]
fn decoders_refuse_every_truncation() {
    let fx = fixture();
    for len in 0..fx.manifest_bytes.len() {
        assert_eq!(decode_both(&fx.manifest_bytes[..len]), (false, false), "manifest cut at {len}");
    }
    for i in [fx.small, fx.main_mid, fx.storage_mid, fx.multi] {
        let c = &fx.chunks[i];
        for len in 0..c.len() {
            assert_eq!(decode_both(&c[..len]), (false, false), "chunk {i} cut at {len}");
        }
    }
}

#[test]
fn decoders_survive_every_changed_byte() {
    let fx = fixture();
    let inputs = [&fx.manifest_bytes, &fx.chunks[fx.small], &fx.chunks[fx.multi]];
    for bytes in inputs {
        for p in 0..bytes.len() {
            for change in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[p] ^= change;
                decode_both(&b);
            }
            for value in [0x00u8, 0xff] {
                let mut b = bytes.clone();
                b[p] = value;
                decode_both(&b);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(256)))]

    #[test]
    fn decoders_survive_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        decode_both(&bytes);
    }

    /// Random bytes behind valid magic bytes and version, so that the decoders go deeper.
    #[test]
    fn decoders_survive_random_bodies(
        manifest in any::<bool>(),
        body in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let magic: &[u8] = if manifest { checkpoint::MANIFEST_MAGIC } else { checkpoint::CHUNK_MAGIC };
        let bytes = [magic, &[checkpoint::FORMAT_VERSION], &body].concat();
        decode_both(&bytes);
    }

    #[test]
    fn decoders_survive_random_edits_of_encodings(which in any::<prop::sample::Index>(), seed in any::<u64>()) {
        let fx = fixture();
        let i = which.index(fx.chunks.len() + 1);
        let original = fx.chunks.get(i).unwrap_or(&fx.manifest_bytes);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        decode_both(&random_edit(original, &mut rng));
    }
}
