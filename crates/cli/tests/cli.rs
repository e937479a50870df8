//! End-to-end tests of the `arbor` binary: roots against known vectors, prove → verify
//! round trips through files and stdin, tampering, and the one-line error contract on
//! malformed input (non-zero exit, `error: …`, never a panic).

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use trie::{keccak256, EthLayout, H256};

const MAINNET_ROOT: &str = "0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544";
const EXEC_APIS_ROOT: &str = "0xdc43f460541a253c0f64b6943ef83fa3bd601699a255622f088d46f7fde359fc";
/// The one account of execution-apis/genesis.json with storage (slots 1, 2, 3).
const STORAGE_ACCOUNT: &str = "0x8bebc8ba651aee624937e7d897853ac30c95a067";

fn testdata(rel: &str) -> String {
    format!("{}/../../../shared/testdata/ethereum/{rel}", env!("CARGO_MANIFEST_DIR"))
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
    let o = arbor(&[
        "bench",
        "trie",
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
    assert_eq!(v["options"]["keys"], 500);
    assert_eq!(v["options"]["incremental_keys"], 500);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written["root"]["root"], v["root"]["root"]);
}
