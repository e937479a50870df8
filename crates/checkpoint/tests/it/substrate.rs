//! Checkpoints of Substrate databases: the manifest records the layout, every proof is made
//! and verified in it, and child tries (`TrieId::Storage(blake2_256(child key))`, their
//! roots under `:child_storage:default: ‖ child key` in the main trie) are bound like
//! Ethereum storage tries. A round trip equals its source; a restore resumed after its
//! main-trie chunks finds the child roots again; a manifest whose layout is edited is
//! refused, and so is a restore into a database of another layout.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use checkpoint::{
    find_candidates, open_source, restore_from_sources, CheckpointDir, CreateError, FetchError,
    FetchOptions, Manifest, Offered, RestoreError, RestoreOptions, Restorer, SourceOptions,
    Trusted, VerifyError,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, TrieId, H256};
use store::{StateDb, StoreConfig};
use trie::{blake2_256, Layout, LayoutName, ProofError, WithLayout};

use crate::common::*;

const CHILD_PREFIX: &[u8] = b":child_storage:default:";

/// The value sizes the states cycle through: inline in V1 (10, 32) and value nodes (33,
/// 100).
const SIZES: [usize; 4] = [10, 32, 33, 100];

fn config(layout: LayoutName) -> StoreConfig {
    let mut c = crate::common::config();
    c.layout = Some(layout);
    c
}

fn open_as(dir: &Path, layout: LayoutName) -> StateDb {
    StateDb::open(dir, config(layout)).unwrap()
}

fn child_key(name: &[u8]) -> Vec<u8> {
    [CHILD_PREFIX, name].concat()
}

struct RootOf<'a>(&'a BTreeMap<Vec<u8>, Vec<u8>>);

impl WithLayout for RootOf<'_> {
    type Output = H256;
    fn run<L: Layout>(self) -> H256 {
        let pairs: Vec<(&Vec<u8>, &Vec<u8>)> = self.0.iter().collect();
        trie::root_from_sorted::<L, _, _>(&pairs).unwrap().0
    }
}

struct CheckProof<'a> {
    root: H256,
    key: &'a [u8],
    proof: Vec<Vec<u8>>,
}

impl WithLayout for CheckProof<'_> {
    type Output = Result<Option<Vec<u8>>, ProofError>;
    fn run<L: Layout>(self) -> Self::Output {
        trie::verify_proof::<L>(&self.root, self.key, &self.proof)
    }
}

/// A Substrate database after three blocks: main-trie keys of several lengths with values
/// of 10, 32, 33 and 100 bytes; the child trie `child` (a few hundred entries), 30 small
/// ones (`child-NN`, one of them deleted again in block 2) and an empty-rooted entry that
/// commits to nothing; each child's root under its `:child_storage:default:` key, kept
/// right in every block. Returns the database and its state.
fn substrate_db(dir: &Path, layout: LayoutName, seed: u64) -> (StateDb, State) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut db = open_as(dir, layout);
    let mut model = State::new();
    let value = |rng: &mut ChaCha8Rng, i: usize| -> Vec<u8> {
        (0..SIZES[i % SIZES.len()]).map(|_| rng.gen()).collect()
    };
    let mut names: Vec<Vec<u8>> = vec![b"child".to_vec()];
    names.extend((0..30).map(|i| format!("child-{i:02}").into_bytes()));
    for block in 0..3usize {
        let mut c = ChangeSet::new();
        let main = c.entry(TrieId::Main).or_default();
        for i in 0..150 {
            let key = match i % 3 {
                0 => blake2_256(&(block * 1000 + i).to_be_bytes()).0.to_vec(),
                1 => [b"pallet:".as_slice(), &(i as u32).to_be_bytes()].concat(),
                _ => vec![rng.gen::<u8>(); 1 + i % 5],
            };
            main.insert(key, Some(value(&mut rng, i + block)));
        }
        if block == 0 {
            main.insert(b":code".to_vec(), Some(vec![0xab; 100]));
        }
        for (n, name) in names.iter().enumerate() {
            let id = TrieId::Storage(blake2_256(name));
            let entries = if n == 0 { 120 } else { 1 + n % 4 };
            let kv = c.entry(id).or_default();
            let deleted = block >= 1 && n == 3;
            if deleted {
                for k in model.get(&id).into_iter().flat_map(|m| m.keys()) {
                    kv.insert(k.clone(), None);
                }
                continue;
            }
            for i in 0..entries {
                let k = [name.as_slice(), &rng.gen::<[u8; 2]>()].concat();
                kv.insert(k, Some(value(&mut rng, i)));
            }
        }
        apply(&mut model, &c);
        // The main-trie entry of each child trie, in the same block.
        let mut roots = ChangeSet::new();
        let main = roots.entry(TrieId::Main).or_default();
        for name in &names {
            let id = TrieId::Storage(blake2_256(name));
            let root = model.get(&id).map(|kv| layout.dispatch(RootOf(kv)));
            main.insert(child_key(name), root.map(|r| r.0.to_vec()));
        }
        // Empty roots commit to no trie.
        main.insert(child_key(b"gone"), Some(layout.empty_root().0.to_vec()));
        apply(&mut model, &roots);
        for (t, kv) in roots {
            c.entry(t).or_default().extend(kv);
        }
        let info = db.commit(&c).unwrap();
        for name in &names {
            let id = TrieId::Storage(blake2_256(name));
            let want = model.get(&id).map_or(layout.empty_root(), |kv| layout.dispatch(RootOf(kv)));
            assert_eq!(db.trie_root(&id).unwrap(), want);
        }
        assert_eq!(info.number, block as u64 + 1);
    }
    db.flush().unwrap();
    (db, model)
}

