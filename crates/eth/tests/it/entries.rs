//! The flat entries of a genesis, as a store bulk-loads them, rebuild to the genesis roots.

use std::collections::BTreeMap;

use eth::{genesis_entries, genesis_state_root, secure_key, Account, Genesis};
use state::{TrieId, H256};
use trie::{root_from_sorted, EthLayout, EMPTY_ROOT};

use crate::{read_genesis, GENESIS_ROOTS};

/// Rebuild every trie from `entries` alone, the way a store's bulk load does, and check the
/// roots against the genesis; returns the number of storage tries.
fn check_entries(label: &str, genesis: &Genesis) -> usize {
    let e = genesis_entries(genesis);
    let mut tries: BTreeMap<TrieId, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
    for (trie, key, value) in &e.entries {
        assert!(!value.is_empty(), "{label}: empty value under {trie:?}");
        let previous = tries.entry(*trie).or_default().insert(key.clone(), value.clone());
        assert!(previous.is_none(), "{label}: key written twice under {trie:?}");
    }
    let root_of = |trie: &TrieId| {
        let leaves: Vec<_> = tries.get(trie).map(|m| m.iter().collect()).unwrap_or_default();
        root_from_sorted::<EthLayout, _, _>(&leaves).unwrap().0
    };

    let state_root = root_of(&TrieId::Main);
    assert_eq!(state_root, e.state_root, "{label}: state root of the main entries");
    assert_eq!(e.state_root, genesis_state_root(genesis), "{label}: genesis_state_root");

    let stored: BTreeMap<TrieId, H256> = e.storage_roots.iter().copied().collect();
    assert_eq!(stored.len(), e.storage_roots.len(), "{label}: storage trie listed twice");
    assert_eq!(e.storage_tries(), e.storage_roots.iter().map(|(t, _)| *t).collect::<Vec<_>>());
    let with_entries: Vec<TrieId> = tries.keys().copied().filter(|t| *t != TrieId::Main).collect();
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), with_entries, "{label}: storage tries");

    let main = &tries[&TrieId::Main];
    assert_eq!(main.len(), genesis.alloc.len(), "{label}: one leaf per account");
    for address in genesis.alloc.keys() {
        let key = secure_key(address);
        let account = Account::decode(&main[&key.0.to_vec()]).unwrap();
        let trie = TrieId::Storage(key);
        let expected = stored.get(&trie).copied().unwrap_or(EMPTY_ROOT);
        assert_ne!(stored.get(&trie), Some(&EMPTY_ROOT), "{label}: empty root listed");
        assert_eq!(account.storage_root, expected, "{label}: storage root of {trie:?}");
        assert_eq!(root_of(&trie), expected, "{label}: entries of {trie:?}");
    }
    stored.len()
}

#[test]
fn genesis_entries_rebuild_every_shipped_genesis() {
    let mut storage_tries = 0;
    for (file, root) in GENESIS_ROOTS {
        let g = read_genesis(file);
        storage_tries += check_entries(file, &g);
        assert_eq!(genesis_entries(&g).state_root, H256::from_hex(root).unwrap(), "{file}");
    }
    // holesky 1, hoodi 3, execution-apis 1 (SOURCES.md): storage is exercised.
    assert_eq!(storage_tries, 5);
}

#[test]
fn genesis_entries_skip_zero_slots_and_cover_edge_cases() {
    let json = r#"{"alloc": {
        "0x0000000000000000000000000000000000000001": {"storage": {"0x01": "0x00"}},
        "0x0000000000000000000000000000000000000002": {"storage": {"0x01": "0x05", "0x02": "0x00"}, "code": "0x6001"},
        "0x0000000000000000000000000000000000000003": {"balance": "0x1", "nonce": "0x2"}
    }}"#;
    let g = Genesis::from_json_str(json).unwrap();
    assert_eq!(check_entries("inline", &g), 1, "only account 2 has a non-zero slot");
    let e = genesis_entries(&g);
    assert_eq!(e.entries.len(), 1 + 3, "one slot and three accounts");

    let empty = genesis_entries(&Genesis::default());
    assert!(empty.entries.is_empty() && empty.storage_roots.is_empty());
    assert_eq!(empty.state_root, EMPTY_ROOT);
}
