//! The Ethereum test subsets in `testdata/ethereum/`: the state tests in `state-tests/`
//! and the blockchain tests in `blockchain-tests/` (one `.tar.gz` each, see its
//! `SOURCES.md`), read into memory for the tests that run them.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The state-test subset's archive in this checkout: under `ARBOR_TESTDATA` (the
/// `ethereum` folder) when set, else the repository's `testdata/ethereum`, found from the
/// run-time `CARGO_MANIFEST_DIR` of the crate whose test runs.
pub fn archive_path() -> PathBuf {
    ethereum_dir().join("state-tests/GeneralStateTests-subset.tar.gz")
}

/// The blockchain-test subset's archive, found as [`archive_path`] finds the state tests'.
pub fn blocktests_archive_path() -> PathBuf {
    ethereum_dir().join("blockchain-tests/BlockchainTests-subset.tar.gz")
}

fn ethereum_dir() -> PathBuf {
    match std::env::var("ARBOR_TESTDATA") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => {
            let manifest =
                std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
            PathBuf::from(manifest).join("../../testdata/ethereum")
        }
    }
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
