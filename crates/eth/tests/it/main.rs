//! Integration tests for the eth crate: the external vectors in `testdata/ethereum`
//! (TrieTests, genesis allocations with their state roots, eth_getProof responses), the
//! genesis entries a store bulk-loads, and hostile JSON and leaf bytes.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod entries;
mod garbage;
// The slow, obviously right reference trie is shared with the trie crate's tests.
#[path = "../../../trie/tests/it/reference.rs"]
mod reference;
mod vectors;
mod world;

use std::path::PathBuf;

/// Property-test case count: `ARBOR_PROPTEST_CASES` (default small enough for CI).
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A file of the vectors: under `ARBOR_TESTDATA` when set, else the repository's
/// `testdata/ethereum`. The
/// run-time `CARGO_MANIFEST_DIR` (cargo sets it for tests) is right even when a shared
/// target directory holds a binary first built from another checkout.
pub(crate) fn testdata(rel: &str) -> PathBuf {
    let dir = match std::env::var("ARBOR_TESTDATA") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => {
            let manifest = std::env::var("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
            PathBuf::from(manifest).join("../../testdata/ethereum")
        }
    };
    dir.join(rel)
}

/// The genesis files shipped with the vectors and their state roots (SOURCES.md).
pub(crate) const GENESIS_ROOTS: [(&str, &str); 7] = [
    ("genesis/mainnet.json", "0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544"),
    ("genesis/sepolia.json", "0x5eb6e371a698b8d68f665192350ffcecbbbf322916f4b51bd79bb6887da3f494"),
    ("genesis/holesky.json", "0x69d8c9d72f6fa4ad42d4702b433707212f90db395eb54dc20bc85de253788783"),
    ("genesis/hoodi.json", "0xda87d7f5f91c51508791bbcbd4aa5baf04917830b86985eeb9ad3d5bfb657576"),
    ("genesis/goerli.json", "0x5d6cded585e73c4e322c30c2f782a336316f17dd85a4863b9d838d2d4b8b3008"),
    ("genesis/dev.json", "0xf09d8f7da5bc5036f8dd9536c953e2212390a46fb3e553ece2b7d419131537b1"),
    (
        "execution-apis/genesis.json",
        "0xdc43f460541a253c0f64b6943ef83fa3bd601699a255622f088d46f7fde359fc",
    ),
];

/// A parsed genesis file of the vectors.
pub(crate) fn read_genesis(rel: &str) -> eth::Genesis {
    let path = testdata(rel);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    eth::Genesis::from_json_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}
