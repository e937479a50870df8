//! Ethereum blocks through the import road (`evm::road`): the blockchain-test subset's
//! linear chains (every block the previous one's child; an invalid block, if any, last;
//! every fifth of them: each costs two stores) imported into RocksDB stores pipelined and not, to the same head, root and last block
//! hash as the fixture's, an invalid last block refused with a typed reason and the head at
//! its parent; a flipped byte anywhere in a chain's blocks refused with the head below it.

use std::sync::atomic::AtomicBool;

use chain::{ImportConfig, ImportError, InvalidBlock};
use eth::Genesis;
use evm::block::ChainConfig;
use evm::blocktest::{parse_file, BlockRlp, BlockTest};
use evm::road::{import_eth, undecodable, EthRoadBlock, RoadError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::H256;
use store::{StateDb, StoreConfig};
use test_support::statetests::{blocktests_archive_path, read_archive};

/// A linear chain of a blockchain test: its configuration, genesis, blocks' RLP and
/// whether the last one must be refused.
struct Linear {
    chain: ChainConfig,
    pre: Genesis,
    genesis: EthRoadBlock,
    blocks: Vec<Vec<u8>>,
    last_invalid: bool,
    post_root: H256,
    last_hash: H256,
}

/// The test as a linear chain, or `None` (a side chain, a network not run, an invalid
/// block before the last, malformed RLP).
fn linear(test: &BlockTest) -> Option<Linear> {
    let mut chain = ChainConfig::for_network(&test.network)?;
    if let Some(id) = test.chain_id {
        chain.chain_id = id;
    }
    let genesis = EthRoadBlock::decode(&test.genesis_rlp).ok()?;
    let (mut parent, mut post_root) = (genesis.block.hash, H256(genesis.block.header.state_root.0));
    let mut blocks = Vec::new();
    let mut last_invalid = false;
    for (i, b) in test.blocks.iter().enumerate() {
        let BlockRlp::Bytes(rlp) = &b.rlp else { return None };
        if last_invalid {
            return None;
        }
        last_invalid = b.expect_exception.is_some();
        if !last_invalid {
            let block = EthRoadBlock::decode(rlp).ok()?;
            let linked = block.block.header.number == i as u64 + 1
                && H256(block.block.header.parent_hash.0) == parent;
            if !linked {
                return None;
            }
            parent = block.block.hash;
            post_root = H256(block.block.header.state_root.0);
        }
        blocks.push(rlp.clone());
    }
    (parent == test.last_block_hash).then(|| Linear {
        chain,
        pre: test.pre.clone(),
        genesis,
        blocks,
        last_invalid,
        post_root,
        last_hash: test.last_block_hash,
    })
}

/// A store holding `chain`'s genesis as block 0 (its allocation and header record).
fn genesis_store(dir: &std::path::Path, chain: &Linear) -> StateDb {
    let mut config = StoreConfig::default();
    config.rocksdb.block_cache_bytes = 4 << 20;
    config.rocksdb.write_buffer_bytes = 1 << 20;
    config.rocksdb.max_total_wal_bytes = 0;
    let mut db = StateDb::open(dir, config).unwrap();
    let entries = eth::genesis_entries(&chain.pre);
    let mut load = db.begin_bulk_load("genesis").unwrap();
    for (trie, key, value) in &entries.entries {
        load.put(trie, key, value).unwrap();
    }
    for account in chain.pre.alloc.values().filter(|a| !a.code.is_empty()) {
        load.put_code(&trie::keccak256(&account.code), &account.code).unwrap();
    }
    load.set_record(&chain.genesis.header_rlp);
    let summary = load.finish().unwrap();
    assert_eq!(summary.root, H256(chain.genesis.block.header.state_root.0), "genesis root");
    db
}

/// The road's blocks from RLP: an undecodable one is refused at its position.
fn road_blocks(rlps: &[Vec<u8>]) -> impl Iterator<Item = Result<EthRoadBlock, ImportError>> + '_ {
    rlps.iter()
        .enumerate()
        .map(|(i, rlp)| EthRoadBlock::decode(rlp).map_err(|e| undecodable(i as u64 + 1, e)))
}

/// Import `blocks` into a fresh genesis store: the import's result, the head's number,
/// root and hash (the keccak of its record).
fn import(
    chain: &Linear,
    blocks: &[Vec<u8>],
    pipelined: bool,
) -> (Result<(), ImportError>, u64, H256, H256) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = genesis_store(dir.path(), chain);
    let config = ImportConfig { pipelined, exec_workers: 1, queue_blocks: 1 };
    let stop = AtomicBool::new(false);
    let (_, result) =
        import_eth(&mut db, road_blocks(blocks), chain.chain.clone(), &config, &stop, &mut |_| {});
    let head = db.head_number();
    let record = db.block_record(head).unwrap().expect("the head's record");
    let out = (result, head, db.head_root(), trie::keccak256(&record));
    db.close().unwrap();
    out
}

/// The executor's typed reason inside a refusal, if it gave one.
fn road_reason(reason: &InvalidBlock) -> Option<&RoadError> {
    match reason {
        InvalidBlock::Rejected(r) => r.source_ref().downcast_ref::<RoadError>(),
        _ => None,
    }
}

