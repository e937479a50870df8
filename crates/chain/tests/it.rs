//! Chain-level properties: exact per-transaction proof size and root for random transfer
//! blocks, stateless verification of built blocks (and its failures on incomplete or
//! altered witnesses), the PoV limit, and codecs that never panic.
//!
//! Environment: `ARBOR_PROPTEST_CASES` (default small enough for CI).

#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::BTreeMap;

use chain::{
    account_id, account_key, apply, block_txs, build_block, build_block_unrecorded, decode_witness,
    encode_witness, finish_block, genesis, start_block, verify_block, verify_block_within,
    ApplyError, Block, BlockContext, BlockLimits, BuildConfig, BuildError, ChainReceipt,
    CodecError, CorruptState, Counter, Format, PerTx, Stop, Transfer, TransferKind, VerifyError,
    EXISTENTIAL_DEPOSIT, FEE, FEE_POT_KEY,
};
use overlay::{Overlay, PovSession};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use state::{TrieId, H256};
use trie::{root_from_sorted, EthLayout, Layout, MemoryNodeSource, SubstrateV0, SubstrateV1, Trie};

fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A parent state of `balances.len()` accounts plus the author; committed to memory.
fn parent(balances: &[u128]) -> (BTreeMap<Vec<u8>, Vec<u8>>, MemoryNodeSource, H256) {
    let mut map = BTreeMap::new();
    for (i, b) in balances.iter().enumerate() {
        for (k, v) in genesis(&[account_id(i as u64)], *b) {
            map.insert(k, v);
        }
    }
    let (src, root) = MemoryNodeSource::committed::<EthLayout, _, _>(&map).unwrap();
    (map, src, root)
}

const AUTHOR: u64 = 1_000_000;

fn ctx() -> BlockContext {
    BlockContext { number: 7, author: account_id(AUTHOR) }
}

/// Transfers among `n` accounts, with amounts around the existential deposit so that
/// keep-alive refusals, deaths and failed receivers all happen; nonces mostly right.
fn transfers(
    n: usize,
    count: usize,
) -> impl Strategy<Value = Vec<(usize, usize, u128, bool, bool)>> {
    prop::collection::vec(
        (
            0..n,
            0..n + 2,
            prop_oneof![0u128..EXISTENTIAL_DEPOSIT * 3, Just(EXISTENTIAL_DEPOSIT)],
            any::<bool>(),
            prop::bool::weighted(0.9),
        ),
        1..count,
    )
}

/// Starting balances of 2 to 23 accounts, some only able to pay the fee.
fn balances() -> impl Strategy<Value = Vec<u128>> {
    prop::collection::vec(prop_oneof![Just(FEE), 0u128..EXISTENTIAL_DEPOSIT * 4], 2..24)
}

/// Drawn transfers restricted to `n` senders (receivers may be up to two unknown accounts).
fn among(
    raw: Vec<(usize, usize, u128, bool, bool)>,
    n: usize,
) -> Vec<(usize, usize, u128, bool, bool)> {
    raw.into_iter().map(|(f, t, a, d, r)| (f % n, t % (n + 2), a, d, r)).collect()
}

/// Turn drawn transfers into transactions with the right nonces (most of the time).
fn with_nonces(raw: &[(usize, usize, u128, bool, bool)]) -> Vec<Transfer> {
    let mut nonces: BTreeMap<usize, u64> = BTreeMap::new();
    raw.iter()
        .map(|&(from, to, amount, allow_death, right_nonce)| {
            let n = nonces.entry(from).or_default();
            let nonce = if right_nonce { *n } else { *n + 5 };
            if right_nonce {
                *n += 1;
            }
            Transfer {
                from: account_id(from as u64),
                to: account_id(to as u64),
                amount,
                nonce,
                kind: if allow_death { TransferKind::AllowDeath } else { TransferKind::KeepAlive },
            }
        })
        .collect()
}

