//! Account-model reads and eth_getProof documents over any holder of tries: a back-end
//! implements [`TrieReader`] (one state's point reads, and code by hash) and [`TrieProver`]
//! (that state's root and single-key proofs), and [`AccountReader`] reads accounts, slots
//! and code through it and assembles an EIP-1186 [`AccountProof`] of an account and slots:
//! one proof of the main trie for `keccak(address)`, one proof of the account's storage trie
//! `TrieId::Storage(keccak(address))` per `keccak(slot)`, exclusion proofs for what is
//! absent. Back-ends: the in-memory [`crate::EthState`] here; the RocksDB store at its head
//! or at a recent block through `evm::StoreTries`, in the crate that knows both, since this
//! crate does not depend on the store.
//!
//! Invariant: a proof [`AccountReader::prove`] returns verifies against the back-end's root;
//! it is checked before it is returned, so a back-end whose account leaves and storage
//! tries disagree is reported ([`ReadError::Inconsistent`]), never served. Cost: per slot
//! one read and one storage-trie proof, one main-trie proof, and the check (one hash per
//! proof node).

use alloy_primitives::U256;
use state::{TrieId, H256};
use trie::EMPTY_CODE_HASH;

use crate::account::{decode_storage_value, secure_key, Account, AccountError};
use crate::genesis::Address;
use crate::proof::{AccountProof, EthProofError, StorageProof};

/// One state's point reads of its tries and its code by hash.
pub trait TrieReader {
    /// Why a read failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The value of `key` in `trie` (`None`: absent).
    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;

    /// The blob stored under `hash` (contract code), if any.
    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, Self::Error>;
}

/// A [`TrieReader`] that also proves: the state's root and single-key proofs of its tries,
/// all of one state.
pub trait TrieProver: TrieReader {
    /// The state root (the main trie's root) the reads and proofs are of.
    fn state_root(&self) -> Result<H256, Self::Error>;

    /// The proof of `key` in `trie` (inclusion or exclusion): the nodes on its path, root
    /// first, as `trie::verify_proof` takes them; an empty trie may give no nodes.
    fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, Self::Error>;
}

impl<T: TrieReader + ?Sized> TrieReader for &T {
    type Error = T::Error;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        (**self).get(trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, Self::Error> {
        (**self).code(hash)
    }
}

impl<T: TrieProver + ?Sized> TrieProver for &T {
    fn state_root(&self) -> Result<H256, Self::Error> {
        (**self).state_root()
    }

    fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, Self::Error> {
        (**self).prove(trie, key)
    }
}

/// Why an account-model read or proof failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError<E> {
    /// The back-end failed.
    #[error(transparent)]
    Source(E),
    /// The main-trie leaf of an account does not decode as an account: the tries are not
    /// the Ethereum account model.
    #[error("the main-trie leaf of 0x{address} is no Ethereum account: {source}", address = hex::encode(.address))]
    Account {
        /// The account.
        address: Address,
        /// Why the leaf does not decode.
        source: AccountError,
    },
    /// A storage leaf does not decode as a storage word.
    #[error("slot {slot} of 0x{address} holds no storage word: {source}", address = hex::encode(.address))]
    Slot {
        /// The account.
        address: Address,
        /// The slot.
        slot: H256,
        /// Why the leaf does not decode.
        source: AccountError,
    },
    /// The back-end's own proof does not verify against its root (its account leaf and
    /// its storage trie disagree, or a node is damaged).
    #[error("the proof of 0x{address} does not verify against the state root {root}: {source}", address = hex::encode(.address))]
    Inconsistent {
        /// The account.
        address: Address,
        /// The back-end's state root.
        root: H256,
        /// What the check found.
        source: Box<EthProofError>,
    },
}

/// Account-model reads and proofs over a back-end (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct AccountReader<R> {
    tries: R,
}

impl<R> AccountReader<R> {
    /// Reads through `tries`.
    pub fn new(tries: R) -> Self {
        AccountReader { tries }
    }

    /// The back-end.
    pub fn tries(&self) -> &R {
        &self.tries
    }
}

