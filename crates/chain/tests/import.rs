//! The import road, differentially: random chains (1–300 transfers per block, failures,
//! deaths, an invalid block at a random height) imported pipelined and unpipelined with 1–4
//! execution workers, against the sequential overlay runtime: identical per-block roots,
//! identical final flat state, and for an invalid block the same head and error.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use chain::{
    import, Block, BlockContext, ChainFileError, ChainHeader, ChainParams, ChainReader,
    ImportConfig, ImportError, InvalidBlock, GENESIS_BALANCE,
};
use overlay::Overlay;
use proptest::prelude::*;
use state::{TrieId, H256};
use store::{StateDb, StoreConfig};

/// Main-trie entries.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;
/// The flat state.
type Flat = BTreeMap<Vec<u8>, Vec<u8>>;

fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A generated chain: its genesis entries and blocks.
fn chain(accounts: u64, blocks: u64, transfers: u64, seed: u64) -> (Entries, Vec<Block>) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(dir.path(), StoreConfig::default()).unwrap();
    let params = ChainParams { accounts, blocks, transfers, seed };
    let mut out = Vec::new();
    let header = chain::generate(&mut db, &params, &mut |_, b| {
        out.push(b);
        Ok(())
    })
    .unwrap();
    (header.genesis_entries(), out)
}

/// How a block is spoiled.
#[derive(Debug, Clone, Copy)]
enum Spoil {
    PostRoot,
    ParentRoot,
    Nonce,
}

fn spoil(blocks: &mut [Block], at: usize, how: Spoil) {
    let b = &mut blocks[at];
    match how {
        Spoil::PostRoot => b.state_root = H256([0xee; 32]),
        Spoil::ParentRoot => b.parent_root = H256([0xdd; 32]),
        Spoil::Nonce => {
            if let Some(t) = b.transfers.first_mut() {
                t.nonce += 1_000;
            } else {
                b.state_root = H256([0xee; 32]);
            }
        }
    }
}

/// The reference: the sequential overlay runtime over an in-memory map, root per block
/// from scratch; stops at the first block whose transactions or roots do not check.
fn reference(genesis: &[(Vec<u8>, Vec<u8>)], blocks: &[Block]) -> (Vec<H256>, Flat, Option<u64>) {
    let mut state: BTreeMap<Vec<u8>, Vec<u8>> = genesis.iter().cloned().collect();
    let mut roots = Vec::new();
    let mut parent = root_of(&state);
    for b in blocks {
        if b.parent_root != parent {
            return (roots, state, Some(b.number));
        }
        let ctx = BlockContext { number: b.number, author: b.author };
        let mut o = Overlay::new(&state);
        chain::start_block(&mut o, &ctx).unwrap();
        let ok = (0u32..).zip(&b.transfers).all(|(i, t)| chain::apply(&mut o, &ctx, i, t).is_ok());
        if !ok {
            return (roots, state, Some(b.number));
        }
        chain::finish_block(&mut o, &ctx).unwrap();
        let changes = o.into_change_set().unwrap();
        let mut next = state.clone();
        for (k, v) in changes.get(&TrieId::Main).into_iter().flatten() {
            match v.as_ref().filter(|v| !v.is_empty()) {
                Some(v) => next.insert(k.clone(), v.clone()),
                None => next.remove(k),
            };
        }
        let root = root_of(&next);
        if root != b.state_root {
            return (roots, state, Some(b.number));
        }
        state = next;
        roots.push(root);
        parent = root;
    }
    (roots, state, None)
}

fn root_of(state: &BTreeMap<Vec<u8>, Vec<u8>>) -> H256 {
    let items: Vec<(&Vec<u8>, &Vec<u8>)> = state.iter().collect();
    trie::root_from_sorted::<trie::EthLayout, _, _>(&items).unwrap().0
}