/// Reference: a fresh recorder replaying the included transactions, then the root.
/// Returns (witness bytes, post-state root).
fn reference(
    src: &MemoryNodeSource,
    root: H256,
    parent: &BTreeMap<Vec<u8>, Vec<u8>>,
    txs: &[Transfer],
) -> (usize, H256) {
    let mut t: Trie<_, EthLayout> = Trie::from_root(src.clone(), root);
    t.start_recording();
    let mut o = Overlay::new(RefCell::new(t));
    start_block(&mut o, &ctx()).unwrap();
    for (i, tx) in (0u32..).zip(txs) {
        apply(&mut o, &ctx(), i, tx).unwrap();
    }
    let cs = o.drain_changes().unwrap();
    let mut t = o.into_backend().into_inner();
    let mut post = parent.clone();
    for (k, v) in cs.get(&TrieId::Main).into_iter().flatten() {
        t.write(k, v.as_deref()).unwrap();
        match v {
            Some(v) => post.insert(k.clone(), v.clone()),
            None => post.remove(k),
        };
    }
    t.root().unwrap();
    let items: Vec<(&Vec<u8>, &Vec<u8>)> = post.iter().collect();
    let scratch = root_from_sorted::<EthLayout, _, _>(&items).unwrap().0;
    (t.take_recorder().unwrap().encoded_bytes(), scratch)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    /// After every transaction k, proof_size() equals the witness a fresh recorder records
    /// for transactions 1..k plus the root, and storage_root() the root from scratch.
    #[test]
    fn per_transaction_size_and_root_are_exact(
        balances in balances(),
        raw in transfers(24, 30),
    ) {
        let n = balances.len();
        let raw = among(raw, n);
        let (map, src, root) = parent(&balances);
        let mut s = PovSession::<_, EthLayout>::new(&src, root);
        start_block(s.overlay(), &ctx()).unwrap();
        let mut included = Vec::new();
        for tx in with_nonces(&raw) {
            s.begin_candidate().unwrap();
            match apply(s.overlay(), &ctx(), included.len() as u32, &tx) {
                Ok(_) => {
                    // A nested transaction the runtime rolled back on failure is inside.
                    s.keep().unwrap();
                    included.push(tx);
                }
                Err(_) => {
                    s.discard().unwrap();
                    continue;
                }
            }
            let (bytes, post) = reference(&src, root, &map, &included);
            prop_assert_eq!(s.proof_size().unwrap(), bytes);
            prop_assert_eq!(s.storage_root().unwrap(), post);
        }
    }

    /// Built blocks verify from their witness alone; dropping any node gives "witness
    /// incomplete", altering any byte fails, nothing panics.
    #[test]
    fn built_blocks_verify_statelessly(
        balances in prop::collection::vec(EXISTENTIAL_DEPOSIT..EXISTENTIAL_DEPOSIT * 4, 2..16),
        raw in transfers(16, 12),
        flip in any::<(usize, usize, u8)>(),
    ) {
        let n = balances.len();
        let raw = among(raw, n);
        let (_, src, root) = parent(&balances);
        let built = build_block::<EthLayout, _>(&src, root, ctx(), &with_nonces(&raw), &BuildConfig::default()).unwrap();
        let block_bytes = built.block.encode();
        let witness_bytes = encode_witness(&built.witness);
        let block = Block::decode(&block_bytes).unwrap();
        prop_assert_eq!(&block, &built.block);
        let nodes = decode_witness::<EthLayout>(&witness_bytes).unwrap();
        prop_assert_eq!(verify_block::<EthLayout>(root, &block, nodes.clone()).unwrap(), built.block.state_root);
        // Drop each node in turn.
        for i in 0..nodes.len() {
            let mut fewer = nodes.clone();
            fewer.remove(i);
            let e = verify_block::<EthLayout>(root, &block, fewer).unwrap_err();
            prop_assert!(matches!(e, VerifyError::Incomplete { .. }), "dropping node {}: {}", i, e);
            prop_assert!(e.to_string().contains("witness incomplete"));
        }
        // Alter one byte of the witness file: decoding or verification fails.
        if !witness_bytes.is_empty() {
            let mut bad = witness_bytes.clone();
            let at = flip.0 % bad.len();
            bad[at] ^= flip.2.max(1);
            let outcome = decode_witness::<EthLayout>(&bad).map(|w| verify_block::<EthLayout>(root, &block, w));
            prop_assert!(!matches!(outcome, Ok(Ok(_))), "flipping byte {} still verified", at);
        }
        // And one byte of the block (a block without transactions does not depend on its
        // number or author: those bytes are only checked once a transaction uses them).
        let mut bad = block_bytes.clone();
        let at = flip.1 % bad.len();
        bad[at] ^= flip.2.max(1);
        let outcome = Block::decode(&bad).map(|b| verify_block::<EthLayout>(root, &b, nodes.clone()));
        let header_only = (5..13).contains(&at) || (77..109).contains(&at);
        if !block.transfers.is_empty() || !header_only {
            prop_assert!(!matches!(outcome, Ok(Ok(_))), "flipping block byte {} still verified", at);
        }
    }

    /// Substrate's layouts: the builder's block verifies from its witness alone, its root is
    /// the unrecorded build's, its size is the witness's by Substrate's rule, and dropping
    /// any node gives "witness incomplete".
    #[test]
    fn built_blocks_verify_statelessly_in_substrate_layouts(
        balances in prop::collection::vec(EXISTENTIAL_DEPOSIT..EXISTENTIAL_DEPOSIT * 4, 2..16),
        raw in transfers(16, 12),
    ) {
        let txs = with_nonces(&among(raw, balances.len()));
        built_block_verifies_in::<SubstrateV0>(&balances, &txs)?;
        built_block_verifies_in::<SubstrateV1>(&balances, &txs)?;
    }

    /// Garbage never panics the decoders.
    #[test]
    fn decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300), prefix in 0usize..3) {
        let mut b = match prefix { 0 => b"ARBB\x01".to_vec(), 1 => b"ARBW\x01".to_vec(), _ => Vec::new() };
        b.extend_from_slice(&bytes);
        let _ = Block::decode(&b);
        let _ = decode_witness::<EthLayout>(&b);
    }
}

