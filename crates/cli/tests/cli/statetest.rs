//! `arbor statetest`: files and directories of the state-test subset pass (the EIP-7610
//! collision files among them), in memory and with `--db` (temporary stores, removed at the
//! end); a wrong expected root is one `FAIL` line naming file, test, fork and indexes, and
//! exit 1; an unsupported fork is skipped and named; malformed fixtures are usage errors
//! naming the file (exit 2) before anything runs, with `--db` too; a missing path is exit 3.

use std::path::{Path, PathBuf};

use serde_json::Value;
use test_support::statetests::archive_path;

use super::suite_files::counts;
use super::{arbor, assert_one_line_error, conventions, ok, stderr, stdout};

/// A fresh directory holding the subset's files whose path contains one of `filters`.
fn extract(name: &str, filters: &[&str]) -> PathBuf {
    super::suite_files::extract(&archive_path(), &format!("statetest-{name}"), filters)
}

fn file(dir: &Path, rel: &str) -> String {
    dir.join(rel).to_str().unwrap().to_string()
}

#[test]
fn directories_and_files_of_the_subset_pass() {
    let dir = extract(
        "pass",
        &["/stExample/", "stSStoreTest/InitCollision", "stCreate2/RevertInCreateInInit"],
    );
    let out = ok(&["statetest", dir.to_str().unwrap()]);
    let (passed, failed, skipped) = counts(&out);
    assert!(passed >= 10 && failed == 0 && skipped == 0, "{out}");
    assert_eq!(out.lines().count(), 1, "only the summary: {out}");

    let v: Value =
        serde_json::from_str(&ok(&["statetest", "--json", dir.to_str().unwrap()])).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64(), v["files"].as_u64()),
        (Some(passed), Some(0), Some(7)),
        "{v}"
    );
    assert!(
        v["transactions"].as_u64().unwrap() > 0
            && v["pov_total"]["accounts_read"].as_u64().unwrap() > 0,
        "{v}"
    );

    let one = file(&dir, "GeneralStateTests/stExample/add11.json");
    assert_eq!(counts(&ok(&["statetest", &one, &one])), (2, 0, 0), "files are run as given");
}