fn apply(model: &mut State, c: &ChangeSet) {
    for (t, kv) in c {
        let m = model.entry(*t).or_default();
        for (k, v) in kv {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        if m.is_empty() {
            model.remove(t);
        }
    }
}

/// Key proofs from `db` for a few keys of every trie of `state` verify in `layout`.
fn check_proofs(db: &StateDb, layout: LayoutName, state: &State) {
    for (t, kv) in state {
        let root = db.trie_root(t).unwrap();
        for (k, v) in kv.iter().step_by(37).chain(kv.iter().last()) {
            let proof = db.prove(*t, k).unwrap();
            let proved = layout.dispatch(CheckProof { root, key: k, proof }).unwrap();
            assert_eq!(proved.as_ref(), Some(v), "{t:?} {}", hex::encode(k));
        }
        let proof = db.prove(*t, b"\xffabsent").unwrap();
        assert_eq!(layout.dispatch(CheckProof { root, key: b"\xffabsent", proof }), Ok(None));
    }
}

fn trusted(m: &Manifest) -> Trusted {
    Trusted { block: m.block, root: m.root }
}

fn dir_source(dir: &CheckpointDir) -> Box<dyn checkpoint::Source> {
    open_source(dir.root().to_str().unwrap(), &SourceOptions::default()).unwrap()
}

#[test]
fn substrate_checkpoints_round_trip() {
    for layout in [LayoutName::SubstrateV1, LayoutName::SubstrateV0] {
        let tmp = tempfile::tempdir().unwrap();
        let (src, state) = substrate_db(&tmp.path().join("src"), layout, 7);
        // 30 child tries, one deleted, plus `child`.
        assert_eq!(state.len(), 31, "{layout}");
        let out = CheckpointDir::new(tmp.path().join("ckpt"));
        let created = create(&src, &out, &small_chunks(3));
        let m = &created.manifest;
        assert_eq!(m.layout, layout);
        assert_eq!((m.block, m.root), (3, src.head_root()));
        assert!(m.chunks.len() > 20, "{} chunks", m.chunks.len());
        let bytes = out.manifest_bytes(&created.id).unwrap().unwrap();
        assert_eq!(bytes[8], checkpoint::MANIFEST_BLAKE3_VERSION);
        assert_eq!(Manifest::layout_of(&bytes), Ok(layout));
        // The bytes do not depend on the thread count.
        let again = create(&src, &CheckpointDir::new(tmp.path().join("t1")), &small_chunks(1));
        assert_eq!(again.id, created.id, "{layout}");
        // Verified without a database.
        let s = checkpoint::verify_manifest(
            dir_source(&out).as_ref(),
            &created.id,
            &bytes,
            trusted(m),
            &|_| {},
        )
        .unwrap();
        assert_eq!((s.layout.as_str(), s.storage_tries), (layout.as_str(), 30));
        // Restored into a new database of its layout, chunks in a shuffled order (storage
        // chunks wait in staging for the main-trie chunks holding their child entries).
        let mut dst = open_as(&tmp.path().join("dst"), layout);
        let order = shuffled(m.chunks.len(), 5);
        let t = restore(&mut dst, &out, &created, &order, &tmp.path().join("staging"));
        assert_eq!((t.block, t.root), (3, src.head_root()));
        assert_eq!((dst.head_number(), dst.head_root()), (3, src.head_root()));
        assert_eq!(dump(&dst), dump(&src));
        assert_eq!(dump(&dst), state);
        assert_eq!(roots(&dst, &state), roots(&src, &state));
        let report = dst.verify().unwrap();
        assert!(report.ok(), "{report:?}");
        check_proofs(&dst, layout, &state);
        // The restored database commits like its source.
        let mut c = ChangeSet::new();
        let id = TrieId::Storage(blake2_256(b"child"));
        let k = state[&id].keys().nth(3).unwrap().clone();
        c.entry(id).or_default().insert(k, Some(vec![5; 40]));
        c.entry(TrieId::Main).or_default().insert(b"new".to_vec(), Some(vec![6; 33]));
        let mut src = src;
        assert_eq!(src.commit(&c).unwrap().root, dst.commit(&c).unwrap().root);
        // Through the sources API, into a database created in the layout it reports.
        let sources = vec![dir_source(&out)];
        let stop = AtomicBool::new(false);
        let found = find_candidates(trusted(m), &sources, &stop);
        assert_eq!(found.layout(), Some(layout));
        let path = tmp.path().join("dst2");
        let mut db = open_as(&path, found.layout().unwrap());
        let (report, outcome) = found.restore(
            &mut db,
            &RestoreOptions::in_database(&path),
            &FetchOptions::default(),
            &stop,
            &|_| {},
        );
        assert_eq!(outcome.unwrap(), trusted(m), "{report:?}");
        assert_eq!(db.layout(), layout);
        assert_eq!(dump(&db), state);
        check_proofs(&db, layout, &state);
    }
}

/// The child roots a restore learns from main-trie chunks outlive a restart: a restore
/// stopped after every main-trie chunk resumes and applies each storage chunk at once.
#[test]
fn a_resumed_substrate_restore_finds_its_child_roots() {
    let layout = LayoutName::SubstrateV1;
    let tmp = tempfile::tempdir().unwrap();
    let (src, state) = substrate_db(&tmp.path().join("src"), layout, 11);
    let out = CheckpointDir::new(tmp.path().join("ckpt"));
    let created = create(&src, &out, &small_chunks(2));
    let m = &created.manifest;
    let bytes = out.manifest_bytes(&created.id).unwrap().unwrap();
    let chunk = |i: usize| out.chunk(&m.chunks[i].digest).unwrap().unwrap();
    let main: Vec<usize> = (0..m.chunks.len()).filter(|i| m.chunks[*i].first[0] == 0).collect();
    assert!(main.len() > 3 && main.len() < m.chunks.len() - 3, "{} main chunks", main.len());
    let path = tmp.path().join("dst");
    let opts = RestoreOptions::in_database(&path);
    let mut db = open_as(&path, layout);
    {
        let r = Restorer::begin(&mut db, trusted(m), &bytes, &opts).unwrap();
        for &i in &main {
            assert!(matches!(r.offer(i, &chunk(i)).unwrap(), Offered::Applied { .. }), "{i}");
        }
    }
    drop(db);
    let mut db = open_as(&path, layout);
    let r = Restorer::begin(&mut db, trusted(m), &bytes, &opts).unwrap();
    assert_eq!(r.restored(), main.len());
    for i in (0..m.chunks.len()).rev().filter(|i| !main.contains(i)) {
        let o = r.offer(i, &chunk(i)).unwrap_or_else(|e| panic!("chunk {i}: {e}"));
        assert!(matches!(o, Offered::Applied { .. }), "chunk {i}: {o:?}");
    }
    assert_eq!(r.finish().unwrap(), trusted(m));
    assert_eq!(dump(&db), state);
    assert!(db.verify().unwrap().ok());
}

/// A manifest whose layout is edited (stored under its new id, as a hostile source would
/// offer it) is refused by `verify` and by a restore into a database of the layout it
/// claims; an unknown layout name does not decode.
#[test]
fn a_manifest_with_an_edited_layout_is_refused() {
    let layout = LayoutName::SubstrateV1;
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = substrate_db(&tmp.path().join("src"), layout, 13);
    let out = CheckpointDir::new(tmp.path().join("ckpt"));
    let created = create(&src, &out, &small_chunks(2));
    let genuine = out.manifest_bytes(&created.id).unwrap().unwrap();
    let name_at = genuine.windows(12).position(|w| w == b"substrate-v1").unwrap();
    assert_eq!(name_at, 10);
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = genuine.clone();
        f(&mut b);
        b
    };
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("v1 byte to v0", edit(&|b| b[name_at + 11] = b'0')),
        ("unknown name", edit(&|b| b[name_at + 11] = b'2')),
        ("unknown name bytes", edit(&|b| b[name_at] = 0xff)),
        ("version 1", edit(&|b| b[8] = 1)),
        ("version 2", edit(&|b| b[8] = 2)),
    ];
    for other in [LayoutName::SubstrateV0, LayoutName::Ethereum] {
        let mut m = created.manifest.clone();
        m.layout = other;
        cases.push((other.as_str(), m.encode()));
    }
    for (what, bytes) in cases {
        let id = trie::keccak256(&bytes);
        out.put_manifest(&id, &bytes).unwrap();
        let verified = checkpoint::verify_manifest(
            dir_source(&out).as_ref(),
            &id,
            &bytes,
            trusted(&created.manifest),
            &|_| {},
        );
        match &verified {
            Err(VerifyError::Chunk(_) | VerifyError::Restore(_)) => {}
            other => panic!("{what}: verified: {other:?}"),
        }
        // A restore into a new database of the layout the manifest claims.
        let path = tmp.path().join(format!("dst-{}", id));
        let Ok(claimed) = Manifest::layout_of(&bytes) else {
            assert!(matches!(verified, Err(VerifyError::Restore(RestoreError::Manifest(_)))));
            continue;
        };
        let mut db = open_as(&path, claimed);
        let opts = RestoreOptions::in_database(&path);
        // Refused at once (a manifest that does not decode, or not of the trusted block),
        // or chunk by chunk.
        let Ok(r) = Restorer::begin(&mut db, trusted(&created.manifest), &bytes, &opts) else {
            continue;
        };
        let m = r.manifest().clone();
        let refused = (0..m.chunks.len()).any(|i| {
            let c = out.chunk(&m.chunks[i].digest).unwrap().unwrap();
            r.offer(i, &c).is_err()
        });
        assert!(refused || r.finish().is_err(), "{what}: restored");
    }
}

