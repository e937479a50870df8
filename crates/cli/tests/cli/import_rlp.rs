//! `arbor import --chain FILE --genesis GENESIS.json` with a file of RLP Ethereum blocks:
//! a blockchain test's chain (the subset's `RecallSuicidedContract_Cancun`, three blocks
//! with a contract's self-destruct and its recall) written as `geth export` writes it, its
//! genesis as geth's JSON; imported pipelined and not to the fixture's last state root, a
//! rerun skips every block; a flipped byte is refused (exit 1, head below the block); the
//! format's flag mistakes are usage errors; a genesis that is not the chain's is refused.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use test_support::statetests::{blocktests_archive_path, read_archive};

use super::{arbor, fresh_db, stderr};

const FILE: &str = "BlockchainTests/ValidBlocks/bcValidBlockTest/RecallSuicidedContract.json";
const TEST: &str = "RecallSuicidedContract_Cancun";

/// The test's chain file and genesis file (under `name`), its last block's state root and
/// the gas its blocks' headers say they used.
fn chain_files(name: &str) -> (PathBuf, PathBuf, String, u64) {
    let (_, bytes) =
        read_archive(&blocktests_archive_path()).into_iter().find(|(p, _)| p == FILE).unwrap();
    let test: Value = serde_json::from_slice::<Value>(&bytes).unwrap()[TEST].clone();
    let h = &test["genesisBlockHeader"];
    let mut genesis = json!({
        "config": {"chainId": 1, "terminalTotalDifficulty": 0, "shanghaiTime": 0, "cancunTime": 0},
        "alloc": test["pre"].clone(),
    });
    for (field, from) in [
        ("nonce", "nonce"),
        ("timestamp", "timestamp"),
        ("extraData", "extraData"),
        ("gasLimit", "gasLimit"),
        ("difficulty", "difficulty"),
        ("mixHash", "mixHash"),
        ("coinbase", "coinbase"),
        ("baseFeePerGas", "baseFeePerGas"),
        ("excessBlobGas", "excessBlobGas"),
        ("blobGasUsed", "blobGasUsed"),
    ] {
        genesis[field] = h[from].clone();
    }
    let blocks = test["blocks"].as_array().unwrap();
    let rlp: Vec<u8> = blocks
        .iter()
        .flat_map(|b| hex::decode(b["rlp"].as_str().unwrap().trim_start_matches("0x")).unwrap())
        .collect();
    let root = blocks.last().unwrap()["blockHeader"]["stateRoot"].as_str().unwrap().to_string();
    let gas_of = |b: &Value| {
        let hex = b["blockHeader"]["gasUsed"].as_str().unwrap().trim_start_matches("0x");
        u64::from_str_radix(hex, 16).unwrap()
    };
    let gas = blocks.iter().map(gas_of).sum();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("import-rlp-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (chain, gen) = (dir.join("chain.rlp"), dir.join("genesis.json"));
    std::fs::write(&chain, rlp).unwrap();
    std::fs::write(&gen, genesis.to_string()).unwrap();
    (chain, gen, root, gas)
}

fn import_json(db: &str, chain: &Path, genesis: &Path, extra: &[&str]) -> (bool, Value) {
    let mut args = vec!["import", "--db", db, "--chain", chain.to_str().unwrap()];
    args.extend(["--genesis", genesis.to_str().unwrap(), "--json"]);
    args.extend(extra);
    let o = arbor(&args);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let code = o.status.code();
    assert!(code == Some(0) || code == Some(1), "exit {code:?}: {}", stderr(&o));
    (o.status.success(), serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn an_rlp_chain_imports_pipelined_and_not_and_resumes() {
    let (chain, genesis, root, gas) = chain_files("ok");
    let db = fresh_db("import-rlp-piped");
    let (good, v) = import_json(&db, &chain, &genesis, &[]);
    assert!(good, "{v}");
    assert_eq!((v["block"].as_u64(), v["blocks"].as_u64()), (Some(3), Some(3)), "{v}");
    assert_eq!(v["root"].as_str(), Some(root.as_str()));
    // The gas the fixture's headers say their blocks used.
    assert_eq!(v["gas_used"].as_u64(), Some(gas), "{v}");
    assert!(v["mgas_per_s"].as_f64().unwrap() > 0.0, "{v}");
    let (good, v) = import_json(&db, &chain, &genesis, &[]);
    assert!(good && v["skipped"] == 3 && v["blocks"] == 0, "a rerun skips every block: {v}");
    let flat = fresh_db("import-rlp-flat");
    let (good, v) = import_json(&flat, &chain, &genesis, &["--no-pipeline"]);
    assert!(good && v["root"].as_str() == Some(root.as_str()), "{v}");
}

#[test]
fn flipped_bytes_and_other_genesis_files_are_refused() {
    let (chain, genesis, _, _) = chain_files("bad");
    let bytes = std::fs::read(&chain).unwrap();
    for (i, at) in
        [40usize, bytes.len() / 3, bytes.len() / 2, bytes.len() - 2].into_iter().enumerate()
    {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x10;
        let path = chain.with_file_name(format!("flipped-{i}.rlp"));
        std::fs::write(&path, flipped).unwrap();
        let db = fresh_db(&format!("import-rlp-flip-{i}"));
        let (good, v) = import_json(&db, &path, &genesis, &[]);
        assert!(!good && v["error"].is_string(), "byte {at}: {v}");
        assert!(v["block"].as_u64().unwrap() < 3, "byte {at}: the head is below the chain's: {v}");
    }
    let mut other: Value = serde_json::from_slice(&std::fs::read(&genesis).unwrap()).unwrap();
    other["extraData"] = json!("0x43");
    let other_path = genesis.with_file_name("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let db = fresh_db("import-rlp-other");
    let (good, v) = import_json(&db, &chain, &other_path, &[]);
    assert!(!good && v["block"] == 0, "{v}");
    assert!(v["error"].as_str().unwrap().contains("parent hash"), "{v}");
    // A database of one genesis refuses another's.
    let args = ["--chain", chain.to_str().unwrap(), "--genesis", genesis.to_str().unwrap()];
    let o = arbor(&[&["import", "--db", &db][..], &args[..]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("another chain"), "{}", stderr(&o));

    let db = fresh_db("import-rlp-usage");
    let o = arbor(&["import", "--db", &db, "--chain", chain.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--genesis"), "{}", stderr(&o));
}
