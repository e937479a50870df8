//! The checkpoint layout, shared by directories, the HTTP server and object storage:
//!
//! ```text
//! chunks/<digest hex>            a chunk, named by its manifest's hash of its bytes (immutable)
//! checkpoints/<id hex>/manifest  a manifest, named by the keccak256 of its bytes
//! ```
//!
//! A manifest is written after every chunk it names, so a listed checkpoint is whole.
//! [`CheckpointDir`] is that layout in a local directory. Each file is written under a
//! temporary name beside it (`<name>.tmp<pid>-<n>`: the writer's process id and a
//! counter) and renamed into place; a writer killed in between leaves that file, which
//! the next creation or pruning removes ([`CheckpointDir::remove_stale_temps`]).

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use state::H256;
use trie::keccak256;

use crate::direct;
use crate::format::{DecodeError, Manifest, CHUNK_BYTES_MAX, MANIFEST_BYTES_MAX};

/// Relative path of a chunk.
pub fn chunk_path(digest: &H256) -> String {
    format!("chunks/{}", hex::encode(digest.0))
}

/// Relative path of a manifest.
pub fn manifest_path(id: &H256) -> String {
    format!("checkpoints/{}/manifest", hex::encode(id.0))
}

/// Parse a 64-digit hex id (a manifest id or chunk digest), with or without `0x`.
pub fn parse_id(s: &str) -> Option<H256> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() != 64 {
        return None;
    }
    H256::from_slice(&hex::decode(s).ok()?)
}

/// Why a checkpoint directory operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A file is not what its name says.
    #[error("{path}: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A manifest does not decode.
    #[error("{path}: {source}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// The decoder's error.
        source: DecodeError,
    },
}

/// What [`open_regular`] found at a path.
pub(crate) enum Opened {
    /// A regular file (symlinks followed), open for reading, and its length.
    File(fs::File, u64),
    /// Nothing.
    Absent,
    /// Something else (a directory, a FIFO, a socket, a device), not read.
    Other(fs::FileType),
}

/// Open `path` for reading if it is a regular file. It is opened without blocking and its
/// type checked on the open file: a FIFO put where a file belongs would otherwise hold
/// `open` until a writer came, past every timeout and signal (a type checked before
/// opening leaves a window for one to be swapped in). Every reader of a checkpoint's files
/// goes through here.
pub(crate) fn open_regular(path: &Path) -> io::Result<Opened> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path);
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Opened::Absent),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    Ok(match meta.is_file() {
        true => Opened::File(f, meta.len()),
        false => Opened::Other(meta.file_type()),
    })
}

/// "not a regular file (a FIFO)": what an [`Opened::Other`] is, for an error message.
pub(crate) fn not_regular(t: fs::FileType) -> String {
    use std::os::unix::fs::FileTypeExt;
    let kind = if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "of another kind"
    };
    format!("not a regular file ({kind})")
}

/// Where a file goes: written under a temporary name beside its path, made durable, then
/// renamed into place.
struct Target {
    tmp: PathBuf,
    path: PathBuf,
    sync: bool,
}

impl Target {
    /// Write the file with `write`, fsync it (unless the directory writes without) and
    /// rename it into place; the temporary file is removed on failure.
    fn write(&self, write: impl FnOnce(&Path) -> io::Result<fs::File>) -> Result<(), DirError> {
        let done = write(&self.tmp).map_err(CheckpointDir::io(&self.tmp)).and_then(|file| {
            if self.sync {
                file.sync_data().map_err(CheckpointDir::io(&self.tmp))?;
            }
            drop(file);
            fs::rename(&self.tmp, &self.path).map_err(CheckpointDir::io(&self.path))
        });
        if done.is_err() {
            let _ = fs::remove_file(&self.tmp);
        }
        done
    }
}

/// A chunk for a thread other than the one that encoded it to write (directly, around the
/// page cache: `direct.rs`), make durable and rename into place: its bytes are
/// `buf[start..]`.
pub(crate) struct Unsynced {
    buf: Vec<u8>,
    start: usize,
    target: Target,
}

impl Unsynced {
    /// Write, fsync and rename; gives the buffer back for reuse.
    pub(crate) fn finish(mut self) -> (Vec<u8>, Result<(), DirError>) {
        let (buf, start) = (&mut self.buf, self.start);
        let done = self.target.write(|tmp| direct::write_new(tmp, buf, start));
        (self.buf, done)
    }
}

