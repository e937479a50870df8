//! End-to-end tests of the `arbor` binary: roots against known vectors, prove → verify
//! round trips through files and stdin, tampering, and the one-line error contract on
//! malformed input (non-zero exit, `error: …`, never a panic).

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use state::H256;
use test_support::dir_snapshot;
use trie::{keccak256, EthLayout};

/// `arbor bench evm`: a tiny run's report, its worker command's refusals.
#[path = "cli/bench_evm.rs"]
mod bench_evm;
/// `arbor bench store`: its report, its worker processes, a driver killed mid-run.
#[path = "cli/bench_store.rs"]
mod bench_store;
/// `blocktest`: the Ethereum blockchain-test subset, failures, skipped networks, bad fixtures.
#[path = "cli/blocktest.rs"]
mod blocktest;
/// `arbor checkpoint …`: round trips, hostile sources and command lines, SIGKILL.
#[path = "cli/checkpoint.rs"]
mod checkpoint;
#[path = "cli/checkpoint_v1.rs"]
mod checkpoint_v1;
/// `--json` field names and exit code classes.
#[path = "cli/conventions.rs"]
mod conventions;
/// SIGKILL during `init` and bulk loads.
#[path = "cli/crash.rs"]
mod crash;
/// `prove --db --address`: eth_getProof answers from account-model databases, tampering.
#[path = "cli/eth_proof.rs"]
mod eth_proof;
/// `gen-chain --evm` chains imported, flipped, killed; `bench import --evm`.
#[path = "cli/gen_chain_evm.rs"]
mod gen_chain_evm;
#[path = "cli/import.rs"]
mod import;
/// `import --chain FILE --genesis GENESIS.json`: RLP Ethereum blocks through the road.
#[path = "cli/import_rlp.rs"]
mod import_rlp;
#[path = "cli/limits.rs"]
mod limits;
/// `get` and `prove --db` at recent blocks (`--block`), and the window in `stats`.
#[path = "cli/recent.rs"]
mod recent;
/// `statetest`: the Ethereum state-test subset, failures, skipped forks, bad fixtures.
#[path = "cli/statetest.rs"]
mod statetest;
/// `root` in Substrate's layouts: chain specs, `--layout`, bad chain specs.
#[path = "cli/substrate.rs"]
mod substrate;
/// Databases in Substrate's layouts: `init --chain-spec`, `load --layout`, proofs.
#[path = "cli/substrate_db.rs"]
mod substrate_db;
/// What the `statetest` and `blocktest` tests share: extracted subsets, summary counts.
#[path = "cli/suite_files.rs"]
mod suite_files;

const MAINNET_ROOT: &str = "0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544";
const EXEC_APIS_ROOT: &str = "0xdc43f460541a253c0f64b6943ef83fa3bd601699a255622f088d46f7fde359fc";
/// The one account of execution-apis/genesis.json with storage (slots 1, 2, 3).
const STORAGE_ACCOUNT: &str = "0x8bebc8ba651aee624937e7d897853ac30c95a067";

fn testdata(rel: &str) -> String {
    // `ARBOR_TESTDATA`, else the repository's copy. Run-time `CARGO_MANIFEST_DIR` (cargo
    // sets it for tests): right even when a target directory holds a binary built from
    // another checkout.
    if let Ok(dir) = std::env::var("ARBOR_TESTDATA") {
        return format!("{dir}/{rel}");
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{dir}/../../testdata/ethereum/{rel}")
}

/// A fresh file under cargo's per-test-binary temp dir.
fn temp_file(name: &str, contents: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    std::fs::write(&path, contents).unwrap();
    path
}

fn arbor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arbor")).args(args).output().unwrap()
}

fn arbor_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// The command failed with exactly one `error: …` line and no panic.
fn assert_one_line_error(o: &Output, mentions: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, got success; stderr: {err}");
    assert!(!err.contains("panicked"), "panic on bad input: {err}");
    assert!(err.starts_with("error: "), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.contains(mentions), "expected {mentions:?} in: {err}");
}