/// Import into a fresh store; returns per-block roots, the final flat state, the error.
fn run(
    genesis: &[(Vec<u8>, Vec<u8>)],
    blocks: &[Block],
    config: &ImportConfig,
) -> (Vec<H256>, Flat, Option<(u64, String)>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(dir.path(), StoreConfig::default()).unwrap();
    db.bulk_load("test genesis", genesis.iter().cloned().map(|(k, v)| (TrieId::Main, k, v)))
        .unwrap();
    let mut numbers = Vec::new();
    let stop = AtomicBool::new(false);
    let (_, result) = import(&mut db, blocks.iter().cloned().map(Ok), config, &stop, &mut |b| {
        numbers.push(b.number)
    });
    let err = result.err().map(|e| match e {
        ImportError::Invalid { number, reason } => (number, kind(&reason)),
        other => panic!("import failed: {other}"),
    });
    let head = db.head_number();
    assert_eq!(numbers, (1..=head).collect::<Vec<_>>());
    let roots: Vec<H256> = (1..=head).map(|n| blocks[n as usize - 1].state_root).collect();
    if let Some(last) = roots.last() {
        assert_eq!(db.head_root(), *last, "head root");
    }
    let flat = db.range(&TrieId::Main, &[], None).unwrap().map(Result::unwrap).collect();
    // The store verifies its own root from flat state.
    assert!(db.verify().unwrap().ok(), "verify after import");
    (roots, flat, err, head)
}

