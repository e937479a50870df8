//! [`MemoryWorld`]: an Ethereum world state in memory that takes [`EthChanges`] and
//! answers with the state root, computed by Arbor's own trie; and the account, storage and
//! code reads execution needs. It is the in-memory back-end of the EVM (the state tests
//! run on it) and the reference a store's account-model commit is checked against.
//!
//! Layout: flat maps answer reads (account by address, slot by address and slot, code by
//! hash) without walking a trie, as a store's flat column does; beside them, one
//! [`Trie`] per account with storage and the account trie, kept in step. A commit
//! ([`MemoryWorld::apply`]) first checks the change set (every code hash it writes must
//! have its code), then computes the storage roots of the touched accounts, folds them into
//! their leaves `RLP[nonce, balance, storage_root, code_hash]` under `keccak(address)`,
//! and hashes the account trie. Tries keep their hashes between commits, so a commit
//! re-hashes only the paths it changed. Invariants: a slot is in the flat map iff it is
//! a non-zero leaf of its account's storage trie; an account with no slots has no storage
//! trie; every account's `storage_root` is its trie's root; every non-empty code hash of
//! an account has its code in `code`.

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::U256;
use state::H256;
use trie::{EthLayout, MemoryNodeSource, Trie, TrieError, EMPTY_CODE_HASH, EMPTY_ROOT};

use crate::account::{secure_key, storage_value_rlp, Account};
use crate::changes::{AccountChange, AccountWrite, EthChanges};
use crate::genesis::{Address, Genesis, GenesisAccount};

/// Why a change set could not be applied. Nothing is changed when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    /// An account is given a code hash whose code neither the change set nor the world
    /// holds.
    #[error("account 0x{address} has code hash {code_hash} but no code for it was supplied", address = hex::encode(.address))]
    MissingCode {
        /// The account.
        address: Address,
        /// Its code hash.
        code_hash: H256,
    },
    /// A trie operation failed (an in-memory trie loads nothing, so this is a bug).
    #[error(transparent)]
    Trie(#[from] TrieError),
}

/// An Ethereum world state in memory (see the module docs).
pub struct MemoryWorld {
    accounts: BTreeMap<Address, Account>,
    /// Invariant: no empty inner map and no zero value.
    storage: BTreeMap<Address, BTreeMap<H256, U256>>,
    code: HashMap<H256, Vec<u8>>,
    account_trie: Trie<MemoryNodeSource, EthLayout>,
    /// Invariant: exactly the accounts of `storage` have a trie.
    storage_tries: BTreeMap<Address, Trie<MemoryNodeSource, EthLayout>>,
    root: H256,
}

impl Default for MemoryWorld {
    fn default() -> Self {
        MemoryWorld {
            accounts: BTreeMap::new(),
            storage: BTreeMap::new(),
            code: HashMap::new(),
            account_trie: Trie::new(MemoryNodeSource::new()),
            storage_tries: BTreeMap::new(),
            root: EMPTY_ROOT,
        }
    }
}

impl MemoryWorld {
    /// An empty world (root `EMPTY_ROOT`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The world of a genesis allocation.
    pub fn from_genesis(genesis: &Genesis) -> Result<MemoryWorld, WorldError> {
        let mut world = MemoryWorld::new();
        world.apply(&EthChanges::from_genesis(genesis))?;
        Ok(world)
    }

    /// The state root after the last commit.
    pub fn root(&self) -> H256 {
        self.root
    }

    /// The account at `address`, if it exists.
    pub fn account(&self, address: &Address) -> Option<&Account> {
        self.accounts.get(address)
    }

    /// The value of `slot` in the storage of `address` (zero when absent).
    pub fn storage(&self, address: &Address, slot: &H256) -> U256 {
        self.storage.get(address).and_then(|s| s.get(slot)).copied().unwrap_or(U256::ZERO)
    }

    /// The code with hash `hash` (empty for `EMPTY_CODE_HASH`), if known.
    pub fn code(&self, hash: &H256) -> Option<&[u8]> {
        if *hash == EMPTY_CODE_HASH {
            return Some(&[]);
        }
        self.code.get(hash).map(Vec::as_slice)
    }

