//! Checkpoints of an Ethereum account database carry its contract code (manifest version
//! 3's code chunks): a restore holds every code of the source, the same roots and the same
//! flat state, in any chunk order, resumed or over HTTP; a code that does not hash to its
//! key, a code chunk no source has and a manifest whose code list is edited are refused
//! with typed errors; a database without code gets no code chunks.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use alloy_primitives::U256;
use checkpoint::{
    open_source, restore_from_sources, verify_manifest, CheckpointDir, ChunkError, CodeChunk,
    CodeError, CodeList, Created, FetchError, FetchOptions, HttpServer, Manifest, Offered,
    RestoreError, RestoreOptions, Restorer, SourceOptions, Trusted, VerifyError,
};
use eth::{AccountModel, AccountWrite, Address, EthChanges};
use state::H256;
use store::StateDb;
use trie::{keccak256, EMPTY_CODE_HASH};

use crate::common::*;

/// Contracts written at block 1; contracts `2k` and `2k + 1` share a code.
const CONTRACTS: u8 = 60;

/// Code number `id`: a few hundred bytes, its own for each id.
fn code(id: u8) -> Vec<u8> {
    (0..200 + 13 * usize::from(id)).map(|j| (j as u8) ^ id).collect()
}

fn contract(i: u8) -> Address {
    let mut a = [0x11; 20];
    a[0] = i;
    a
}

fn slot(i: u64) -> H256 {
    H256(U256::from(i).to_be_bytes::<32>())
}

fn write(nonce: u64, balance: u64, code_hash: H256, slots: &[(u64, u64)]) -> AccountWrite {
    AccountWrite {
        nonce,
        balance: U256::from(balance),
        code_hash,
        storage_cleared: false,
        storage: slots.iter().map(|(s, v)| (slot(*s), U256::from(*v))).collect(),
    }
}

/// An account database of two blocks committed with the account-model commit: block 1
/// writes [`CONTRACTS`] contracts with storage and code and 40 accounts without either;
/// block 2 removes contract 0 (its code stays referred to by contract 1), rewrites every
/// seventh contract's storage, creates one contract with a code of its own and stores a
/// code no account refers to. Returns the database, every code it holds, and the hash of
/// the code no account refers to.
fn eth_db(dir: &Path) -> (StateDb, BTreeMap<H256, Vec<u8>>, H256) {
    let mut db = open(dir);
    let mut codes = BTreeMap::new();
    let mut b1 = EthChanges::new();
    for i in 0..CONTRACTS {
        let hash = b1.insert_code(code(i / 2));
        codes.insert(hash, code(i / 2));
        let slots: Vec<(u64, u64)> =
            (1..=u64::from(i % 5) + 1).map(|s| (s, u64::from(i) * 100 + s)).collect();
        b1.write_account(contract(i), write(1, u64::from(i) + 1, hash, &slots));
    }
    for i in 0..40u8 {
        let mut user = [0xee; 20];
        user[19] = i;
        b1.write_account(user, write(u64::from(i), 1_000 + u64::from(i), EMPTY_CODE_HASH, &[]));
    }
    db.commit_nested(&b1.to_nested(), &AccountModel).unwrap();
    let mut b2 = EthChanges::new();
    b2.remove_account(contract(0));
    for i in (1..CONTRACTS).step_by(7) {
        let hash = keccak256(&code(i / 2));
        b2.write_account(contract(i), write(2, 7, hash, &[(1, 0), (50, u64::from(i) + 9)]));
    }
    let hash = b2.insert_code(code(100));
    codes.insert(hash, code(100));
    b2.write_account(contract(200), write(1, 5, hash, &[(3, 4)]));
    let unreferenced = b2.insert_code(code(101));
    codes.insert(unreferenced, code(101));
    db.commit_nested(&b2.to_nested(), &AccountModel).unwrap();
    (db, codes, unreferenced)
}

/// The trusted block and root of a checkpoint.
fn trusted(m: &Manifest) -> Trusted {
    Trusted { block: m.block, root: m.root }
}

/// Why an edited checkpoint was refused.
#[derive(Debug)]
enum Refused {
    Chunk(ChunkError),
    Restore(RestoreError),
}

