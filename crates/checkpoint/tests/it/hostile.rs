//! Hostile local files: a restore's staging directory that holds someone else's files (or
//! is the database directory), chunk files in `create`'s output that are damaged or not
//! files at all, and FIFOs where a push reads a checkpoint's files. Nothing is deleted
//! that a restore did not create, nothing damaged is trusted by its name, nothing blocks.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use checkpoint::{
    open_source, verify_checkpoint, CheckpointDir, CreateError, Created, DirError, RestoreError,
    RestoreOptions, Restorer, SourceOptions, Trusted, STAGING_MARKER,
};
use store::StateDb;

use crate::common::*;

/// A small source database and its checkpoint under `tmp`.
fn checkpointed(tmp: &Path) -> (StateDb, CheckpointDir, Created) {
    let src = load(&tmp.join("src"), &eth_state(41, 120, 12, 30));
    let out = CheckpointDir::new(tmp.join("ckpt")).without_sync();
    let created = create(&src, &out, &small_chunks(2));
    assert!(created.manifest.chunks.len() > 4, "{} chunks", created.manifest.chunks.len());
    (src, out, created)
}

fn trusted(created: &Created) -> Trusted {
    Trusted { block: created.manifest.block, root: created.manifest.root }
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// `f` on another thread, failing (instead of hanging the suite) past 10 s.
fn within_10s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{what}: blocked"))
}

/// Begin a restore of `created` into `db` staging in `staging`.
fn begin<'db>(
    db: &'db mut StateDb,
    out: &CheckpointDir,
    created: &Created,
    staging: &Path,
) -> Result<Restorer<'db>, RestoreError> {
    let manifest = out.manifest_bytes(&created.id).unwrap().unwrap();
    Restorer::begin(db, trusted(created), &manifest, &RestoreOptions::new(staging))
}

#[test]
fn a_foreign_staging_directory_is_refused_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (_src, out, created) = checkpointed(tmp.path());
    let precious = tmp.path().join("precious");
    std::fs::create_dir_all(precious.join("sub")).unwrap();
    std::fs::write(precious.join("notes.txt"), b"x\n").unwrap();
    std::fs::write(precious.join("sub/more.txt"), b"y\n").unwrap();
    let dst_dir = tmp.path().join("dst");
    let mut dst = open(&dst_dir);
    match begin(&mut dst, &out, &created, &precious) {
        Err(RestoreError::StagingForeign { path }) => assert_eq!(path, precious),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a foreign staging directory was taken"),
    }
    assert_eq!(std::fs::read(precious.join("notes.txt")).unwrap(), b"x\n");
    assert_eq!(std::fs::read(precious.join("sub/more.txt")).unwrap(), b"y\n");
    assert!(!precious.join(STAGING_MARKER).exists());
    assert!(
        dst.unfinished_bulk_load().is_none(),
        "a refused restore leaves the database as it was"
    );
    // The database directory itself, and a directory holding it, are never empty: refused,
    // and the database is whole.
    for staging in [dst_dir.clone(), tmp.path().to_path_buf()] {
        let e = begin(&mut dst, &out, &created, &staging).err();
        assert!(matches!(e, Some(RestoreError::StagingForeign { .. })), "{staging:?}: {e:?}");
    }
    drop(dst);
    let mut dst = open(&dst_dir);
    let order: Vec<usize> = (0..created.manifest.chunks.len()).rev().collect();
    restore(&mut dst, &out, &created, &order, &tmp.path().join("staging"));
    assert!(dst.verify().unwrap().ok());
    assert!(!tmp.path().join("staging").exists(), "a staging directory it made is removed");
}

#[test]
fn a_foreign_file_in_a_marked_staging_directory_survives_a_resumed_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out, created) = checkpointed(tmp.path());
    let n = created.manifest.chunks.len();
    // Storage chunks first: they wait in staging for their accounts.
    let order: Vec<usize> = (0..n).rev().collect();
    let staging = tmp.path().join("staging");
    let dst_dir = tmp.path().join("dst");
    {
        let mut dst = open(&dst_dir);
        let r = begin(&mut dst, &out, &created, &staging).unwrap();
        for &i in &order[..n / 2] {
            r.offer(i, &out.chunk(&created.manifest.chunks[i].digest).unwrap().unwrap()).unwrap();
        }
        assert!(r.restored() < n / 2, "some chunks wait in staging");
        // Dropped without finishing: interrupted.
    }
    assert!(staging.join(STAGING_MARKER).is_file());
    let staged: Vec<PathBuf> = std::fs::read_dir(&staging)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with(STAGING_MARKER))
        .collect();
    assert!(!staged.is_empty(), "nothing staged");
    // Someone's files beside the staged chunks, one named almost like one.
    let foreign = [staging.join("notes.txt"), staging.join("0-abc"), staging.join("sub/x")];
    std::fs::create_dir_all(staging.join("sub")).unwrap();
    for f in &foreign {
        std::fs::write(f, b"mine").unwrap();
    }
    let mut dst = open(&dst_dir);
    restore(&mut dst, &out, &created, &order, &staging);
    assert_eq!(dump(&dst), dump(&src));
    for f in &foreign {
        assert_eq!(std::fs::read(f).unwrap(), b"mine", "{}", f.display());
    }
    for p in &staged {
        assert!(!p.exists(), "staged chunk {} left behind", p.display());
    }
    assert!(!staging.join(STAGING_MARKER).exists(), "marker left behind");
}

