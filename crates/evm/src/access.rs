//! What a transaction reads and writes, in the terms a proof of it needs: the input
//! `PovSession` will take to report an EVM transaction's exact proof size and root.
//!
//! [`RecordingReader`] wraps any [`WorldReader`] and records each distinct account, slot,
//! code hash and block number read through it; [`PovNeeds`] joins those reads with the
//! transaction's [`EthChanges`]. Each account read or written is a path in the account
//! trie, each slot a path in its account's storage trie (a witness needs both, and the
//! storage roots of written accounts), a storage clear needs the whole storage trie gone
//! (its nodes are not read, but the account leaf is), and code is proven by its hash in
//! the account leaf. Recording costs one set insertion per read.

use std::cell::RefCell;
use std::collections::BTreeSet;

use alloy_primitives::U256;
use eth::{Account, AccountChange, Address, EthChanges};
use state::H256;

use crate::reader::WorldReader;

/// The distinct keys read through a [`RecordingReader`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// Accounts read (present or not).
    pub accounts: BTreeSet<Address>,
    /// Slots read, by account.
    pub slots: BTreeSet<(Address, H256)>,
    /// Code read, by hash.
    pub code: BTreeSet<H256>,
    /// Block hashes read, by number.
    pub block_hashes: BTreeSet<u64>,
}

/// A [`WorldReader`] that records what is read through it.
#[derive(Debug)]
pub struct RecordingReader<R> {
    inner: R,
    reads: RefCell<Reads>,
}

impl<R: WorldReader> RecordingReader<R> {
    /// Record the reads made through `inner`.
    pub fn new(inner: R) -> Self {
        RecordingReader { inner, reads: RefCell::new(Reads::default()) }
    }

    /// The reads so far, leaving the record empty.
    pub fn take_reads(&self) -> Reads {
        std::mem::take(&mut *self.reads.borrow_mut())
    }
}

impl<R: WorldReader> WorldReader for RecordingReader<R> {
    type Error = R::Error;

    fn account(&self, address: &Address) -> Result<Option<Account>, Self::Error> {
        self.reads.borrow_mut().accounts.insert(*address);
        self.inner.account(address)
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, Self::Error> {
        self.reads.borrow_mut().slots.insert((*address, *slot));
        self.inner.storage(address, slot)
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, Self::Error> {
        self.reads.borrow_mut().code.insert(*code_hash);
        self.inner.code(code_hash)
    }

    fn block_hash(&self, number: u64) -> Result<Option<H256>, Self::Error> {
        self.reads.borrow_mut().block_hashes.insert(number);
        self.inner.block_hash(number)
    }
}

/// One transaction's reads and writes, counted the way a witness of it is built: the
/// input `PovSession` needs for an EVM transaction (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PovNeeds {
    /// Account-trie paths read (distinct accounts).
    pub accounts_read: usize,
    /// Storage-trie paths read (distinct slots over all accounts).
    pub slots_read: usize,
    /// Storage tries read from (distinct accounts with a slot read).
    pub storage_tries_read: usize,
    /// Code read by hash (not part of the trie witness, but of a block's).
    pub code_read: usize,
    /// Account leaves written.
    pub accounts_written: usize,
    /// Account leaves removed.
    pub accounts_removed: usize,
    /// Storage slots written or deleted.
    pub slots_written: usize,
    /// Storage tries cleared whole (self-destruct, creation over storage).
    pub storage_clears: usize,
    /// Storage tries whose root changes (accounts with slot writes or a clear).
    pub storage_tries_written: usize,
    /// New code entries.
    pub code_written: usize,
}

impl PovNeeds {
    /// The needs of a transaction that made `reads` and `changes`.
    pub fn new(reads: &Reads, changes: &EthChanges) -> Self {
        let counts = changes.counts();
        let storage_tries_read: BTreeSet<&Address> = reads.slots.iter().map(|(a, _)| a).collect();
        let storage_tries_written = changes
            .accounts
            .values()
            .filter(|c| match c {
                AccountChange::Write(w) => w.storage_cleared || !w.storage.is_empty(),
                _ => false,
            })
            .count();
        PovNeeds {
            accounts_read: reads.accounts.len(),
            slots_read: reads.slots.len(),
            storage_tries_read: storage_tries_read.len(),
            code_read: reads.code.len(),
            accounts_written: counts.accounts_written,
            accounts_removed: counts.accounts_removed,
            slots_written: counts.slots_written,
            storage_clears: counts.storage_clears,
            storage_tries_written,
            code_written: counts.code,
        }
    }
}