/// Restore `m` (stored into `dir` first) from `dir` into a new database at `db`: every
/// chunk in index order, then the staged ones; finish.
#[allow(clippy::result_large_err, reason = "a test helper whose error is matched on")]
fn restore_all(db: &Path, dir: &CheckpointDir, m: &Manifest) -> Result<Trusted, Refused> {
    let bytes = m.encode();
    dir.put_manifest(&keccak256(&bytes), &bytes).unwrap();
    let mut dst = open(db);
    let staging = RestoreOptions::new(db.with_extension("staging"));
    let r = Restorer::begin(&mut dst, trusted(m), &bytes, &staging).map_err(Refused::Restore)?;
    for i in 0..m.chunk_count() {
        let chunk = dir.chunk(&m.chunk_name(i).unwrap().0).unwrap().unwrap();
        r.offer(i, &chunk).map_err(Refused::Chunk)?;
        r.retry_staged().map_err(Refused::Chunk)?;
    }
    while r.retry_staged().map_err(Refused::Chunk)? > 0 {}
    r.finish().map_err(Refused::Restore)
}

/// Every code of `codes` is in `db` as it is in the source.
fn assert_codes(db: &StateDb, codes: &BTreeMap<H256, Vec<u8>>) {
    for (hash, c) in codes {
        assert_eq!(db.code(hash).unwrap().as_deref(), Some(c.as_slice()), "code {hash}");
    }
}

/// The source, its codes, the code no account refers to, and a checkpoint of it in `out`.
fn checkpoint_of_eth_db(tmp: &Path) -> (StateDb, BTreeMap<H256, Vec<u8>>, H256, Created) {
    let (src, codes, unreferenced) = eth_db(&tmp.join("src"));
    let created = create(&src, &CheckpointDir::new(tmp.join("ckpt")), &small_chunks(2));
    (src, codes, unreferenced, created)
}

#[test]
fn an_account_database_restores_with_its_code_in_any_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, codes, _) = eth_db(&tmp.path().join("src"));
    assert_eq!(codes.len(), usize::from(CONTRACTS) / 2 + 2);
    let out = CheckpointDir::new(tmp.path().join("ckpt"));
    let state = dump(&src);
    let mut ids = Vec::new();
    for threads in [1, 3] {
        let created = create(&src, &out, &small_chunks(threads));
        let m = &created.manifest;
        assert_eq!(m.code.entries, codes.len() as u64);
        assert_eq!(m.code.bytes, codes.values().map(|c| 32 + c.len() as u64).sum::<u64>());
        assert!(m.code.chunks.len() >= 3, "{} code chunks", m.code.chunks.len());
        assert_eq!(m.chunk_count(), m.chunks.len() + m.code.chunks.len());
        ids.push(created.id);
        let mut dst = open(&tmp.path().join(format!("dst{threads}")));
        let order = shuffled(m.chunk_count(), threads as u64);
        let staging = tmp.path().join(format!("staging{threads}"));
        let t = restore(&mut dst, &out, &created, &order, &staging);
        assert_eq!((t.block, t.root), (2, src.head_root()));
        assert_eq!(dump(&dst), state);
        assert_eq!(roots(&dst, &state), roots(&src, &state));
        assert_codes(&dst, &codes);
        let report = dst.verify().unwrap();
        assert!(report.ok(), "{report:?}");
    }
    // The code is cut by its content: the same checkpoint whatever the thread count.
    assert_eq!(ids[0], ids[1]);
    // A verification without a database reports the codes.
    let m = out.list().unwrap().remove(0).1;
    let source = open_source(out.root().to_str().unwrap(), &SourceOptions::default()).unwrap();
    let bytes = out.manifest_bytes(&ids[0]).unwrap().unwrap();
    let s = verify_manifest(source.as_ref(), &ids[0], &bytes, trusted(&m), &|_| {}).unwrap();
    assert_eq!((s.codes, s.chunks), (codes.len() as u64, m.chunk_count()));
    assert_eq!(s.bytes, m.chunk_bytes + m.code.chunk_bytes);
    // A state without code (accounts all without) has no code chunks.
    let plain = load(&tmp.path().join("plain"), &eth_state(9, 200, 10, 20));
    let created = create(&plain, &CheckpointDir::new(tmp.path().join("p")), &small_chunks(2));
    assert_eq!(created.manifest.code, CodeList::default());
}