fn kind(r: &InvalidBlock) -> String {
    match r {
        InvalidBlock::PostRoot { .. } => "post-root".into(),
        InvalidBlock::ParentRoot { .. } => "parent-root".into(),
        InvalidBlock::Transaction { .. } => "transaction".into(),
        other => format!("{other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(16)))]

    #[test]
    fn pipelined_unpipelined_and_sequential_agree(
        seed in any::<u64>(),
        blocks in 2u64..8,
        transfers in 1u64..300,
        workers in 1usize..=4,
        bad in prop::option::of((0usize..8, 0u8..3)),
    ) {
        let (genesis, mut chain) = chain(60, blocks, transfers, seed);
        if let Some((at, how)) = bad {
            let how = [Spoil::PostRoot, Spoil::ParentRoot, Spoil::Nonce][how as usize];
            let at = at % chain.len();
            spoil(&mut chain, at, how);
        }
        let (ref_roots, ref_state, ref_err) = reference(&genesis, &chain);
        let mut errors = Vec::new();
        for pipelined in [false, true] {
            let config = ImportConfig { pipelined, exec_workers: workers, queue_blocks: 1 };
            let (roots, flat, err, head) = run(&genesis, &chain, &config);
            prop_assert_eq!(&roots, &ref_roots, "pipelined {}", pipelined);
            prop_assert_eq!(&flat, &ref_state, "pipelined {}", pipelined);
            prop_assert_eq!(err.as_ref().map(|e| e.0), ref_err, "pipelined {}", pipelined);
            prop_assert_eq!(head, ref_roots.len() as u64);
            errors.push(err);
        }
        // The same error (block and reason) whether pipelined or not.
        prop_assert_eq!(&errors[0], &errors[1]);
    }
}

/// A truncated chain file is a typed error after the blocks before the cut.
#[test]
fn truncated_chain_file_is_a_typed_error() {
    let (_, blocks) = chain(20, 3, 5, 7);
    let header =
        ChainHeader { accounts: 20, balance: GENESIS_BALANCE, genesis_root: H256::default() };
    let mut bytes = Vec::new();
    chain::write_header(&mut bytes, &header).unwrap();
    for b in &blocks {
        chain::write_block(&mut bytes, b).unwrap();
    }
    for cut in [10, 65 + 2, bytes.len() - 1] {
        let r = ChainReader::new(&bytes[..cut]);
        let items: Vec<_> = match r {
            Ok(r) => r.collect(),
            Err(e) => {
                assert!(e.to_string().contains("truncated"), "{e}");
                continue;
            }
        };
        let last = items.last().unwrap();
        assert!(matches!(last, Err(ImportError::Source(_))), "cut {cut}: {last:?}");
        assert!(last.as_ref().unwrap_err().to_string().contains("truncated"));
    }
}

/// A slow disk (every write of the store's writer waits 25 ms): the import stalls instead
/// of growing. The unpersisted layers stay within `layers.unpersisted_bytes_max`, the
/// blocks in flight within the queue (one committing, one queued, one waiting
/// for room), and the result is the
/// chain's.
#[test]
fn a_slow_writer_makes_the_import_stall_not_grow() {
    let (genesis, blocks) = chain(2_000, 40, 250, 9);
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::default();
    config.layers.unpersisted_bytes_max = 1 << 20;
    config.layers.persist_blocks = 1;
    let mut db = StateDb::open(dir.path(), config).unwrap();
    db.bulk_load("test genesis", genesis.into_iter().map(|(k, v)| (TrieId::Main, k, v))).unwrap();
    db.faults().slow_writes(std::time::Duration::from_millis(25));
    let config = ImportConfig { pipelined: true, exec_workers: 2, queue_blocks: 1 };
    let stop = AtomicBool::new(false);
    let (stats, result) =
        import(&mut db, blocks.iter().cloned().map(Ok), &config, &stop, &mut |_| {});
    result.unwrap();
    db.faults().clear();
    assert_eq!(db.head_root(), blocks.last().unwrap().state_root);
    let s = db.stats();
    assert!(s.commit_waits > 0, "the writer never held the committer back: {s:?}");
    assert!(
        s.peak_unpersisted_bytes <= 1 << 20,
        "unpersisted layers grew to {}",
        s.peak_unpersisted_bytes
    );
    // One committing, `queue_blocks` queued, one executed and waiting for room.
    assert!(stats.max_pending_blocks <= config.queue_blocks + 2, "{stats:?}");
    let largest = blocks.iter().map(|b| b.transfers.len()).max().unwrap() as u64;
    // A block's writes: two accounts, an event and a few counters per transfer.
    assert!(stats.max_pending_bytes <= 3 * (largest * 4 * 200 + 1_000), "{stats:?}");
    assert!(stats.stalled > std::time::Duration::ZERO, "{stats:?}");
}

/// A write failure poisons the store: the import reports it and the pipeline drains
/// without deadlock, pipelined or not; the head stays at a block of the chain.
#[test]
fn a_failed_write_stops_the_import_without_deadlock() {
    let (genesis, blocks) = chain(500, 30, 60, 4);
    for pipelined in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::default();
        config.layers.persist_blocks = 1;
        let mut db = StateDb::open(dir.path(), config).unwrap();
        db.bulk_load("test genesis", genesis.iter().cloned().map(|(k, v)| (TrieId::Main, k, v)))
            .unwrap();
        db.faults().fail_writes_from(5);
        let config = ImportConfig { pipelined, exec_workers: 2, queue_blocks: 1 };
        let stop = AtomicBool::new(false);
        let (stats, result) =
            import(&mut db, blocks.iter().cloned().map(Ok), &config, &stop, &mut |_| {});
        let err = result.unwrap_err();
        assert!(matches!(err, ImportError::Store(_)), "pipelined {pipelined}: {err}");
        assert!(stats.blocks < 30, "pipelined {pipelined}: {stats:?}");
        drop(db);
        // Reopened, the store is at a whole block of the chain (at most the last persisted).
        let db = StateDb::open(dir.path(), StoreConfig::default()).unwrap();
        let head = db.head_number();
        assert!(head < 5, "pipelined {pipelined}: head {head}");
        if head > 0 {
            assert_eq!(db.head_root(), blocks[head as usize - 1].state_root);
        }
    }
}

/// Hostile headers: not a chain file, another version, a genesis too large to build.
#[test]
fn hostile_chain_headers_are_typed_errors() {
    let good =
        ChainHeader { accounts: 20, balance: GENESIS_BALANCE, genesis_root: H256::default() };
    let mut bytes = Vec::new();
    chain::write_header(&mut bytes, &good).unwrap();
    assert!(ChainReader::new(&bytes[..]).is_ok());
    let mut huge = bytes.clone();
    huge[9..17].copy_from_slice(&u64::MAX.to_be_bytes());
    let e = ChainReader::new(&huge[..]).unwrap_err();
    assert!(matches!(e, ChainFileError::Accounts(u64::MAX)), "{e}");
    let mut none = bytes.clone();
    none[9..17].copy_from_slice(&0u64.to_be_bytes());
    assert!(ChainReader::new(&none[..]).is_err());
    let mut version = bytes.clone();
    version[8] = 2;
    assert!(matches!(ChainReader::new(&version[..]).unwrap_err(), ChainFileError::Header));
    assert!(ChainReader::new(&b"hello"[..]).is_err());
    assert!(ChainReader::new(&b""[..]).is_err());
    // A record claiming more than the limit.
    let mut long = bytes.clone();
    long.extend_from_slice(&u32::MAX.to_be_bytes());
    let mut r = ChainReader::new(&long[..]).unwrap();
    let e = r.next().unwrap().unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
    assert!(r.next().is_none());
}

/// A store holding `genesis` and the first `head` of `blocks`, keeping `history_depth`
/// blocks of history.
fn store_at(
    genesis: &[(Vec<u8>, Vec<u8>)],
    blocks: &[Block],
    head: usize,
    history_depth: u64,
) -> (tempfile::TempDir, StateDb) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::default();
    config.layers.history_depth = history_depth;
    let mut db = StateDb::open(dir.path(), config).unwrap();
    db.bulk_load("test genesis", genesis.iter().cloned().map(|(k, v)| (TrieId::Main, k, v)))
        .unwrap();
    let (_, r) = import_blocks(&mut db, &blocks[..head], true);
    r.unwrap();
    (dir, db)
}