#[test]
fn root_of_mainnet_genesis() {
    let o = arbor(&["root", "--genesis", &testdata("genesis/mainnet.json")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{MAINNET_ROOT}\n"));

    let o = arbor(&["root", "--genesis", &testdata("genesis/mainnet.json"), "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["root"], MAINNET_ROOT);
}

#[test]
fn root_of_key_values_plain_and_secure() {
    let path = temp_file(
        "kv.json",
        r#"{"0x646f": "0x76657262", "0x646f67": "0x7075707079", "0x646f6765": "0x636f696e", "0x01": ""}"#,
    );
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"do".to_vec(), b"verb".to_vec()),
        (b"dog".to_vec(), b"puppy".to_vec()),
        (b"doge".to_vec(), b"coin".to_vec()),
    ];
    let plain = trie::root_from_sorted::<EthLayout, _, _>(&pairs).unwrap().0;
    let mut hashed: Vec<(H256, Vec<u8>)> =
        pairs.iter().map(|(k, v)| (keccak256(k), v.clone())).collect();
    hashed.sort();
    let secure = trie::root_from_sorted::<EthLayout, _, _>(&hashed).unwrap().0;
    assert_ne!(plain, secure);

    let o = arbor(&["root", "--kv", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{plain}\n"));
    let o = arbor(&["root", "--kv", path.to_str().unwrap(), "--secure"]);
    assert_eq!(stdout(&o), format!("{secure}\n"));
    let o = arbor(&["root", "--kv", path.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["root"], plain.to_string());
}

#[test]
fn prove_verify_round_trip_with_storage_and_tampering() {
    let genesis = testdata("execution-apis/genesis.json");
    let o = arbor(&["root", "--genesis", &genesis]);
    assert_eq!(stdout(&o), format!("{EXEC_APIS_ROOT}\n"));

    let o = arbor(&[
        "prove",
        "--genesis",
        &genesis,
        "--address",
        STORAGE_ACCOUNT,
        "--slot",
        "0x1",
        "--slot",
        "0x7",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut proof: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(proof["storageProof"][0]["value"], "0x1");
    assert_eq!(proof["storageProof"][1]["value"], "0x0", "slot 7 is proven absent");
    let path = temp_file("proof.json", &stdout(&o));
    let o = arbor(&["verify-proof", "--root", EXEC_APIS_ROOT, path.to_str().unwrap()]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "valid\n".to_string()), "{}", stderr(&o));

    // The same proof wrapped in a JSON-RPC response, from stdin.
    let rpc = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "result": proof.clone() });
    let o = arbor_stdin(&["verify-proof", "--root", EXEC_APIS_ROOT, "-"], &rpc.to_string());
    assert_eq!(stdout(&o), "valid\n", "{}", stderr(&o));

    proof["balance"] = Value::String("0x2".into());
    let path = temp_file("proof-tampered.json", &proof.to_string());
    let o = arbor(&["verify-proof", "--root", EXEC_APIS_ROOT, path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("invalid: "), "{}", stdout(&o));
    assert!(stdout(&o).contains("balance"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn exclusion_proof_verifies_only_against_its_root() {
    let o = arbor(&[
        "prove",
        "--genesis",
        &testdata("genesis/sepolia.json"),
        "--address",
        &"ab".repeat(20),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let path = temp_file("exclusion.json", &stdout(&o));
    let sepolia = "0x5eb6e371a698b8d68f665192350ffcecbbbf322916f4b51bd79bb6887da3f494";
    let o = arbor(&["verify-proof", "--root", sepolia, path.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["valid"], true, "{v}");
    let o = arbor(&["verify-proof", "--root", MAINNET_ROOT, path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("invalid: "), "{}", stdout(&o));
}

#[test]
fn malformed_inputs_give_one_line_errors() {
    let missing = format!("{}/no-such-file.json", env!("CARGO_TARGET_TMPDIR"));
    assert_one_line_error(&arbor(&["root", "--genesis", &missing]), "no-such-file.json");
    assert_one_line_error(&arbor(&["root", "--kv", &missing]), "cannot read");

    let bad_json = temp_file("bad.json", "{\"0x01\": ");
    let bad = bad_json.to_str().unwrap();
    assert_one_line_error(&arbor(&["root", "--genesis", bad]), "JSON");
    assert_one_line_error(&arbor(&["root", "--kv", bad]), "JSON");
    assert_one_line_error(&arbor(&["verify-proof", "--root", MAINNET_ROOT, bad]), "JSON");

    let odd = temp_file("odd.json", r#"{"0x01": "0x02", "0x123": "0x04"}"#);
    assert_one_line_error(&arbor(&["root", "--kv", odd.to_str().unwrap()]), "\"0x123\"");
    let dup = temp_file("dup.json", r#"{"0x0a": "0x02", "0A": "0x04"}"#);
    assert_one_line_error(&arbor(&["root", "--kv", dup.to_str().unwrap()]), "same key");

    let proof = temp_file("not-a-proof.json", r#"{"jsonrpc": "2.0", "result": {"address": 5}}"#);
    let p = proof.to_str().unwrap();
    assert_one_line_error(&arbor(&["verify-proof", "--root", MAINNET_ROOT, p]), "address");
    assert_one_line_error(&arbor(&["verify-proof", "--root", "0x1234", p]), "--root");
    assert_one_line_error(&arbor(&["verify-proof", "--root", "0xzz", p]), "--root");

    let genesis = testdata("genesis/sepolia.json");
    assert_one_line_error(
        &arbor(&["prove", "--genesis", &genesis, "--address", "0x12"]),
        "--address",
    );
    let addr = "00".repeat(20);
    let o = arbor(&["prove", "--genesis", &genesis, "--address", &addr, "--slot", "0xq"]);
    assert_one_line_error(&o, "--slot");
}

#[test]
fn usage_mistakes_give_one_line_errors() {
    assert_one_line_error(&arbor(&["root"]), "--genesis <FILE>|--kv <FILE>");
    let g = testdata("genesis/dev.json");
    assert_one_line_error(&arbor(&["root", "--genesis", &g, "--kv", &g]), "cannot be used");
    assert_one_line_error(&arbor(&["root", "--genesis", &g, "--secure"]), "--secure");
    assert_one_line_error(&arbor(&["verify-proof", "--root", MAINNET_ROOT]), "FILE");
    assert_one_line_error(&arbor(&["bench", "trie", "--keys", "many"]), "--keys");
    assert_one_line_error(&arbor(&["frobnicate"]), "frobnicate");
    let o = arbor(&["--help"]);
    assert!(o.status.success() && stdout(&o).contains("verify-proof"));
}

#[test]
fn demo_passes_on_the_testdata() {
    let o = arbor(&["demo"]);
    assert!(o.status.success(), "stdout: {}\nstderr: {}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(MAINNET_ROOT) && out.contains("checks passed"), "{out}");

    let o = arbor(&["demo", "--json", "--testdata", &testdata("")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(v["failures"], 0);
    assert_eq!(v["mainnet"]["root"], MAINNET_ROOT);
    assert_eq!(v["tampered"]["rejected"], true);
    assert_eq!(v["genesis_roots"].as_array().unwrap().len(), 5);
    assert!(v["proofs"].as_array().unwrap().iter().any(|p| p["kind"] == "exclusion"));

    assert_one_line_error(
        &arbor(&["demo", "--testdata", env!("CARGO_TARGET_TMPDIR")]),
        "--testdata",
    );
}

#[test]
fn bench_trie_smoke() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-bench.json");
    let html = html_path("trie");
    let o = arbor(&[
        "bench",
        "trie",
        "--html",
        html.to_str().unwrap(),
        "--keys",
        "500",
        "--runs",
        "1",
        "--rounds",
        "3",
        "--proofs",
        "5",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(v["options"]["keys"], 500);
    assert_eq!(v["options"]["incremental_keys"], 500);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written["root"]["root"], v["root"]["root"]);
    assert_eq!(parse_svgs(&std::fs::read_to_string(&html).unwrap()), 3, "times, ratios, rounds");
}

/// `bench pov --layout substrate-v0`: the parent state in a RocksDB store of that layout
/// (the store took Ethereum's layout only before), every build's witness verified
/// statelessly; and in memory with `--memory`.
#[test]
fn bench_pov_substrate_in_the_store_and_in_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut roots = Vec::new();
    for (memory, state) in [(false, "rocksdb"), (true, "memory")] {
        let mut args = vec!["bench", "pov", "--layout", "substrate-v0", "--accounts", "6"];
        args.extend(["--runs", "1", "--sizes", "2", "--json", "--dir"]);
        args.push(tmp.path().to_str().unwrap());
        if memory {
            args.push("--memory");
        }
        let o = arbor(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        conventions::assert_json_names(&v);
        assert_eq!(
            (v["layout"].as_str(), v["state"].as_str()),
            (Some("substrate-v0"), Some(state))
        );
        let workloads = v["workloads"].as_array().unwrap();
        assert_eq!(workloads.len(), 2, "{v}");
        for w in workloads {
            assert_eq!(w["witness_verified"], true, "{w}");
        }
        roots.push((v["parent_root"].clone(), workloads[0]["post_root"].clone()));
    }
    assert_eq!(roots[0], roots[1], "the store and the memory state disagree");
}

/// `bench trie --layout substrate-v1`: Arbor's roots against trie-db's on the same input,
/// the layout in the report, no alloy-trie and no keccak bound.
#[test]
fn bench_trie_substrate_smoke() {
    let html = html_path("trie-substrate-v1");
    let o = arbor(&[
        "bench",
        "trie",
        "--layout",
        "substrate-v1",
        "--keys",
        "2000",
        "--runs",
        "1",
        "--rounds",
        "3",
        "--proofs",
        "5",
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(v["options"]["layout"], "substrate-v1");
    assert_eq!(v["options"]["keys"], 2000);
    let root = &v["root"];
    assert_eq!(root["roots_equal"], true, "{root}");
    assert!(root["root"].as_str().unwrap().starts_with("0x"), "{root}");
    assert!(root["oracle_engine"].as_str().unwrap().contains("SubstrateV1"), "{root}");
    assert_eq!(root["oracle"]["runs"], 1);
    assert!(root["oracle_over_serial"].as_f64().unwrap() > 0.0, "{root}");
    assert!(root["keys_per_s"]["oracle"].as_f64().unwrap() > 0.0, "{root}");
    assert!(root.get("alloy").is_none() && v["bound"].is_null(), "{v}");
    assert_eq!(v["incremental"]["root_matches_rebuild"], true);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(parse_svgs(&page), 3, "times, ratios, rounds");
    assert!(page.contains("trie-db") && !page.contains("alloy"), "{page}");
}

/// A fresh path for a bench's HTML page.
fn html_path(bench: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-bench-{bench}.html"));
    let _ = std::fs::remove_file(&p);
    p
}

/// A fresh (absent) database directory under cargo's per-test-binary temp dir.
fn fresh_db(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-db-{name}"));
    let _ = std::fs::remove_dir_all(&path);
    path.to_str().unwrap().to_string()
}

/// Run a command that must succeed; its stdout.
fn ok(args: &[&str]) -> String {
    let o = arbor(args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    stdout(&o)
}

/// `<number> <root>` lines as pairs.
fn heads(out: &str) -> Vec<(u64, String)> {
    out.lines()
        .map(|l| {
            let (n, r) = l.split_once(' ').unwrap();
            (n.parse().unwrap(), r.to_string())
        })
        .collect()
}

/// SIGTERM during a long `revert` stops after a whole block: exit 0, the summary, and a
/// head whose root is the one that block had (or the full revert, if it finished first).
#[test]
fn revert_stops_cleanly_on_sigterm() {
    let db = fresh_db("revert-sigterm");
    let out = ok(&[
        "load",
        "--db",
        &db,
        "--blocks",
        "120",
        "--updates-per-block",
        "200",
        "--keys",
        "2000",
        "--seed",
        "9",
    ]);
    let roots: std::collections::HashMap<u64, String> = heads(&out).into_iter().collect();
    let child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["revert", "--db", &db, "120", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(150));
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let (block, reverted) = (v["block"].as_u64().unwrap(), v["reverted"].as_u64().unwrap());
    assert_eq!(block + reverted, 120, "{v}");
    assert_eq!(v["stopped"], reverted < 120, "{v}");
    if reverted < 120 {
        assert!(stderr(&o).contains("stopped by signal"), "{}", stderr(&o));
    }
    assert_eq!(v["root"].as_str(), roots.get(&block).map(String::as_str), "{v}");
    assert!(ok(&["verify", "--db", &db]).starts_with(&format!("ok {block} ")));
}

#[test]
fn init_from_mainnet_genesis_and_verify() {
    let db = fresh_db("init");
    let genesis = testdata("genesis/mainnet.json");
    assert_eq!(ok(&["init", "--db", &db, "--genesis", &genesis]), format!("{MAINNET_ROOT}\n"));
    assert_eq!(ok(&["verify", "--db", &db]), format!("ok 0 {MAINNET_ROOT}\n"));
    let v: Value = serde_json::from_str(&ok(&["verify", "--db", &db, "--json"])).unwrap();
    assert_eq!((v["valid"].clone(), v["leaves"].clone()), (Value::Bool(true), Value::from(8893)));
    assert_one_line_error(&arbor(&["init", "--db", &db, "--genesis", &genesis]), "not empty");

    // An account of the alloc, by its secure key: present, and provable against the root.
    let address = "0x000d836201318ec6899a67540690382780743280";
    let key = keccak256(&hex::decode(&address[2..]).unwrap());
    let value = ok(&["get", "--db", &db, &key.to_string()]);
    assert!(value.starts_with("0x") && value.len() > 70, "{value}");
    let proof: Value =
        serde_json::from_str(&ok(&["prove", "--db", &db, &key.to_string()])).unwrap();
    assert_eq!(proof["root"], MAINNET_ROOT);
    assert_eq!(proof["value"], value.trim());
}

#[test]
fn load_verify_revert_and_inspect() {
    let db = fresh_db("load");
    let load = |blocks: &str| {
        ok(&[
            "load",
            "--db",
            &db,
            "--keys",
            "2000",
            "--blocks",
            blocks,
            "--updates-per-block",
            "100",
            "--seed",
            "9",
        ])
    };
    let first = heads(&load("5"));
    assert_eq!(first.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
    assert_eq!(ok(&["verify", "--db", &db]), format!("ok 5 {}\n", first[5].1));

    assert_eq!(ok(&["revert", "--db", &db, "2"]), format!("3 {}\n", first[3].1));
    assert_eq!(ok(&["verify", "--db", &db]), format!("ok 3 {}\n", first[3].1));

    // Get and prove agree, and the proof verifies against the printed root.
    let workload = bench::workload::Workload::new(9, 2000, 100);
    for i in [0u64, 1, 2, 1999, 2050] {
        let key = workload.key(i);
        let got = ok(&["get", "--db", &db, &hex::encode(key)]);
        let p: Value =
            serde_json::from_str(&ok(&["prove", "--db", &db, &hex::encode(key)])).unwrap();
        assert_eq!(p["root"], first[3].1.as_str());
        let value = p["value"].as_str().map_or("absent".to_string(), str::to_string);
        assert_eq!(got.trim(), value);
        let root = H256::from_hex(p["root"].as_str().unwrap()).unwrap();
        let nodes: Vec<Vec<u8>> = p["proof"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| hex::decode(&n.as_str().unwrap()[2..]).unwrap())
            .collect();
        let proven = trie::verify_proof::<EthLayout>(&root, &key, &nodes).unwrap();
        assert_eq!(
            proven.map(|v| format!("0x{}", hex::encode(v))).unwrap_or("absent".into()),
            got.trim()
        );
    }

    let stats: Value = serde_json::from_str(&ok(&["stats", "--db", &db, "--json"])).unwrap();
    assert_eq!(stats["block"], 3);
    assert_eq!(stats["root"], first[3].1.as_str());
    assert!(
        stats["sst_bytes"].as_u64().unwrap() > 0 || stats["estimated_keys"].as_u64().unwrap() > 0
    );
    // Counters of earlier sessions (the loads, gets and proves above) are kept.
    let totals = &stats["cache_totals"];
    assert!(totals["node_misses"].as_u64().unwrap() > 0, "{totals}");
    assert!(totals["flat_hits"].as_u64().unwrap() + totals["flat_misses"].as_u64().unwrap() > 0);
    let text = ok(&["stats", "--db", &db]);
    assert!(text.contains("node cache") && text.contains("hit rate"), "{text}");
    assert!(text.contains("all sessions"), "{text}");

    // Blocks depend only on (seed, number): reloading 4 and 5 restores the same roots.
    assert_eq!(heads(&load("2")), first[4..].to_vec());
}

#[test]
fn loading_in_one_run_or_several_gives_the_same_root() {
    let (a, b) = (fresh_db("one-run"), fresh_db("two-runs"));
    let load = |db: &str, blocks: &str, quiet: bool| {
        let mut args = vec!["load", "--db", db, "--keys", "1500", "--blocks", blocks];
        args.extend(["--updates-per-block", "120", "--seed", "42"]);
        if quiet {
            args.push("--quiet");
        }
        heads(&ok(&args))
    };
    let one = load(&a, "6", true);
    assert_eq!(one.len(), 1, "--quiet prints the last line only");
    assert_eq!(one[0].0, 6);
    let two = load(&b, "2", false);
    assert_eq!(two.len(), 3, "block 0 (bulk load), 1, 2");
    let two = load(&b, "4", false);
    assert_eq!(two.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [3, 4, 5, 6]);
    assert_eq!(two.last(), one.last());
    assert_eq!(ok(&["verify", "--db", &b]), format!("ok 6 {}\n", one[0].1));
}

#[test]
fn database_commands_reject_bad_input() {
    let db = fresh_db("bad-input");
    let missing = fresh_db("missing");
    assert_one_line_error(&arbor(&["verify", "--db", &missing]), "no database");
    assert!(!PathBuf::from(&missing).exists(), "verify must not create a database");
    assert_one_line_error(&arbor(&["get", "--db", &missing, "0x01"]), "no database");
    assert_one_line_error(&arbor(&["stats", "--db", &missing]), "no database");

    let genesis = testdata("genesis/dev.json");
    ok(&["init", "--db", &db, "--genesis", &genesis]);
    assert_one_line_error(&arbor(&["get", "--db", &db, "0xzz"]), "KEY");
    assert_one_line_error(&arbor(&["get", "--db", &db, "0x123"]), "KEY");
    assert_one_line_error(&arbor(&["prove", "--db", &db, "nothex"]), "KEY");
    assert_one_line_error(&arbor(&["get", "--db", &db, &"ab".repeat(200)]), "limit");
    assert_one_line_error(&arbor(&["revert", "--db", &db, "1"]), "cannot revert");
    assert_one_line_error(&arbor(&["revert", "--db", &db, "-1"]), "-1");
    assert_eq!(ok(&["get", "--db", &db, "0x01"]), "absent\n");

    // prove takes a genesis and address, or a database and key, never a mix.
    assert_one_line_error(&arbor(&["prove", "--db", &db]), "KEY");
    assert_one_line_error(&arbor(&["prove"]), "--genesis");
    assert_one_line_error(
        &arbor(&["prove", "--genesis", &genesis, "--db", &db, "0x01"]),
        "cannot be used",
    );
    assert_one_line_error(&arbor(&["prove", "--genesis", &genesis]), "--address");

    let bad_genesis = temp_file("bad-genesis.json", "{\"alloc\": 3}");
    let nowhere = fresh_db("never-created");
    assert_one_line_error(
        &arbor(&["init", "--db", &nowhere, "--genesis", bad_genesis.to_str().unwrap()]),
        "bad-genesis",
    );
    assert!(!PathBuf::from(&nowhere).exists(), "a bad genesis must not leave a directory behind");
    let not_db = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-not-a-db");
    std::fs::create_dir_all(&not_db).unwrap();
    std::fs::write(not_db.join("notes.txt"), "hello").unwrap();
    assert_one_line_error(
        &arbor(&["init", "--db", not_db.to_str().unwrap(), "--genesis", &genesis]),
        "not empty",
    );

    let bad_config = temp_file("bad-config.toml", "[cache]\nnode_cache_bites = 1\n");
    let o = arbor(&["verify", "--db", &db, "--config", bad_config.to_str().unwrap()]);
    assert_one_line_error(&o, "node_cache_bites");
    let o = arbor(&["load", "--db", &db, "--blocks", "1", "--updates-per-block", "1"]);
    assert_one_line_error(&o, "--seed");
}

#[test]
fn build_block_then_verify_block_statelessly() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let block = dir.join("cli-block.bin");
    let witness = dir.join("cli-witness.bin");
    // Outputs must be new files (see limits.rs): clear an earlier run's.
    let _ = (std::fs::remove_file(&block), std::fs::remove_file(&witness));
    let (b, w) = (block.to_str().unwrap(), witness.to_str().unwrap());
    let out = ok(&[
        "build-block",
        "--accounts",
        "200",
        "--transfers",
        "60",
        "--allow-death",
        "--block",
        b,
        "--witness",
        w,
    ]);
    let parent = out.lines().next().unwrap().strip_prefix("parent ").unwrap().trim().to_string();
    let post = out.lines().nth(1).unwrap().strip_prefix("post   ").unwrap().trim().to_string();
    assert_eq!(ok(&["verify-block", "--parent-root", &parent, b, w]).trim(), format!("ok {post}"));

    // Another parent, a truncated witness, an altered block: exit 1 with a reason.
    let other = format!("0x{}", "11".repeat(32));
    let o = arbor(&["verify-block", "--parent-root", &other, b, w]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("invalid: "), "{}", stdout(&o));

    let bytes = std::fs::read(&witness).unwrap();
    let cut = dir.join("cli-witness-cut.bin");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let o = arbor(&["verify-block", "--parent-root", &parent, b, cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("truncated"), "{}", stdout(&o));

    // Drop the witness's last node (rewrite the count): "witness incomplete".
    let mut fewer = bytes.clone();
    let count = u32::from_be_bytes(fewer[5..9].try_into().unwrap());
    fewer[5..9].copy_from_slice(&(count - 1).to_be_bytes());
    let mut at = 9;
    for _ in 0..count - 1 {
        let len = u32::from_be_bytes(fewer[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + len;
    }
    fewer.truncate(at);
    let dropped = dir.join("cli-witness-dropped.bin");
    std::fs::write(&dropped, &fewer).unwrap();
    let o = arbor(&["verify-block", "--parent-root", &parent, b, dropped.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("witness incomplete"), "{}", stdout(&o));

    let mut bad = std::fs::read(&block).unwrap();
    let last = bad.len() - 20;
    bad[last] ^= 0x40;
    let altered = dir.join("cli-block-altered.bin");
    std::fs::write(&altered, &bad).unwrap();
    let o = arbor(&["verify-block", "--parent-root", &parent, altered.to_str().unwrap(), w]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn bench_blockstm_smoke() {
    let html = html_path("blockstm");
    let o = arbor(&[
        "bench",
        "blockstm",
        "--html",
        html.to_str().unwrap(),
        "--txs",
        "300",
        "--runs",
        "1",
        "--workers",
        "1,2",
        "--no-sig",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(v["signatures"], false);
    // Six workloads (the chain runtime's on RocksDB included), each: sequential, 1 worker,
    // 1 worker with the engine forced, 2 workers, 2 workers with the partitioned executor
    // forced.
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6 * 5);
    assert_eq!(v["ceilings"].as_array().unwrap().len(), 6);
    assert!(rows.iter().any(|r| r["workload"] == "chain-transfers"));
    for r in rows {
        assert!(r["allocations"].as_u64().unwrap() > 0, "{r}");
        assert!(r["median_ms"].as_f64().unwrap() > 0.0, "{r}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(parse_svgs(&page), 6, "a speed-up chart per workload");
    let forced = rows.iter().filter(|r| r["forced_engine"] == true);
    assert!(
        forced.clone().count() == 6
            && forced.clone().all(|r| r["validations_per_tx"].as_f64().unwrap() >= 1.0)
    );
    let partitioned = rows.iter().filter(|r| r["forced_partitioned"] == true);
    assert!(partitioned.clone().count() == 6 && partitioned.clone().all(|r| r["workers"] == 2));
}

#[test]
fn deep_verify_repair_and_config_defaults() {
    let db = fresh_db("deep");
    ok(&[
        "load",
        "--db",
        &db,
        "--blocks",
        "3",
        "--updates-per-block",
        "50",
        "--keys",
        "5000",
        "--seed",
        "4",
        "--quiet",
    ]);
    let out = ok(&["verify", "--db", &db, "--deep"]);
    assert!(out.starts_with("ok 3 ") && out.contains("nodes checked"), "{out}");
    let v: Value = serde_json::from_str(&ok(&["verify", "--db", &db, "--deep", "--json"])).unwrap();
    assert_eq!(v["valid"], true);
    assert!(v["nodes_checked"].as_u64().unwrap() > 100, "{v}");
    let out = ok(&["repair", "--db", &db]);
    assert!(out.starts_with("repaired 3 "), "{out}");
    let v: Value = serde_json::from_str(&ok(&["repair", "--db", &db, "--json"])).unwrap();
    assert!(v["nodes_rebuilt"].as_u64().unwrap() > 0 && v["block"] == 3, "{v}");
    let v: Value =
        serde_json::from_str(&ok(&["get", "--db", &db, "0x00112233", "--json"])).unwrap();
    assert!(v["value"].is_null() && v["block"] == 3 && v["root"].is_string(), "{v}");
    let v: Value =
        serde_json::from_str(&ok(&["prove", "--db", &db, "0x00112233", "--json"])).unwrap();
    assert!(v["proof"].is_array(), "{v}");
    let v: Value = serde_json::from_str(&ok(&["revert", "--db", &db, "1", "--json"])).unwrap();
    assert_eq!(v["block"], 2, "{v}");
    assert!(ok(&["verify", "--db", &db, "--deep"]).starts_with("ok 2 "));
    // The printed defaults are a configuration the commands accept.
    let defaults = ok(&["config", "defaults"]);
    assert!(defaults.contains("[checkpoint]") && defaults.contains("[rocksdb]"), "{defaults}");
    let file = temp_file("defaults.toml", &defaults);
    ok(&["verify", "--db", &db, "--config", file.to_str().unwrap()]);
    let o = arbor(&["config", "nonsense"]);
    assert_eq!(o.status.code(), Some(2));
    // `prove --db` prints what `verify-proof` checks (here an absence proof), and a tampered
    // claim is refused.
    let v: Value = serde_json::from_str(&ok(&["stats", "--db", &db, "--json"])).unwrap();
    let root = v["root"].as_str().unwrap().to_string();
    let proof = ok(&["prove", "--db", &db, "0x00112233"]);
    let file = temp_file("db-proof.json", &proof);
    assert_eq!(ok(&["verify-proof", "--root", &root, file.to_str().unwrap()]).trim(), "valid");
    let mut tampered: Value = serde_json::from_str(&proof).unwrap();
    tampered["value"] = Value::String("0x01".into());
    let file = temp_file("db-proof-tampered.json", &tampered.to_string());
    let o = arbor(&["verify-proof", "--root", &root, file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("invalid: "), "{}", stdout(&o));
    let o = arbor(&["repair", "--db", &fresh_db("no-such-db")]);
    assert_one_line_error(&o, "no database");
}

#[test]
fn read_commands_run_beside_a_writer_and_write_nothing() {
    let db = fresh_db("beside-writer");
    ok(&[
        "load",
        "--db",
        &db,
        "--blocks",
        "1",
        "--updates-per-block",
        "50",
        "--keys",
        "20000",
        "--seed",
        "6",
        "--quiet",
    ]);
    // Idle: the read commands leave the directory exactly as it was.
    let before = dir_snapshot(&db);
    ok(&["get", "--db", &db, "0x0011"]);
    ok(&["stats", "--db", &db, "--json"]);
    ok(&["verify", "--db", &db, "--deep"]);
    ok(&["prove", "--db", &db, "0x0011"]);
    assert!(dir_snapshot(&db) == before, "a read command changed the database directory");
    // Beside a writer in another process: they all succeed.
    let mut writer = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args([
            "load",
            "--db",
            &db,
            "--blocks",
            "400",
            "--updates-per-block",
            "200",
            "--keys",
            "20000",
            "--seed",
            "6",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    for _ in 0..3 {
        ok(&["get", "--db", &db, "0x0011"]);
        ok(&["stats", "--db", &db]);
        ok(&["verify", "--db", &db]);
        ok(&["prove", "--db", &db, "0x0011"]);
    }
    // A second writer is told the database is in use.
    let o = arbor(&[
        "load",
        "--db",
        &db,
        "--blocks",
        "1",
        "--updates-per-block",
        "1",
        "--keys",
        "20000",
        "--seed",
        "6",
    ]);
    let still_running = writer.try_wait().unwrap().is_none();
    if still_running {
        assert_one_line_error(&o, "is in use: another open handle");
    }
    let status = writer.wait().unwrap();
    assert!(status.success(), "the writer failed");
    assert!(ok(&["verify", "--db", &db]).starts_with("ok "));
}

#[test]
fn load_serves_prometheus_metrics() {
    use std::io::{BufRead, Read};
    let db = fresh_db("metrics");
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args([
            "load",
            "--db",
            &db,
            "--blocks",
            "100000",
            "--updates-per-block",
            "500",
            "--keys",
            "20000",
            "--seed",
            "3",
            "--quiet",
            "--metrics",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("metrics on http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let scrape = || {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        body
    };
    let value = |body: &str, series: &str| -> f64 {
        body.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {body}"))
    };
    let mut body = scrape();
    for _ in 0..100 {
        if value(&body, "arbor_blocks_committed_total") >= 5.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        body = scrape();
    }
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("text/plain; version=0.0.4"), "{body}");
    let blocks = value(&body, "arbor_blocks_committed_total");
    assert!(blocks >= 5.0, "{body}");
    assert_eq!(value(&body, "arbor_commit_duration_seconds_count"), blocks);
    assert!(value(&body, "arbor_block_changes_total") >= blocks * 400.0);
    assert!(value(&body, "arbor_head_block") >= blocks);
    assert!(value(&body, "arbor_store_persisted_block") <= value(&body, "arbor_head_block"));
    let sum = value(&body, "arbor_commit_duration_seconds_sum");
    assert!(sum > 0.0 && sum < blocks * 10.0, "{sum}");
    for series in [
        "arbor_store_unpersisted_bytes",
        "arbor_store_written_bytes_total",
        "arbor_cache_hits_total{cache=\"node\"}",
        "arbor_cache_misses_total{cache=\"flat\"}",
    ] {
        assert!(body.contains(series), "{series} missing: {body}");
    }
    // SIGTERM: it stops at a block boundary with its summary.
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{rest}");
    assert!(rest.contains("stopped by signal"), "{rest}");
    assert!(ok(&["verify", "--db", &db]).starts_with("ok "));
}

#[test]
fn json_logs_parse() {
    let db = fresh_db("json-logs");
    let o = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args([
            "--log-format",
            "json",
            "load",
            "--db",
            &db,
            "--blocks",
            "3",
            "--updates-per-block",
            "10",
            "--keys",
            "100",
            "--seed",
            "1",
            "--quiet",
        ])
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let logs: Vec<Value> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let messages: Vec<&str> = logs.iter().filter_map(|l| l["fields"]["message"].as_str()).collect();
    assert!(
        messages.contains(&"arbor starting") && messages.contains(&"load done"),
        "{messages:?}"
    );
    assert_eq!(messages.iter().filter(|m| **m == "committed").count(), 3, "{messages:?}");
    assert!(logs.iter().all(|l| l["level"].is_string() && l["timestamp"].is_string()));
    // Without the flag and RUST_LOG, nothing is logged.
    let o = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["verify", "--db", &db])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

/// Every `<svg>…</svg>` of an HTML page parses as XML with bars; how many there are.
fn parse_svgs(page: &str) -> usize {
    let mut svgs = 0;
    let mut rest = page;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").unwrap() + start + "</svg>".len();
        let doc = roxmltree::Document::parse(&rest[start..end]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(doc.descendants().any(|n| n.has_tag_name("rect")));
        svgs += 1;
        rest = &rest[end..];
    }
    svgs
}

#[test]
fn bench_import_writes_an_html_report_whose_svg_parses() {
    let html = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-bench-import.html");
    let _ = std::fs::remove_file(&html);
    let o = arbor(&[
        "bench",
        "import",
        "--accounts",
        "200",
        "--blocks",
        "3",
        "--transfers",
        "20",
        "--workers",
        "1",
        "--runs",
        "1",
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    conventions::assert_json_names(&serde_json::from_str(&stdout(&o)).unwrap());
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(parse_svgs(&page), 4, "blocks/s, speed-up, share of the bound, RSS");
}

#[test]
fn bench_checkpoint_writes_an_html_report_whose_svg_parses() {
    let html = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-bench-checkpoint.html");
    let _ = std::fs::remove_file(&html);
    let o = arbor(&[
        "bench",
        "checkpoint",
        "--keys",
        "2000",
        "--runs",
        "1",
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert!(v["create_vs_scan"]["ratio"].as_f64().unwrap() > 0.0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(parse_svgs(&page), 6, "times, one chart per ratio, restore progress");
    assert_eq!(page.matches("<polyline").count(), 2, "local and HTTP restore progress");
}
