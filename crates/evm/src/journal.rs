//! [`Eip7610Journal`]: revm's journal with EIP-7610's collision rule, which revm 43 lacks.
//!
//! EIP-7610 (adopted for every fork, retroactively) makes a contract creation fail, as a
//! collision, when the target address has non-empty storage, besides a nonce or code.
//! revm checks nonce and code only, in its journal's `create_account_checkpoint`; this
//! wrapper runs the storage check at that very point and delegates everything else to
//! revm's `Journal` unchanged. The check costs nothing but at creations: [`WorldDb`]
//! remembers which accounts it served with a non-empty storage root (an account revm
//! creates at is always loaded first), so the check is a set lookup with no read that
//! could fail. Within one transaction an account's storage cannot become non-empty
//! without it getting a nonce or code (a creation that wrote storage and kept neither is
//! reverted), so the storage at the start of the transaction is what the rule sees.
//!
//! [`world_context`] builds revm's context with it over a [`WorldReader`].
//!
//! On mainnet this never triggers (no such account exists); the Ethereum state tests
//! check it (`create2collisionStorage`, `InitCollision`, `RevertInCreateInInit`, …).

use alloy_primitives::{Address, Log, B256, U256};
use revm::bytecode::Bytecode;
use revm::context::journal::Journal;
use revm::context::{BlockEnv, CfgEnv, Context, TxEnv};
use revm::context_interface::context::{SStoreResult, SelfDestructResult, StateLoad};
use revm::context_interface::journaled_state::account::JournaledAccount;
use revm::context_interface::journaled_state::{
    AccountInfoLoad, AccountLoad, JournalCheckpoint, JournalLoadError, JournalTr, TransferError,
};
use revm::primitives::hardfork::SpecId;
use revm::primitives::{AddressMap, AddressSet, HashSet, StorageKey, StorageValue};
use revm::state::{Account, EvmState};

use crate::database::{DbError, WorldDb};
use crate::reader::WorldReader;

/// revm's journal over a [`WorldDb`], with EIP-7610 (see the module docs).
#[derive(Debug)]
pub struct Eip7610Journal<R: WorldReader> {
    inner: Journal<WorldDb<R>>,
}

type DbErr<R> = DbError<<R as WorldReader>::Error>;

impl<R: WorldReader> JournalTr for Eip7610Journal<R> {
    type Database = WorldDb<R>;
    type State = EvmState;
    type JournaledAccount<'a>
        = JournaledAccount<'a, WorldDb<R>>
    where
        R: 'a;

    fn new(database: WorldDb<R>) -> Self {
        Eip7610Journal { inner: Journal::new(database) }
    }

    fn create_account_checkpoint(
        &mut self,
        caller: Address,
        address: Address,
        balance: U256,
        spec_id: SpecId,
    ) -> Result<JournalCheckpoint, TransferError> {
        // EIP-7610: storage at the target is a collision, as a nonce or code is. The caller's
        // nonce is already bumped and the target warm, as on revm's own collision path.
        if self.inner.database.loaded_with_storage(&address) {
            return Err(TransferError::CreateCollision);
        }
        self.inner.create_account_checkpoint(caller, address, balance, spec_id)
    }

    fn db_and_state(&self) -> (&Self::Database, &Self::State) {
        self.inner.db_and_state()
    }

    fn db_and_state_mut(&mut self) -> (&mut Self::Database, &mut Self::State) {
        self.inner.db_and_state_mut()
    }

    fn sload(
        &mut self,
        address: Address,
        key: StorageKey,
    ) -> Result<StateLoad<StorageValue>, DbErr<R>> {
        self.inner.sload(address, key)
    }

    fn sload_skip_cold_load(
        &mut self,
        address: Address,
        key: StorageKey,
        skip_cold_load: bool,
    ) -> Result<StateLoad<StorageValue>, JournalLoadError<DbErr<R>>> {
        self.inner.sload_skip_cold_load(address, key, skip_cold_load)
    }

    fn sstore(
        &mut self,
        address: Address,
        key: StorageKey,
        value: StorageValue,
    ) -> Result<StateLoad<SStoreResult>, DbErr<R>> {
        self.inner.sstore(address, key, value)
    }

    fn sstore_skip_cold_load(
        &mut self,
        address: Address,
        key: StorageKey,
        value: StorageValue,
        skip_cold_load: bool,
    ) -> Result<StateLoad<SStoreResult>, JournalLoadError<DbErr<R>>> {
        self.inner.sstore_skip_cold_load(address, key, value, skip_cold_load)
    }

    fn tload(&mut self, address: Address, key: StorageKey) -> StorageValue {
        self.inner.tload(address, key)
    }

    fn tstore(&mut self, address: Address, key: StorageKey, value: StorageValue) {
        self.inner.tstore(address, key, value)
    }

    fn log(&mut self, log: Log) {
        self.inner.log(log)
    }

    fn take_logs(&mut self) -> Vec<Log> {
        self.inner.take_logs()
    }

    fn logs(&self) -> &[Log] {
        self.inner.logs()
    }