fn import_blocks(
    db: &mut StateDb,
    blocks: &[Block],
    pipelined: bool,
) -> (chain::ImportStats, Result<(), ImportError>) {
    let config = ImportConfig { pipelined, exec_workers: 2, queue_blocks: 1 };
    import(db, blocks.iter().cloned().map(Ok), &config, &AtomicBool::new(false), &mut |_| {})
}

/// The block number and reason of an `Invalid` error (panics on another outcome).
fn invalid(r: Result<(), ImportError>) -> (u64, InvalidBlock) {
    match r {
        Err(ImportError::Invalid { number, reason }) => (number, reason),
        other => panic!("expected an invalid block, got {other:?}"),
    }
}

/// `blocks` with block `number` replaced by `with`.
fn replaced(blocks: &[Block], number: u64, with: Block) -> Vec<Block> {
    let mut out = blocks.to_vec();
    out[number as usize - 1] = with;
    out
}

/// Issue 29, defect 4: a block at or below the head is not skipped unchecked. After a
/// block above the head it is out of order; in order, it must link to the block before it
/// and carry the root the store recorded for its number.
#[test]
fn blocks_at_or_below_the_head_are_checked_before_they_are_skipped() {
    let (genesis, blocks) = chain(200, 12, 20, 7);
    let (other_genesis, other) = chain(200, 12, 20, 8);
    assert_eq!(genesis, other_genesis);
    assert_ne!(blocks[4].state_root, other[4].state_root);
    let mut damaged = blocks[2].clone();
    damaged.state_root.0[31] ^= 1;
    for pipelined in [false, true] {
        // After block 10, a damaged block 3 or another chain's block 5: out of order.
        for stray in [&damaged, &other[4]] {
            let (_dir, mut db) = store_at(&genesis, &blocks, 0, 128);
            let mut file = blocks[..10].to_vec();
            file.push(stray.clone());
            file.extend_from_slice(&blocks[10..]);
            let (stats, r) = import_blocks(&mut db, &file, pipelined);
            let expected = InvalidBlock::Number { expected: 11, got: stray.number };
            assert_eq!(invalid(r), (11, expected), "pipelined {pipelined}");
            assert_eq!((db.head_number(), db.head_root()), (10, blocks[9].state_root));
            assert_eq!(stats.skipped, 0);
        }
        // In order, on a store at block 10: each is refused and nothing changes.
        let (_dir, mut db) = store_at(&genesis, &blocks, 10, 128);
        let mut parent = blocks[2].clone();
        parent.parent_root.0[0] ^= 1;
        let mut swapped = blocks.clone();
        swapped.swap(2, 3);
        let cases = [
            (replaced(&blocks, 3, damaged.clone()), 3, "recorded"),
            (replaced(&blocks, 3, parent), 3, "parent-root"),
            (replaced(&blocks, 5, other[4].clone()), 5, "parent-root"),
            (swapped, 3, "number 4, expected 3"),
            (other.clone(), 1, "recorded"),
        ];
        for (file, number, what) in cases {
            let (stats, r) = import_blocks(&mut db, &file, pipelined);
            let (n, reason) = invalid(r);
            let got = match reason {
                InvalidBlock::Recorded { recorded, got } => {
                    assert_eq!(
                        (recorded, got),
                        (blocks[n as usize - 1].state_root, file[n as usize - 1].state_root)
                    );
                    "recorded".to_string()
                }
                other => kind(&other),
            };
            assert_eq!((n, got.as_str()), (number, what), "pipelined {pipelined}");
            assert_eq!((db.head_number(), db.head_root()), (10, blocks[9].state_root));
            assert_eq!(stats.blocks, 0);
        }
        // The chain itself: ten checked and skipped, two imported.
        let (stats, r) = import_blocks(&mut db, &blocks, pipelined);
        r.unwrap();
        assert_eq!((stats.skipped, stats.blocks), (10, 2));
        assert_eq!(db.head_root(), blocks[11].state_root);
    }
}

