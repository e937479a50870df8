//! The blockchain-test runner's verdicts on real fixtures edited by hand: every check it
//! makes can fail (a wrong last block hash, post-state account, genesis root; a valid block
//! expected refused, an invalid one expected accepted; a block with a flipped byte refused
//! with the head unchanged), networks it does not run are skipped, and hostile fixture
//! text is a typed error naming the field, never a panic.

use alloy_primitives::U256;
use evm::blocktest::{
    parse_file, run_file, run_test, BlockBackend, BlockRlp, BlockTest, InMemoryChain, InStoreChain,
    Outcome, PostState, Verdict,
};
use evm::FixtureError;
use serde_json::{json, Value};
use state::H256;
use test_support::statetests::{blocktests_archive_path, read_archive};

/// The text of one file of the blockchain-test subset.
fn block_file(name: &str) -> String {
    let files = read_archive(&blocktests_archive_path());
    let (_, bytes) = files
        .into_iter()
        .find(|(path, _)| path.ends_with(name))
        .unwrap_or_else(|| panic!("{name} not in the subset"));
    String::from_utf8(bytes).unwrap()
}

/// One Cancun block with one transaction, accepted.
const VALID: &str = "ValidBlocks/bcValidBlockTest/SimpleTx.json";
/// One Cancun block whose transaction asks for more gas than the block allows: refused.
const INVALID: &str = "InvalidBlocks/bcStateTests/gasLimitTooHigh.json";

/// The only test of a subset file.
fn only_test(name: &str) -> BlockTest {
    let mut file = parse_file(&block_file(name)).unwrap();
    assert_eq!(file.tests.len(), 1, "{name}");
    file.tests.remove(0).1
}

fn run(test: &BlockTest) -> Outcome {
    run_test(test, &mut InMemoryChain::new())
}