/// Checkpoints in a local directory (see the module docs).
#[derive(Debug, Clone)]
pub struct CheckpointDir {
    root: PathBuf,
    /// fsync every file before it is renamed into place (off only for benchmarks of the
    /// page cache).
    sync: bool,
}

impl CheckpointDir {
    /// The layout under `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        CheckpointDir { root: root.into(), sync: true }
    }

    /// The same, writing without fsync.
    pub fn without_sync(mut self) -> Self {
        self.sync = false;
        self
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DirError + '_ {
        move |source| DirError::Io { path: path.to_path_buf(), source }
    }

    /// Write `bytes` at `rel` atomically (a temporary file renamed into place); a file
    /// already there that holds exactly `bytes` is kept ([`CheckpointDir::holds`]).
    fn put(&self, rel: &str, bytes: &[u8]) -> Result<bool, DirError> {
        let Some(target) = self.target(rel, bytes)? else { return Ok(false) };
        target.write(|tmp| direct::write_buffered(tmp, bytes))?;
        Ok(true)
    }

    /// Where `bytes` go for `rel`: a temporary name beside it; `None` when `rel` holds
    /// those bytes already.
    fn target(&self, rel: &str, bytes: &[u8]) -> Result<Option<Target>, DirError> {
        let path = self.root.join(rel);
        if Self::holds(&path, bytes)? {
            return Ok(None);
        }
        let parent = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(Self::io(parent))?;
        // Unique per write, not only per process: two writers of one process (checkpoints
        // created at once into one directory) must not truncate each other's file.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("{TEMP_TAG}{}-{n}", std::process::id()));
        Ok(Some(Target { tmp, path, sync: self.sync }))
    }

    /// Whether `path` holds exactly `bytes` (then it is kept). Files are named by the
    /// digests of their contents, but a file is not trusted by its name: one damaged,
    /// truncated or replaced by something else (a FIFO, which is never read) is to be
    /// written again. A directory in the way cannot be replaced: an error.
    fn holds(path: &Path, bytes: &[u8]) -> Result<bool, DirError> {
        let f = match open_regular(path).map_err(Self::io(path))? {
            Opened::File(f, len) if len == bytes.len() as u64 => f,
            Opened::File(..) | Opened::Absent => return Ok(false),
            Opened::Other(t) if t.is_dir() => {
                let what = format!("{}; remove it", not_regular(t));
                return Err(DirError::Corrupt { path: path.to_path_buf(), what });
            }
            Opened::Other(_) => return Ok(false),
        };
        // Equal bytes are the bytes the name is the digest of.
        let mut held = Vec::with_capacity(bytes.len());
        f.take(bytes.len() as u64 + 1).read_to_end(&mut held).map_err(Self::io(path))?;
        Ok(held == bytes)
    }

    /// The chunk `buf[start..]` (named by `digest`) for another thread to write and make
    /// durable and visible ([`Unsynced::finish`]); `buf` is moved into it. `None` (and
    /// `buf` kept) when it is there already.
    pub(crate) fn put_chunk_unsynced(
        &self,
        digest: &H256,
        buf: &mut Vec<u8>,
        start: usize,
    ) -> Result<Option<Unsynced>, DirError> {
        let Some(target) = self.target(&chunk_path(digest), &buf[start..])? else {
            return Ok(None);
        };
        Ok(Some(Unsynced { buf: std::mem::take(buf), start, target }))
    }

    /// Store a chunk under its digest; false when it was there already.
    pub fn put_chunk(&self, digest: &H256, bytes: &[u8]) -> Result<bool, DirError> {
        self.put(&chunk_path(digest), bytes)
    }

    /// Store a manifest under its id (after its chunks, which must be durable first).
    pub fn put_manifest(&self, id: &H256, bytes: &[u8]) -> Result<bool, DirError> {
        if self.sync {
            let dir = self.root.join("chunks");
            if dir.exists() {
                fs::File::open(&dir).and_then(|d| d.sync_all()).map_err(Self::io(&dir))?;
            }
        }
        self.put(&manifest_path(id), bytes)
    }

    fn read(&self, rel: &str, max: u64) -> Result<Option<Vec<u8>>, DirError> {
        let path = self.root.join(rel);
        let (f, len) = match open_regular(&path).map_err(Self::io(&path))? {
            Opened::File(f, len) => (f, len),
            Opened::Absent => return Ok(None),
            Opened::Other(t) => return Err(DirError::Corrupt { path, what: not_regular(t) }),
        };
        // Sized from the file's length: growing a megabyte buffer by doubling costs copies
        // and page faults on every chunk served.
        let hint = len.min(max + 1);
        let mut out = Vec::with_capacity(hint as usize);
        f.take(max + 1).read_to_end(&mut out).map_err(Self::io(&path))?;
        if out.len() as u64 > max {
            return Err(DirError::Corrupt { path, what: format!("larger than {max} bytes") });
        }
        Ok(Some(out))
    }

    /// A chunk's bytes (`None`: not here); not checked against the digest.
    pub fn chunk(&self, digest: &H256) -> Result<Option<Vec<u8>>, DirError> {
        self.read(&chunk_path(digest), CHUNK_BYTES_MAX)
    }

    /// A manifest's bytes (`None`: not here), checked against the id.
    pub fn manifest_bytes(&self, id: &H256) -> Result<Option<Vec<u8>>, DirError> {
        let Some(bytes) = self.read(&manifest_path(id), MANIFEST_BYTES_MAX)? else {
            return Ok(None);
        };
        if keccak256(&bytes) != *id {
            let path = self.root.join(manifest_path(id));
            return Err(DirError::Corrupt {
                path,
                what: "content does not hash to its name".into(),
            });
        }
        Ok(Some(bytes))
    }

    /// The ids of the checkpoints here (those with a manifest), sorted.
    pub fn ids(&self) -> Result<Vec<H256>, DirError> {
        let dir = self.root.join("checkpoints");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Self::io(&dir)(e)),
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e.map_err(Self::io(&dir))?;
            let Some(id) = e.file_name().to_str().and_then(parse_id) else { continue };
            // A manifest that cannot be checked (a directory without permission) is listed:
            // reading it then reports the error, where "absent" would be a wrong verdict.
            if e.path().join("manifest").try_exists().unwrap_or(true) {
                out.push(id);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Every checkpoint here, decoded, oldest block first.
    pub fn list(&self) -> Result<Vec<(H256, Manifest)>, DirError> {
        let mut out = Vec::new();
        for id in self.ids()? {
            let path = self.root.join(manifest_path(&id));
            let Some(bytes) = self.manifest_bytes(&id)? else { continue };
            let m =
                Manifest::decode(&bytes).map_err(|source| DirError::Manifest { path, source })?;
            out.push((id, m));
        }
        out.sort_by_key(|(id, m)| (m.block, *id));
        Ok(out)
    }

    /// Every checkpoint here whose manifest reads, hashes to its name and decodes, oldest
    /// block first; the others are skipped (what a server lists).
    pub fn list_readable(&self) -> Result<Vec<(H256, Manifest)>, DirError> {
        let mut out = Vec::new();
        for id in self.ids()? {
            let m = self.manifest_bytes(&id).ok().flatten().and_then(|b| Manifest::decode(&b).ok());
            if let Some(m) = m {
                out.push((id, m));
            }
        }
        out.sort_by_key(|(id, m)| (m.block, *id));
        Ok(out)
    }

    /// Keep the `keep` newest checkpoints (by block): delete the others' manifests, then
    /// every chunk no kept manifest names, and the temporary files of writers that are
    /// gone ([`CheckpointDir::remove_stale_temps`]). Returns the ids removed.
    pub fn prune(&self, keep: usize) -> Result<Vec<H256>, DirError> {
        self.remove_stale_temps();
        let all = self.list()?;
        let cut = all.len().saturating_sub(keep);
        let (old, kept) = all.split_at(cut);
        let mut removed = Vec::new();
        for (id, _) in old {
            let dir = self.root.join("checkpoints").join(hex::encode(id.0));
            fs::remove_dir_all(&dir).map_err(Self::io(&dir))?;
            removed.push(*id);
        }
        if removed.is_empty() {
            return Ok(removed);
        }
        let live: std::collections::HashSet<H256> =
            kept.iter().flat_map(|(_, m)| m.chunk_names().map(|(d, _)| d)).collect();
        let chunks = self.root.join("chunks");
        for e in fs::read_dir(&chunks).map_err(Self::io(&chunks))? {
            let e = e.map_err(Self::io(&chunks))?;
            let Some(d) = e.file_name().to_str().and_then(parse_id) else { continue };
            if !live.contains(&d) {
                let p = e.path();
                fs::remove_file(&p).map_err(Self::io(&p))?;
            }
        }
        Ok(removed)
    }
}