/// Past the history the store keeps, skipped blocks are still checked by their links: a
/// damaged post-state root breaks the next block's parent root. The store answers the
/// roots it holds (the head's, and those its history restores) and nothing older.
#[test]
fn past_the_history_skipped_blocks_are_checked_by_their_links() {
    let (genesis, blocks) = chain(200, 12, 20, 7);
    let (_dir, mut db) = store_at(&genesis, &blocks, 10, 3);
    let handle = db.read_handle().unwrap();
    for n in 0..=12u64 {
        let want = (7..=10).contains(&n).then(|| blocks[n as usize - 1].state_root);
        assert_eq!(handle.recorded_root(n).unwrap(), want, "block {n}");
    }
    let mut damaged = blocks[2].clone();
    damaged.state_root.0[31] ^= 1;
    let file = replaced(&blocks, 3, damaged.clone());
    for pipelined in [false, true] {
        let (_, r) = import_blocks(&mut db, &file, pipelined);
        let expected =
            InvalidBlock::ParentRoot { expected: damaged.state_root, got: blocks[3].parent_root };
        assert_eq!(invalid(r), (4, expected));
        assert_eq!(db.head_number(), 10);
    }
}

/// Issue 29, defect 5: `invalid block j` names the number the failing position must carry
/// (the head is j − 1), with the record's own number in the reason.
#[test]
fn an_invalid_block_is_named_by_the_number_expected_there() {
    let (genesis, blocks) = chain(200, 8, 10, 3);
    let mut swapped = blocks.clone();
    swapped.swap(4, 5);
    let mut flipped = blocks.clone();
    flipped[3].number ^= 1 << 22;
    for pipelined in [false, true] {
        // Blocks 5 and 6 swapped: on a fresh store and, resumed, past skipped blocks.
        for head in [0, 4] {
            let (_dir, mut db) = store_at(&genesis, &blocks, head, 128);
            let (_, r) = import_blocks(&mut db, &swapped, pipelined);
            assert_eq!(invalid(r), (5, InvalidBlock::Number { expected: 5, got: 6 }));
            assert_eq!(db.head_number(), 4);
        }
        let (_dir, mut db) = store_at(&genesis, &blocks, 0, 128);
        let (_, r) = import_blocks(&mut db, &flipped, pipelined);
        assert_eq!(invalid(r), (4, InvalidBlock::Number { expected: 4, got: 4 | 1 << 22 }));
        assert_eq!(db.head_number(), 3);
    }
    // An undecodable record is named after the block before it.
    let header =
        ChainHeader { accounts: 200, balance: GENESIS_BALANCE, genesis_root: H256::default() };
    let mut bytes = Vec::new();
    chain::write_header(&mut bytes, &header).unwrap();
    for b in &blocks[4..6] {
        chain::write_block(&mut bytes, b).unwrap();
    }
    bytes.extend_from_slice(&3u32.to_be_bytes());
    bytes.extend_from_slice(b"bad");
    let items: Vec<_> = ChainReader::new(&bytes[..]).unwrap().collect();
    match items.last().unwrap() {
        Err(ImportError::Invalid { number, reason: InvalidBlock::Undecodable(_) }) => {
            assert_eq!(*number, 7)
        }
        other => panic!("{other:?}"),
    }
}
