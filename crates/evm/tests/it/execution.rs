//! Execution rules checked directly on small worlds: EIP-7610's collision (revm alone
//! creates over storage; Arbor's journal refuses it), a created account's storage cleared,
//! EIP-161's removal of touched empty accounts against Frontier's creation of them, and
//! the database adapter's typed errors for missing code and block hashes.

use std::collections::BTreeMap;
use std::convert::Infallible;

use alloy_primitives::{Address as RevmAddress, Bytes, TxKind, U256};
use eth::{Account, AccountChange, Address, EthChanges, Genesis, GenesisAccount, MemoryWorld};
use evm::{evm_changes, world_context, DbError, WorldDb, WorldReader};
use revm::context::{BlockEnv, CfgEnv, TxEnv};
use revm::context_interface::result::{EVMError, ExecutionResult, HaltReason};
use revm::primitives::hardfork::SpecId;
use revm::{Context, ExecuteEvm, MainBuilder, MainContext};
use state::H256;
use trie::{keccak256, EMPTY_CODE_HASH, EMPTY_ROOT};

const SENDER: Address = [0xaa; 20];
const GAS: u64 = 200_000;

fn world(accounts: &[(Address, GenesisAccount)]) -> MemoryWorld {
    let mut alloc: BTreeMap<Address, GenesisAccount> = accounts.iter().cloned().collect();
    alloc.insert(
        SENDER,
        GenesisAccount { balance: U256::from(10u64.pow(18)), ..Default::default() },
    );
    MemoryWorld::from_genesis(&Genesis { alloc }).unwrap()
}

fn cfg(spec: SpecId) -> CfgEnv {
    let mut cfg = CfgEnv::new_with_spec(spec);
    cfg.chain_id = 1;
    cfg
}

fn block() -> BlockEnv {
    BlockEnv {
        number: U256::from(1u8),
        gas_limit: 30_000_000,
        prevrandao: Some(Default::default()),
        ..BlockEnv::default()
    }
}

fn tx(kind: TxKind, data: &[u8]) -> TxEnv {
    TxEnv {
        caller: RevmAddress::from(SENDER),
        kind,
        data: Bytes::copy_from_slice(data),
        gas_limit: GAS,
        gas_price: 10,
        chain_id: Some(1),
        ..TxEnv::default()
    }
}

/// Run `tx` over `world` at `spec` with Arbor's context; commit its changes.
fn run(
    world: &mut MemoryWorld,
    spec: SpecId,
    tx: TxEnv,
) -> (ExecutionResult<HaltReason>, EthChanges) {
    let mut evm = world_context(&*world, cfg(spec), block()).build_mainnet();
    let out = evm.transact(tx).unwrap();
    drop(evm);
    let changes = evm_changes(&out.state).unwrap();
    world.apply(&changes).unwrap();
    (out.result, changes)
}

/// Init code: SSTORE(2, 1), then return no code.
const INIT: [u8; 10] = [0x60, 0x01, 0x60, 0x02, 0x55, 0x60, 0x00, 0x60, 0x00, 0xf3];

fn with_storage() -> GenesisAccount {
    let slot = H256(U256::from(1u8).to_be_bytes::<32>());
    GenesisAccount {
        storage: [(slot, U256::from(7u8))].into_iter().collect(),
        ..Default::default()
    }
}

#[test]
fn creating_over_storage_collides_under_eip_7610() {
    let target = RevmAddress::from(SENDER).create(0).into_array();
    let mut w = world(&[(target, with_storage())]);
    let (result, changes) = run(&mut w, SpecId::CANCUN, tx(TxKind::Create, &INIT));
    assert!(
        matches!(result, ExecutionResult::Halt { reason: HaltReason::CreateCollision, .. }),
        "{result:?}"
    );
    assert_eq!(result.tx_gas_used(), GAS, "a collision consumes all the gas");
    assert!(!changes.accounts.contains_key(&target), "the target is untouched");
    assert_eq!(w.account(&SENDER).unwrap().nonce, 1);
    assert_eq!(w.storage(&target, &H256(U256::from(1u8).to_be_bytes::<32>())), U256::from(7u8));
}