/// What a temporary file's extension starts with (then `<pid>-<n>`).
const TEMP_TAG: &str = "tmp";

/// A temporary file whose writer may still be at work (it was modified this recently) is
/// kept even when its process id names no running process here: a writer in another
/// PID namespace (a container) sharing the directory has an id this process cannot see.
const TEMP_FRESH: Duration = Duration::from_secs(60);

/// A temporary file untouched this long is stale even when its process id names a
/// running process (an id reused since): a write and its fsync take seconds.
const TEMP_STALE: Duration = Duration::from_secs(3600);

/// The process id in `name` when it is `<stem>.tmp<pid>-<n>` (both decimal) with a stem
/// that `stem_ok` accepts: the names [`CheckpointDir`] writes under, and nothing else.
fn temp_pid(name: &str, stem_ok: impl Fn(&str) -> bool) -> Option<u32> {
    let (stem, ext) = name.rsplit_once('.')?;
    let (pid, n) = ext.strip_prefix(TEMP_TAG)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    (stem_ok(stem) && digits(pid) && digits(n)).then(|| pid.parse().ok())?
}

/// Whether process `pid` runs on this machine (in this PID namespace), as `/proc` shows;
/// without `/proc`, every process counts as running (then only age makes a file stale).
fn process_running(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

/// Whether the temporary file at `path`, written by process `pid`, belongs to no writer:
/// not this process's, untouched for [`TEMP_FRESH`], and its process gone (or the file
/// untouched for [`TEMP_STALE`]).
fn temp_is_stale(path: &Path, pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    let Ok(meta) = fs::symlink_metadata(path) else { return false };
    if !meta.is_file() {
        return false;
    }
    let age = meta.modified().ok().and_then(|m| m.elapsed().ok()).unwrap_or_default();
    age >= TEMP_FRESH && (age >= TEMP_STALE || !process_running(pid))
}

impl CheckpointDir {
    /// Remove what writers killed mid-write left (best effort; returns how many files):
    /// `chunks/<digest>.tmp<pid>-<n>` and `checkpoints/<id>/manifest.tmp<pid>-<n>` files
    /// (then the checkpoint's directory if nothing else is in it), only those of these
    /// exact names, only regular files, and only stale ones: not this process's, untouched
    /// for a minute, and whose process is gone (or untouched for an hour, its id since
    /// reused). A creation in another process is at work on its files, so they are kept.
    /// Every other file is left alone, whatever its name.
    pub fn remove_stale_temps(&self) -> usize {
        let is_id = |s: &str| s.len() == 64 && parse_id(s).is_some();
        let mut removed = 0;
        let mut remove = |path: &Path, pid: u32| {
            if temp_is_stale(path, pid) && fs::remove_file(path).is_ok() {
                removed += 1;
            }
        };
        for e in fs::read_dir(self.root.join("chunks")).into_iter().flatten().flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|n| temp_pid(n, is_id)) {
                remove(&e.path(), pid);
            }
        }
        for e in fs::read_dir(self.root.join("checkpoints")).into_iter().flatten().flatten() {
            if !e.file_name().to_str().is_some_and(is_id) {
                continue;
            }
            let dir = e.path();
            let mut found = false;
            for f in fs::read_dir(&dir).into_iter().flatten().flatten() {
                if let Some(pid) =
                    f.file_name().to_str().and_then(|n| temp_pid(n, |s| s == "manifest"))
                {
                    found = true;
                    remove(&f.path(), pid);
                }
            }
            if found {
                // Only when empty: a manifest, or anything else, keeps the directory.
                let _ = fs::remove_dir(&dir);
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process id no process has (above Linux's largest `pid_max`).
    const DEAD_PID: u32 = 4_000_000_000;

    fn backdate(path: &Path, by: Duration) {
        let f = fs::File::options().write(true).open(path).unwrap();
        f.set_modified(std::time::SystemTime::now() - by).unwrap();
    }

    /// Only stale temporary files of Arbor's own names go: a killed writer's (its process
    /// gone, the file a minute old) or an hour-old one; a fresh one, this process's, one of
    /// a running process, and every other name or kind of file stay.
    #[test]
    fn stale_temporary_files_go_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::new(root.path()).without_sync();
        let (chunks, ckpts) = (root.path().join("chunks"), root.path().join("checkpoints"));
        let (a, b) = ("ab".repeat(32), "cd".repeat(32));
        fs::create_dir_all(ckpts.join(&a)).unwrap();
        fs::create_dir_all(ckpts.join(&b)).unwrap();
        fs::create_dir_all(&chunks).unwrap();
        let me = std::process::id();
        let minutes = Duration::from_secs(300);
        let hours = Duration::from_secs(2 * 3600);
        let stale = [
            (chunks.join(format!("{a}.tmp{DEAD_PID}-0")), minutes),
            (chunks.join(format!("{b}.tmp1-7")), hours),
            (ckpts.join(&a).join(format!("manifest.tmp{DEAD_PID}-3")), minutes),
            (ckpts.join(&b).join(format!("manifest.tmp{DEAD_PID}-4")), minutes),
        ];
        let kept = [
            (chunks.join(format!("{a}.tmp{DEAD_PID}-1")), Duration::ZERO),
            (chunks.join(format!("{a}.tmp1-2")), minutes),
            (chunks.join(format!("{a}.tmp{me}-5")), hours),
            (chunks.join(format!("{a}.tmp{DEAD_PID}-6.bak")), hours),
            (chunks.join(format!("notes.tmp{DEAD_PID}-6")), hours),
            (chunks.join(&a), hours),
            (ckpts.join(&b).join("notes.txt"), hours),
            (ckpts.join(&b).join(format!("other.tmp{DEAD_PID}-4")), hours),
            (root.path().join(format!("manifest.tmp{DEAD_PID}-4")), hours),
        ];
        for (path, age) in stale.iter().chain(&kept) {
            fs::write(path, b"x").unwrap();
            backdate(path, *age);
        }
        // A directory of a temporary name is not a file Arbor wrote.
        let odd = chunks.join(format!("{b}.tmp{DEAD_PID}-9"));
        fs::create_dir(&odd).unwrap();
        assert_eq!(dir.remove_stale_temps(), stale.len());
        for (path, _) in &stale {
            assert!(!path.exists(), "{} stayed", path.display());
        }
        for (path, _) in &kept {
            assert!(path.exists(), "{} removed", path.display());
        }
        assert!(odd.is_dir());
        // The checkpoint directory left empty goes; the one with a user's file stays.
        assert!(!ckpts.join(&a).exists());
        assert!(ckpts.join(&b).is_dir());
        assert_eq!(dir.remove_stale_temps(), 0);
    }

    #[test]
    fn only_our_temporary_names_parse() {
        let id = "ab".repeat(32);
        let is_id = |s: &str| s.len() == 64 && parse_id(s).is_some();
        assert_eq!(temp_pid(&format!("{id}.tmp123-0"), is_id), Some(123));
        assert_eq!(temp_pid("manifest.tmp9-77", |s| s == "manifest"), Some(9));
        for other in [
            id.clone(),
            format!("{id}.tmp"),
            format!("{id}.tmp12"),
            format!("{id}.tmp12-"),
            format!("{id}.tmp-3"),
            format!("{id}.tmp1x-3"),
            format!("{id}.tmp1-3.bak"),
            format!("{id}.TMP1-3"),
            format!("{id}x.tmp1-3"),
            format!("0x{id}.tmp1-3"),
            "notes.tmp1-3".to_string(),
            "manifest.old.tmp1-3".to_string(),
        ] {
            let either = |s: &str| is_id(s) || s == "manifest";
            assert_eq!(temp_pid(&other, either), None, "{other}");
        }
    }

    /// Writers of one process putting the same chunk at once (checkpoints created into one
    /// directory together) never see each other's temporary file.
    #[test]
    fn concurrent_writers_of_one_chunk_all_succeed() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::new(root.path()).without_sync();
        let bytes = vec![7u8; 256 << 10];
        for round in 0..20u8 {
            let digest = H256([round; 32]);
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| dir.put_chunk(&digest, &bytes).unwrap());
                }
            });
            let path = root.path().join(chunk_path(&digest));
            assert_eq!(std::fs::read(path).unwrap(), bytes);
        }
        let left: Vec<_> = std::fs::read_dir(root.path().join("chunks"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().contains(".tmp"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }
}