/// The builder never goes over the limit and stops only when the next transaction would.
#[test]
fn builder_fills_to_the_pov_limit() {
    let balances = vec![EXISTENTIAL_DEPOSIT * 100; 400];
    let (_, src, root) = parent(&balances);
    let pool: Vec<Transfer> = (0..400u64)
        .map(|i| Transfer {
            from: account_id(i),
            to: account_id((i * 7 + 3) % 400),
            amount: EXISTENTIAL_DEPOSIT,
            nonce: 0,
            kind: TransferKind::KeepAlive,
        })
        .collect();
    for limit in [4_000usize, 20_000, 40_000] {
        let config = BuildConfig { pov_limit: limit, ..BuildConfig::default() };
        let built = build_block::<EthLayout, _>(&src, root, ctx(), &pool, &config).unwrap();
        assert!(built.proof_size <= limit, "{} > {limit}", built.proof_size);
        assert_eq!(built.stop, Stop::PovLimit);
        let k = built.block.transfers.len();
        // With the next transaction the witness would have been over the limit.
        let more = BuildConfig { per_tx: PerTx::Nothing, ..BuildConfig::default() };
        let over = build_block::<EthLayout, _>(&src, root, ctx(), &pool[..k + 1], &more).unwrap();
        assert!(over.proof_size > limit, "limit {limit}: {} transactions fit", k + 1);
        assert!(verify_block::<EthLayout>(
            root,
            &built.block,
            decode_witness::<EthLayout>(&encode_witness(&built.witness)).unwrap()
        )
        .is_ok());
    }
}

