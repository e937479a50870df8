//! `MemoryWorld` against a from-scratch reference: random sequences of `EthChanges`
//! (accounts written and removed, storage cleared, slots set and deleted, code) applied to
//! the world, and the same changes applied naively to a genesis allocation whose
//! `genesis_state_root` is computed from nothing after every step. The world's reads must
//! match the allocation too, and applying the merge of the steps to a fresh world must give
//! the same root as applying them one by one.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use eth::{
    genesis_state_root, AccountChange, AccountWrite, Address, EthChanges, Genesis, GenesisAccount,
    MemoryWorld, WorldError,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::H256;
use trie::{keccak256, EMPTY_CODE_HASH, EMPTY_ROOT};

use crate::{read_genesis, GENESIS_ROOTS};

const CODES: [&[u8]; 3] = [&[], &[0x60, 0x01, 0x60, 0x00, 0x55], &[0xfe]];

fn address(i: u8) -> Address {
    let mut a = [0x11; 20];
    a[19] = i;
    a
}

fn slot(i: u8) -> H256 {
    let mut s = [0u8; 32];
    s[31] = i;
    H256(s)
}

/// One random change of `a`: removed (one in six), or written with random fields, a
/// random storage clear and random slot writes (zeros among them).
fn random_change(rng: &mut ChaCha8Rng, changes: &mut EthChanges, a: Address) {
    if rng.gen_ratio(1, 6) {
        changes.remove_account(a);
        return;
    }
    let code = CODES[rng.gen_range(0..CODES.len())];
    let code_hash =
        if code.is_empty() { EMPTY_CODE_HASH } else { changes.insert_code(code.to_vec()) };
    let mut storage = BTreeMap::new();
    for _ in 0..rng.gen_range(0..6) {
        let value = if rng.gen_ratio(1, 3) { U256::ZERO } else { U256::from(rng.gen::<u64>()) };
        storage.insert(slot(rng.gen_range(0..12)), value);
    }
    let write = AccountWrite {
        nonce: rng.gen_range(0..3),
        balance: if rng.gen_bool(0.3) { U256::ZERO } else { U256::from(rng.gen::<u128>()) },
        code_hash,
        storage_cleared: rng.gen_ratio(1, 5),
        storage,
    };
    changes.write_account(a, write);
}

/// The naive application of `changes` to an allocation.
fn apply_to_alloc(alloc: &mut BTreeMap<Address, GenesisAccount>, changes: &EthChanges) {
    for (a, change) in &changes.accounts {
        match change {
            AccountChange::Removed => {
                alloc.remove(a);
            }
            AccountChange::Write(w) => {
                let acc = alloc.entry(*a).or_default();
                if w.storage_cleared {
                    acc.storage.clear();
                }
                for (s, v) in &w.storage {
                    if v.is_zero() {
                        acc.storage.remove(s);
                    } else {
                        acc.storage.insert(*s, *v);
                    }
                }
                acc.nonce = w.nonce;
                acc.balance = w.balance;
                acc.code = if w.code_hash == EMPTY_CODE_HASH {
                    Vec::new()
                } else {
                    changes.code()[&w.code_hash].clone()
                };
            }
            other => panic!("unexpected change {other:?}"),
        }
    }
}

/// Every account, slot and code of `alloc` reads back from `world`, and nothing else.
fn assert_reads(world: &MemoryWorld, alloc: &BTreeMap<Address, GenesisAccount>, seed: u64) {
    assert_eq!(world.len(), alloc.len(), "seed {seed}");
    for i in 0..16 {
        let a = address(i);
        match (world.account(&a), alloc.get(&a)) {
            (None, None) => {}
            (Some(acc), Some(g)) => {
                assert_eq!((acc.nonce, acc.balance), (g.nonce, g.balance), "seed {seed}");
                assert_eq!(world.code(&acc.code_hash), Some(g.code.as_slice()), "seed {seed}");
                assert_eq!(acc.storage_root == EMPTY_ROOT, g.storage.is_empty(), "seed {seed}");
                for s in 0..12 {
                    let want = g.storage.get(&slot(s)).copied().unwrap_or(U256::ZERO);
                    assert_eq!(world.storage(&a, &slot(s)), want, "seed {seed}");
                }
            }
            (w, g) => panic!("seed {seed}: account {i}: world {w:?}, reference {g:?}"),
        }
    }
}

#[test]
fn random_change_sequences_match_the_genesis_root_of_the_same_allocation() {
    for seed in 0..crate::cases(40) as u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut alloc: BTreeMap<Address, GenesisAccount> = BTreeMap::new();
        let mut world = MemoryWorld::new();
        let mut merged = EthChanges::new();
        for step in 0..25 {
            let mut changes = EthChanges::new();
            for _ in 0..rng.gen_range(0..6) {
                let a = address(rng.gen_range(0..16));
                random_change(&mut rng, &mut changes, a);
            }
            apply_to_alloc(&mut alloc, &changes);
            let root = world.apply(&changes).unwrap();
            let want = genesis_state_root(&Genesis { alloc: alloc.clone() });
            assert_eq!(root, want, "seed {seed} step {step}");
            assert_eq!(world.root(), root);
            assert_reads(&world, &alloc, seed);
            merged.merge(changes);
        }
        let mut at_once = MemoryWorld::new();
        assert_eq!(at_once.apply(&merged).unwrap(), world.root(), "seed {seed}: merged");
        assert_eq!(world.to_genesis().alloc, alloc, "seed {seed}");
    }
}

#[test]
fn genesis_files_give_their_known_roots() {
    for (file, root) in GENESIS_ROOTS {
        let genesis = read_genesis(file);
        let world = MemoryWorld::from_genesis(&genesis).unwrap();
        assert_eq!(world.root().to_string(), root, "{file}");
    }
}

#[test]
fn code_hash_without_code_is_refused_and_changes_nothing() {
    let mut world = MemoryWorld::new();
    let mut changes = EthChanges::new();
    changes.write_account(
        address(1),
        AccountWrite {
            nonce: 1,
            balance: U256::from(5u8),
            code_hash: EMPTY_CODE_HASH,
            storage_cleared: false,
            storage: [(slot(1), U256::from(9u8))].into_iter().collect(),
        },
    );
    let root = world.apply(&changes).unwrap();
    let mut bad = EthChanges::new();
    let missing = keccak256(b"no such code");
    bad.write_account(
        address(2),
        AccountWrite {
            nonce: 0,
            balance: U256::ZERO,
            code_hash: missing,
            storage_cleared: false,
            storage: BTreeMap::new(),
        },
    );
    bad.remove_account(address(1));
    let e = world.apply(&bad).unwrap_err();
    assert!(matches!(e, WorldError::MissingCode { code_hash, .. } if code_hash == missing), "{e}");
    assert_eq!(world.root(), root);
    assert_eq!(world.storage(&address(1), &slot(1)), U256::from(9u8));
}
