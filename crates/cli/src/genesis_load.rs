//! Loading a genesis allocation into a database, crash-safe: one bulk load (accounts,
//! storage and contract code) labelled with the genesis's state root, so that an interrupted `init` is finished only by the same
//! genesis and refused for any other.

use anyhow::{ensure, Context, Result};
use eth::{Genesis, GenesisEntries};
use indicatif::ProgressBar;
use state::H256;
use store::StateDb;

/// The bulk-load label of a genesis.
pub(crate) fn genesis_label(root: &H256) -> String {
    format!("genesis {root}")
}

/// Bulk-load `genesis` (whose entries, from `eth::genesis_entries`, are `entries`) into `db` (empty, or holding an unfinished load of the same
/// genesis) and return its state root. The roots the store rebuilds from the flat entries
/// must be the ones the entries commit to, storage tries included. `pb` counts the
/// entries written (accounts and slots), then shows the node rebuild. `record`, if any,
/// is block 0's record (an Ethereum chain's genesis header, which its first block names).
pub(crate) fn load_genesis(
    db: &mut StateDb,
    genesis: &Genesis,
    entries: GenesisEntries,
    record: Option<&[u8]>,
    pb: &ProgressBar,
) -> Result<H256> {
    let expected = entries.state_root;
    let mut storage_roots = entries.storage_roots;
    pb.set_length(entries.entries.len() as u64);
    let total = entries.entries.len();
    let counted = entries.entries.into_iter().enumerate().map(|(i, e)| {
        if i % 4096 == 0 || i + 1 == total {
            pb.set_position(i as u64 + 1);
        }
        if i + 1 == total {
            pb.set_message("rebuilding nodes");
        }
        e
    });
    let mut load =
        db.begin_bulk_load(&genesis_label(&expected)).context("cannot load the genesis state")?;
    for (trie, key, value) in counted {
        load.put(&trie, &key, &value).context("cannot load the genesis state")?;
    }
    // Contract code goes beside the tries, by hash (the accounts name it).
    for account in genesis.alloc.values().filter(|a| !a.code.is_empty()) {
        load.put_code(&trie::keccak256(&account.code), &account.code)
            .context("cannot load the genesis code")?;
    }
    if let Some(record) = record {
        load.set_record(record);
    }
    let summary = load.finish().context("cannot load the genesis state")?;
    ensure!(
        summary.root == expected,
        "the store rebuilt root {} from the genesis, expected {expected}",
        summary.root
    );
    let mut rebuilt = summary.roots;
    storage_roots.sort_unstable();
    rebuilt.sort_unstable();
    ensure!(rebuilt == storage_roots, "the store rebuilt other storage roots than the genesis's");
    Ok(summary.root)
}
