//! Chain files: a genesis and the blocks that follow it, what `arbor gen-chain` writes and
//! `arbor import` reads (through [`crate::ChainReader`]); and the generator of random
//! transfer chains.
//!
//! Format: `"ARBCHAIN" ‖ version (u8 = 1) ‖ accounts (u64 BE) ‖ balance (u128 BE) ‖
//! genesis root (32)`, then per block `length (u32 BE) ‖ block` ([`Block::encode`]). The
//! genesis is [`crate::genesis`] of [`crate::funded_accounts`]`(accounts)`, each funded
//! with `balance`.

use std::io::{self, Write};

use overlay::ChangeSetError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{TransactionError, TrieId, H256};
use store::{CommitError, StateDb};

use crate::block::Block;
use crate::runtime::{
    self, account_id, funded_accounts, AccountId, ApplyError, BlockContext, Transfer, TransferKind,
    EXISTENTIAL_DEPOSIT, FEE,
};

pub(crate) const MAGIC: &[u8; 8] = b"ARBCHAIN";
pub(crate) const VERSION: u8 = 1;
/// The largest block record a reader accepts (a block of ~750k transfers).
pub const BLOCK_BYTES_MAX: u32 = 64 << 20;
/// The most genesis accounts a chain file may declare (the genesis is built in memory).
pub const GENESIS_ACCOUNTS_MAX: u64 = 10_000_000;

/// A chain file's genesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainHeader {
    /// Funded accounts (plus the default author).
    pub accounts: u64,
    /// Each one's balance.
    pub balance: u128,
    /// The genesis state root.
    pub genesis_root: H256,
}

impl ChainHeader {
    /// The genesis state's main-trie entries.
    pub fn genesis_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        runtime::genesis(&funded_accounts(self.accounts), self.balance)
    }
}

/// Why a chain file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainFileError {
    /// Reading failed.
    #[error("reading the chain file: {0}")]
    Io(#[from] io::Error),
    /// Not a chain file, or another version.
    #[error("not an Arbor chain file (no \"ARBCHAIN\" version-1 header)")]
    Header,
    /// The file ends inside the header or inside block record `index`.
    #[error("the chain file is truncated inside {}", match .block { Some(i) => format!("block record {i}"), None => "its header".to_string() })]
    Truncated {
        /// The record (0-based), or `None` for the header.
        block: Option<u64>,
    },
    /// A genesis of more accounts than [`GENESIS_ACCOUNTS_MAX`], or of none.
    #[error("the chain's genesis declares {0} accounts; 1 to {GENESIS_ACCOUNTS_MAX} are accepted")]
    Accounts(u64),
    /// A file of RLP blocks (what `geth export` writes) holds something other than a
    /// block's RLP list at record `block`.
    #[error("record {block} of the RLP block file is not an RLP list")]
    NotRlpList {
        /// The record (0-based).
        block: u64,
    },
    /// A record of a file of RLP blocks longer than [`BLOCK_BYTES_MAX`].
    #[error(
        "RLP block record {block} claims {len} bytes, more than the {BLOCK_BYTES_MAX}-byte limit"
    )]
    RlpTooLong {
        /// The record (0-based).
        block: u64,
        /// Its claimed length (its RLP header's included).
        len: u64,
    },
    /// A block record longer than [`BLOCK_BYTES_MAX`].
    #[error("block record {block} claims {len} bytes, more than the {BLOCK_BYTES_MAX}-byte limit")]
    TooLong {
        /// The record (0-based).
        block: u64,
        /// Its claimed length.
        len: u32,
    },
}

/// Write a chain file's header.
pub fn write_header(w: &mut impl Write, h: &ChainHeader) -> io::Result<()> {
    w.write_all(MAGIC)?;
    w.write_all(&[VERSION])?;
    w.write_all(&h.accounts.to_be_bytes())?;
    w.write_all(&h.balance.to_be_bytes())?;
    w.write_all(h.genesis_root.as_bytes())
}

/// Append one block record.
pub fn write_block(w: &mut impl Write, b: &Block) -> io::Result<()> {
    let bytes = b.encode();
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|l| *l <= BLOCK_BYTES_MAX)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "block too large"))?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(&bytes)
}

/// What [`generate`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainParams {
    /// Funded accounts.
    pub accounts: u64,
    /// Blocks after genesis.
    pub blocks: u64,
    /// Transfers per block.
    pub transfers: u64,
    /// Seed of the random transfers.
    pub seed: u64,
}