#[test]
fn a_wrong_root_fails_and_an_unsupported_fork_is_skipped() {
    let dir = extract("fail", &["/stExample/add11.json"]);
    let path = dir.join("GeneralStateTests/stExample/add11.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let entries = v["add11"]["post"]["Cancun"].clone();
    v["add11"]["post"]["Constantinople"] = entries;
    v["add11"]["post"]["Cancun"][0]["hash"] = Value::String(format!("0x{}", "11".repeat(32)));
    std::fs::write(&path, v.to_string()).unwrap();
    let o = arbor(&["statetest", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("FAIL ")
            && lines[0].contains("add11.json add11 Cancun d=0 g=0 v=0: state root"),
        "{out}"
    );
    assert_eq!(lines[1], "skipped forks revm does not support: Constantinople (1 entries)");
    assert_eq!(counts(&out), (0, 1, 1));

    let o = arbor(&["statetest", "--json", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(v["failures"][0]["test"], "add11");
    assert_eq!(
        (v["failures"][0]["fork"].as_str(), v["failures"][0]["d"].as_u64()),
        (Some("Cancun"), Some(0))
    );
    assert_eq!(v["skipped_forks"][0]["fork"], "Constantinople");
}

#[test]
fn malformed_fixtures_and_paths_are_refused() {
    let dir = extract("bad", &["/stExample/"]);
    let good = file(&dir, "GeneralStateTests/stExample/add11.json");
    let text = std::fs::read_to_string(&good).unwrap();
    let bad = dir.join("GeneralStateTests/stExample/zz_truncated.json");
    std::fs::write(&bad, &text[..text.len() / 2]).unwrap();
    let o = arbor(&["statetest", dir.to_str().unwrap()]);
    assert_one_line_error(&o, "zz_truncated.json");
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(2), ""), "nothing runs");

    std::fs::write(&bad, text.replace("\"currentNumber\" : \"0x01\"", "\"currentNumber\" : [1]"))
        .unwrap();
    assert_one_line_error(&arbor(&["statetest", bad.to_str().unwrap()]), "env.currentNumber");
    std::fs::write(&bad, [0xff, 0xfe, b'{']).unwrap();
    let o = arbor(&["statetest", bad.to_str().unwrap()]);
    assert_one_line_error(&o, "UTF-8");
    assert_eq!(o.status.code(), Some(2));

    let o = arbor(&["statetest", &file(&dir, "no-such-file.json")]);
    assert_one_line_error(&o, "no-such-file.json");
    assert_eq!(o.status.code(), Some(3));
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = arbor(&["statetest", empty.to_str().unwrap()]);
    assert_one_line_error(&o, "no *.json");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(arbor(&["statetest"]).status.code(), Some(2));
}

/// The entries of a directory (none once `--db` removed its temporary directory).
fn entries_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
}

#[test]
fn the_store_back_end_passes_and_cleans_up() {
    let dir = extract("db", &["stSStoreTest/InitCollisionParis", "/vmTests/suicide.json"]);
    let dbs = dir.join("dbs");
    std::fs::create_dir_all(&dbs).unwrap();
    let (tests, d) = (dir.join("GeneralStateTests"), dbs.to_str().unwrap());
    let out = ok(&["statetest", "--db", "--db-dir", d, tests.to_str().unwrap()]);
    assert_eq!(counts(&out), (7, 0, 0), "{out}");
    assert_eq!(entries_in(&dbs), Vec::<PathBuf>::new(), "the temporary databases are removed");
    let o = arbor(&["statetest", "--db", "--json", "--db-dir", d, tests.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!((v["backend"].as_str(), v["passed"].as_u64()), (Some("db"), Some(7)), "{v}");
    // Without --db-dir, under the system's temporary directory.
    let one = file(&dir, "GeneralStateTests/VMTests/vmTests/suicide.json");
    assert_eq!(counts(&ok(&["statetest", "--db", &one])), (3, 0, 0));

    // A wrong root fails its entry alone, as in memory.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
    v["suicide"]["post"]["Cancun"][1]["hash"] = Value::String(format!("0x{}", "11".repeat(32)));
    std::fs::write(&one, v.to_string()).unwrap();
    let o = arbor(&["statetest", "--db", "--db-dir", d, &one]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("FAIL ") && out.contains(" suicide Cancun d=1 "), "{out}");
    assert_eq!(counts(&out), (2, 1, 0));
    assert_eq!(entries_in(&dbs), Vec::<PathBuf>::new());

    let o = arbor(&["statetest", "--db-dir", d, &one]);
    assert_one_line_error(&o, "--db");
    assert_eq!(o.status.code(), Some(2), "--db-dir needs --db");
    let missing = dir.join("no-such-dir");
    let o = arbor(&["statetest", "--db", "--db-dir", missing.to_str().unwrap(), &one]);
    assert_one_line_error(&o, "no-such-dir");
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn a_malformed_fixture_is_a_usage_error_with_db_too() {
    let dir = extract("bad-db", &["/stExample/add11.json"]);
    let good = file(&dir, "GeneralStateTests/stExample/add11.json");
    let text = std::fs::read_to_string(&good).unwrap();
    let dbs = dir.join("dbs");
    std::fs::create_dir_all(&dbs).unwrap();
    let d = dbs.to_str().unwrap();
    let bad = dir.join("GeneralStateTests/stExample/zz_bad.json");
    for broken in [
        text[..text.len() / 3].to_string(),
        text.replace("\"currentGasLimit\"", "\"currentGasLimit\" : {}, \"x\""),
        text.replace(
            "\"indexes\"",
            "\"indexes\" : {\"data\" : 9, \"gas\" : 0, \"value\" : 0}, \"y\"",
        ),
    ] {
        std::fs::write(&bad, &broken).unwrap();
        let o = arbor(&["statetest", "--db", "--db-dir", d, dir.to_str().unwrap()]);
        assert_one_line_error(&o, "zz_bad.json");
        assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(2), ""), "nothing runs");
        assert_eq!(entries_in(&dbs), Vec::<PathBuf>::new(), "no database was made");
    }
}
