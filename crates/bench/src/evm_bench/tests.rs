//! The engines of `arbor bench evm` in one process on a tiny state: the same blocks of
//! every workload give the same gas in each; the in-memory and plain states hold exactly
//! the accounts, slots and code of an `eth::MemoryWorld` fed the blocks' changes, and every
//! engine ends at that world's root (Arbor's head root and `verify` too); and the
//! contracts' creation code deploys to exactly the recorded runtime code.

use alloy_primitives::{Address as RevmAddress, Bytes, TxKind, U256};
use eth::{EthChanges, MemoryWorld};
use evm::generate::{sender_keys, World};
use revm::context::TxEnv;
use revm::database::{CacheDB, EmptyDB};
use revm::state::AccountInfo;
use revm::{Context, ExecuteEvm, MainBuilder, MainContext};
use store::StoreConfig;

use crate::evm_bench::blocks::{write_blocks, BlockReader, Generator, Workload};
use crate::evm_bench::contracts::Contracts;
use crate::evm_bench::engines::{ArborEngine, EvmEngine, MemoryEngine, PlainEngine};
use crate::evm_bench::execute::{execute, recover};
use crate::evm_bench::genesis::bench_genesis;

const GAS_LIMIT: u64 = 1_000_000;

#[test]
fn three_engines_end_at_one_root() {
    let (accounts, blocks) = (40, 2);
    let keys = sender_keys(7, accounts);
    let world = World::new(7, accounts, &keys);
    let genesis = bench_genesis(&world, &Contracts::load().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut generator = Generator::new(&world, &keys, GAS_LIMIT);
    let mut files = Vec::new();
    for w in Workload::ALL {
        let path = dir.path().join(w.name());
        write_blocks(&mut generator, w, blocks, &path, &|| {}).unwrap();
        files.push(path);
    }
    let config = StoreConfig::default();
    let mut arbor =
        ArborEngine::load(&dir.path().join("arbor"), &config, &genesis, &|_| {}).unwrap();
    let mut memory = MemoryEngine::load(&genesis, &|_| {}).unwrap();
    let mut plain =
        PlainEngine::load(&dir.path().join("plain"), &config, &genesis, &|_| {}).unwrap();
    let mut world_state = MemoryWorld::from_genesis(&genesis).unwrap();
    let mut number = 0;
    for path in &files {
        let mut reader = BlockReader::open(path, GAS_LIMIT).unwrap();
        for _ in 0..blocks {
            number += 1;
            let txs = reader.next_block().unwrap();
            let engines: [&mut dyn EvmEngine; 3] = [&mut arbor, &mut memory, &mut plain];
            let records: Vec<_> =
                engines.into_iter().map(|e| e.block(number, GAS_LIMIT, &txs).unwrap()).collect();
            assert!(records[0].gas > GAS_LIMIT * 3 / 5, "block {number} is mostly full");
            assert!(records.iter().all(|r| (r.gas, r.txs) == (records[0].gas, records[0].txs)));
            // The changes once more, into the eth crate's in-memory world.
            let mut changes = EthChanges::new();
            let db = CacheDB::new(evm::WorldDb::new(&world_state));
            execute(db, number, GAS_LIMIT, recover(&txs).unwrap(), Some(&mut changes)).unwrap();
            world_state.apply(&changes).unwrap();
        }
    }
    // Every account, balance, nonce, slot and code of the two baselines is the world's.
    let want = world_state.to_genesis();
    assert!(want.alloc.len() > genesis.alloc.len(), "transfers created accounts");
    assert_ne!(want, genesis);
    assert_eq!(memory.state().unwrap(), want, "revm's in-memory state");
    assert_eq!(plain.state().unwrap(), want, "the plain state");
    let engines: Vec<Box<dyn EvmEngine>> = vec![Box::new(arbor), Box::new(memory), Box::new(plain)];
    let states: Vec<_> = engines
        .into_iter()
        .map(|mut e| {
            e.flush().unwrap();
            e.final_state().unwrap()
        })
        .collect();
    let root = world_state.root().to_string();
    assert_eq!(states[0].head_root.as_deref(), Some(root.as_str()), "Arbor's commits");
    assert_eq!(states[0].verified, Some(true));
    for s in &states {
        assert_eq!(s.root, root);
    }
}

#[test]
fn creation_code_deploys_the_recorded_runtime() {
    let contracts = Contracts::load().unwrap();
    let deployer = RevmAddress::repeat_byte(0x11);
    let mut db = CacheDB::new(EmptyDB::default());
    let rich =
        AccountInfo { balance: U256::from(10u64).pow(U256::from(20u8)), ..AccountInfo::default() };
    db.insert_account_info(deployer, rich);
    let mut evm = Context::mainnet().with_db(db).build_mainnet();
    // Nothing is committed: each deployment is the deployer's first transaction.
    for (compiled, args) in [
        (&contracts.token, U256::from(1000u64).to_be_bytes::<32>().to_vec()),
        (&contracts.churn, Vec::new()),
    ] {
        let mut data = compiled.creation.clone();
        data.extend(args);
        let tx = TxEnv {
            caller: deployer,
            kind: TxKind::Create,
            data: Bytes::from(data),
            gas_limit: 5_000_000,
            ..TxEnv::default()
        };
        let out = evm.transact(tx).unwrap();
        assert!(out.result.is_success(), "{:?}", out.result);
        let deployed = out
            .state
            .values()
            .find(|a| a.is_created())
            .and_then(|a| a.info.code.clone())
            .expect("a created account with code");
        assert_eq!(deployed.original_bytes().to_vec(), compiled.runtime);
    }
}