    /// Number of accounts.
    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    /// True when no account exists.
    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// The whole state as a genesis allocation (accounts, their code and slots): its
    /// [`crate::genesis_state_root`] is [`MemoryWorld::root`].
    pub fn to_genesis(&self) -> Genesis {
        let alloc = self
            .accounts
            .iter()
            .map(|(address, account)| {
                let code = self.code(&account.code_hash).map(<[u8]>::to_vec);
                // Invariant (checked by `apply`): every account's code is known.
                let code = code.expect("MemoryWorld holds the code of every account");
                let storage = self.storage.get(address).cloned().unwrap_or_default();
                let genesis_account = GenesisAccount {
                    nonce: account.nonce,
                    balance: account.balance,
                    code,
                    storage,
                };
                (*address, genesis_account)
            })
            .collect();
        Genesis { alloc }
    }

    /// Commit `changes` and return the new state root: the storage roots of the touched
    /// accounts, then their leaves, then the account trie. On error nothing has changed.
    pub fn apply(&mut self, changes: &EthChanges) -> Result<H256, WorldError> {
        self.check_code(changes)?;
        for (hash, code) in changes.code() {
            self.code.entry(*hash).or_insert_with(|| code.clone());
        }
        let mut leaves: Vec<(Address, Option<Account>)> =
            Vec::with_capacity(changes.accounts.len());
        for (address, change) in &changes.accounts {
            match change {
                AccountChange::Removed => {
                    self.storage.remove(address);
                    self.storage_tries.remove(address);
                    leaves.push((*address, None));
                }
                AccountChange::Write(w) => {
                    let storage_root = self.write_storage(address, w)?;
                    let account = Account {
                        nonce: w.nonce,
                        balance: w.balance,
                        storage_root,
                        code_hash: w.code_hash,
                    };
                    leaves.push((*address, Some(account)));
                }
            }
        }
        for (address, account) in leaves {
            let key = secure_key(&address);
            match account {
                Some(account) => {
                    self.account_trie.insert(key.as_bytes(), &account.rlp())?;
                    self.accounts.insert(address, account);
                }
                None => {
                    self.account_trie.remove(key.as_bytes())?;
                    self.accounts.remove(&address);
                }
            }
        }
        self.root = self.account_trie.root()?;
        Ok(self.root)
    }

    /// Refuse a change set that gives an account a code hash with no known code.
    fn check_code(&self, changes: &EthChanges) -> Result<(), WorldError> {
        for (address, change) in &changes.accounts {
            if let AccountChange::Write(w) = change {
                let known =
                    self.code(&w.code_hash).is_some() || changes.code().contains_key(&w.code_hash);
                if !known {
                    return Err(WorldError::MissingCode {
                        address: *address,
                        code_hash: w.code_hash,
                    });
                }
            }
        }
        Ok(())
    }

    /// Apply one account's storage clear and slot writes; its new storage root.
    fn write_storage(&mut self, address: &Address, w: &AccountWrite) -> Result<H256, WorldError> {
        if w.storage_cleared {
            self.storage.remove(address);
            self.storage_tries.remove(address);
        } else if w.storage.is_empty() {
            return Ok(self.accounts.get(address).map_or(EMPTY_ROOT, |a| a.storage_root));
        }
        if w.storage.values().all(U256::is_zero) && !self.storage.contains_key(address) {
            return Ok(EMPTY_ROOT);
        }
        let slots = self.storage.entry(*address).or_default();
        let trie = self
            .storage_tries
            .entry(*address)
            .or_insert_with(|| Trie::new(MemoryNodeSource::new()));
        for (slot, value) in &w.storage {
            let key = secure_key(&slot.0);
            if value.is_zero() {
                trie.remove(key.as_bytes())?;
                slots.remove(slot);
            } else {
                trie.insert(key.as_bytes(), &storage_value_rlp(value))?;
                slots.insert(*slot, *value);
            }
        }
        let root = trie.root()?;
        if slots.is_empty() {
            self.storage.remove(address);
            self.storage_tries.remove(address);
        }
        Ok(root)
    }
}