#[test]
fn without_eip_7610_revm_creates_over_storage_and_the_commit_clears_it() {
    let target = RevmAddress::from(SENDER).create(0).into_array();
    let mut w = world(&[(target, with_storage())]);
    // revm's own journal: no storage check.
    let mut evm = Context::mainnet()
        .with_db(WorldDb::new(&w))
        .with_block(block())
        .with_cfg(cfg(SpecId::CANCUN))
        .build_mainnet();
    let out = evm.transact(tx(TxKind::Create, &INIT)).unwrap();
    drop(evm);
    assert!(out.result.is_success(), "{:?}", out.result);
    let changes = evm_changes(&out.state).unwrap();
    let AccountChange::Write(write) = &changes.accounts[&target] else { panic!("{changes:?}") };
    assert!(write.storage_cleared, "a created account starts with empty storage");
    w.apply(&changes).unwrap();
    let slot = |i: u8| H256(U256::from(i).to_be_bytes::<32>());
    assert_eq!(
        (w.storage(&target, &slot(1)), w.storage(&target, &slot(2))),
        (U256::ZERO, U256::from(1u8))
    );
    let root = w.account(&target).unwrap().storage_root;
    assert_ne!(root, EMPTY_ROOT);
}

#[test]
fn a_touched_empty_account_exists_before_spurious_dragon_and_not_after() {
    let empty: Address = [0x42; 20];
    for (spec, exists) in [
        (SpecId::FRONTIER, true),
        (SpecId::HOMESTEAD, true),
        (SpecId::SPURIOUS_DRAGON, false),
        (SpecId::CANCUN, false),
    ] {
        let mut w = world(&[]);
        let (result, _) = run(&mut w, spec, tx(TxKind::Call(RevmAddress::from(empty)), &[]));
        assert!(result.is_success(), "{spec:?}: {result:?}");
        let account = w.account(&empty).copied();
        assert_eq!(account.is_some(), exists, "{spec:?}: {account:?}");
        if let Some(a) = account {
            assert_eq!(a, Account::default(), "an empty account");
        }
    }
}

/// A reader with an account whose code it does not have, and no block hashes.
struct Holes;

const HOLLOW: Address = [0x33; 20];

impl WorldReader for Holes {
    type Error = Infallible;

    fn account(&self, address: &Address) -> Result<Option<Account>, Infallible> {
        Ok(match *address {
            SENDER => Some(Account { balance: U256::from(10u64.pow(18)), ..Account::default() }),
            HOLLOW => {
                Some(Account { nonce: 1, code_hash: keccak256(b"lost code"), ..Account::default() })
            }
            _ => None,
        })
    }

    fn storage(&self, _: &Address, _: &H256) -> Result<U256, Infallible> {
        Ok(U256::ZERO)
    }

    fn code(&self, _: &H256) -> Result<Option<Vec<u8>>, Infallible> {
        Ok(None)
    }

    fn block_hash(&self, _: u64) -> Result<Option<H256>, Infallible> {
        Ok(None)
    }
}

#[test]
fn missing_code_and_block_hashes_are_typed_errors() {
    let mut evm = world_context(Holes, cfg(SpecId::CANCUN), block()).build_mainnet();
    let e = evm.transact(tx(TxKind::Call(RevmAddress::from(HOLLOW)), &[])).unwrap_err();
    assert!(
        matches!(e, EVMError::Database(DbError::MissingCode(h)) if h == keccak256(b"lost code")),
        "{e:?}"
    );

    // PUSH1 0, BLOCKHASH, POP, STOP: the hash of block 0, which an in-memory world lacks.
    let caller: Address = [0x44; 20];
    let code = vec![0x60, 0x00, 0x40, 0x50, 0x00];
    let w = world(&[(caller, GenesisAccount { code, nonce: 1, ..Default::default() })]);
    let mut evm = world_context(&w, cfg(SpecId::CANCUN), block()).build_mainnet();
    let e = evm.transact(tx(TxKind::Call(RevmAddress::from(caller)), &[])).unwrap_err();
    assert!(matches!(e, EVMError::Database(DbError::MissingBlockHash(0))), "{e:?}");
    assert_ne!(w.account(&caller).unwrap().code_hash, EMPTY_CODE_HASH);
}

