//! The state tests on the store back-end (`InStore`): a file of several tests passes as in
//! memory, with its databases gone at the end; a wrong expected root fails its entry alone
//! (the revert to the pre-state lets the next entries pass); a database that cannot be
//! created fails every entry with the reason; a back-end's failure at the end of a file
//! fails the entries that had passed.

use eth::{EthChanges, Genesis, MemoryWorld};
use evm::statetest::{parse_file, run_file, Failure, InMemory, InStore, TestBackend};
use serde_json::Value;
use state::H256;

use crate::subset_file;

/// One JSON document holding the tests of several subset files.
fn merged(names: &[&str]) -> String {
    let mut all = serde_json::Map::new();
    for name in names {
        let v: Value = serde_json::from_str(&subset_file(name)).unwrap();
        for (test, body) in v.as_object().unwrap() {
            assert!(all.insert(test.clone(), body.clone()).is_none(), "{test} twice");
        }
    }
    Value::Object(all).to_string()
}

fn entries_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn several_tests_in_one_file_pass_on_the_store() {
    let text = merged(&[
        "stExample/add11.json",
        "stSStoreTest/InitCollisionParis.json",
        "vmTests/suicide.json",
        "stSStoreTest/sstore_0toX.json",
    ]);
    let file = parse_file(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut backend = InStore::new(dir.path().to_path_buf());
    let report = run_file(&file, &mut backend);
    let failures: Vec<String> =
        report.entries.iter().filter_map(|e| e.failure.as_ref().map(|f| f.to_string())).collect();
    assert!(failures.is_empty(), "{failures:?}");
    let memory = run_file(&file, &mut InMemory);
    assert_eq!((report.passed(), memory.passed()), (memory.passed(), report.entries.len()));
    assert!(report.passed() >= 20, "{}", report.passed());
    assert_eq!(entries_in(dir.path()), 0, "the file's database is removed at its end");
    // The same back-end runs the next file in a database of its own.
    let again = run_file(&parse_file(&subset_file("stExample/add11.json")).unwrap(), &mut backend);
    assert_eq!((again.passed(), again.failed()), (1, 0));
    assert_eq!(entries_in(dir.path()), 0);
}

#[test]
fn a_wrong_root_fails_its_entry_alone() {
    let mut v: Value = serde_json::from_str(&subset_file("stSStoreTest/sstore_0toX.json")).unwrap();
    let test = v.as_object_mut().unwrap().values_mut().next().unwrap();
    test["post"]["Cancun"][0]["hash"] = Value::String(format!("0x{}", "11".repeat(32)));
    let file = parse_file(&v.to_string()).unwrap();
    let first = file.tests[0].1.post[0].1[0].indexes;
    let dir = tempfile::tempdir().unwrap();
    let report = run_file(&file, &mut InStore::new(dir.path().to_path_buf()));
    let failed: Vec<_> = report.entries.iter().filter(|e| e.failure.is_some()).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!((failed[0].fork.as_str(), failed[0].indexes), ("Cancun", first));
    assert!(matches!(failed[0].failure, Some(Failure::StateRoot { .. })), "{failed:?}");
    assert!(report.passed() >= 10, "the entries after it pass: {}", report.passed());
}

#[test]
fn a_database_that_cannot_be_created_fails_every_entry_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = parse_file(&subset_file("stSStoreTest/sstore_0toX.json")).unwrap();
    let report = run_file(&file, &mut InStore::new(dir.path().join("absent")));
    assert!(report.passed() == 0 && report.failed() >= 10, "{report:?}");
    for e in &report.entries {
        let reason = e.failure.as_ref().unwrap().to_string();
        assert!(reason.contains("cannot create the database directory"), "{reason}");
    }
}

/// The in-memory back-end, failing at the end of each file.
struct FailingEnd;

impl TestBackend for FailingEnd {
    type State = MemoryWorld;
    type Error = std::io::Error;

    fn load(&mut self, pre: &Genesis) -> Result<MemoryWorld, std::io::Error> {
        MemoryWorld::from_genesis(pre).map_err(std::io::Error::other)
    }

    fn commit(&mut self, s: &mut MemoryWorld, c: &EthChanges) -> Result<H256, std::io::Error> {
        s.apply(c).map_err(std::io::Error::other)
    }

    fn root(&self, s: &MemoryWorld) -> Result<H256, std::io::Error> {
        Ok(s.root())
    }

    fn end_entry(&mut self, _state: MemoryWorld) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn end_file(&mut self) -> Result<(), std::io::Error> {
        Err(std::io::Error::other("the check found the file's state inconsistent"))
    }
}

#[test]
fn a_failure_at_the_end_of_a_file_fails_its_entries() {
    let mut v: Value = serde_json::from_str(&subset_file("stSStoreTest/sstore_0toX.json")).unwrap();
    let test = v.as_object_mut().unwrap().values_mut().next().unwrap();
    test["post"]["Cancun"][0]["hash"] = Value::String(format!("0x{}", "11".repeat(32)));
    let report = run_file(&parse_file(&v.to_string()).unwrap(), &mut FailingEnd);
    assert!(report.failed() >= 10 && report.passed() == 0, "{report:?}");
    assert!(matches!(report.entries[0].failure, Some(Failure::StateRoot { .. })), "kept");
    for e in &report.entries[1..] {
        let reason = e.failure.as_ref().unwrap().to_string();
        assert!(reason.contains("at the end of the file") && reason.contains("inconsistent"));
    }
}