/// A restore stopped with some state and code chunks in resumes: the codes its accounts
/// refer to are checked at the end whichever run restored them.
#[test]
fn a_restore_with_code_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, codes, _, created) = checkpoint_of_eth_db(tmp.path());
    let out = CheckpointDir::new(tmp.path().join("ckpt"));
    let m = &created.manifest;
    let bytes = out.manifest_bytes(&created.id).unwrap().unwrap();
    let order = shuffled(m.chunk_count(), 5);
    let (first, rest) = order.split_at(order.len() / 2);
    let staging = RestoreOptions::new(tmp.path().join("staging"));
    let mut dst = open(&tmp.path().join("dst"));
    for part in [first, rest] {
        let r = Restorer::begin(&mut dst, trusted(m), &bytes, &staging).unwrap();
        for &i in part {
            let chunk = out.chunk(&m.chunk_name(i).unwrap().0).unwrap().unwrap();
            assert!(!matches!(r.offer(i, &chunk).unwrap(), Offered::AlreadyDone));
            r.retry_staged().unwrap();
        }
        while r.retry_staged().unwrap() > 0 {}
        if part == rest {
            r.finish().unwrap();
        } else {
            assert!(matches!(r.finish(), Err(RestoreError::Incomplete { .. })));
        }
    }
    assert_eq!(dst.head_root(), src.head_root());
    assert_codes(&dst, &codes);
}

#[test]
fn a_code_that_does_not_hash_to_its_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, _, created) = checkpoint_of_eth_db(tmp.path());
    let dir = CheckpointDir::new(tmp.path().join("ckpt"));
    let mut m = created.manifest.clone();
    let n = m.chunks.len();
    let good = dir.chunk(&m.code.chunks[1].digest).unwrap().unwrap();
    let mut chunk = CodeChunk::decode(&good).unwrap();
    let mut altered = chunk.codes[0].1.to_vec();
    altered[7] ^= 0x01;
    let key = chunk.codes[0].0;
    chunk.codes[0].1 = &altered;
    let forged = chunk.encode();
    assert_eq!(forged.len(), good.len());
    // Served in place of the chunk the manifest names: the source's fault.
    let staging = RestoreOptions::new(tmp.path().join("staging"));
    let bytes = dir.manifest_bytes(&created.id).unwrap().unwrap();
    let mut dst = open(&tmp.path().join("dst0"));
    let r = Restorer::begin(&mut dst, trusted(&m), &bytes, &staging).unwrap();
    let e = r.offer(n + 1, &forged).unwrap_err();
    assert!(matches!(e, ChunkError::Digest { index, .. } if index == n + 1), "{e:?}");
    assert!(e.blames_source());
    drop(r);
    // Named by a manifest: the checkpoint's fault, the code's hash named.
    m.code.chunks[1].digest = m.chunk_hash.digest(&forged);
    dir.put_chunk(&m.code.chunks[1].digest, &forged).unwrap();
    match restore_all(&tmp.path().join("dst1"), &dir, &m) {
        Err(Refused::Chunk(ChunkError::Code {
            index,
            source: CodeError::Hash { key: k, actual },
        })) => {
            assert_eq!((index, k, actual), (n + 1, key, keccak256(&altered)));
        }
        other => panic!("{other:?}"),
    }
    // A verification refuses it the same way.
    let id = keccak256(&m.encode());
    let source = open_source(dir.root().to_str().unwrap(), &SourceOptions::default()).unwrap();
    let e = verify_manifest(source.as_ref(), &id, &m.encode(), trusted(&m), &|_| {}).unwrap_err();
    assert!(
        matches!(&e, VerifyError::Chunk(c) if matches!(c.as_ref(), ChunkError::Code { .. })),
        "{e:?}"
    );
}

