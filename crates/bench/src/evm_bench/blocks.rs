//! The blocks of `arbor bench evm`: made once by the driver (signed before any timing),
//! written to one file per workload, and read back by every engine's worker, block by
//! block, outside the timed section.
//!
//! Workloads ([`Workload`]), each block filled up to the gas limit by its transactions'
//! gas limits (the check a block builder makes), senders drawn uniformly from the keyed
//! accounts with their nonces in order:
//! - `eth-transfer`: value transfers (21,000 gas), nine in ten to an existing account,
//!   one in ten to a new one;
//! - `erc20-transfer`: `BenchToken.transfer`, four in five to an existing holder (two
//!   slots rewritten), one in five to a new one (a slot created);
//! - `storage-heavy`: `SlotChurn.churn`, [`CHURN_FRESH`] new slots and [`CHURN_EXISTING`]
//!   rewritten ones per call, plus its call counter.
//!
//! File format (made and read here only, still checked as outside bytes): per block a
//! little-endian `u32` transaction count, then per transaction a `u32` length and its
//! bytes; counts and lengths are bounded ([`TX_BYTES_MAX`], the block's gas limit over
//! 21,000 transactions).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use alloy_primitives::U256;
use anyhow::{ensure, Context, Result};
use k256::ecdsa::SigningKey;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use evm::generate::{
    fresh_address, sign_bytes, token_address, transfer_call, UnsignedTx, World, CHAIN_ID,
};

use crate::evm_bench::contracts::churn_call;
use crate::evm_bench::genesis::{churn_address, FRESH_KEY_BASE};

/// The blocks' base fee, wei per gas.
pub(crate) const BASE_FEE: u64 = 1_000_000_000;
/// Every transaction's gas price: the base fee and a priority fee of the same size.
pub(crate) const GAS_PRICE: u128 = 2 * BASE_FEE as u128;
/// Gas limit of a value transfer.
pub(crate) const TRANSFER_GAS: u64 = 21_000;
/// Gas limit of a token transfer (one to a new holder uses about 51,000).
pub(crate) const TOKEN_TRANSFER_GAS: u64 = 55_000;
/// New slots per `churn` call.
pub(crate) const CHURN_FRESH: u64 = 4;
/// Rewritten slots per `churn` call.
pub(crate) const CHURN_EXISTING: u64 = 4;
/// Gas limit of a `churn` call: it uses about 140,000, the first one about 157,000 (its
/// call counter goes from zero to one).
pub(crate) const CHURN_GAS: u64 = 175_000;
/// The longest transaction the block files hold.
pub(crate) const TX_BYTES_MAX: usize = 4096;

/// A workload of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Workload {
    /// Value transfers.
    EthTransfer,
    /// ERC-20 transfers.
    Erc20Transfer,
    /// Storage-heavy contract calls.
    StorageHeavy,
}

impl Workload {
    /// Every workload, in the order a run measures them.
    pub(crate) const ALL: [Workload; 3] =
        [Workload::EthTransfer, Workload::Erc20Transfer, Workload::StorageHeavy];

    /// Its name in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::EthTransfer => "eth-transfer",
            Workload::Erc20Transfer => "erc20-transfer",
            Workload::StorageHeavy => "storage-heavy",
        }
    }

    /// The gas limit of each of its transactions.
    fn tx_gas(self) -> u64 {
        match self {
            Workload::EthTransfer => TRANSFER_GAS,
            Workload::Erc20Transfer => TOKEN_TRANSFER_GAS,
            Workload::StorageHeavy => CHURN_GAS,
        }
    }
}

/// Makes the blocks of every workload in order: the senders' nonces and the fresh
/// addresses and keys carry over from one block (and workload) to the next.
pub(crate) struct Generator<'a> {
    world: &'a World,
    keys: &'a [SigningKey],
    rng: ChaCha8Rng,
    nonces: Vec<u64>,
    fresh_addresses: u64,
    fresh_keys: u64,
    gas_limit: u64,
}

impl<'a> Generator<'a> {
    /// A generator over `world`, whose senders sign with `keys`.
    pub(crate) fn new(world: &'a World, keys: &'a [SigningKey], gas_limit: u64) -> Self {
        Generator {
            world,
            keys,
            rng: ChaCha8Rng::seed_from_u64(world.seed ^ 0x6576_6d5f_626c_6f63),
            nonces: vec![0; keys.len()],
            fresh_addresses: 0,
            fresh_keys: FRESH_KEY_BASE,
            gas_limit,
        }
    }

    /// An existing account, or (one time in `new_one_in`) one never seen.
    fn recipient(&mut self, new_one_in: u32) -> eth::Address {
        if self.rng.gen_ratio(1, new_one_in) {
            self.fresh_addresses += 1;
            fresh_address(self.world.seed, self.fresh_addresses)
        } else {
            self.world.address(self.rng.gen_range(0..self.world.accounts))
        }
    }

