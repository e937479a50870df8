//! What the transactions of generated blocks do, chosen from one seeded RNG with the
//! senders' nonces in order and a model of the contracts alive, so that every transaction
//! succeeds when executed in order (the generator checks that it did).
//!
//! Per block: first a call of the recorder (the header fields into its storage), then
//! `txs_per_block` transactions, each from a sender drawn uniformly: 45% value transfers
//! (nine in ten to an existing account, one in ten to a new one), 40% token transfers
//! (four in five to an existing holder, one in five to a new one), 15% contract work:
//! a stash deployed by CREATE (1..=8 constructor slots), a stash deployed through the
//! factory by CREATE2 (one of [`CHILDREN`] init codes, each at its fixed address, only while
//! the previous one there is destroyed: a re-creation), a store of a word into a live
//! stash, or a live stash's self-destruct (storage and code deleted under Shanghai's rules).
//! Also [`WITHDRAWALS`] withdrawals per block to existing accounts.

use alloy_eips::eip4895::Withdrawal;
use alloy_primitives::U256;
use eth::Address;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::contracts::{
    create2_address, create_address, stash_init, stash_store_call, transfer_call,
};
use super::sign::UnsignedTx;
use super::world::{fresh_address, token_address, World};

/// Every transaction's gas price: above any base fee the chain reaches (the generator's
/// blocks never use more than half their gas limit, so the base fee only falls).
pub(crate) const GAS_PRICE: u128 = 2_000_000_000;
/// Gas limit of a value transfer.
pub(crate) const TRANSFER_GAS: u64 = 21_000;
/// Gas limit of a token transfer (one to a new holder uses about 51,000).
pub(crate) const TOKEN_TRANSFER_GAS: u64 = 55_000;
/// Gas limit of a stash's deployment, by CREATE or the factory's CREATE2 (eight
/// constructor slots use about 240,000).
pub(crate) const CREATE_GAS: u64 = 300_000;
/// Gas limit of a store into a stash or its self-destruct.
pub(crate) const STASH_CALL_GAS: u64 = 60_000;
/// Gas limit of the recorder's call (its first call writes six new slots: about 155,000).
pub(crate) const RECORDER_GAS: u64 = 200_000;
/// The largest gas limit of a transaction after the recorder's.
pub(crate) const TX_GAS_MAX: u64 = CREATE_GAS;
/// The factory's init codes: stashes of 1 to `CHILDREN` slots, each at its own address.
pub(crate) const CHILDREN: usize = 4;
/// Withdrawals per block.
pub(crate) const WITHDRAWALS: u64 = 2;

/// A deployed stash.
#[derive(Debug, Clone, Copy)]
struct Stash {
    address: Address,
    /// Which of the factory's children it is, if one.
    child: Option<usize>,
}

/// The transaction planner (see the module docs).
pub(crate) struct Planner {
    world: World,
    factory: Address,
    recorder: Address,
    rng: ChaCha8Rng,
    nonces: Vec<u64>,
    fresh: u64,
    live: Vec<Stash>,
    children_alive: [bool; CHILDREN],
    withdrawal_index: u64,
}

impl Planner {
    /// A planner over `world`'s senders, with the factory and recorder at their addresses.
    pub(crate) fn new(world: World, factory: Address, recorder: Address) -> Planner {
        Planner {
            rng: ChaCha8Rng::seed_from_u64(world.seed ^ 0x6765_6e5f_6368_6169),
            nonces: vec![0; world.senders.len()],
            world,
            factory,
            recorder,
            fresh: 0,
            live: Vec::new(),
            children_alive: [false; CHILDREN],
            withdrawal_index: 0,
        }
    }

    /// The world the planner sends from.
    pub(crate) fn world(&self) -> &World {
        &self.world
    }

    /// Random bytes (the blocks' PREVRANDAO).
    pub(crate) fn random_word(&mut self) -> [u8; 32] {
        self.rng.gen()
    }

    /// A transaction of `sender` (its nonce taken).
    fn tx(
        &mut self,
        sender: usize,
        gas_limit: u64,
        to: Option<Address>,
        value: u64,
        data: Vec<u8>,
    ) -> (usize, UnsignedTx) {
        let nonce = self.nonces[sender];
        self.nonces[sender] += 1;
        let value = U256::from(value);
        (sender, UnsignedTx { nonce, gas_price: GAS_PRICE, gas_limit, to, value, data })
    }

