//! The transfer runtime, modelled on Substrate's balances pallet as its block-production
//! benchmark exercises it (seed 1).
//!
//! State (all in the main trie, keys hashed so that they spread like Substrate's):
//! - account `a`: `keccak("System.Account" ‖ a)` → `nonce (u64 BE) ‖ free balance (u128 BE)`;
//! - the event of transfer `i` of block `n`: `keccak("System.Events" ‖ n (u64 BE) ‖ i (u32
//!   BE))` → `kind (u8) ‖ from ‖ to ‖ amount (u128 BE) ‖ fee (u128 BE)`, a fresh key per
//!   event, named by the transaction's position;
//! - `"System.EventCount"`, `"System.BlockWeight"`, `"System.AllExtrinsicsLen"` (`u64 BE`):
//!   the per-block bookkeeping every transaction bumps, and `"Balances.FeePot"` (`u64 BE`):
//!   the block's fees, paid to the author by the block-end hook. All four change through
//!   commutative deltas ([`StateView::add_delta`]), never read by a transfer, so that
//!   transfers of different accounts do not depend on each other under Block-STM.
//!
//! A transaction is valid when its sender exists, its nonce is the sender's and the sender
//! can pay the fee; an invalid one changes nothing and is not included. A valid one pays
//! its fee into the pot and bumps the sender's nonce, then runs the transfer in a nested
//! transaction: a transfer that fails (funds, existential deposit) is rolled back and
//! leaves only the fee, the nonce and the bookkeeping.
//!
//! The runtime runs over any [`StateView`]: the overlay (block building, verification)
//! and Block-STM's per-transaction view (import) alike.

use state::{StateView, TransactionError, H256};
use trie::keccak256;

/// An account id (32 bytes, as Substrate's `AccountId32`).
pub type AccountId = [u8; 32];

/// Fee every transaction pays to the block author.
pub const FEE: u128 = 1_000;
/// Balance below which an account may not stay (it is removed or the transfer fails).
pub const EXISTENTIAL_DEPOSIT: u128 = 10_000;
/// Weight of one transfer (Substrate's benchmarked order of magnitude, in its units).
pub const TRANSFER_WEIGHT: u64 = 140_000_000;
/// Encoded bytes of one transfer (see [`Transfer::encode`]).
pub const TRANSFER_BYTES: usize = 32 + 32 + 16 + 8 + 1;

/// Which balances call a transfer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferKind {
    /// Refuses to take the sender below the existential deposit.
    KeepAlive,
    /// Removes the sender's account when it drops below the existential deposit.
    AllowDeath,
}

/// One transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// Sender.
    pub from: AccountId,
    /// Receiver.
    pub to: AccountId,
    /// Amount moved.
    pub amount: u128,
    /// The sender's nonce this transaction uses.
    pub nonce: u64,
    /// Keep-alive or allow-death.
    pub kind: TransferKind,
}

/// A transaction's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The transfer happened.
    Transferred,
    /// The fee was paid but the transfer was refused and rolled back.
    Failed(FailReason),
}

/// Why a valid transaction's transfer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// The sender's balance after the fee is below the amount.
    InsufficientBalance,
    /// A keep-alive transfer would take the sender below the existential deposit.
    KeepAlive,
    /// The receiver does not exist and the amount is below the existential deposit.
    ReceiverBelowDeposit,
}

/// Why a transaction is not valid (it changes nothing and is not included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidTransaction {
    /// The sender has no account.
    #[error("the sender has no account")]
    UnknownSender,
    /// The nonce is not the sender's next one.
    #[error("nonce {got}, the sender's next nonce is {expected}")]
    Nonce {
        /// The account's nonce.
        expected: u64,
        /// The transaction's.
        got: u64,
    },
    /// The sender cannot pay the fee.
    #[error("the sender cannot pay the fee")]
    CannotPayFee,
}