#[test]
fn an_empty_existing_staging_directory_is_adopted_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out, created) = checkpointed(tmp.path());
    let staging = tmp.path().join("empty");
    std::fs::create_dir(&staging).unwrap();
    let mut dst = open(&tmp.path().join("dst"));
    let order: Vec<usize> = (0..created.manifest.chunks.len()).rev().collect();
    restore(&mut dst, &out, &created, &order, &staging);
    assert_eq!(dump(&dst), dump(&src));
    assert!(!staging.exists());
}

/// The path of chunk `i` of `created` in `out`.
fn chunk_file(out: &CheckpointDir, created: &Created, i: usize) -> PathBuf {
    out.root().join(checkpoint::chunk_path(&created.manifest.chunks[i].digest))
}

#[test]
fn create_rewrites_damaged_chunks_and_the_result_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out, created) = checkpointed(tmp.path());
    let n = created.manifest.chunks.len();
    let junk: Vec<u8> =
        (0..created.manifest.chunks[0].len).map(|i| (i * 131 % 251) as u8).collect();
    std::fs::write(chunk_file(&out, &created, 0), junk).unwrap();
    std::fs::write(chunk_file(&out, &created, 1), b"").unwrap();
    let fifo = chunk_file(&out, &created, 2);
    std::fs::remove_file(&fifo).unwrap();
    mkfifo(&fifo);
    let last = chunk_file(&out, &created, n - 1);
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&last, bytes).unwrap();
    let again = within_10s("create over a FIFO", move || {
        let c = create(&src, &out, &small_chunks(2));
        (c, out)
    });
    let (again, out) = again;
    assert_eq!(again.id, created.id);
    assert_eq!(again.chunks_written, 4, "the damaged chunks count as new");
    let source = open_source(&out.root().display().to_string(), &SourceOptions::default()).unwrap();
    let summary = verify_checkpoint(source.as_ref(), &again.id, trusted(&again), &|_| {}).unwrap();
    assert_eq!(summary.chunks, n);
}

#[test]
fn create_fails_on_a_directory_in_a_chunks_place() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out, created) = checkpointed(tmp.path());
    let path = chunk_file(&out, &created, 1);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir_all(path.join("inside")).unwrap();
    src.flush().unwrap();
    let handle = src.read_handle().unwrap();
    let state = handle.persisted().unwrap();
    let progress = std::sync::atomic::AtomicU64::new(0);
    match checkpoint::create(&state, &small_chunks(2), &out, &progress) {
        Err(CreateError::Dir(DirError::Corrupt { path: p, what })) => {
            assert_eq!(p, path);
            assert!(what.contains("directory"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    assert!(path.join("inside").is_dir(), "the directory is left alone");
}

#[test]
fn a_fifo_in_a_pushed_directory_is_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let (_src, out, created) = checkpointed(tmp.path());
    // A chunk: what a push reads for each chunk the bucket lacks.
    let fifo = chunk_file(&out, &created, 0);
    std::fs::remove_file(&fifo).unwrap();
    mkfifo(&fifo);
    let digest = created.manifest.chunks[0].digest;
    let dir = out.clone();
    match within_10s("reading a FIFO chunk", move || dir.chunk(&digest)) {
        Err(DirError::Corrupt { path, what }) => {
            assert_eq!(path, fifo);
            assert!(what.contains("not a regular file"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    // The manifest, which a push reads before any request.
    let manifest = out.root().join(checkpoint::manifest_path(&created.id));
    std::fs::remove_file(&manifest).unwrap();
    mkfifo(&manifest);
    let id = created.id;
    let pushed = within_10s("pushing a FIFO manifest", move || {
        let s3 = checkpoint::S3Store::from_env("bucket", Duration::from_secs(1)).unwrap();
        s3.push(&out, &id, &|_| {}).map_err(|e| e.to_string())
    });
    let e = pushed.unwrap_err();
    assert!(e.contains("not a regular file (a FIFO)"), "{e}");
}