impl<R: TrieReader> AccountReader<R> {
    /// The account at `address`, if it exists.
    pub fn account(&self, address: &Address) -> Result<Option<Account>, ReadError<R::Error>> {
        let key = secure_key(address);
        let leaf = self.tries.get(&TrieId::Main, key.as_bytes()).map_err(ReadError::Source)?;
        leaf.map(|leaf| Account::decode(&leaf))
            .transpose()
            .map_err(|source| ReadError::Account { address: *address, source })
    }

    /// The value of `slot` in the storage of `address` (zero when absent, also when the
    /// account does not exist).
    pub fn storage(&self, address: &Address, slot: &H256) -> Result<U256, ReadError<R::Error>> {
        let trie = TrieId::Storage(secure_key(address));
        let leaf =
            self.tries.get(&trie, secure_key(&slot.0).as_bytes()).map_err(ReadError::Source)?;
        match leaf {
            None => Ok(U256::ZERO),
            Some(leaf) => decode_storage_value(&leaf).map_err(|source| ReadError::Slot {
                address: *address,
                slot: *slot,
                source,
            }),
        }
    }

    /// The code whose keccak256 is `hash`, if known; the empty code for `EMPTY_CODE_HASH`.
    pub fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, ReadError<R::Error>> {
        if *hash == EMPTY_CODE_HASH {
            return Ok(Some(Vec::new()));
        }
        self.tries.code(hash).map_err(ReadError::Source)
    }
}