/// A failure applying a transaction.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError<E: std::error::Error + 'static> {
    /// The transaction is not valid.
    #[error(transparent)]
    Invalid(#[from] InvalidTransaction),
    /// The state below the overlay failed.
    #[error("state read failed: {0}")]
    State(#[source] E),
    /// A stored value does not decode.
    #[error("corrupt state: {0}")]
    Corrupt(#[from] CorruptState),
    /// The runtime's nested transactions did not balance (a bug in the runtime, not the
    /// transaction's fault or the state's).
    #[error("the runtime misused the overlay's nested transactions: {0}")]
    Transaction(#[from] TransactionError),
}

/// One of the runtime's counters (`u64 BE`, changed through deltas).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Counter {
    /// [`EVENT_COUNT_KEY`]: events so far in the block.
    EventCount,
    /// [`BLOCK_WEIGHT_KEY`]: the block's accumulated weight.
    BlockWeight,
    /// [`BLOCK_LENGTH_KEY`]: the block's accumulated transaction bytes.
    BlockLength,
    /// [`FEE_POT_KEY`]: the block's fees not yet paid to the author.
    FeePot,
}

impl Counter {
    /// Every counter.
    pub const ALL: [Counter; 4] =
        [Counter::EventCount, Counter::BlockWeight, Counter::BlockLength, Counter::FeePot];

    /// Its key in the main trie.
    pub const fn key(self) -> &'static [u8] {
        match self {
            Counter::EventCount => EVENT_COUNT_KEY,
            Counter::BlockWeight => BLOCK_WEIGHT_KEY,
            Counter::BlockLength => BLOCK_LENGTH_KEY,
            Counter::FeePot => FEE_POT_KEY,
        }
    }

    /// Bytes of its big-endian value.
    pub const fn width(self) -> usize {
        8
    }
}

impl std::fmt::Display for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys are ASCII constants.
        f.write_str(std::str::from_utf8(self.key()).unwrap_or("bookkeeping counter"))
    }
}

/// A stored value of the runtime's state that does not decode: the parent state is not
/// one this runtime wrote (or was altered).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptState {
    /// An account record of the wrong length.
    #[error(
        "account {key} holds {len} bytes; an account record has 24 (nonce u64 BE, balance u128 BE)"
    )]
    Account {
        /// The account's trie key.
        key: H256,
        /// The stored value's length.
        len: usize,
    },
    /// A bookkeeping counter of the wrong length.
    #[error("{counter} holds {len} bytes, expected {}", .counter.width())]
    Counter {
        /// Which counter.
        counter: Counter,
        /// The stored value's length.
        len: usize,
    },
}

/// An account's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Account {
    /// Transactions sent.
    pub nonce: u64,
    /// Free balance.
    pub balance: u128,
}

impl Account {
    /// `nonce (u64 BE) ‖ balance (u128 BE)`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        v.extend_from_slice(&self.nonce.to_be_bytes());
        v.extend_from_slice(&self.balance.to_be_bytes());
        v
    }

    /// Decode [`Account::encode`]'s output.
    pub fn decode(bytes: &[u8]) -> Option<Account> {
        let nonce = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
        let balance = u128::from_be_bytes(bytes.get(8..24)?.try_into().ok()?);
        (bytes.len() == 24).then_some(Account { nonce, balance })
    }
}

/// The trie key of account `who`.
pub fn account_key(who: &AccountId) -> H256 {
    let mut input = b"System.Account".to_vec();
    input.extend_from_slice(who);
    keccak256(&input)
}

/// The trie key of the event of transaction `index` of block `number` (derived from the
/// transaction's position, never from a running count, so that transactions do not read
/// each other's bookkeeping).
pub fn event_key(number: u64, index: u32) -> H256 {
    let mut input = b"System.Events".to_vec();
    input.extend_from_slice(&number.to_be_bytes());
    input.extend_from_slice(&index.to_be_bytes());
    keccak256(&input)
}

