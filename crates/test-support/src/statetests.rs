//! The Ethereum state-test subset in `testdata/ethereum/state-tests/` (one `.tar.gz`, see its
//! `SOURCES.md`), read into memory for the tests that run it.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The subset's archive in this checkout: under `ARBOR_TESTDATA` (the `ethereum` folder)
/// when set, else the repository's `testdata/ethereum`, found from the run-time
/// `CARGO_MANIFEST_DIR` of the crate whose test runs.
pub fn archive_path() -> PathBuf {
    let dir = match std::env::var("ARBOR_TESTDATA") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => {
            let manifest =
                std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
            PathBuf::from(manifest).join("../../testdata/ethereum")
        }
    };
    dir.join("state-tests/GeneralStateTests-subset.tar.gz")
}

/// Every file of the archive at `path`: (path inside the archive, bytes), in archive order.
pub fn read_archive(path: &Path) -> Vec<(String, Vec<u8>)> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut files = Vec::new();
    for entry in archive.entries().unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        let mut entry = entry.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = entry.path().expect("archive paths are UTF-8").to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        files.push((name, bytes));
    }
    files
}
