//! Generated Ethereum chains and the pieces they are made of, one algorithm for every
//! user: `arbor gen-chain --evm` and `arbor bench import --evm` write chains with
//! [`ChainGenerator`]; `arbor bench evm` signs its workloads' transactions with
//! [`sign_bytes`] over the same [`World`] of keyed accounts and the same token.
//!
//! Parts: `world` (keys, addresses and the genesis allocation of funded accounts and the
//! ERC-20 token, from a seed), `contracts` (the token's record and calls, the stash,
//! factory and recorder contracts assembled here), `sign` (legacy EIP-155 transactions
//! signed with k256), `plan` (what each transaction does, chosen so that it succeeds) and
//! `chain` (blocks executed by `crate::block` and sealed with their results, the geth
//! genesis file).

mod chain;
mod contracts;
mod plan;
mod sign;
mod world;

pub use chain::{
    factory_address, gas_limit, recorder_address, ChainGenerator, ChainSpec, GenError,
    GeneratedBlock, GENESIS_TIMESTAMP,
};
pub use contracts::{
    address_word, create2_address, create_address, mapping_slot, selector, stash_init,
    stash_store_call, token_balance_slot, transfer_call, Compiled, ContractError, FACTORY_RUNTIME,
    RECORDER_RUNTIME, STASH_RUNTIME, STASH_SLOTS_MAX,
};
pub use sign::{sign_bytes, sign_tx, SignError, UnsignedTx};
pub use world::{
    account_address, account_balance, add_contract, coinbase, derived_address, fresh_address,
    key_address, sender_balance, sender_count, sender_key, sender_keys, token_address, AllocError,
    World, CHAIN_ID, SENDERS_MAX, TOKEN_BALANCE,
};

#[cfg(test)]
mod tests;