impl<R: TrieProver> AccountReader<R> {
    /// The eth_getProof (EIP-1186) answer for `address` and `slots` (in the order given,
    /// repeats kept): the account (all-empty when it does not exist) with its proof, and
    /// each slot's value (zero when absent) with its proof. Checked against the state root
    /// before it is returned (see the module docs).
    pub fn prove(
        &self,
        address: &Address,
        slots: &[H256],
    ) -> Result<AccountProof, ReadError<R::Error>> {
        let root = self.tries.state_root().map_err(ReadError::Source)?;
        let key = secure_key(address);
        let account_proof =
            self.tries.prove(&TrieId::Main, key.as_bytes()).map_err(ReadError::Source)?;
        let account = self.account(address)?;
        let trie = TrieId::Storage(key);
        let mut storage_proof = Vec::with_capacity(slots.len());
        for slot in slots {
            // A missing account has no storage: its slots are proven absent by the
            // exclusion of the account itself (its storage root is the empty root).
            let (value, proof) = match account {
                None => (U256::ZERO, Vec::new()),
                Some(_) => {
                    let slot_key = secure_key(&slot.0);
                    let proof =
                        self.tries.prove(&trie, slot_key.as_bytes()).map_err(ReadError::Source)?;
                    (self.storage(address, slot)?, proof)
                }
            };
            storage_proof.push(StorageProof { key: *slot, value, proof });
        }
        let proof = AccountProof {
            address: *address,
            account: account.unwrap_or_default(),
            account_proof,
            storage_proof,
        };
        proof.verify(&root).map_err(|e| ReadError::Inconsistent {
            address: *address,
            root,
            source: Box::new(e),
        })?;
        Ok(proof)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::convert::Infallible;

    use trie::{prove_sorted, root_from_sorted, EthLayout, EMPTY_ROOT};

    use super::*;
    use crate::account::storage_value_rlp;

    /// Tries as sorted maps, proofs straight from their entries: a back-end that shares no
    /// code with the mutable trie `EthState` proves through.
    #[derive(Default)]
    struct Maps {
        tries: BTreeMap<TrieId, BTreeMap<Vec<u8>, Vec<u8>>>,
        code: BTreeMap<H256, Vec<u8>>,
    }

    impl Maps {
        fn entries(&self, trie: &TrieId) -> Vec<(Vec<u8>, Vec<u8>)> {
            let entries = self.tries.get(trie).into_iter().flatten();
            entries.map(|(k, v)| (k.clone(), v.clone())).collect()
        }

        fn root(&self, trie: &TrieId) -> H256 {
            root_from_sorted::<EthLayout, _, _>(&self.entries(trie)).unwrap().0
        }

        fn set(&mut self, trie: TrieId, key: H256, value: Vec<u8>) {
            self.tries.entry(trie).or_default().insert(key.0.to_vec(), value);
        }

        /// An account with these slots, its storage root as its trie has it.
        fn account(&mut self, address: &Address, balance: u64, slots: &[(u64, u64)]) -> Account {
            let trie = TrieId::Storage(secure_key(address));
            for &(s, v) in slots {
                let slot = U256::from(s).to_be_bytes::<32>();
                self.set(trie, secure_key(&slot), storage_value_rlp(&U256::from(v)));
            }
            let account = Account {
                nonce: 1,
                balance: U256::from(balance),
                storage_root: self.root(&trie),
                ..Account::default()
            };
            self.set(TrieId::Main, secure_key(address), account.rlp());
            account
        }
    }

    impl TrieReader for Maps {
        type Error = Infallible;

        fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Infallible> {
            Ok(self.tries.get(trie).and_then(|t| t.get(key)).cloned())
        }

        fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, Infallible> {
            Ok(self.code.get(hash).cloned())
        }
    }

    impl TrieProver for Maps {
        fn state_root(&self) -> Result<H256, Infallible> {
            Ok(self.root(&TrieId::Main))
        }

        fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, Infallible> {
            Ok(prove_sorted::<EthLayout, _, _>(&self.entries(trie), &[key]).unwrap())
        }
    }

    fn word(i: u64) -> H256 {
        H256(U256::from(i).to_be_bytes::<32>())
    }

    #[test]
    fn reads_and_proofs_of_present_and_absent_accounts_and_slots() {
        let mut maps = Maps::default();
        let (a, b, missing) = ([1u8; 20], [2u8; 20], [3u8; 20]);
        let account = maps.account(&a, 10, &[(1, 11), (2, 22), (3, 33)]);
        let account_b = maps.account(&b, 20, &[]);
        let reader = AccountReader::new(&maps);
        assert_eq!(reader.account(&a).unwrap(), Some(account));
        assert_eq!(reader.account(&missing).unwrap(), None);
        assert_eq!(reader.storage(&a, &word(2)).unwrap(), U256::from(22));
        assert_eq!(reader.storage(&a, &word(9)).unwrap(), U256::ZERO);
        assert_eq!(reader.storage(&missing, &word(1)).unwrap(), U256::ZERO);
        assert_eq!(reader.code(&EMPTY_CODE_HASH).unwrap(), Some(Vec::new()));
        assert_eq!(reader.code(&H256([7; 32])).unwrap(), None);
        let root = maps.state_root().unwrap();
        let slots = [word(3), word(9), word(1), word(3)];
        let proof = reader.prove(&a, &slots).unwrap();
        assert_eq!(proof.account, account);
        let values: Vec<U256> = proof.storage_proof.iter().map(|s| s.value).collect();
        assert_eq!(values, [33, 0, 11, 33].map(U256::from));
        proof.verify(&root).unwrap();
        proof.check_query(&a, &slots).unwrap();
        for (address, expected) in [(b, account_b), (missing, Account::default())] {
            let proof = reader.prove(&address, &[word(1)]).unwrap();
            assert_eq!((proof.account, proof.storage_proof[0].value), (expected, U256::ZERO));
            assert_eq!(proof.account.storage_root, EMPTY_ROOT);
            proof.verify(&root).unwrap();
        }
    }

    #[test]
    fn a_back_end_that_is_no_account_model_is_reported() {
        let (a, b) = ([1u8; 20], [2u8; 20]);
        let mut maps = Maps::default();
        maps.account(&a, 10, &[(1, 11)]);
        // A slot written after its account leaf: the leaf's storage root is stale.
        let trie = TrieId::Storage(secure_key(&a));
        maps.set(trie, secure_key(&word(2).0), vec![0x05]);
        let e = AccountReader::new(&maps).prove(&a, &[word(1)]).unwrap_err();
        assert!(matches!(e, ReadError::Inconsistent { address, .. } if address == a), "{e}");
        // A slot that holds no RLP word, a main-trie leaf that is no account.
        maps.set(trie, secure_key(&word(3).0), vec![0x81, 0x00]);
        let e = AccountReader::new(&maps).storage(&a, &word(3)).unwrap_err();
        assert!(matches!(e, ReadError::Slot { .. }), "{e}");
        maps.set(TrieId::Main, secure_key(&b), b"not an account".to_vec());
        let e = AccountReader::new(&maps).account(&b).unwrap_err();
        assert!(e.to_string().contains("0x0202"), "{e}");
        assert!(matches!(AccountReader::new(&maps).prove(&b, &[]), Err(ReadError::Account { .. })));
    }
}