/// Key of the fee pot: fees of the block so far (`u64 BE`), paid to the author at the end.
pub const FEE_POT_KEY: &[u8] = b"Balances.FeePot";
/// Key of the block's event count.
pub const EVENT_COUNT_KEY: &[u8] = b"System.EventCount";
/// Key of the block's accumulated weight.
pub const BLOCK_WEIGHT_KEY: &[u8] = b"System.BlockWeight";
/// Key of the block's accumulated transaction bytes.
pub const BLOCK_LENGTH_KEY: &[u8] = b"System.AllExtrinsicsLen";

impl Transfer {
    /// `from ‖ to ‖ amount (u128 BE) ‖ nonce (u64 BE) ‖ kind (0 keep-alive, 1 allow-death)`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.from);
        out.extend_from_slice(&self.to);
        out.extend_from_slice(&self.amount.to_be_bytes());
        out.extend_from_slice(&self.nonce.to_be_bytes());
        out.push(match self.kind {
            TransferKind::KeepAlive => 0,
            TransferKind::AllowDeath => 1,
        });
    }

    /// Decode one transfer of exactly [`TRANSFER_BYTES`] bytes.
    pub fn decode(b: &[u8]) -> Option<Transfer> {
        if b.len() != TRANSFER_BYTES {
            return None;
        }
        let kind = match b[88] {
            0 => TransferKind::KeepAlive,
            1 => TransferKind::AllowDeath,
            _ => return None,
        };
        Some(Transfer {
            from: b[..32].try_into().ok()?,
            to: b[32..64].try_into().ok()?,
            amount: u128::from_be_bytes(b[64..80].try_into().ok()?),
            nonce: u64::from_be_bytes(b[80..88].try_into().ok()?),
            kind,
        })
    }
}

/// The block a transaction runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockContext {
    /// Block number (names the event keys).
    pub number: u64,
    /// Receives the fees.
    pub author: AccountId,
}

/// The account of `who`, if it exists.
pub fn account<V: StateView + ?Sized>(
    o: &mut V,
    who: &AccountId,
) -> Result<Option<Account>, ApplyError<V::Error>> {
    account_at(o, account_key(who))
}

/// The account under trie key `key` (an [`account_key`]), if it exists.
fn account_at<V: StateView + ?Sized>(
    o: &mut V,
    key: H256,
) -> Result<Option<Account>, ApplyError<V::Error>> {
    match o.get(key.as_bytes()).map_err(ApplyError::State)? {
        None => Ok(None),
        Some(v) => Account::decode(&v)
            .map(Some)
            .ok_or_else(|| CorruptState::Account { key, len: v.len() }.into()),
    }
}

fn put_account<V: StateView + ?Sized>(o: &mut V, key: H256, a: Option<Account>) {
    match a {
        Some(a) => o.set(key.as_bytes(), a.encode()),
        None => o.remove(key.as_bytes()),
    }
}

/// Apply transaction `index` of the block (its position among the block's transfers,
/// which names its event). An invalid transaction changes nothing.
pub fn apply<V: StateView + ?Sized>(
    o: &mut V,
    ctx: &BlockContext,
    index: u32,
    tx: &Transfer,
) -> Result<Outcome, ApplyError<V::Error>> {
    // The two account keys, hashed once per transaction.
    let keys = (account_key(&tx.from), account_key(&tx.to));
    let mut sender = account_at(o, keys.0)?.ok_or(InvalidTransaction::UnknownSender)?;
    if sender.nonce != tx.nonce {
        return Err(InvalidTransaction::Nonce { expected: sender.nonce, got: tx.nonce }.into());
    }
    if sender.balance < FEE {
        return Err(InvalidTransaction::CannotPayFee.into());
    }
    // Fee and nonce: kept whatever the transfer does. The fee goes to the block's pot
    // (a commutative counter), paid to the author by `finish_block`.
    sender.balance -= FEE;
    sender.nonce += 1;
    put_account(o, keys.0, Some(sender));
    delta(o, FEE_POT_KEY, FEE as i64)?;

    o.start();
    let outcome = match transfer(o, tx, keys) {
        Ok(()) => {
            o.commit()?;
            Outcome::Transferred
        }
        Err(Step::Fail(reason)) => {
            o.rollback()?;
            Outcome::Failed(reason)
        }
        Err(Step::Error(e)) => {
            o.rollback()?;
            return Err(e);
        }
    };
    bookkeeping(o, ctx, index, tx, outcome)?;
    Ok(outcome)
}