/// `parent` with `writes` applied.
fn post_state<'a>(
    parent: &BTreeMap<Vec<u8>, Vec<u8>>,
    writes: impl IntoIterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut post = parent.clone();
    for (k, v) in writes {
        match v {
            Some(v) => post.insert(k.clone(), v.clone()),
            None => post.remove(k),
        };
    }
    post
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    /// The runtime run as Block-STM transactions (sequentially and with 2-4 workers, the
    /// engine forced even for small blocks) writes exactly what applying the same block to
    /// an overlay writes, with the same outcome per transaction (invalid ones included).
    #[test]
    fn block_stm_execution_matches_the_overlay_runtime(
        balances in balances(),
        raw in transfers(24, 40),
        workers in 2usize..=4,
    ) {
        let n = balances.len();
        let raw = among(raw, n);
        let (map, _, _) = parent(&balances);
        let txs = with_nonces(&raw);
        let mut o = Overlay::new(&map);
        start_block(&mut o, &ctx()).unwrap();
        let mut expected = vec![ChainReceipt::Started];
        for (i, tx) in (0u32..).zip(&txs) {
            o.start_transaction();
            expected.push(match apply(&mut o, &ctx(), i, tx) {
                Ok(outcome) => ChainReceipt::Applied(outcome),
                Err(ApplyError::Invalid(i)) => ChainReceipt::Invalid(i),
                Err(e) => panic!("{e}"),
            });
            o.commit_transaction().unwrap();
        }
        finish_block(&mut o, &ctx()).unwrap();
        expected.push(ChainReceipt::Finished);
        let cs = o.drain_changes().unwrap();
        let expected_state = post_state(&map, cs.get(&TrieId::Main).into_iter().flatten());

        // The executors also report deletes of keys that were never there (the block-start
        // hook's); the post-states must be equal.
        let block = block_txs(ctx(), &txs);
        let seq = exec::execute_sequential(&block, &map).unwrap();
        prop_assert_eq!(&seq.outputs, &expected);
        prop_assert_eq!(&post_state(&map, &seq.writes), &expected_state);
        let options = exec::ParallelOptions { always_parallel: true, ..Default::default() };
        let par = exec::execute_parallel_with(&block, &map, workers, options).unwrap();
        prop_assert_eq!(&par.outputs, &expected);
        prop_assert_eq!(&par.writes, &seq.writes);
    }
}

/// The parent map with block `b`'s changes applied, committed to memory.
fn commit(
    map: &BTreeMap<Vec<u8>, Vec<u8>>,
    changes: &state::ChangeSet,
) -> (BTreeMap<Vec<u8>, Vec<u8>>, MemoryNodeSource, H256) {
    let post = post_state(map, changes.get(&TrieId::Main).into_iter().flatten());
    let (src, root) = MemoryNodeSource::committed::<EthLayout, _, _>(&post).unwrap();
    (post, src, root)
}

/// A limit below the witness of an empty block is refused with that size; at that size
/// the builder produces a block within it. Checked on a genesis and on a parent whose
/// bookkeeping keys the block-start hook deletes (branches collapse).
#[test]
fn pov_limit_below_an_empty_block_is_refused() {
    let (map, src, root) = parent(&vec![EXISTENTIAL_DEPOSIT * 100; 50]);
    let pool: Vec<Transfer> = (0..50u64)
        .map(|i| Transfer {
            from: account_id(i),
            to: account_id((i + 1) % 50),
            amount: EXISTENTIAL_DEPOSIT,
            nonce: 0,
            kind: TransferKind::KeepAlive,
        })
        .collect();
    let first =
        build_block::<EthLayout, _>(&src, root, ctx(), &pool[..10], &BuildConfig::default())
            .unwrap();
    let (_, src2, root2) = commit(&map, &first.changes);
    let next: Vec<Transfer> = pool[10..].to_vec();
    for (src, root, pool) in [(&src, root, &pool[..]), (&src2, root2, &next[..])] {
        let empty =
            build_block::<EthLayout, _>(src, root, ctx(), &[], &BuildConfig::default()).unwrap();
        let min = empty.proof_size;
        assert!(min > 0);
        let config = BuildConfig { pov_limit: min - 1, ..BuildConfig::default() };
        match build_block::<EthLayout, _>(src, root, ctx(), pool, &config) {
            Err(BuildError::PovLimitTooSmall { limit, min: m }) => {
                assert_eq!((limit, m), (min - 1, min));
            }
            other => panic!("expected PovLimitTooSmall, got {other:?}"),
        }
        let e = build_block::<EthLayout, _>(src, root, ctx(), pool, &config).unwrap_err();
        assert!(e.to_string().contains(&format!("at least {min} bytes")), "{e}");
        for limit in [min, min + 1, min + 500] {
            let config = BuildConfig { pov_limit: limit, ..BuildConfig::default() };
            let built = build_block::<EthLayout, _>(src, root, ctx(), pool, &config).unwrap();
            assert!(built.proof_size <= limit, "{} > {limit}", built.proof_size);
        }
        // Modes that do not enforce the limit do not check it either.
        let config = BuildConfig { pov_limit: 0, per_tx: PerTx::Nothing, ..BuildConfig::default() };
        assert!(build_block::<EthLayout, _>(src, root, ctx(), pool, &config).is_ok());
    }
}

