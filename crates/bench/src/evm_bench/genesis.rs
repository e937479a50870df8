//! The state `arbor bench evm` starts from, the same in every engine: the funded accounts
//! and the ERC-20 token of `evm::generate::World` (derived from the seed and the account
//! count alone, but for the senders' addresses, which need their keys: the driver derives
//! them once and hands them to the workers), and the storage-heavy contract at a fixed
//! address with `slots[k] = k + 1` for every `k` below the account count; its fresh keys
//! start at [`FRESH_KEY_BASE`].

use alloy_primitives::U256;
use anyhow::Result;
use eth::{Address, Genesis, GenesisAccount};
use evm::generate::{add_contract, derived_address, World};

use crate::evm_bench::contracts::{churn_slot, Contracts};

/// The first key of the storage-heavy contract's fresh slots (above any genesis key).
pub(crate) const FRESH_KEY_BASE: u64 = 1 << 40;

/// The storage-heavy contract's address.
pub(crate) fn churn_address() -> Address {
    derived_address("arbor bench evm churn", 0, 0)
}

/// The genesis allocation of `world` with both contracts (see the module docs).
pub(crate) fn bench_genesis(world: &World, contracts: &Contracts) -> Result<Genesis> {
    let mut genesis = world.genesis(&contracts.token.runtime)?;
    let mut churn = GenesisAccount { code: contracts.churn.runtime.clone(), ..Default::default() };
    for i in 0..world.accounts {
        churn.storage.insert(churn_slot(i), U256::from(i + 1));
    }
    add_contract(&mut genesis, churn_address(), churn)?;
    Ok(genesis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use evm::generate::{sender_keys, token_address};

    #[test]
    fn the_bench_genesis_holds_both_contracts() {
        let keys = sender_keys(3, 40);
        let world = World::new(3, 40, &keys);
        let genesis = bench_genesis(&world, &Contracts::load().unwrap()).unwrap();
        assert_eq!(genesis.alloc.len(), 42, "40 accounts and two contracts");
        assert_eq!(genesis.alloc[&token_address()].storage.len(), 41, "balances, supply");
        assert_eq!(genesis.alloc[&churn_address()].storage.len(), 40);
        let few = World { senders: world.senders[..10].to_vec(), ..world.clone() };
        assert!(bench_genesis(&few, &Contracts::load().unwrap()).is_err(), "wrong sender count");
    }
}