#[test]
fn a_manifest_whose_code_list_is_edited_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, unreferenced, created) = checkpoint_of_eth_db(tmp.path());
    let dir = CheckpointDir::new(tmp.path().join("ckpt"));
    let m0 = created.manifest.clone();
    let source = open_source(dir.root().to_str().unwrap(), &SourceOptions::default()).unwrap();
    let first = dir.chunk(&m0.code.chunks[0].digest).unwrap().unwrap();
    let first = CodeChunk::decode(&first).unwrap();
    let referred = first.codes.iter().filter(|(h, _)| *h != unreferenced).count() as u64;
    assert!(referred > 0);
    let weight: u64 = first.codes.iter().map(|(_, c)| 32 + c.len() as u64).sum();
    let mut case = 0;
    let mut refused = |m: &Manifest| {
        case += 1;
        let verified = verify_manifest(source.as_ref(), &m.id(), &m.encode(), trusted(m), &|_| {});
        assert!(verified.is_err(), "case {case}: {verified:?}");
        restore_all(&tmp.path().join(format!("dst{case}")), &dir, m).unwrap_err()
    };
    // The first code chunk dropped from the list, the totals with it: the codes it held
    // that accounts refer to are missing.
    let mut m = m0.clone();
    let dropped = m.code.chunks.remove(0);
    m.code.entries -= dropped.entries;
    m.code.chunk_bytes -= dropped.len;
    m.code.bytes -= weight;
    match refused(&m) {
        Refused::Restore(RestoreError::CodeMissing { missing, first: one }) => {
            assert_eq!(missing, referred);
            assert!(one != unreferenced && first.codes.iter().any(|(h, _)| *h == one), "{one}");
        }
        other => panic!("{other:?}"),
    }
    // ... with the code bytes left as they were: misstated.
    m.code.bytes += weight;
    assert!(matches!(refused(&m), Refused::Restore(RestoreError::Misstated(_))));
    // ... with the totals left as they were: the manifest does not decode.
    let mut m = m0.clone();
    m.code.chunks.remove(0);
    assert!(matches!(refused(&m), Refused::Restore(RestoreError::Manifest(_))));
    // No code at all: every code an account refers to is missing.
    let m = Manifest { code: CodeList::default(), ..m0.clone() };
    match refused(&m) {
        Refused::Restore(RestoreError::CodeMissing { missing, .. }) => {
            assert_eq!(missing, m0.code.entries - 1);
        }
        other => panic!("{other:?}"),
    }
    // A code chunk's count edited (and the total): it does not fit the manifest.
    let mut m = m0.clone();
    m.code.chunks[1].entries += 1;
    m.code.entries += 1;
    m.code.bytes += 32;
    let n = m.chunks.len();
    match refused(&m) {
        Refused::Chunk(ChunkError::Code { index, source: CodeError::Mismatch(_) }) => {
            assert_eq!(index, n + 1);
        }
        other => panic!("{other:?}"),
    }
}

/// A code chunk no source has: the checkpoint is abandoned and the database left empty,
/// with none of the code the restore wrote; the checkpoint's code chunks are fetched over
/// HTTP like its state chunks.
#[test]
fn a_dropped_code_chunk_is_refused_and_http_restores_code() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, codes, _, created) = checkpoint_of_eth_db(tmp.path());
    let m = &created.manifest;
    let full = tmp.path().join("ckpt");
    let server = HttpServer::start(CheckpointDir::new(&full), "127.0.0.1:0", 2).unwrap();
    let lacking = tmp.path().join("lacking");
    test_support::copy_tree(&full, &lacking);
    let j = m.code.chunks.len() - 1;
    std::fs::remove_file(lacking.join(checkpoint::chunk_path(&m.code.chunks[j].digest))).unwrap();
    let opts = SourceOptions::default();
    let run = |dst: &mut StateDb, addr: &str| {
        let sources = vec![open_source(addr, &opts).unwrap()];
        let fetch = FetchOptions { workers: 2, ..FetchOptions::default() };
        let staging = RestoreOptions::new(tmp.path().join("staging"));
        let stop = AtomicBool::new(false);
        restore_from_sources(dst, trusted(m), &sources, &staging, &fetch, &stop, &|_| {})
    };
    let mut dst = open(&tmp.path().join("dst"));
    let (report, outcome) = run(&mut dst, lacking.to_str().unwrap());
    match &outcome {
        Err(FetchError::BadCheckpoint { reason, .. }) => assert!(
            matches!(reason.as_ref(), FetchError::MissingChunk { index } if *index == m.chunks.len() + j),
            "{reason:?}"
        ),
        other => panic!("{other:?}: {report:#?}"),
    }
    assert!(dst.is_empty().unwrap());
    for hash in codes.keys() {
        assert_eq!(dst.code(hash).unwrap(), None, "code {hash} left behind");
    }
    // The whole checkpoint over HTTP.
    let (report, outcome) = run(&mut dst, &format!("http://{}", server.addr()));
    outcome.unwrap_or_else(|e| panic!("{e}: {report:#?}"));
    assert_eq!(report.chunks, m.chunk_count());
    assert_eq!(dst.head_root(), src.head_root());
    assert_eq!(dump(&dst), dump(&src));
    assert_codes(&dst, &codes);
    server.shutdown();
}