/// The subset's linear chains: the ValidBlocks and InvalidBlocks files and every tenth
/// GeneralStateTests file (in path order).
fn subset_chains() -> Vec<(String, Linear)> {
    let files = read_archive(&blocktests_archive_path());
    let mut state_tests = 0usize;
    let mut chains = Vec::new();
    for (path, bytes) in files {
        if path.contains("/GeneralStateTests/") {
            state_tests += 1;
            if state_tests % 10 != 1 {
                continue;
            }
        }
        let file = parse_file(std::str::from_utf8(&bytes).unwrap()).unwrap();
        for (name, test) in &file.tests {
            if let Some(chain) = linear(test) {
                chains.push((format!("{path}: {name}"), chain));
            }
        }
    }
    chains
}

#[test]
fn linear_chains_of_the_subset_import_through_the_road() {
    let started = std::time::Instant::now();
    // Every fifth chain (in path order): each costs two stores' creation and flush.
    let chains: Vec<_> = subset_chains().into_iter().step_by(5).collect();
    let (mut valid, mut refused, mut blocks) = (0usize, 0usize, 0usize);
    for (name, chain) in &chains {
        let last = chain.blocks.len() as u64;
        let good = if chain.last_invalid { last - 1 } else { last };
        let piped = import(chain, &chain.blocks, true);
        let unpiped = import(chain, &chain.blocks, false);
        let (result, head, root, hash) = &piped;
        match (result, chain.last_invalid) {
            (Ok(()), false) => valid += 1,
            (Err(ImportError::Invalid { number, .. }), true) if *number == last => refused += 1,
            // A first block numbered at or below the head (0) is taken for an imported one
            // and does not carry the head's hash: another chain's, refused all the same.
            (Err(ImportError::OtherChain { .. }), true) if last == 1 => refused += 1,
            (other, _) => panic!("{name}: {other:?}"),
        }
        assert_eq!((*head, *root, *hash), (good, chain.post_root, chain.last_hash), "{name}");
        assert_eq!((&unpiped.1, &unpiped.2, &unpiped.3), (head, root, hash), "{name}: unpipelined");
        assert_eq!(
            unpiped.0.as_ref().err().map(ToString::to_string),
            result.as_ref().err().map(ToString::to_string),
            "{name}: the same outcome unpipelined"
        );
        blocks += good as usize;
    }
    println!(
        "{} linear chains ({valid} valid, {refused} with an invalid last block refused), \
         {blocks} blocks, in {:.1} s",
        chains.len(),
        started.elapsed().as_secs_f64()
    );
    // Of 686 linear chains, 589 valid and 97 ending in an invalid block: a fifth of each.
    assert!(valid >= 110 && refused >= 15, "{valid} valid, {refused} refused");
}

#[test]
fn a_flipped_byte_of_a_block_is_refused_with_the_head_below_it() {
    let seed = match std::env::var("ARBOR_SEED") {
        Ok(s) => s.parse().expect("ARBOR_SEED is a u64"),
        Err(_) => rand::thread_rng().gen(),
    };
    eprintln!("seed {seed} (replay with ARBOR_SEED={seed})");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Valid chains of several blocks with transactions.
    let chains: Vec<(String, Linear)> = subset_chains()
        .into_iter()
        .filter(|(_, c)| !c.last_invalid && c.blocks.len() >= 2)
        .filter(|(_, c)| {
            c.blocks.iter().any(|b| !EthRoadBlock::decode(b).unwrap().block.transactions.is_empty())
        })
        .collect();
    assert!(chains.len() >= 10, "{} chains", chains.len());
    for trial in 0..24 {
        let (name, chain) = &chains[rng.gen_range(0..chains.len())];
        let mut blocks = chain.blocks.clone();
        let at = rng.gen_range(0..blocks.len());
        let byte = rng.gen_range(0..blocks[at].len());
        blocks[at][byte] ^= 1 << rng.gen_range(0..8);
        let (result, head, _, hash) = import(chain, &blocks, trial % 2 == 0);
        let what = format!("{name}: block {} byte {byte} (seed {seed})", at + 1);
        // A flip that leaves a valid block (its extra data or prevrandao, say) in the last
        // block has no next block to be refused at: it is another valid block, imported
        // as what it is (a new hash, every check of its header passed), never as the old.
        if result.is_ok() && at + 1 == blocks.len() {
            assert_eq!(head, blocks.len() as u64, "{what}");
            assert_ne!(hash, chain.last_hash, "{what}: a changed block kept its hash");
            continue;
        }
        let Err(ImportError::Invalid { number, reason }) = &result else {
            panic!("{what}: {result:?}");
        };
        // A flip that leaves a valid block (its extra data, say) is refused at the next
        // block, whose parent hash no longer matches.
        assert!(*number == at as u64 + 1 || *number == at as u64 + 2, "{what}: {number}");
        assert_eq!(head, number - 1, "{what}: the head is the block before the refused one");
        let typed = road_reason(reason).is_some()
            || matches!(
                reason,
                InvalidBlock::ParentHash { .. }
                    | InvalidBlock::Number { .. }
                    | InvalidBlock::PostRoot { .. }
            );
        assert!(typed, "{what}: {reason}");
        if *number == at as u64 + 1 && at > 0 {
            let prefix = import(chain, &chain.blocks[..at], true);
            assert_eq!(prefix.3, hash, "{what}: the head is the chain's block {at}");
        }
    }
}
