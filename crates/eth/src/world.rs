//! World state built from a genesis allocation: the state root (via the streaming
//! builder), the flat entries a store bulk-loads, and an in-memory state with per-account
//! storage tries that answers account-model reads and eth_getProof (a
//! [`crate::TrieProver`], read through [`crate::AccountReader`] as a store is).
//!
//! All three lay the state out the same way: slot `s` of account `a` is the leaf
//! `keccak(s) → RLP(value)` of the storage trie `TrieId::Storage(keccak(a))` (zero values
//! are absent), and account `a` is the leaf `keccak(a) → RLP(account)` of the main trie.
//! Roots cost one hash per node, each node hashed once; nothing is cached.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use state::{TrieId, H256};
use trie::{
    keccak256, root_from_sorted, EthLayout, MemoryNodeSource, Trie, TrieError, EMPTY_CODE_HASH,
    EMPTY_ROOT,
};

use crate::account::{secure_key, storage_value_rlp, Account};
use crate::genesis::{Address, Genesis, GenesisAccount};
use crate::proof::AccountProof;
use crate::reader::{AccountReader, ReadError, TrieProver, TrieReader};

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

/// An in-memory Ethereum state: the account trie plus one storage trie per account, and
/// the code; it answers account-model reads and eth_getProof through [`AccountReader`]
/// (as the store does), being a [`TrieProver`] itself.
pub struct EthState {
    /// The main trie and every non-empty storage trie. The tries cache node hashes as
    /// they are read, hence the cell: reads take `&self`.
    tries: RefCell<BTreeMap<TrieId, Trie<MemoryNodeSource, EthLayout>>>,
    code: HashMap<H256, Vec<u8>>,
}

impl EthState {
    /// Build the state of a genesis allocation.
    pub fn from_genesis(genesis: &Genesis) -> Result<EthState, TrieError> {
        let mut tries = BTreeMap::new();
        let mut code = HashMap::new();
        let mut accounts = Trie::new(MemoryNodeSource::new());
        for (addr, acc) in &genesis.alloc {
            let key = secure_key(addr);
            let mut st = Trie::new(MemoryNodeSource::new());
            for (k, v) in storage_leaves(acc) {
                st.insert(k.as_bytes(), &v)?;
            }
            let account = account_of(acc, st.root()?);
            accounts.insert(key.as_bytes(), &account.rlp())?;
            if account.code_hash != EMPTY_CODE_HASH {
                code.insert(account.code_hash, acc.code.clone());
            }
            if account.storage_root != EMPTY_ROOT {
                tries.insert(TrieId::Storage(key), st);
            }
        }
        tries.insert(TrieId::Main, accounts);
        Ok(EthState { tries: RefCell::new(tries), code })
    }

    /// The state root.
    pub fn root(&mut self) -> Result<H256, TrieError> {
        self.state_root()
    }

    /// The account at `address`, if it exists.
    pub fn account(&mut self, address: &Address) -> Result<Option<Account>, ReadError<TrieError>> {
        AccountReader::new(&*self).account(address)
    }

    /// An eth_getProof-shaped proof of `address` and the given storage slots.
    pub fn prove(
        &mut self,
        address: &Address,
        slots: &[H256],
    ) -> Result<AccountProof, ReadError<TrieError>> {
        AccountReader::new(&*self).prove(address, slots)
    }

    /// Run `f` on `trie` (an empty trie when the state has none of that name).
    fn with_trie<T>(
        &self,
        trie: &TrieId,
        f: impl FnOnce(&mut Trie<MemoryNodeSource, EthLayout>) -> Result<T, TrieError>,
    ) -> Result<T, TrieError> {
        let mut tries = self.tries.borrow_mut();
        match tries.get_mut(trie) {
            Some(t) => f(t),
            None => f(&mut Trie::new(MemoryNodeSource::new())),
        }
    }
}

impl TrieReader for EthState {
    type Error = TrieError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, TrieError> {
        self.with_trie(trie, |t| t.get(key))
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, TrieError> {
        Ok(self.code.get(hash).cloned())
    }
}

impl TrieProver for EthState {
    fn state_root(&self) -> Result<H256, TrieError> {
        self.with_trie(&TrieId::Main, Trie::root)
    }

    fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, TrieError> {
        self.with_trie(trie, |t| t.prove(key))
    }
}
