//! `arbor blocktest`: files and directories of the blockchain-test subset pass (valid
//! blocks and blocks the fixtures expect refused); a wrong expected last block hash is one
//! `FAIL` line naming file, test and network, and exit 1; a network the executor does not
//! run is skipped and named; malformed fixtures are usage errors naming the file (exit 2)
//! before anything runs; a missing path is exit 3; `--db` runs the same on temporary stores
//! and removes them.

use std::path::PathBuf;

use serde_json::Value;
use test_support::statetests::blocktests_archive_path;

use super::suite_files::counts;
use super::{arbor, assert_one_line_error, conventions, ok, stderr, stdout};

/// A fresh directory holding the subset's files whose path contains one of `filters`.
fn extract(name: &str, filters: &[&str]) -> PathBuf {
    super::suite_files::extract(&blocktests_archive_path(), &format!("blocktest-{name}"), filters)
}

const SIMPLE: &str = "BlockchainTests/ValidBlocks/bcValidBlockTest/SimpleTx.json";

#[test]
fn directories_and_files_of_the_subset_pass() {
    let dir = extract("pass", &["/bcExample/", "InvalidBlocks/bcUncleTest/InChainUncle", SIMPLE]);
    let out = ok(&["blocktest", dir.to_str().unwrap()]);
    let (passed, failed, skipped) = counts(&out);
    assert!(passed >= 10 && failed == 0 && skipped == 0, "{out}");
    assert_eq!(out.lines().count(), 1, "only the summary: {out}");

    let v: Value =
        serde_json::from_str(&ok(&["blocktest", "--json", dir.to_str().unwrap()])).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64(), v["files"].as_u64()),
        (Some(passed), Some(0), Some(12)),
        "{v}"
    );
    assert_eq!(v["backend"], "memory");

    let one = dir.join(SIMPLE);
    let one = one.to_str().unwrap();
    assert_eq!(counts(&ok(&["blocktest", one, one])), (2, 0, 0), "files are run as given");
}

#[test]
fn a_wrong_last_block_hash_fails_and_another_network_is_skipped() {
    let dir = extract("fail", &[SIMPLE]);
    let path = dir.join(SIMPLE);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut other = v["SimpleTx_Cancun"].clone();
    other["network"] = Value::String("Berlin".into());
    v["SimpleTx_Berlin"] = other;
    v["SimpleTx_Cancun"]["lastblockhash"] = Value::String(format!("0x{}", "11".repeat(32)));
    std::fs::write(&path, v.to_string()).unwrap();
    let o = arbor(&["blocktest", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("FAIL ")
            && lines[0].contains("SimpleTx.json SimpleTx_Cancun Cancun: head 0x")
            && lines[0].contains("lastblockhash"),
        "{out}"
    );
    assert_eq!(lines[1], "skipped networks the block executor does not run: Berlin (1 tests)");
    assert_eq!(counts(&out), (0, 1, 1));

    let o = arbor(&["blocktest", "--json", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(
        (v["failures"][0]["test"].as_str(), v["failures"][0]["network"].as_str()),
        (Some("SimpleTx_Cancun"), Some("Cancun"))
    );
    assert_eq!(v["skipped_networks"][0]["network"], "Berlin");
}

#[test]
fn malformed_fixtures_and_paths_are_refused() {
    let dir = extract("bad", &[SIMPLE]);
    let text = std::fs::read_to_string(dir.join(SIMPLE)).unwrap();
    let bad = dir.join("BlockchainTests/ValidBlocks/bcValidBlockTest/zz_truncated.json");
    std::fs::write(&bad, &text[..text.len() / 2]).unwrap();
    let o = arbor(&["blocktest", dir.to_str().unwrap()]);
    assert_one_line_error(&o, "zz_truncated.json");
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(2), ""), "nothing runs");

    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["SimpleTx_Cancun"]["blocks"][0]["rlp"] = Value::String("0xnothex".into());
    std::fs::write(&bad, v.to_string()).unwrap();
    let o = arbor(&["blocktest", bad.to_str().unwrap()]);
    assert_one_line_error(&o, "blocks[0].rlp");
    assert_eq!(o.status.code(), Some(2));
    std::fs::write(&bad, [0xff, 0xfe, b'{']).unwrap();
    let o = arbor(&["blocktest", bad.to_str().unwrap()]);
    assert_one_line_error(&o, "UTF-8");
    assert_eq!(o.status.code(), Some(2));

    let missing = dir.join("no-such-file.json");
    let o = arbor(&["blocktest", missing.to_str().unwrap()]);
    assert_one_line_error(&o, "no-such-file.json");
    assert_eq!(o.status.code(), Some(3));
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = arbor(&["blocktest", empty.to_str().unwrap()]);
    assert_one_line_error(&o, "no *.json");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(arbor(&["blocktest"]).status.code(), Some(2));
}

#[test]
fn the_store_back_end_passes_and_cleans_up() {
    let dir = extract("db", &["/bcExample/", "/bcMultiChainTest/", SIMPLE]);
    let dbs = dir.join("dbs");
    std::fs::create_dir_all(&dbs).unwrap();
    let (tests, d) = (dir.join("BlockchainTests"), dbs.to_str().unwrap());
    let out = ok(&["blocktest", "--db", "--db-dir", d, tests.to_str().unwrap()]);
    let (passed, failed, skipped) = counts(&out);
    assert!(passed >= 6 && failed == 0 && skipped == 0, "{out}");
    assert_eq!(std::fs::read_dir(&dbs).unwrap().count(), 0, "the temporary databases are removed");
    let o = arbor(&["blocktest", "--db", "--json", "--db-dir", d, tests.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!((v["backend"].as_str(), v["passed"].as_u64()), (Some("db"), Some(passed)), "{v}");

    // A wrong expected head fails its test alone, as in memory.
    let one = dir.join(SIMPLE);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
    v["SimpleTx_Cancun"]["lastblockhash"] = Value::String(format!("0x{}", "11".repeat(32)));
    std::fs::write(&one, v.to_string()).unwrap();
    let o = arbor(&["blocktest", "--db", "--db-dir", d, tests.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("FAIL ") && out.contains(" SimpleTx_Cancun Cancun: head "), "{out}");
    assert_eq!(counts(&out), (passed - 1, 1, 0));
    assert_eq!(std::fs::read_dir(&dbs).unwrap().count(), 0);

    let one = one.to_str().unwrap();
    let o = arbor(&["blocktest", "--db-dir", d, one]);
    assert_one_line_error(&o, "--db");
    assert_eq!(o.status.code(), Some(2), "--db-dir needs --db");
    let missing = dir.join("no-such-dir");
    let o = arbor(&["blocktest", "--db", "--db-dir", missing.to_str().unwrap(), one]);
    assert_one_line_error(&o, "no-such-dir");
    assert_eq!(o.status.code(), Some(3));
}
