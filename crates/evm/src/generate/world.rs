//! The accounts a generated state starts from, derived from a seed and an account count
//! alone, but for the senders' addresses, which need their keys (derived once by whoever
//! makes blocks and handed on as addresses).
//!
//! - Accounts `0..senders` are the senders: secp256k1 keys from keccak256 of the seed and
//!   the index ([`sender_key`]), 10^24 wei each; at most [`SENDERS_MAX`] of them. The others
//!   have addresses from keccak256 of the seed and the index, 10^18 wei each.
//! - The ERC-20 token ([`super::contracts`]) at a fixed address: every account holds
//!   [`TOKEN_BALANCE`] units (its `balanceOf` slot), `totalSupply` is their sum
//!   ([`World::genesis`]).
//!
//! Addresses of accounts made later ([`fresh_address`]) come from a counter no genesis
//! address uses. Cost: one scalar multiplication per sender key (in parallel), one keccak
//! per other address.

use alloy_primitives::U256;
use eth::{Address, Genesis, GenesisAccount};
use k256::ecdsa::SigningKey;
use rayon::prelude::*;
use state::H256;
use trie::keccak256;

use super::contracts::token_balance_slot;

/// The chain id generated transactions sign for.
pub const CHAIN_ID: u64 = 1;
/// The most senders (keyed accounts) a state has.
pub const SENDERS_MAX: u64 = 65_536;
/// Token units each account holds.
pub const TOKEN_BALANCE: u128 = 1_000_000_000_000_000_000_000_000;

/// Why a genesis cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AllocError {
    /// The world's senders are not its keys' count.
    #[error("{got} sender addresses for {accounts} accounts, expected {want}")]
    SenderCount {
        /// Addresses given.
        got: usize,
        /// Addresses expected.
        want: u64,
        /// The world's accounts.
        accounts: u64,
    },
    /// Two accounts (or an account and a contract) share an address.
    #[error("address 0x{} occurs twice in the genesis", hex::encode(.0))]
    Repeated(Address),
}

/// Wei of each sender.
pub fn sender_balance() -> U256 {
    U256::from(10u8).pow(U256::from(24u8))
}

/// Wei of each other account.
pub fn account_balance() -> U256 {
    U256::from(10u8).pow(U256::from(18u8))
}

/// A 20-byte address from keccak256 of a label and two numbers.
pub fn derived_address(label: &str, seed: u64, i: u64) -> Address {
    let mut input = label.as_bytes().to_vec();
    input.extend_from_slice(&seed.to_be_bytes());
    input.extend_from_slice(&i.to_be_bytes());
    let mut address = [0u8; 20];
    address.copy_from_slice(&keccak256(&input).0[12..]);
    address
}

/// The token's address.
pub fn token_address() -> Address {
    derived_address("arbor bench evm token", 0, 0)
}

/// The blocks' beneficiary (it receives the priority fees).
pub fn coinbase() -> Address {
    derived_address("arbor bench evm coinbase", 0, 0)
}

/// The address of account `i` (`i` at least the sender count: senders' come from keys).
pub fn account_address(seed: u64, i: u64) -> Address {
    derived_address("arbor bench evm account", seed, i)
}

/// The `n`th address that no genesis account has.
pub fn fresh_address(seed: u64, n: u64) -> Address {
    derived_address("arbor bench evm fresh", seed, n)
}

/// Sender `i`'s key: keccak256 of the seed and the index (hashed again in the negligible
/// case that it is not a valid secp256k1 scalar).
pub fn sender_key(seed: u64, i: u64) -> SigningKey {
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
pub fn key_address(key: &SigningKey) -> Address {
    let point = key.verifying_key().to_encoded_point(false);
    let mut address = [0u8; 20];
    address.copy_from_slice(&keccak256(&point.as_bytes()[1..]).0[12..]);
    address
}

/// How many senders a state of `accounts` accounts has.
pub fn sender_count(accounts: u64) -> u64 {
    accounts.min(SENDERS_MAX)
}

/// The senders' keys (in parallel: a scalar multiplication each).
pub fn sender_keys(seed: u64, accounts: u64) -> Vec<SigningKey> {
    (0..sender_count(accounts)).into_par_iter().map(|i| sender_key(seed, i)).collect()
}

/// The accounts a generated state starts with (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// The seed of every derived key and address.
    pub seed: u64,
    /// Accounts in the genesis (senders included).
    pub accounts: u64,
    /// The senders' addresses (accounts `0..senders.len()`).
    pub senders: Vec<Address>,
}

impl World {
    /// The world of `accounts` accounts, its senders derived from their keys.
    pub fn new(seed: u64, accounts: u64, keys: &[SigningKey]) -> World {
        let senders = keys.par_iter().map(key_address).collect();
        World { seed, accounts, senders }
    }

    /// The address of account `i`.
    pub fn address(&self, i: u64) -> Address {
        match usize::try_from(i).ok().and_then(|i| self.senders.get(i)) {
            Some(a) => *a,
            None => account_address(self.seed, i),
        }
    }

    /// The genesis allocation: the funded accounts and the token at [`token_address`]
    /// running `token_runtime`, with a balance for each account and the supply in slot 0.
    pub fn genesis(&self, token_runtime: &[u8]) -> Result<Genesis, AllocError> {
        let want = sender_count(self.accounts);
        if self.senders.len() as u64 != want {
            return Err(AllocError::SenderCount {
                got: self.senders.len(),
                want,
                accounts: self.accounts,
            });
        }
        let mut genesis = Genesis::default();
        let mut token = GenesisAccount { code: token_runtime.to_vec(), ..Default::default() };
        for i in 0..self.accounts {
            let address = self.address(i);
            let balance =
                if i < self.senders.len() as u64 { sender_balance() } else { account_balance() };
            let account = GenesisAccount { balance, ..Default::default() };
            if genesis.alloc.insert(address, account).is_some() {
                return Err(AllocError::Repeated(address));
            }
            token.storage.insert(token_balance_slot(&address), U256::from(TOKEN_BALANCE));
        }
        let supply = U256::from(TOKEN_BALANCE) * U256::from(self.accounts);
        token.storage.insert(H256(U256::ZERO.to_be_bytes()), supply);
        add_contract(&mut genesis, token_address(), token)?;
        Ok(genesis)
    }
}

/// Add `account` at `address` to `genesis`; an address already there is an error.
pub fn add_contract(
    genesis: &mut Genesis,
    address: Address,
    account: GenesisAccount,
) -> Result<(), AllocError> {
    match genesis.alloc.insert(address, account) {
        None => Ok(()),
        Some(_) => Err(AllocError::Repeated(address)),
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
        assert!(matches!(few.genesis(&[0x00]), Err(AllocError::SenderCount { got: 10, .. })));
        let genesis = world.genesis(&[0x00]).unwrap();
        assert_eq!(genesis.alloc.len(), 41, "40 accounts and the token");
        let token = &genesis.alloc[&token_address()];
        assert_eq!(token.storage.len(), 41, "40 balances and the supply");
        assert!(!genesis.alloc.contains_key(&fresh_address(3, 0)));
        let mut again = genesis.clone();
        let taken = world.address(0);
        assert_eq!(
            add_contract(&mut again, taken, GenesisAccount::default()),
            Err(AllocError::Repeated(taken))
        );
    }
}