    fn selfdestruct(
        &mut self,
        address: Address,
        target: Address,
        skip_cold_load: bool,
    ) -> Result<StateLoad<SelfDestructResult>, JournalLoadError<DbErr<R>>> {
        self.inner.selfdestruct(address, target, skip_cold_load)
    }

    fn warm_access_list(&mut self, access_list: AddressMap<HashSet<StorageKey>>) {
        self.inner.warm_access_list(access_list)
    }

    fn warm_coinbase_account(&mut self, address: Address) {
        self.inner.warm_coinbase_account(address)
    }

    fn warm_precompiles(&mut self, addresses: &AddressSet) {
        self.inner.warm_precompiles(addresses)
    }

    fn precompile_addresses(&self) -> &AddressSet {
        self.inner.precompile_addresses()
    }

    fn set_spec_id(&mut self, spec_id: SpecId) {
        self.inner.set_spec_id(spec_id)
    }

    fn set_eip7708_config(&mut self, disabled: bool, eip8246_delayed_clear_disabled: bool) {
        self.inner.set_eip7708_config(disabled, eip8246_delayed_clear_disabled)
    }

    fn touch_account(&mut self, address: Address) {
        self.inner.touch_account(address)
    }

    fn transfer(
        &mut self,
        from: Address,
        to: Address,
        balance: U256,
    ) -> Result<Option<TransferError>, DbErr<R>> {
        self.inner.transfer(from, to, balance)
    }

    fn transfer_loaded(
        &mut self,
        from: Address,
        to: Address,
        balance: U256,
    ) -> Option<TransferError> {
        self.inner.transfer_loaded(from, to, balance)
    }

    #[allow(deprecated, reason = "delegates revm's own (deprecated) journal entry point")]
    fn caller_accounting_journal_entry(
        &mut self,
        address: Address,
        old_balance: U256,
        bump_nonce: bool,
    ) {
        self.inner.caller_accounting_journal_entry(address, old_balance, bump_nonce)
    }

    fn balance_incr(&mut self, address: Address, balance: U256) -> Result<(), DbErr<R>> {
        self.inner.balance_incr(address, balance)
    }

    #[allow(deprecated, reason = "delegates revm's own (deprecated) journal entry point")]
    fn nonce_bump_journal_entry(&mut self, address: Address) {
        self.inner.nonce_bump_journal_entry(address)
    }

    fn load_account(&mut self, address: Address) -> Result<StateLoad<&Account>, DbErr<R>> {
        self.inner.load_account(address)
    }

    fn load_account_mut_skip_cold_load(
        &mut self,
        address: Address,
        skip_cold_load: bool,
    ) -> Result<StateLoad<Self::JournaledAccount<'_>>, JournalLoadError<DbErr<R>>> {
        self.inner.load_account_mut_skip_cold_load(address, skip_cold_load)
    }

    fn load_account_mut_optional_code(
        &mut self,
        address: Address,
        load_code: bool,
    ) -> Result<StateLoad<Self::JournaledAccount<'_>>, DbErr<R>> {
        self.inner.load_account_mut_optional_code(address, load_code)
    }

    fn load_account_with_code(
        &mut self,
        address: Address,
    ) -> Result<StateLoad<&Account>, DbErr<R>> {
        self.inner.load_account_with_code(address)
    }

    fn load_account_delegated(
        &mut self,
        address: Address,
    ) -> Result<StateLoad<AccountLoad>, DbErr<R>> {
        self.inner.load_account_delegated(address)
    }

    fn set_code_with_hash(&mut self, address: Address, code: Bytecode, hash: B256) {
        self.inner.set_code_with_hash(address, code, hash)
    }

    fn checkpoint(&mut self) -> JournalCheckpoint {
        self.inner.checkpoint()
    }

    fn checkpoint_commit(&mut self) {
        self.inner.checkpoint_commit()
    }

    fn checkpoint_revert(&mut self, checkpoint: JournalCheckpoint) {
        self.inner.checkpoint_revert(checkpoint)
    }

    fn depth(&self) -> usize {
        self.inner.depth()
    }

    fn commit_tx(&mut self) {
        self.inner.commit_tx()
    }

    fn discard_tx(&mut self) {
        self.inner.discard_tx()
    }

    fn finalize(&mut self) -> Self::State {
        self.inner.finalize()
    }

    fn load_account_info_skip_cold_load(
        &mut self,
        address: Address,
        load_code: bool,
        skip_cold_load: bool,
    ) -> Result<AccountInfoLoad<'_>, JournalLoadError<DbErr<R>>> {
        self.inner.load_account_info_skip_cold_load(address, load_code, skip_cold_load)
    }
}

/// revm's context over a [`WorldReader`]: its reads through [`WorldDb`], its journal
/// [`Eip7610Journal`]. `build_mainnet()` makes the EVM.
pub type WorldContext<R> = Context<BlockEnv, TxEnv, CfgEnv, WorldDb<R>, Eip7610Journal<R>>;

/// The context that runs transactions of `block` under `cfg` over `reader`.
pub fn world_context<R: WorldReader>(reader: R, cfg: CfgEnv, block: BlockEnv) -> WorldContext<R> {
    let spec = cfg.spec;
    WorldContext::new(WorldDb::new(reader), spec).with_block(block).with_cfg(cfg)
}