/// Corrupt state is a typed error (with its cause) everywhere the runtime runs: applying
/// a transaction, building a block, verifying one, and as a Block-STM receipt.
#[test]
fn corrupt_state_is_typed() {
    let (mut map, _, _) = parent(&[EXISTENTIAL_DEPOSIT * 100; 4]);
    let key = account_key(&account_id(0));
    map.insert(key.as_bytes().to_vec(), vec![1, 2, 3]);
    let (src, root) = MemoryNodeSource::committed::<EthLayout, _, _>(&map).unwrap();
    let tx = Transfer {
        from: account_id(0),
        to: account_id(1),
        amount: EXISTENTIAL_DEPOSIT,
        nonce: 0,
        kind: TransferKind::KeepAlive,
    };
    let want = CorruptState::Account { key, len: 3 };

    let mut o = Overlay::new(&map);
    match apply(&mut o, &ctx(), 0, &tx) {
        Err(ApplyError::Corrupt(c)) => assert_eq!(c, want),
        other => panic!("expected a corrupt account, got {other:?}"),
    }
    // A fee pot of the wrong width: the hooks read it.
    let mut odd = map.clone();
    odd.insert(FEE_POT_KEY.to_vec(), vec![0; 3]);
    let mut o = Overlay::new(&odd);
    match start_block(&mut o, &ctx()) {
        Err(ApplyError::Corrupt(c)) => {
            assert_eq!(c, CorruptState::Counter { counter: Counter::FeePot, len: 3 });
            assert!(c.to_string().contains("Balances.FeePot holds 3 bytes, expected 8"), "{c}");
        }
        other => panic!("expected a corrupt counter, got {other:?}"),
    }

    let e =
        build_block::<EthLayout, _>(&src, root, ctx(), &[tx], &BuildConfig::default()).unwrap_err();
    match &e {
        BuildError::Runtime(ApplyError::Corrupt(c)) => assert_eq!(c, &want),
        other => panic!("expected a runtime error, got {other:?}"),
    }
    let source = std::error::Error::source(&e).unwrap();
    assert!(source.to_string().contains("holds 3 bytes"), "{source}");

    // The witness of the reads so far is enough to re-execute up to the corrupt read.
    let mut s = PovSession::<_, EthLayout>::new(&src, root);
    start_block(s.overlay(), &ctx()).unwrap();
    assert!(apply(s.overlay(), &ctx(), 0, &tx).is_err());
    let witness = s.witness().unwrap();
    let block = Block {
        number: ctx().number,
        parent_root: root,
        state_root: root,
        author: ctx().author,
        transfers: vec![tx],
    };
    let nodes = decode_witness::<EthLayout>(&encode_witness(&witness)).unwrap();
    assert_eq!(
        verify_block::<EthLayout>(root, &block, nodes).unwrap_err(),
        VerifyError::CorruptState { index: 0, source: want.clone() }
    );

    let out = exec::execute_sequential(&block_txs(ctx(), &[tx]), &map).unwrap();
    assert_eq!(
        out.outputs,
        vec![ChainReceipt::Started, ChainReceipt::Corrupt(want), ChainReceipt::Finished]
    );
}