fn delta<V: StateView + ?Sized>(
    o: &mut V,
    key: &[u8],
    amount: i64,
) -> Result<(), ApplyError<V::Error>> {
    o.add_delta(key, amount).map_err(ApplyError::State)
}

enum Step<E: std::error::Error + 'static> {
    Fail(FailReason),
    Error(ApplyError<E>),
}

impl<E: std::error::Error + 'static> From<ApplyError<E>> for Step<E> {
    fn from(e: ApplyError<E>) -> Self {
        Step::Error(e)
    }
}

fn transfer<V: StateView + ?Sized>(
    o: &mut V,
    tx: &Transfer,
    (from, to): (H256, H256),
) -> Result<(), Step<V::Error>> {
    let mut sender = account_at(o, from)?.unwrap_or_default();
    if sender.balance < tx.amount {
        return Err(Step::Fail(FailReason::InsufficientBalance));
    }
    let left = sender.balance - tx.amount;
    let reaped = left < EXISTENTIAL_DEPOSIT;
    if reaped && tx.kind == TransferKind::KeepAlive {
        return Err(Step::Fail(FailReason::KeepAlive));
    }
    sender.balance = left;
    // Allow-death below the deposit: the account goes, its dust is burned.
    put_account(o, from, (!reaped).then_some(sender));
    if tx.from == tx.to {
        if !reaped {
            let mut s = account_at(o, from)?.unwrap_or_default();
            s.balance += tx.amount;
            put_account(o, from, Some(s));
        }
        return Ok(());
    }
    let receiver = account_at(o, to)?;
    if receiver.is_none() && tx.amount < EXISTENTIAL_DEPOSIT {
        return Err(Step::Fail(FailReason::ReceiverBelowDeposit));
    }
    let mut r = receiver.unwrap_or_default();
    r.balance = r.balance.saturating_add(tx.amount);
    put_account(o, to, Some(r));
    Ok(())
}

/// The event under its own key, and the block's counters bumped through deltas: nothing
/// here reads what another transaction wrote.
fn bookkeeping<V: StateView + ?Sized>(
    o: &mut V,
    ctx: &BlockContext,
    index: u32,
    tx: &Transfer,
    outcome: Outcome,
) -> Result<(), ApplyError<V::Error>> {
    let mut event = Vec::with_capacity(1 + 64 + 32);
    event.push(match outcome {
        Outcome::Transferred => 0,
        Outcome::Failed(FailReason::InsufficientBalance) => 1,
        Outcome::Failed(FailReason::KeepAlive) => 2,
        Outcome::Failed(FailReason::ReceiverBelowDeposit) => 3,
    });
    event.extend_from_slice(&tx.from);
    event.extend_from_slice(&tx.to);
    event.extend_from_slice(&tx.amount.to_be_bytes());
    event.extend_from_slice(&FEE.to_be_bytes());
    o.set(event_key(ctx.number, index).as_bytes(), event);
    delta(o, EVENT_COUNT_KEY, 1)?;
    delta(o, BLOCK_WEIGHT_KEY, TRANSFER_WEIGHT as i64)?;
    delta(o, BLOCK_LENGTH_KEY, TRANSFER_BYTES as i64)
}