/// Each genesis account's balance: enough for thousands of transfers.
pub const GENESIS_BALANCE: u128 = EXISTENTIAL_DEPOSIT * 10_000;

/// Build a random chain on `db` (empty: the genesis is bulk-loaded into it), handing
/// every block to `out`. Transfers pick random senders and receivers among the accounts:
/// mostly keep-alive moves of one to two existential deposits, some that fail for lack of
/// funds, and one in fifty allow-death transfers of the sender's whole balance (its
/// account dies; later picks of it are dropped as invalid and replaced).
pub fn generate(
    db: &mut StateDb,
    params: &ChainParams,
    out: &mut dyn FnMut(&ChainHeader, Block) -> io::Result<()>,
) -> Result<ChainHeader, GenerateError> {
    let mut header = ChainHeader {
        accounts: params.accounts,
        balance: GENESIS_BALANCE,
        genesis_root: H256::default(),
    };
    let entries = header.genesis_entries().into_iter().map(|(k, v)| (TrieId::Main, k, v));
    db.bulk_load("chain genesis (gen-chain)", entries)?;
    header.genesis_root = db.head_root();
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    for number in 1..=params.blocks {
        let block = next_block(db, params, number, &mut rng)?;
        out(&header, block)?;
    }
    Ok(header)
}

/// Why [`generate`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] store::StoreError),
    /// Loading the genesis failed.
    #[error("genesis: {0}")]
    Bulk(#[from] store::BulkError),
    /// Committing a block failed.
    #[error("commit: {0}")]
    Commit(#[from] CommitError),
    /// The runtime failed on the generated state (a bug).
    #[error("runtime: {0}")]
    Runtime(#[source] ApplyError<store::StoreError>),
    /// The runtime's nested transactions did not balance (a bug).
    #[error("runtime: {0}")]
    Transaction(#[source] TransactionError),
    /// The block's changes could not be handed over (a bug, or the store failed).
    #[error("runtime: {0}")]
    ChangeSet(#[source] ChangeSetError<store::StoreError>),
    /// Writing the chain failed.
    #[error("writing: {0}")]
    Io(#[from] io::Error),
}

fn next_block(
    db: &mut StateDb,
    params: &ChainParams,
    number: u64,
    rng: &mut ChaCha8Rng,
) -> Result<Block, GenerateError> {
    let ctx = BlockContext { number, author: runtime::default_author() };
    let parent_root = db.head_root();
    let mut o = overlay::Overlay::new(&*db);
    runtime::start_block(&mut o, &ctx).map_err(GenerateError::Runtime)?;
    let mut transfers = Vec::new();
    let mut attempts = 0u64;
    while (transfers.len() as u64) < params.transfers && attempts < params.transfers * 20 {
        attempts += 1;
        let from = account_id(rng.gen_range(0..params.accounts));
        let to: AccountId = account_id(rng.gen_range(0..params.accounts));
        let Some(sender) = runtime::account(&mut o, &from).map_err(GenerateError::Runtime)? else {
            continue;
        };
        let (kind, amount) = match rng.gen_range(0..50) {
            0 => (TransferKind::AllowDeath, sender.balance.saturating_sub(FEE)),
            1 => (TransferKind::KeepAlive, sender.balance),
            _ => (TransferKind::KeepAlive, EXISTENTIAL_DEPOSIT * rng.gen_range(1..=2)),
        };
        let tx = Transfer { from, to, amount, nonce: sender.nonce, kind };
        o.start_transaction();
        match runtime::apply(&mut o, &ctx, transfers.len() as u32, &tx) {
            Ok(_) => {
                o.commit_transaction().map_err(GenerateError::Transaction)?;
                transfers.push(tx);
            }
            Err(ApplyError::Invalid(_)) => {
                o.rollback_transaction().map_err(GenerateError::Transaction)?;
            }
            Err(e) => return Err(GenerateError::Runtime(e)),
        }
    }
    runtime::finish_block(&mut o, &ctx).map_err(GenerateError::Runtime)?;
    let changes = o.into_change_set().map_err(GenerateError::ChangeSet)?;
    let info = db.commit(&changes)?;
    Ok(Block { number, parent_root, state_root: info.root, author: ctx.author, transfers })
}