/// Codec errors name the encoding and its magic.
#[test]
fn codec_errors_name_the_format() {
    let e = Block::decode(b"ARBW\x01").unwrap_err();
    assert_eq!(e, CodecError::Magic { what: Format::Block });
    assert_eq!(e.to_string(), "not a block: the file does not start with \"ARBB\"");
    let e = decode_witness::<EthLayout>(b"ARBW\x02").unwrap_err();
    assert_eq!(e, CodecError::Version { what: Format::Witness, version: 2 });
    let e = decode_witness::<EthLayout>(b"ARBW\x01\x00\x00\x00\x01\x00").unwrap_err();
    assert_eq!(e, CodecError::Length { what: Format::Witness, offset: 9 });
}

/// A validator enforces the builder's limits: a block of more transfers than the weight
/// limit allows, or a witness over the PoV limit, is refused before it executes, however
/// it would execute.
#[test]
fn blocks_over_the_limits_are_refused() {
    let (_, src, root) = parent(&[EXISTENTIAL_DEPOSIT * 1_000; 4]);
    let pool: Vec<Transfer> = (0..2u64)
        .map(|i| Transfer {
            from: account_id(i),
            to: account_id(i + 2),
            amount: EXISTENTIAL_DEPOSIT,
            nonce: 0,
            kind: TransferKind::KeepAlive,
        })
        .collect();
    let built =
        build_block::<EthLayout, _>(&src, root, ctx(), &pool, &BuildConfig::default()).unwrap();
    let nodes = || decode_witness::<EthLayout>(&encode_witness(&built.witness)).unwrap();
    assert_eq!(
        verify_block::<EthLayout>(root, &built.block, nodes()).unwrap(),
        built.block.state_root
    );

    let tight = BlockLimits { pov_limit: built.proof_size - 1, ..BlockLimits::default() };
    assert_eq!(
        verify_block_within::<EthLayout>(root, &built.block, nodes(), &tight).unwrap_err(),
        VerifyError::PovTooLarge { bytes: built.proof_size, limit: built.proof_size - 1 }
    );
    let exact = BlockLimits { pov_limit: built.proof_size, ..BlockLimits::default() };
    assert!(verify_block_within::<EthLayout>(root, &built.block, nodes(), &exact).is_ok());

    let limit = BlockLimits::default().weight_limit;
    let transfers = usize::try_from(limit / chain::TRANSFER_WEIGHT).unwrap() + 1;
    let mut heavy = built.block.clone();
    heavy.transfers = vec![pool[0]; transfers];
    let weight = transfers as u64 * chain::TRANSFER_WEIGHT;
    assert_eq!(
        verify_block::<EthLayout>(root, &heavy, nodes()).unwrap_err(),
        VerifyError::Overweight { transfers, weight, limit }
    );
}

/// See `built_blocks_verify_statelessly_in_substrate_layouts`.
fn built_block_verifies_in<L: Layout>(
    balances: &[u128],
    txs: &[Transfer],
) -> Result<(), TestCaseError> {
    let (map, _, _) = parent(balances);
    let (src, root) = MemoryNodeSource::committed::<L, _, _>(&map).unwrap();
    let built = build_block::<L, _>(&src, root, ctx(), txs, &BuildConfig::default()).unwrap();
    let plain = build_block_unrecorded::<L, _, _>(&map, &src, root, ctx(), txs).unwrap();
    prop_assert_eq!(built.block.state_root, plain.block.state_root);
    let size: usize = built.witness.iter().map(|n| L::PROOF_SIZE.item_size(n.len())).sum();
    prop_assert_eq!(built.proof_size, size);
    let nodes = decode_witness::<L>(&encode_witness(&built.witness)).unwrap();
    let limits = BlockLimits::default();
    let verified = verify_block_within::<L>(root, &built.block, nodes.clone(), &limits);
    prop_assert_eq!(verified.unwrap(), built.block.state_root);
    for i in 0..nodes.len() {
        let mut fewer = nodes.clone();
        fewer.remove(i);
        let e = verify_block_within::<L>(root, &built.block, fewer, &limits).unwrap_err();
        prop_assert!(matches!(e, VerifyError::Incomplete { .. }), "dropping node {}: {}", i, e);
    }
    Ok(())
}