fn failure(test: &BlockTest) -> String {
    match run(test) {
        Outcome::Failed(why) => why,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn the_base_fixtures_pass() {
    assert_eq!(run(&only_test(VALID)), Outcome::Passed);
    assert_eq!(run(&only_test(INVALID)), Outcome::Passed);
}

#[test]
fn a_wrong_last_block_hash_or_genesis_root_fails() {
    let mut test = only_test(VALID);
    test.last_block_hash = H256([7; 32]);
    assert!(failure(&test).contains("lastblockhash"), "{}", failure(&test));

    let mut test = only_test(VALID);
    test.genesis_state_root = H256([7; 32]);
    assert!(failure(&test).contains("genesis state root"), "{}", failure(&test));

    let mut test = only_test(VALID);
    test.genesis_hash = H256([7; 32]);
    assert!(failure(&test).contains("genesis hash"), "{}", failure(&test));
}

#[test]
fn a_wrong_post_state_fails_naming_the_account() {
    let mut test = only_test(VALID);
    let PostState::Accounts(post) = &mut test.post else { panic!("SimpleTx has a postState") };
    let (address, account) = post.alloc.iter_mut().last().unwrap();
    account.balance += U256::from(1);
    let name = format!("0x{}", hex::encode(address));
    let why = failure(&test);
    assert!(why.contains(&name) && why.contains("balance"), "{why}");

    let mut test = only_test(VALID);
    let PostState::Accounts(post) = &mut test.post else { unreachable!() };
    let (_, account) = post.alloc.iter_mut().last().unwrap();
    account.storage.insert(H256([1; 32]), U256::from(5));
    assert!(failure(&test).contains("slot"), "{}", failure(&test));

    let mut test = only_test(VALID);
    test.post = PostState::Root(H256([7; 32]));
    assert!(failure(&test).contains("postStateHash"), "{}", failure(&test));
}

#[test]
fn expectations_of_validity_are_checked_both_ways() {
    let mut test = only_test(VALID);
    test.blocks[0].expect_exception = Some("made up".into());
    assert!(failure(&test).contains("expected it refused"), "{}", failure(&test));

    let mut test = only_test(INVALID);
    test.blocks[0].expect_exception = None;
    assert!(failure(&test).contains("refused"), "{}", failure(&test));
}

#[test]
fn a_block_with_a_flipped_byte_is_refused_with_the_head_unchanged() {
    let test = only_test(VALID);
    let BlockRlp::Bytes(rlp) = &test.blocks[0].rlp else { panic!("hex rlp") };
    let genesis = evm::block::decode_block(&test.genesis_rlp).unwrap();
    let chain = evm::block::ChainConfig::for_network(&test.network).unwrap();
    // The header's span: a flip there may give another valid block (a header field that
    // nothing executed reads, such as mixHash); a flip anywhere else must be refused.
    let mut rest = &rlp[..];
    alloy_rlp::Header::decode(&mut rest).unwrap();
    let header_start = rlp.len() - rest.len();
    let inner = alloy_rlp::Header::decode(&mut rest).unwrap();
    let header_end = rlp.len() - rest.len() + inner.payload_length;
    // Every 7th byte, and the last ones (the body's end): one at a time.
    let picks = (0..rlp.len()).step_by(7).chain(rlp.len().saturating_sub(4)..rlp.len());
    let mut refused = 0;
    for at in picks {
        let mut bad = rlp.clone();
        bad[at] ^= 0x01;
        let mut backend = InMemoryChain::new();
        backend.start(&test.pre, &genesis, &chain).unwrap();
        let root = backend.head_root();
        match backend.import(&bad).unwrap() {
            Verdict::Rejected(_) => {
                refused += 1;
                assert_eq!(backend.head(), genesis.hash, "byte {at}: the head moved");
                assert_eq!(backend.head_root(), root, "byte {at}: the state moved");
            }
            Verdict::Imported(hash) => {
                let in_header = (header_start..header_end).contains(&at);
                assert!(in_header, "byte {at} (body): a flipped block was accepted");
                assert_ne!(Some(hash), test.blocks[0].hash, "byte {at}: the same hash");
                assert_eq!(backend.head(), hash);
            }
        }
    }
    assert!(refused > 10, "{refused}");
    // And the unflipped block is accepted after all that.
    let mut backend = InMemoryChain::new();
    backend.start(&test.pre, &genesis, &chain).unwrap();
    assert!(matches!(backend.import(rlp).unwrap(), Verdict::Imported(_)));
}

#[test]
fn networks_the_executor_does_not_run_are_skipped() {
    for network in ["Frontier", "Berlin", "London", "Osaka", "NoSuchFork"] {
        let mut test = only_test(VALID);
        test.network = network.into();
        assert_eq!(run(&test), Outcome::Skipped, "{network}");
    }
}

/// `f` applied to the (only) test of the valid base fixture, as text.
fn edited(f: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(&block_file(VALID)).unwrap();
    let test = v.as_object_mut().unwrap().values_mut().next().unwrap();
    f(test);
    v.to_string()
}

fn field_path(text: &str) -> String {
    match parse_file(text) {
        Err(FixtureError::Field { path, .. }) => path,
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn hostile_fixture_text_is_a_typed_error() {
    let text = block_file(VALID);
    for cut in (0..text.len()).step_by(97) {
        assert!(parse_file(&text[..cut]).is_err(), "a prefix of {cut} bytes parsed");
    }
    assert!(matches!(parse_file("{}"), Err(FixtureError::NoTests)));
    assert!(field_path(&edited(|t| t["blocks"] = json!({}))).ends_with(".blocks"));
    assert!(
        field_path(&edited(|t| t["blocks"][0]["rlp"] = json!("0xzz"))).ends_with("blocks[0].rlp")
    );
    assert!(field_path(&edited(|t| t["lastblockhash"] = json!("0x12"))).ends_with(".lastblockhash"));
    assert!(field_path(&edited(|t| {
        t.as_object_mut().unwrap().remove("genesisRLP");
    }))
    .ends_with(".genesisRLP"));
    let no_post = edited(|t| {
        t.as_object_mut().unwrap().remove("postState");
    });
    assert!(field_path(&no_post).ends_with(".postState"));
    let message = parse_file(&no_post).unwrap_err().to_string();
    assert!(message.ends_with(".postState: missing (and no postStateHash)"), "{message}");
    assert!(field_path(&edited(|t| t["config"]["chainid"] = json!("0x1ffffffffffffffff")))
        .ends_with("config.chainid"));
    assert!(matches!(
        parse_file(&edited(|t| t["pre"] = json!({"0x01": {"balance": []}}))),
        Err(FixtureError::Alloc { .. })
    ));
    // Not hex, in a block expected to be refused: kept, and refusing it is the test.
    let text = edited(|t| {
        t["blocks"][0]["rlp"] = json!("0xzz");
        t["blocks"][0]["expectException"] = json!("rlp");
        t["lastblockhash"] = t["genesisBlockHeader"]["hash"].clone();
        t["postState"] = t["pre"].clone();
    });
    let file = parse_file(&text).unwrap();
    let reports = run_file(&file, InMemoryChain::new);
    assert_eq!(reports[0].outcome, Outcome::Passed, "{reports:?}");
}

/// A chain of three blocks, imported, then its blocks again from the first (each a branch
/// from below the head, so the backend undoes blocks and replays): same head, same root.
fn branches_replay_on(mut backend: impl BlockBackend) {
    let test = only_test("ValidBlocks/bcValidBlockTest/RecallSuicidedContract.json");
    let genesis = evm::block::decode_block(&test.genesis_rlp).unwrap();
    let chain = evm::block::ChainConfig::for_network(&test.network).unwrap();
    backend.start(&test.pre, &genesis, &chain).unwrap();
    let rlps: Vec<&Vec<u8>> = test
        .blocks
        .iter()
        .map(|b| match &b.rlp {
            BlockRlp::Bytes(rlp) => rlp,
            BlockRlp::Malformed(_) => panic!("hex rlp"),
        })
        .collect();
    let mut roots = Vec::new();
    for rlp in &rlps {
        assert!(matches!(backend.import(rlp).unwrap(), Verdict::Imported(_)));
        roots.push(backend.head_root());
    }
    assert_eq!(backend.head(), test.last_block_hash);
    for (i, rlp) in rlps.iter().enumerate() {
        let Verdict::Imported(hash) = backend.import(rlp).unwrap() else { panic!("block {i}") };
        assert_eq!(backend.head(), hash);
        assert_eq!(backend.head_root(), roots[i], "block {i} again");
    }
    assert_eq!(backend.head(), test.last_block_hash);
    backend.finish().unwrap();
}

#[test]
fn branches_below_the_head_replay_in_memory_and_on_the_store() {
    branches_replay_on(InMemoryChain::new());
    let dir = tempfile::tempdir().unwrap();
    branches_replay_on(InStoreChain::in_dir(dir.path().join("db")));
    assert!(!dir.path().join("db").exists(), "the database is removed when the chain drops");
}

#[test]
fn a_typed_transaction_off_its_declared_length_is_not_a_block() {
    // alloy decodes a typed transaction out of an RLP string without holding it to the
    // string's declared length; every such item of these blocks, declared a few bytes
    // shorter or longer (nothing else changed), must fail to decode.
    let file = parse_file(&block_file("ValidBlocks/bcEIP1559/medDemand.json")).unwrap();
    let mut tried = 0;
    for (_, test) in &file.tests {
        for block in &test.blocks {
            let BlockRlp::Bytes(rlp) = &block.rlp else { continue };
            assert!(evm::block::decode_block(rlp).is_ok());
            let mut rest = &rlp[..];
            alloy_rlp::Header::decode(&mut rest).unwrap();
            let header = alloy_rlp::Header::decode(&mut rest).unwrap();
            rest = &rest[header.payload_length..];
            let list = alloy_rlp::Header::decode(&mut rest).unwrap();
            let base = rlp.len() - rest.len();
            let mut items = &rest[..list.payload_length];
            while !items.is_empty() {
                let at = base + list.payload_length - items.len();
                let start = items;
                let item = alloy_rlp::Header::decode(&mut items).unwrap();
                items = &items[item.payload_length..];
                // A typed transaction with a one-byte long-form length (`b8 LL`).
                if item.list || start[0] != 0xb8 || item.payload_length < 60 {
                    continue;
                }
                for delta in [-4i16, -1, 1, 3] {
                    let mut bad = rlp.clone();
                    bad[at + 1] = (i16::from(bad[at + 1]) + delta) as u8;
                    let decoded = evm::block::decode_block(&bad);
                    assert!(decoded.is_err(), "item at {at}, length {delta:+}: decoded");
                    tried += 1;
                }
            }
        }
    }
    assert!(tried >= 40, "{tried}");
}
