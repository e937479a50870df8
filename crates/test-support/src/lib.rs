//! Helpers that the tests of several crates share, written once instead of once per test
//! binary; a dev-dependency only, never a library's dependency.
//!
//! - [`dir_snapshot`]: a directory's files and their bytes, to show that an operation
//!   wrote nothing.
//! - [`copy_tree`]: a copy of a directory tree (a database or a checkpoint to damage).
//! - [`Mount`]: a tmpfs mounted for a test's duration (as root), for databases on a mount
//!   point.
//! - [`rlp_like`]: hostile bytes shaped like RLP, for the decoders' never-panic properties.
//! - [`statetests`]: the Ethereum state-test and blockchain-test subsets of `testdata/`,
//!   read from their archives.
//! - [`substrate_oracle`]: trie-db with reference-trie's Substrate layouts, the oracle of
//!   the Substrate differential tests.
//!
//! A helper panics where a test would (a failure here is the test's failure).

#![forbid(unsafe_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use proptest::prelude::*;

pub mod statetests;
pub mod substrate_oracle;

/// Every file directly in the directory `path` (not recursive), with its contents, sorted
/// by name; an entry that cannot be read as a file (a subdirectory) has empty contents.
/// Two equal snapshots taken around an operation show it changed no file there.
pub fn dir_snapshot(path: impl AsRef<Path>) -> Vec<(String, Vec<u8>)> {
    let path = path.as_ref();
    let entries =
        std::fs::read_dir(path).unwrap_or_else(|e| panic!("cannot list {}: {e}", path.display()));
    let mut out: Vec<(String, Vec<u8>)> = entries
        .map(|e| {
            let e = e.unwrap_or_else(|e| panic!("cannot list {}: {e}", path.display()));
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// A copy of the directory tree `from` at `to` (created if missing): files copied,
/// subdirectories copied in turn.
pub fn copy_tree(from: impl AsRef<Path>, to: impl AsRef<Path>) {
    let (from, to) = (from.as_ref(), to.as_ref());
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("cannot create {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("cannot list {}: {e}", from.display()));
    for e in entries {
        let e = e.unwrap_or_else(|e| panic!("cannot list {}: {e}", from.display()));
        let target = to.join(e.file_name());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            copy_tree(e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target)
                .unwrap_or_else(|err| panic!("cannot copy {}: {err}", e.path().display()));
        }
    }
}

/// A tmpfs mounted for the test's duration; unmounted when dropped, also on a panic.
/// Declare it before anything that holds files on it (locals drop in reverse order).
#[derive(Debug)]
pub struct Mount(PathBuf);

impl Mount {
    /// Mount a 64 MiB tmpfs at the existing directory `at`, or `None` (with a message naming
    /// `test`) when the tests cannot mount: not root, no `mount` command, or not allowed (a
    /// container without the capability).
    pub fn tmpfs(at: &Path, test: &str) -> Option<Mount> {
        if std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) != 0 {
            eprintln!("{test}: skipped, mounting a tmpfs needs root");
            return None;
        }
        let out = match Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
            .arg(at)
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                eprintln!("{test}: skipped, cannot run mount: {e}");
                return None;
            }
        };
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let denied = ["permission denied", "not permitted", "must be superuser"];
            if denied.iter().any(|d| err.to_lowercase().contains(d)) {
                eprintln!("{test}: skipped, mount refused: {}", err.trim());
                return None;
            }
            panic!("mount -t tmpfs at {}: {err}", at.display());
        }
        Some(Mount(at.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a panic left something open): detach it all the same.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Hostile bytes for decoders: up to 80 bytes of noise, or one of `headers` (plausible RLP
/// list and string headers) followed by fewer than `tail_bytes_max` bytes of noise, so that
/// inputs get past the first header check.
pub fn rlp_like(headers: &[u8], tail_bytes_max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..80),
        (
            prop::sample::select(headers.to_vec()),
            prop::collection::vec(any::<u8>(), 0..tail_bytes_max)
        )
            .prop_map(|(h, mut rest)| {
                rest.insert(0, h);
                rest
            }),
    ]
}