/// The address of a secp256k1 key (the last 20 bytes of keccak of the public key).
fn address_of(key: &k256::ecdsa::SigningKey) -> Address {
    let point = key.verifying_key().to_encoded_point(false);
    let mut a = [0u8; 20];
    a.copy_from_slice(&keccak256(&point.as_bytes()[1..]).0[12..]);
    a
}

#[test]
fn an_eip7702_authorization_in_a_fixture_delegates_the_authority() {
    use revm::context_interface::transaction::Authorization;
    let sender_key = k256::ecdsa::SigningKey::from_slice(&[0x45; 32]).unwrap();
    let authority_key = k256::ecdsa::SigningKey::from_slice(&[0x46; 32]).unwrap();
    let (sender, authority) = (address_of(&sender_key), address_of(&authority_key));
    let target: Address = [0x77; 20];
    let auth =
        Authorization { chain_id: U256::from(1u8), address: RevmAddress::from(target), nonce: 0 };
    let (sig, recid) =
        authority_key.sign_prehash_recoverable(auth.signature_hash().as_slice()).unwrap();
    let (r, s) =
        (U256::from_be_slice(&sig.r().to_bytes()), U256::from_be_slice(&sig.s().to_bytes()));
    let transaction = serde_json::json!({
        "data": ["0x"], "gasLimit": ["0x0186a0"], "value": ["0x00"], "nonce": "0x00",
        "to": format!("0x{}", hex::encode(authority)),
        "secretKey": format!("0x{}", hex::encode(sender_key.to_bytes())),
        "maxFeePerGas": "0x0a", "maxPriorityFeePerGas": "0x01",
        "authorizationList": [{
            "chainId": "0x01", "address": format!("0x{}", hex::encode(target)), "nonce": "0x00",
            "v": format!("0x{:x}", recid.to_byte()), "r": format!("{r:#x}"), "s": format!("{s:#x}"),
        }],
    });
    let fixture = serde_json::json!({ "t": {
        "env": { "currentCoinbase": format!("0x{}", "00".repeat(20)), "currentDifficulty": "0x0",
                 "currentGasLimit": "0x1000000", "currentNumber": "0x1", "currentTimestamp": "0x3e8",
                 "currentBaseFee": "0x7", "currentRandom": "0x0", "currentExcessBlobGas": "0x0" },
        "pre": { format!("0x{}", hex::encode(sender)): { "balance": "0x0de0b6b3a7640000" } },
        "transaction": transaction,
        "post": { "Prague": [{ "hash": format!("0x{}", "00".repeat(32)), "logs": format!("0x{}", "00".repeat(32)),
                               "indexes": { "data": 0, "gas": 0, "value": 0 } }] },
    }});
    let file = evm::statetest::parse_file(&fixture.to_string()).unwrap();
    let test = &file.tests[0].1;
    let indexes = test.post[0].1[0].indexes;
    let tx = evm::statetest::build_tx(&test.transaction, indexes, 1).unwrap();
    assert_eq!((tx.tx_type, tx.authorization_list.len()), (4, 1));
    let mut w = MemoryWorld::from_genesis(&test.pre).unwrap();
    let mut evm = world_context(&w, cfg(SpecId::PRAGUE), block()).build_mainnet();
    let out = evm.transact(tx).unwrap();
    drop(evm);
    assert!(out.result.is_success(), "{:?}", out.result);
    w.apply(&evm_changes(&out.state).unwrap()).unwrap();
    let delegated = w.account(&authority).copied().unwrap();
    let code = [&[0xef, 0x01, 0x00][..], &target].concat();
    assert_eq!((delegated.nonce, delegated.code_hash), (1, keccak256(&code)));
    assert_eq!(
        w.code(&delegated.code_hash),
        Some(code.as_slice()),
        "the delegation's code is stored"
    );
    assert_eq!(w.account(&sender).unwrap().nonce, 1);
}