    /// The recorder's call that opens block `number`.
    pub(crate) fn recorder_tx(&mut self, number: u64) -> (usize, UnsignedTx) {
        let sender = (number % self.nonces.len() as u64) as usize;
        self.tx(sender, RECORDER_GAS, Some(self.recorder), 0, Vec::new())
    }

    /// An existing account, or (one time in `new_one_in`) one never seen.
    fn recipient(&mut self, new_one_in: u32) -> Address {
        if self.rng.gen_ratio(1, new_one_in) {
            self.fresh += 1;
            fresh_address(self.world.seed, self.fresh)
        } else {
            self.world.address(self.rng.gen_range(0..self.world.accounts))
        }
    }

    /// The next transaction and the index of its sender.
    pub(crate) fn next_tx(&mut self) -> (usize, UnsignedTx) {
        let sender = self.rng.gen_range(0..self.nonces.len());
        match self.rng.gen_range(0..100u32) {
            0..45 => {
                let to = self.recipient(10);
                let value = self.rng.gen_range(1..1_000_000_000u64);
                self.tx(sender, TRANSFER_GAS, Some(to), value, Vec::new())
            }
            45..85 => {
                let to = self.recipient(5);
                let data = transfer_call(&to, self.rng.gen_range(1..1_000_000_000u64));
                self.tx(sender, TOKEN_TRANSFER_GAS, Some(token_address()), 0, data)
            }
            _ => self.contract_tx(sender),
        }
    }

    /// A stash deployed, stored into or destroyed.
    fn contract_tx(&mut self, sender: usize) -> (usize, UnsignedTx) {
        let op = if self.live.is_empty() { 0 } else { self.rng.gen_range(0..4u32) };
        let dead: Vec<usize> = (0..CHILDREN).filter(|k| !self.children_alive[*k]).collect();
        match op {
            1 if !dead.is_empty() => {
                let child = dead[self.rng.gen_range(0..dead.len())];
                let init = child_init(child);
                let address = create2_address(&self.factory, &init);
                self.children_alive[child] = true;
                self.live.push(Stash { address, child: Some(child) });
                self.tx(sender, CREATE_GAS, Some(self.factory), 0, init)
            }
            2 => {
                let stash = self.live[self.rng.gen_range(0..self.live.len())];
                let key = self.rng.gen_range(0..32u64);
                let data = stash_store_call(key, self.rng.gen_range(1..u64::MAX));
                self.tx(sender, STASH_CALL_GAS, Some(stash.address), 0, data)
            }
            3 => {
                let stash = self.live.swap_remove(self.rng.gen_range(0..self.live.len()));
                if let Some(child) = stash.child {
                    self.children_alive[child] = false;
                }
                self.tx(sender, STASH_CALL_GAS, Some(stash.address), 0, Vec::new())
            }
            _ => {
                let slots = self.rng.gen_range(1..=8u8);
                let init = stash_init(slots, self.rng.gen());
                let address = create_address(&self.world.senders[sender], self.nonces[sender]);
                self.live.push(Stash { address, child: None });
                self.tx(sender, CREATE_GAS, None, 0, init)
            }
        }
    }

    /// The next block's withdrawals.
    pub(crate) fn withdrawals(&mut self) -> Vec<Withdrawal> {
        (0..WITHDRAWALS)
            .map(|_| {
                self.withdrawal_index += 1;
                let account = self.world.address(self.rng.gen_range(0..self.world.accounts));
                Withdrawal {
                    index: self.withdrawal_index,
                    validator_index: self.rng.gen_range(0..1_000_000),
                    address: account.into(),
                    amount: self.rng.gen_range(1..1_000_000),
                }
            })
            .collect()
    }
}

/// The init code of the factory's child `k`: a stash of `k + 1` slots, its values fixed
/// by `k`, so that it always lands at one address.
fn child_init(k: usize) -> Vec<u8> {
    // Invariant: k < CHILDREN, far below 255.
    let slots = u8::try_from(k + 1).unwrap_or(1);
    stash_init(slots, 0x00c0_ffee + u32::from(slots))
}
