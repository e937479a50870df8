//! Arbor as a library: open a store, commit a change set, prove a key, verify the proof.
//!
//! `cargo run -p store --example quickstart [DIR]` (a temporary directory by default).

use state::{ChangeSet, TrieId};
use store::{StateDb, StoreConfig};
use trie::{verify_proof, EthLayout};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args().nth(1).map_or_else(|| tmp.path().to_path_buf(), Into::into);
    let mut db = StateDb::open(&dir, StoreConfig::default())?;

    // One block: two keys set in the main trie (`None` would delete a key).
    let mut changes = ChangeSet::new();
    let main = changes.entry(TrieId::Main).or_default();
    main.insert(b"alice".to_vec(), Some(b"100".to_vec()));
    main.insert(b"bob".to_vec(), Some(b"50".to_vec()));
    let block = db.commit(&changes)?;
    println!("block {} root {}", block.number, block.root);

    // A proof of `alice` against that root, checked without the database.
    let proof = db.prove(TrieId::Main, b"alice")?;
    let value = verify_proof::<EthLayout>(&block.root, b"alice", &proof)?;
    assert_eq!(value.as_deref(), Some(&b"100"[..]));
    println!(
        "alice = {} (proof of {} nodes verified)",
        String::from_utf8_lossy(&b"100"[..]),
        proof.len()
    );

    db.close()?;
    Ok(())
}