/// A checkpoint is restored only into a database of its layout: a Substrate checkpoint into
/// an Ethereum database and an Ethereum one into a Substrate database are refused before
/// anything is written, through [`Restorer::begin`] and through the sources API.
#[test]
fn a_restore_into_a_database_of_another_layout_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (sub, _) = substrate_db(&tmp.path().join("sub"), LayoutName::SubstrateV1, 17);
    let eth = load(&tmp.path().join("eth"), &eth_state(3, 200, 5, 20));
    for (src, into) in [(&sub, LayoutName::Ethereum), (&eth, LayoutName::SubstrateV1)] {
        let out = CheckpointDir::new(tmp.path().join(format!("ckpt-{into}")));
        let created = create(src, &out, &small_chunks(2));
        let m = &created.manifest;
        assert_eq!(m.layout, src.layout());
        let bytes = out.manifest_bytes(&created.id).unwrap().unwrap();
        let path = tmp.path().join(format!("dst-{into}"));
        let mut db = open_as(&path, into);
        let opts = RestoreOptions::in_database(&path);
        let e = Restorer::begin(&mut db, trusted(m), &bytes, &opts).map(|_| ()).unwrap_err();
        assert!(
            matches!(e, RestoreError::Layout { database, checkpoint } if database == into && checkpoint == m.layout),
            "{e:?}"
        );
        assert!(e.to_string().contains(m.layout.as_str()), "{e}");
        let sources = vec![dir_source(&out)];
        let stop = AtomicBool::new(false);
        let (report, outcome) = restore_from_sources(
            &mut db,
            trusted(m),
            &sources,
            &opts,
            &FetchOptions::default(),
            &stop,
            &|_| {},
        );
        assert!(
            matches!(outcome, Err(FetchError::Restore(RestoreError::Layout { .. }))),
            "{outcome:?}"
        );
        assert!(report.outcome.contains("restore into a new directory"), "{}", report.outcome);
        // Nothing was written: the database takes a checkpoint of its own layout.
        assert_eq!(db.unfinished_bulk_load(), None);
        assert_eq!(db.head_number(), 0);
        assert_eq!(db.head_root(), into.empty_root());
    }
}

/// A child trie that no main-trie entry commits to (its entry holds another root) cannot be
/// checkpointed: a restore could not verify it.
#[test]
fn an_unbound_child_trie_is_refused_at_creation() {
    let layout = LayoutName::SubstrateV1;
    let tmp = tempfile::tempdir().unwrap();
    let (mut db, _) = substrate_db(&tmp.path().join("src"), layout, 19);
    let mut c = ChangeSet::new();
    c.entry(TrieId::Main).or_default().insert(child_key(b"child"), Some(vec![1; 32]));
    db.commit(&c).unwrap();
    db.flush().unwrap();
    let handle = db.read_handle().unwrap();
    let state = handle.persisted().unwrap();
    let out = CheckpointDir::new(tmp.path().join("ckpt"));
    let e = checkpoint::create(&state, &small_chunks(2), &out, &Default::default()).unwrap_err();
    match e {
        CreateError::UnboundStorage { trie, .. } => {
            assert_eq!(trie, TrieId::Storage(blake2_256(b"child")))
        }
        e => panic!("{e}"),
    }
}
