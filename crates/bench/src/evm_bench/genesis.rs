//! The state `arbor bench evm` starts from, the same in every engine: derived from the seed
//! and the account count alone, but for the senders' addresses, which need their keys (the
//! driver derives them once and hands them to the workers).
//!
//! - Accounts `0..senders` are the senders: secp256k1 keys from keccak256 of the seed and
//!   the index, 10^24 wei each. The others have addresses from keccak256 of the seed and
//!   the index, 10^18 wei each.
//! - The ERC-20 token ([`crate::evm_bench::contracts`]) at a fixed address: every account
//!   holds [`TOKEN_BALANCE`] units (its `balanceOf` slot), `totalSupply` is their sum.
//! - The storage-heavy contract at a fixed address: `slots[k] = k + 1` for every `k` below
//!   the account count; fresh keys start at [`FRESH_KEY_BASE`].
//!
//! Addresses of new accounts and token holders made during the run are also drawn here
//! ([`fresh_address`]), from a counter no genesis address uses.

use alloy_primitives::U256;
use anyhow::{ensure, Result};
use eth::{Address, Genesis, GenesisAccount};
use k256::ecdsa::SigningKey;
use rayon::prelude::*;
use state::H256;
use trie::keccak256;

use crate::evm_bench::contracts::{churn_slot, token_balance_slot, Contracts};

/// The chain id the transactions sign for.
pub(crate) const CHAIN_ID: u64 = 1;
/// The most senders (keyed accounts) a state has.
pub(crate) const SENDERS_MAX: u64 = 65_536;
/// Wei of each sender.
pub(crate) fn sender_balance() -> U256 {
    U256::from(10u8).pow(U256::from(24u8))
}
/// Wei of each other account.
pub(crate) fn account_balance() -> U256 {
    U256::from(10u8).pow(U256::from(18u8))
}
/// Token units each account holds.
pub(crate) const TOKEN_BALANCE: u128 = 1_000_000_000_000_000_000_000_000;
/// The first key of the storage-heavy contract's fresh slots (above any genesis key).
pub(crate) const FRESH_KEY_BASE: u64 = 1 << 40;

/// A 20-byte address from keccak256 of a label and two numbers.
fn derived_address(label: &str, seed: u64, i: u64) -> Address {
    let mut input = label.as_bytes().to_vec();
    input.extend_from_slice(&seed.to_be_bytes());
    input.extend_from_slice(&i.to_be_bytes());
    let mut address = [0u8; 20];
    address.copy_from_slice(&keccak256(&input).0[12..]);
    address
}

/// The token's address.
pub(crate) fn token_address() -> Address {
    derived_address("arbor bench evm token", 0, 0)
}

/// The storage-heavy contract's address.
pub(crate) fn churn_address() -> Address {
    derived_address("arbor bench evm churn", 0, 0)
}

/// The blocks' beneficiary (it receives the priority fees).
pub(crate) fn coinbase() -> Address {
    derived_address("arbor bench evm coinbase", 0, 0)
}

/// The address of account `i` (`i` at least the sender count: senders' come from keys).
pub(crate) fn account_address(seed: u64, i: u64) -> Address {
    derived_address("arbor bench evm account", seed, i)
}

/// The `n`th address that no genesis account has.
pub(crate) fn fresh_address(seed: u64, n: u64) -> Address {
    derived_address("arbor bench evm fresh", seed, n)
}

/// Sender `i`'s key: keccak256 of the seed and the index (hashed again in the negligible
/// case that it is not a valid secp256k1 scalar).
pub(crate) fn sender_key(seed: u64, i: u64) -> SigningKey {
    let mut input = b"arbor bench evm sender".to_vec();
    input.extend_from_slice(&seed.to_be_bytes());
    input.extend_from_slice(&i.to_be_bytes());
    let mut bytes = keccak256(&input);
    loop {
        match SigningKey::from_slice(&bytes.0) {
            Ok(key) => return key,
            Err(_) => bytes = keccak256(&bytes.0),
        }
    }
}