/// Block-start hook: clear the previous block's per-block bookkeeping (Substrate's
/// `on_initialize`; its events stay under their own keys) and read the author's account
/// and the fee pot, which [`finish_block`] updates in place: the block's witness holds
/// their paths from the start, so the end of the block adds nothing to it.
pub fn start_block<V: StateView + ?Sized>(
    o: &mut V,
    ctx: &BlockContext,
) -> Result<(), ApplyError<V::Error>> {
    for counter in [Counter::EventCount, Counter::BlockWeight, Counter::BlockLength] {
        o.remove(counter.key());
    }
    account(o, &ctx.author)?;
    fee_pot(o)?;
    Ok(())
}

fn fee_pot<V: StateView + ?Sized>(o: &mut V) -> Result<u64, ApplyError<V::Error>> {
    let counter = Counter::FeePot;
    match o.get(counter.key()).map_err(ApplyError::State)? {
        None => Ok(0),
        Some(v) => <[u8; 8]>::try_from(v.as_slice())
            .map(u64::from_be_bytes)
            .map_err(|_| CorruptState::Counter { counter, len: v.len() }.into()),
    }
}

/// Block-end hook: pay the block's fees (the pot) to the author and empty the pot (to
/// zero, not removed, so the trie's shape does not change at the end of the block).
pub fn finish_block<V: StateView + ?Sized>(
    o: &mut V,
    ctx: &BlockContext,
) -> Result<(), ApplyError<V::Error>> {
    let fees = fee_pot(o)?;
    if fees > 0 {
        let key = account_key(&ctx.author);
        let mut author = account_at(o, key)?.unwrap_or_default();
        author.balance = author.balance.saturating_add(u128::from(fees));
        put_account(o, key, Some(author));
        o.set(FEE_POT_KEY, 0u64.to_be_bytes().to_vec());
    }
    Ok(())
}

/// The genesis entries of `accounts` funded with `balance` each, and the empty fee pot
/// (main-trie keys and values).
pub fn genesis(accounts: &[AccountId], balance: u128) -> Vec<(Vec<u8>, Vec<u8>)> {
    accounts
        .iter()
        .map(|a| (account_key(a).0.to_vec(), Account { nonce: 0, balance }.encode()))
        .chain([(FEE_POT_KEY.to_vec(), 0u64.to_be_bytes().to_vec())])
        .collect()
}

/// Deterministic account id `i` (for tests, the demo and the benchmark).
pub fn account_id(i: u64) -> AccountId {
    let mut input = b"arbor/account".to_vec();
    input.extend_from_slice(&i.to_be_bytes());
    keccak256(&input).0
}

/// The block author the tools, the demo and the benchmarks use.
pub fn default_author() -> AccountId {
    account_id(u64::MAX)
}

/// Accounts `0..n` plus [`default_author`]: the ones a tool's genesis funds.
pub fn funded_accounts(n: u64) -> Vec<AccountId> {
    (0..n).map(account_id).chain([default_author()]).collect()
}

/// `count` transfers numbered from `first` among `accounts` funded accounts: transfer `i`
/// goes from account `i mod half` to account `half + i mod half` (`half = accounts / 2`)
/// with nonce `i / half`. Keep-alive moves the existential deposit; allow-death moves the
/// sender's whole `balance` after the fee, so the sender's account is deleted. Numbering
/// stops at `u64::MAX` (fewer than `count` transfers then); the result holds `count`
/// transfers of 89 bytes each, so the caller bounds `count`.
pub fn paired_transfers(
    accounts: u64,
    first: u64,
    count: u64,
    kind: TransferKind,
    balance: u128,
) -> Vec<Transfer> {
    let half = (accounts / 2).max(1);
    (0..count)
        .map_while(|j| first.checked_add(j))
        .map(|i| Transfer {
            from: account_id(i % half),
            to: account_id(half + i % half),
            amount: match kind {
                TransferKind::KeepAlive => EXISTENTIAL_DEPOSIT,
                TransferKind::AllowDeath => balance.saturating_sub(FEE),
            },
            nonce: i / half,
            kind,
        })
        .collect()
}
