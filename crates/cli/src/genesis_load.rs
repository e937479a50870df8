//! Loading a genesis allocation into a database, crash-safe: one bulk load labelled with
//! the genesis's state root, so that an interrupted `init` is finished only by the same
//! genesis and refused for any other.

use anyhow::{ensure, Context, Result};
use store::StateDb;
use trie::eth::account::storage_value_rlp;
use trie::eth::{genesis_state_root, secure_key, Account, Genesis};
use trie::{keccak256, root_from_sorted, EthLayout, TrieId, EMPTY_CODE_HASH, H256};

/// The bulk-load label of a genesis.
pub(crate) fn genesis_label(root: &H256) -> String {
    format!("genesis {root}")
}

/// Every flat entry of the genesis state: storage slots, then account leaves (whose
/// storage roots are computed here, in memory).
fn genesis_entries(genesis: &Genesis) -> Result<Vec<(TrieId, Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for (addr, acc) in &genesis.alloc {
        let trie = TrieId::Storage(secure_key(addr));
        let mut slots: Vec<(H256, Vec<u8>)> = acc
            .storage
            .iter()
            .filter(|(_, v)| !v.is_zero())
            .map(|(slot, v)| (secure_key(&slot.0), storage_value_rlp(v)))
            .collect();
        slots.sort_unstable_by_key(|(k, _)| *k);
        let (storage_root, _) = root_from_sorted::<EthLayout, _, _>(&slots)?;
        out.extend(slots.into_iter().map(|(k, v)| (trie, k.0.to_vec(), v)));
        let code_hash = if acc.code.is_empty() { EMPTY_CODE_HASH } else { keccak256(&acc.code) };
        let account = Account { nonce: acc.nonce, balance: acc.balance, storage_root, code_hash };
        out.push((TrieId::Main, secure_key(addr).0.to_vec(), account.rlp()));
    }
    Ok(out)
}

/// Bulk-load `genesis` into `db` (empty, or holding an unfinished load of the same
/// genesis) and return its state root, checked against the root computed in memory.
pub(crate) fn load_genesis(db: &mut StateDb, genesis: &Genesis) -> Result<H256> {
    let expected = genesis_state_root(genesis);
    let summary = db
        .bulk_load(&genesis_label(&expected), genesis_entries(genesis)?)
        .context("cannot load the genesis state")?;
    ensure!(
        summary.root == expected,
        "the loaded state has root {}, the genesis has root {expected}",
        summary.root
    );
    Ok(summary.root)
}