    /// One unsigned transaction of `workload` and the index of its sender.
    fn next_tx(&mut self, workload: Workload) -> (usize, UnsignedTx) {
        let sender = self.rng.gen_range(0..self.keys.len());
        let (to, value, data) = match workload {
            Workload::EthTransfer => {
                let to = self.recipient(10);
                (to, U256::from(self.rng.gen_range(1..1_000_000_000u64)), Vec::new())
            }
            Workload::Erc20Transfer => {
                let to = self.recipient(5);
                (token_address(), U256::ZERO, transfer_call(&to, self.rng.gen_range(1..1000)))
            }
            Workload::StorageHeavy => {
                let fresh = self.fresh_keys;
                self.fresh_keys += CHURN_FRESH;
                let span = self.world.accounts.saturating_sub(CHURN_EXISTING).max(1);
                let existing = self.rng.gen_range(0..span);
                let data = churn_call(fresh, CHURN_FRESH, existing, CHURN_EXISTING);
                (churn_address(), U256::ZERO, data)
            }
        };
        let nonce = self.nonces[sender];
        self.nonces[sender] += 1;
        let tx = UnsignedTx {
            nonce,
            gas_price: GAS_PRICE,
            gas_limit: workload.tx_gas(),
            to: Some(to),
            value,
            data,
        };
        (sender, tx)
    }

    /// The next block of `workload`, signed: as many transactions as the gas limit holds.
    pub(crate) fn block(&mut self, workload: Workload) -> Result<Vec<Vec<u8>>> {
        let count = self.gas_limit / workload.tx_gas();
        let txs: Vec<(usize, UnsignedTx)> = (0..count).map(|_| self.next_tx(workload)).collect();
        let keys = self.keys;
        txs.par_iter().map(|(sender, tx)| Ok(sign_bytes(tx, &keys[*sender], CHAIN_ID)?)).collect()
    }
}

/// The most transactions a block of `gas_limit` holds.
pub(crate) fn txs_max(gas_limit: u64) -> usize {
    (gas_limit / TRANSFER_GAS) as usize
}

/// Write `blocks` of `workload` to `path`, calling `tick` after each block.
pub(crate) fn write_blocks(
    generator: &mut Generator<'_>,
    workload: Workload,
    blocks: u64,
    path: &Path,
    tick: &dyn Fn(),
) -> Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    for _ in 0..blocks {
        let txs = generator.block(workload)?;
        out.write_all(&u32::try_from(txs.len())?.to_le_bytes())?;
        for tx in &txs {
            ensure!(tx.len() <= TX_BYTES_MAX, "a transaction of {} bytes", tx.len());
            out.write_all(&(tx.len() as u32).to_le_bytes())?;
            out.write_all(tx)?;
        }
        tick();
    }
    out.flush().with_context(|| format!("cannot write {}", path.display()))
}

/// Reads a block file one block at a time.
pub(crate) struct BlockReader {
    input: BufReader<File>,
    txs_max: usize,
}

impl BlockReader {
    /// Open the block file at `path` of blocks of at most `gas_limit` gas.
    pub(crate) fn open(path: &Path, gas_limit: u64) -> Result<BlockReader> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Ok(BlockReader { input: BufReader::new(file), txs_max: txs_max(gas_limit) })
    }

    fn u32(&mut self) -> Result<usize> {
        let mut b = [0u8; 4];
        self.input.read_exact(&mut b).context("the block file ends early")?;
        Ok(u32::from_le_bytes(b) as usize)
    }

    /// The next block's transactions, as bytes.
    pub(crate) fn next_block(&mut self) -> Result<Vec<Vec<u8>>> {
        let count = self.u32()?;
        ensure!(count <= self.txs_max, "a block of {count} transactions in the block file");
        let mut txs = Vec::with_capacity(count);
        for _ in 0..count {
            let len = self.u32()?;
            ensure!(len <= TX_BYTES_MAX, "a transaction of {len} bytes in the block file");
            let mut tx = vec![0u8; len];
            self.input.read_exact(&mut tx).context("the block file ends early")?;
            txs.push(tx);
        }
        Ok(txs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evm_bench::tx::decode;
    use evm::generate::sender_keys;

    #[test]
    fn blocks_round_trip_through_the_file_with_nonces_in_order() {
        let keys = sender_keys(1, 6);
        let world = World::new(1, 30, &keys);
        let mut generator = Generator::new(&world, &keys, 1_000_000);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blocks");
        write_blocks(&mut generator, Workload::Erc20Transfer, 3, &path, &|| {}).unwrap();
        let mut reader = BlockReader::open(&path, 1_000_000).unwrap();
        let mut nonces = std::collections::HashMap::new();
        for _ in 0..3 {
            let block = reader.next_block().unwrap();
            assert_eq!(block.len() as u64, 1_000_000 / TOKEN_TRANSFER_GAS);
            for tx in block {
                let env = decode(&tx, CHAIN_ID).unwrap();
                let next = nonces.entry(env.caller).or_insert(0u64);
                assert_eq!(env.nonce, *next, "nonces in order per sender");
                *next += 1;
                assert_eq!(env.kind.to().map(|a| a.into_array()), Some(token_address()));
            }
        }
        assert!(reader.next_block().is_err(), "three blocks only");
        // A count over the bound is refused.
        std::fs::write(&path, u32::MAX.to_le_bytes()).unwrap();
        assert!(BlockReader::open(&path, 1_000_000).unwrap().next_block().is_err());
    }
}
