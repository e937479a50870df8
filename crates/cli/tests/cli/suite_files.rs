//! What the tests of the test-suite commands (`statetest`, `blocktest`) share: a subset's
//! files extracted to a directory, the counts of a run's summary line.

use std::path::{Path, PathBuf};

use test_support::statetests::read_archive;

/// A fresh directory `name` (under cargo's per-test-binary temp dir) holding the files of
/// the subset `archive` whose path contains one of `filters`, under their archive paths.
pub(crate) fn extract(archive: &Path, name: &str, filters: &[&str]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    for (path, bytes) in read_archive(archive) {
        if filters.iter().any(|f| path.contains(f)) {
            let out = dir.join(&path);
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            std::fs::write(out, bytes).unwrap();
        }
    }
    dir
}

/// The last line of a command's stdout, split into its three counts.
pub(crate) fn counts(out: &str) -> (u64, u64, u64) {
    let last = out.trim_end().lines().last().unwrap_or_default();
    let n: Vec<u64> = last.split([' ', ',']).filter_map(|w| w.parse().ok()).collect();
    assert!(last.ends_with(" skipped") && n.len() == 3, "last line: {last:?}");
    (n[0], n[1], n[2])
}
