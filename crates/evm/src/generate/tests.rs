//! A generated chain against the block executor: every block decodes from its RLP, passes
//! the header checks against its parent and `execute_block`'s checks of its commitments
//! over a world built separately from the genesis file, to the header's state root; the
//! chain holds deployments, self-destructs of contracts with storage and re-creations at
//! a destroyed address; and it is the same chain for the same seed.

use std::collections::BTreeSet;

use eth::{AccountChange, Genesis, MemoryWorld};
use state::H256;
use trie::{EMPTY_CODE_HASH, EMPTY_ROOT};

use super::*;
use crate::block::{decode_block, execute_block, genesis_header, header_hash, validate_header};
use crate::BlockHashes;

struct Hashes(Vec<H256>);

impl BlockHashes for Hashes {
    fn block_hash(&self, number: u64) -> Option<H256> {
        self.0.get(number as usize).copied()
    }
}

#[derive(Default, Debug)]
struct Seen {
    deployed: usize,
    wiped: usize,
    recreated: usize,
}

#[test]
fn generated_blocks_pass_the_executor_and_hold_wipes_and_recreations() {
    let spec = ChainSpec { seed: 11, accounts: 300, txs_per_block: 40 };
    let mut generator = ChainGenerator::new(&spec).unwrap();
    let json = generator.genesis_json().clone();
    let chain = crate::block::ChainConfig::from_geth_config(&json["config"]).unwrap();
    let mut parent = genesis_header(&json, &chain).unwrap();
    let mut world = MemoryWorld::from_genesis(&Genesis::from_value(&json).unwrap()).unwrap();
    assert_eq!(world.root().0, parent.state_root.0);
    let mut hashes = Hashes(vec![header_hash(&parent)]);
    let (mut seen, mut destroyed) = (Seen::default(), BTreeSet::new());
    let mut blocks = Vec::new();
    for n in 1..=30u64 {
        let generated = generator.next_block().unwrap();
        let block = decode_block(&generated.rlp).unwrap();
        assert_eq!((block.header.number, block.hash), (n, generated.hash));
        validate_header(&block.header, &parent, &chain).unwrap();
        let outcome = execute_block(&block, &world, &hashes, &chain).unwrap();
        assert_eq!(outcome.receipts.len() as u64, spec.txs_per_block + 1);
        for (address, change) in &outcome.changes.accounts {
            let before = world.account(address).copied();
            match change {
                AccountChange::Removed => {
                    if before.is_some_and(|a| a.storage_root != EMPTY_ROOT) {
                        seen.wiped += 1;
                    }
                    destroyed.insert(*address);
                }
                AccountChange::Write(w)
                    if w.code_hash != EMPTY_CODE_HASH
                        && before.is_none_or(|a| a.code_hash == EMPTY_CODE_HASH) =>
                {
                    seen.deployed += 1;
                    if destroyed.contains(address) {
                        seen.recreated += 1;
                    }
                }
                _ => {}
            }
        }
        let root = world.apply(&outcome.changes).unwrap();
        assert_eq!((root, generated.state_root), (H256(block.header.state_root.0), root));
        hashes.0.push(block.hash);
        parent = block.header;
        blocks.push(generated);
    }
    eprintln!("{seen:?}");
    assert!(seen.deployed >= 10 && seen.wiped >= 3 && seen.recreated >= 1, "{seen:?}");
    // The same seed, the same chain; another seed, another.
    let mut again = ChainGenerator::new(&spec).unwrap();
    assert_eq!(again.genesis_json(), &json);
    for b in &blocks[..3] {
        assert_eq!(&again.next_block().unwrap(), b);
    }
    let other = ChainSpec { seed: 12, ..spec };
    assert_ne!(ChainGenerator::new(&other).unwrap().next_block().unwrap().rlp, blocks[0].rlp);
}

#[test]
fn a_chain_of_no_accounts_is_refused() {
    let spec = ChainSpec { seed: 1, accounts: 0, txs_per_block: 1 };
    assert!(matches!(ChainGenerator::new(&spec), Err(GenError::NoAccounts)));
}
