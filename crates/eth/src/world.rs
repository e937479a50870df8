//! World state built from a genesis allocation: the state root (via the streaming
//! builder), the flat entries a store bulk-loads, and an in-memory state with per-account
//! storage tries that answers eth_getProof.
//!
//! All three lay the state out the same way: slot `s` of account `a` is the leaf
//! `keccak(s) → RLP(value)` of the storage trie `TrieId::Storage(keccak(a))` (zero values
//! are absent), and account `a` is the leaf `keccak(a) → RLP(account)` of the main trie.
//! Roots cost one hash per node, each node hashed once; nothing is cached.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use state::{TrieId, H256};
use trie::{
    keccak256, root_from_sorted, EthLayout, MemoryNodeSource, Trie, TrieError, EMPTY_CODE_HASH,
};

use crate::account::{decode_storage_value, secure_key, storage_value_rlp, Account};
use crate::genesis::{Address, Genesis, GenesisAccount};
use crate::proof::{AccountProof, StorageProof};

/// The storage leaves of an account, sorted by key.
fn storage_leaves(acc: &GenesisAccount) -> Vec<(H256, Vec<u8>)> {
    let mut leaves: Vec<(H256, Vec<u8>)> = acc
        .storage
        .iter()
        .filter(|(_, v)| !v.is_zero())
        .map(|(slot, v)| (secure_key(&slot.0), storage_value_rlp(v)))
        .collect();
    leaves.sort_unstable_by_key(|(k, _)| *k);
    leaves
}

fn account_of(acc: &GenesisAccount, storage_root: H256) -> Account {
    let code_hash = if acc.code.is_empty() { EMPTY_CODE_HASH } else { keccak256(&acc.code) };
    Account { nonce: acc.nonce, balance: acc.balance, storage_root, code_hash }
}

fn sorted_root(leaves: &[(H256, Vec<u8>)]) -> H256 {
    // Keys are distinct hashes in ascending order, so the builder cannot fail.
    root_from_sorted::<EthLayout, _, _>(leaves).expect("sorted distinct keys").0
}

/// The state root of a genesis allocation.
pub fn genesis_state_root(genesis: &Genesis) -> H256 {
    let mut leaves: Vec<(H256, Vec<u8>)> = genesis
        .alloc
        .iter()
        .map(|(addr, acc)| {
            let storage_root = sorted_root(&storage_leaves(acc));
            (secure_key(addr), account_of(acc, storage_root).rlp())
        })
        .collect();
    leaves.sort_unstable_by_key(|(k, _)| *k);
    sorted_root(&leaves)
}

/// Every flat entry of a genesis state, ready for a store's bulk load, with the roots
/// they must produce.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GenesisEntries {
    /// `(trie, key, value)`: the slots of each storage trie (sorted by key, one account
    /// after another), then the account leaves of the main trie (sorted by key). Values are
    /// never empty.
    pub entries: Vec<(TrieId, Vec<u8>, Vec<u8>)>,
    /// The root of every storage trie that has entries, in the order of `entries`.
    /// Invariant: no root is the empty root, and every other storage trie is empty.
    pub storage_roots: Vec<(TrieId, H256)>,
    /// The state root the entries commit to; equals [`genesis_state_root`].
    pub state_root: H256,
}

impl GenesisEntries {
    /// The storage tries with a non-empty root: what a bulk load must rebuild besides the
    /// main trie.
    pub fn storage_tries(&self) -> Vec<TrieId> {
        self.storage_roots.iter().map(|(t, _)| *t).collect()
    }
}

/// The flat entries of a genesis state (see [`GenesisEntries`]). Storage roots are computed
/// in memory with the streaming builder, so the account leaves are final.
pub fn genesis_entries(genesis: &Genesis) -> GenesisEntries {
    let slots = genesis.alloc.values().map(|a| a.storage.len()).sum::<usize>();
    let mut entries = Vec::with_capacity(slots + genesis.alloc.len());
    let mut storage_roots = Vec::new();
    let mut accounts = Vec::with_capacity(genesis.alloc.len());
    for (addr, acc) in &genesis.alloc {
        let account_key = secure_key(addr);
        let leaves = storage_leaves(acc);
        let storage_root = sorted_root(&leaves);
        if !leaves.is_empty() {
            let trie = TrieId::Storage(account_key);
            storage_roots.push((trie, storage_root));
            entries.extend(leaves.into_iter().map(|(k, v)| (trie, k.0.to_vec(), v)));
        }
        accounts.push((account_key, account_of(acc, storage_root).rlp()));
    }
    accounts.sort_unstable_by_key(|(k, _)| *k);
    let state_root = sorted_root(&accounts);
    entries.extend(accounts.into_iter().map(|(k, v)| (TrieId::Main, k.0.to_vec(), v)));
    GenesisEntries { entries, storage_roots, state_root }
}

/// An in-memory Ethereum state: the account trie plus one storage trie per account.
pub struct EthState {
    accounts: Trie<MemoryNodeSource, EthLayout>,
    storage: BTreeMap<Address, Trie<MemoryNodeSource, EthLayout>>,
}

impl EthState {
    /// Build the state of a genesis allocation.
    pub fn from_genesis(genesis: &Genesis) -> Result<EthState, TrieError> {
        let mut accounts = Trie::new(MemoryNodeSource::new());
        let mut storage = BTreeMap::new();
        for (addr, acc) in &genesis.alloc {
            let mut st = Trie::new(MemoryNodeSource::new());
            for (k, v) in storage_leaves(acc) {
                st.insert(k.as_bytes(), &v)?;
            }
            let account = account_of(acc, st.root()?);
            accounts.insert(secure_key(addr).as_bytes(), &account.rlp())?;
            storage.insert(*addr, st);
        }
        Ok(EthState { accounts, storage })
    }

    /// The state root.
    pub fn root(&mut self) -> Result<H256, TrieError> {
        self.accounts.root()
    }

    /// The account at `address`, if it exists.
    pub fn account(&mut self, address: &Address) -> Result<Option<Account>, TrieError> {
        let Some(raw) = self.accounts.get(secure_key(address).as_bytes())? else { return Ok(None) };
        // Values were written by this type from `Account::rlp`.
        Ok(Some(Account::decode(&raw).expect("account leaves written by EthState decode")))
    }

    /// An eth_getProof-shaped proof of `address` and the given storage slots.
    pub fn prove(&mut self, address: &Address, slots: &[H256]) -> Result<AccountProof, TrieError> {
        let account_proof = self.accounts.prove(secure_key(address).as_bytes())?;
        let account = self.account(address)?;
        let mut storage_proof = Vec::with_capacity(slots.len());
        for slot in slots {
            let key = secure_key(&slot.0);
            let (value, proof) = match self.storage.get_mut(address) {
                Some(st) => {
                    let value = st.get(key.as_bytes())?;
                    let value = value
                        .map(|v| decode_storage_value(&v).expect("written by EthState"))
                        .unwrap_or(U256::ZERO);
                    (value, st.prove(key.as_bytes())?)
                }
                None => (U256::ZERO, Vec::new()),
            };
            storage_proof.push(StorageProof { key: *slot, value, proof });
        }
        Ok(AccountProof {
            address: *address,
            account: account.unwrap_or_default(),
            account_proof,
            storage_proof,
        })
    }
}