/// The address of a key: the last 20 bytes of keccak256 of its uncompressed public key.
pub(crate) fn key_address(key: &SigningKey) -> Address {
    let point = key.verifying_key().to_encoded_point(false);
    let mut address = [0u8; 20];
    address.copy_from_slice(&keccak256(&point.as_bytes()[1..]).0[12..]);
    address
}

/// How many senders a state of `accounts` accounts has.
pub(crate) fn sender_count(accounts: u64) -> u64 {
    accounts.min(SENDERS_MAX)
}

/// The senders' keys (in parallel: a scalar multiplication each).
pub(crate) fn sender_keys(seed: u64, accounts: u64) -> Vec<SigningKey> {
    (0..sender_count(accounts)).into_par_iter().map(|i| sender_key(seed, i)).collect()
}

/// What every engine builds its state from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct World {
    pub(crate) seed: u64,
    pub(crate) accounts: u64,
    /// The senders' addresses (accounts `0..senders.len()`).
    pub(crate) senders: Vec<Address>,
}

impl World {
    /// The world of `accounts` accounts, its senders derived from their keys.
    pub(crate) fn new(seed: u64, accounts: u64, keys: &[SigningKey]) -> World {
        let senders = keys.par_iter().map(key_address).collect();
        World { seed, accounts, senders }
    }

    /// The address of account `i`.
    pub(crate) fn address(&self, i: u64) -> Address {
        match self.senders.get(i as usize) {
            Some(a) => *a,
            None => account_address(self.seed, i),
        }
    }

    /// The genesis allocation (see the module docs).
    pub(crate) fn genesis(&self, contracts: &Contracts) -> Result<Genesis> {
        ensure!(self.senders.len() as u64 == sender_count(self.accounts), "wrong sender count");
        let mut genesis = Genesis::default();
        let mut token =
            GenesisAccount { code: contracts.token.runtime.clone(), ..Default::default() };
        let mut churn =
            GenesisAccount { code: contracts.churn.runtime.clone(), ..Default::default() };
        for i in 0..self.accounts {
            let address = self.address(i);
            let balance =
                if i < self.senders.len() as u64 { sender_balance() } else { account_balance() };
            let account = GenesisAccount { balance, ..Default::default() };
            ensure!(genesis.alloc.insert(address, account).is_none(), "address {i} repeats");
            token.storage.insert(token_balance_slot(&address), U256::from(TOKEN_BALANCE));
            churn.storage.insert(churn_slot(i), U256::from(i + 1));
        }
        let supply = U256::from(TOKEN_BALANCE) * U256::from(self.accounts);
        token.storage.insert(H256(U256::ZERO.to_be_bytes()), supply);
        for (address, account) in [(token_address(), token), (churn_address(), churn)] {
            ensure!(genesis.alloc.insert(address, account).is_none(), "a contract address repeats");
        }
        Ok(genesis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_is_deterministic_and_distinct() {
        // Below 65,536 accounts every account sends.
        let keys = sender_keys(3, 40);
        let world = World::new(3, 40, &keys);
        assert_eq!(world.senders.len(), 40);
        assert_eq!(world, World::new(3, 40, &sender_keys(3, 40)));
        assert_ne!(world.senders, World::new(4, 40, &sender_keys(4, 40)).senders);
        assert_eq!(world.address(2), key_address(&keys[2]));
        // Past the senders, addresses come from the seed.
        let few = World { senders: world.senders[..10].to_vec(), ..world.clone() };
        assert_eq!(few.address(20), account_address(3, 20));
        assert!(few.genesis(&Contracts::load().unwrap()).is_err(), "wrong sender count");
        let contracts = Contracts::load().unwrap();
        let genesis = world.genesis(&contracts).unwrap();
        assert_eq!(genesis.alloc.len(), 42, "40 accounts and two contracts");
        let token = &genesis.alloc[&token_address()];
        assert_eq!(token.storage.len(), 41, "40 balances and the supply");
        assert_eq!(genesis.alloc[&churn_address()].storage.len(), 40);
        assert!(!genesis.alloc.contains_key(&fresh_address(3, 0)));
    }
}
