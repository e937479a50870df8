//! Hostile state-test fixtures: truncated and mutated text, wrong JSON types, indexes out of
//! range. Parsing never panics and names the field; a fixture that still parses runs
//! without panicking.

use evm::statetest::{parse_file, run_file, InMemory, TxNumber};
use evm::{FieldProblem, FixtureError};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::{cases, subset_file};

/// A small real fixture (one test, one Cancun entry, a contract that stores 2 at slot 0).
fn base() -> String {
    subset_file("stExample/add11.json")
}

fn base_value() -> Value {
    serde_json::from_str(&base()).unwrap()
}

/// `f` applied to the (only) test of the base fixture, as text.
fn edited(f: impl FnOnce(&mut Value)) -> String {
    let mut v = base_value();
    let test = v.as_object_mut().unwrap().values_mut().next().unwrap();
    f(test);
    v.to_string()
}

fn field_error(text: &str) -> (String, FieldProblem) {
    match parse_file(text) {
        Err(FixtureError::Field { path, problem }) => (path, problem),
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn the_base_fixture_parses_and_passes() {
    let file = parse_file(&base()).unwrap();
    let report = run_file(&file, &mut InMemory);
    assert_eq!((report.passed(), report.failed()), (1, 0), "{report:?}");
    let pov = report.entries[0].pov.unwrap();
    assert!(pov.accounts_read >= 2 && pov.slots_written == 1, "{pov:?}");
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let text = base();
    for cut in 0..text.len() {
        // Cut on character boundaries (the text is ASCII).
        assert!(parse_file(&text[..cut]).is_err(), "a prefix of {cut} bytes parsed");
    }
}

#[test]
fn wrong_types_and_values_name_the_field() {
    let (path, problem) = field_error(&edited(|t| t["env"]["currentGasLimit"] = json!([])));
    assert!(path.ends_with("env.currentGasLimit"), "{path}");
    assert!(matches!(problem, FieldProblem::WrongType { found: "an array", .. }), "{problem}");

    let (path, _) = field_error(&edited(|t| t["transaction"]["data"] = json!("0x")));
    assert!(path.ends_with("transaction.data"), "{path}");

    let (path, problem) =
        field_error(&edited(|t| t["post"]["Cancun"][0]["indexes"]["gas"] = json!(7)));
    assert!(path.ends_with("post.Cancun[0].indexes.gas"), "{path}");
    assert_eq!(problem, FieldProblem::IndexOutOfRange { index: 7, len: 1 });

    let (path, problem) =
        field_error(&edited(|t| t["post"]["Cancun"][0]["hash"] = json!("0x1234")));
    assert!(path.ends_with("hash"), "{path}");
    assert!(matches!(problem, FieldProblem::Hex(_)), "{problem}");

    let (path, problem) = field_error(&edited(|t| {
        t["env"].as_object_mut().unwrap().remove("currentNumber");
    }));
    assert!(path.ends_with("env.currentNumber") && problem == FieldProblem::Missing, "{path}");

    let (path, _) = field_error(&edited(|t| t["transaction"]["to"] = json!("0x12")));
    assert!(path.ends_with("transaction.to"), "{path}");
    let (path, _) = field_error(&edited(|t| t["transaction"]["gasLimit"][0] = json!("0xzz")));
    assert!(path.ends_with("transaction.gasLimit[0]"), "{path}");
    let (path, _) =
        field_error(&edited(|t| t["transaction"]["accessLists"] = json!([[{"address": 5}]])));
    assert!(path.ends_with("accessLists[0][0].address"), "{path}");

    let with_config = parse_file(&edited(|t| t["config"] = json!({"chainid": "0x05"}))).unwrap();
    assert_eq!(with_config.tests[0].1.env.chain_id, 5);
    let (path, _) = field_error(&edited(|t| t["config"] = json!({"chainid": "five"})));
    assert!(path.ends_with("config.chainid"), "{path}");

    let pre = edited(|t| t["pre"] = json!({"0x01": {"balance": "0x1"}}));
    assert!(matches!(parse_file(&pre), Err(FixtureError::Alloc { .. })));
    assert!(matches!(parse_file("{}"), Err(FixtureError::NoTests)));
    assert!(matches!(parse_file("[1, 2]"), Err(FixtureError::Field { .. })));
    assert!(matches!(parse_file("{\"a\": 1, \"a\": 2}"), Err(FixtureError::Json(_))));
}

#[test]
fn numbers_a_transaction_cannot_carry_are_kept_as_such() {
    let big = format!("0x1{}", "0".repeat(64));
    let file = parse_file(&edited(|t| t["transaction"]["value"][0] = json!(big))).unwrap();
    assert_eq!(file.tests[0].1.transaction.value[0], TxNumber::Unencodable);
    let spelled = edited(|t| t["transaction"]["value"][0] = json!("0x:bigint 0x0100"));
    let file = parse_file(&spelled).unwrap();
    assert_eq!(file.tests[0].1.transaction.value[0], TxNumber::Unencodable);
    // Such a transaction is rejected: the entry passes only if the fixture expects that.
    let report = run_file(&file, &mut InMemory);
    assert_eq!(report.failed(), 1, "{report:?}");
    // Expected: rejected, and then the state must still have the pre-state's root.
    let pre_root = eth::genesis_state_root(&file.tests[0].1.pre);
    for (root, passes) in [(pre_root.to_string(), true), (format!("0x{}", "00".repeat(32)), false)]
    {
        let expecting = edited(|t| {
            t["transaction"]["value"][0] = json!("0x:bigint 0x0100");
            t["post"]["Cancun"][0]["expectException"] =
                json!("TransactionException.RLP_INVALID_VALUE");
            t["post"]["Cancun"][0]["hash"] = json!(root);
        });
        let report = run_file(&parse_file(&expecting).unwrap(), &mut InMemory);
        assert_eq!(report.passed() == 1, passes, "{report:?}");
    }
    assert!(parse_file(&edited(|t| t["transaction"]["value"][0] = json!("0x:bigint zz"))).is_err());
}

#[test]
fn unsupported_forks_are_skipped_and_named() {
    let text = edited(|t| {
        let entries = t["post"]["Cancun"].take();
        t["post"] = json!({ "Constantinople": entries.clone(), "Cancun": entries });
    });
    let report = run_file(&parse_file(&text).unwrap(), &mut InMemory);
    assert_eq!(report.passed(), 1);
    assert_eq!(report.skipped.get("Constantinople"), Some(&1), "{report:?}");
}

/// Byte-level damage anywhere in the text.
fn mutations() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    // (position, operation, byte): 0 overwrite, 1 insert, 2 delete.
    prop::collection::vec((any::<usize>(), 0u8..3, any::<u8>()), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn mutated_fixtures_never_panic(ops in mutations()) {
        let mut bytes = base().into_bytes();
        for (at, op, b) in ops {
            let at = at % (bytes.len() + 1);
            match op {
                0 if at < bytes.len() => bytes[at] = b,
                1 => bytes.insert(at, b),
                _ if at < bytes.len() => { bytes.remove(at); }
                _ => {}
            }
        }
        if let Ok(text) = String::from_utf8(bytes) {
            if let Ok(file) = parse_file(&text) {
                let _ = run_file(&file, &mut InMemory);
            }
        }
    }

    #[test]
    fn any_json_type_in_any_field_never_panics(field in 0usize..64, kind in 0u8..7) {
        let replacement = match kind {
            0 => json!(null),
            1 => json!(true),
            2 => json!(-1),
            3 => json!(1.5),
            4 => json!("0x"),
            5 => json!([]),
            _ => json!({}),
        };
        let mut v = base_value();
        let mut seen = 0;
        replace_nth(&mut v, field, &replacement, &mut seen);
        if let Ok(file) = parse_file(&v.to_string()) {
            let _ = run_file(&file, &mut InMemory);
        }
    }
}

/// Replace the `n`th value (depth-first) of `v` by `with`.
fn replace_nth(v: &mut Value, n: usize, with: &Value, seen: &mut usize) -> bool {
    if *seen == n {
        *v = with.clone();
        return true;
    }
    *seen += 1;
    match v {
        Value::Object(map) => map.values_mut().any(|x| replace_nth(x, n, with, seen)),
        Value::Array(items) => items.iter_mut().any(|x| replace_nth(x, n, with, seen)),
        _ => false,
    }
}

/// The root a rejected transaction must leave: the pre-state as geth's state-test runner
/// leaves it, with its zero-value touch of the coinbase.
#[test]
fn a_rejected_transaction_still_touches_the_coinbase() {
    let fresh = format!("0x{}", "c0".repeat(20));
    let cases = [
        // Before Spurious Dragon an absent coinbase is created empty; from it, nothing.
        ("Frontier", false, true),
        ("Cancun", false, false),
        // From Spurious Dragon an empty coinbase is removed; before it, kept.
        ("Cancun", true, false),
        ("Homestead", true, true),
    ];
    for (fork, in_pre, exists_after) in cases {
        let text = edited(|t| {
            t["env"]["currentCoinbase"] = json!(fresh);
            if in_pre {
                t["pre"][fresh.as_str()] =
                    json!({ "balance": "0x0", "nonce": "0x0", "code": "0x", "storage": {} });
            }
            t["transaction"]["value"][0] = json!("0x:bigint 0x00");
            let mut entry = t["post"]["Cancun"][0].take();
            entry["expectException"] = json!("TransactionException.RLP_INVALID_VALUE");
            t["post"] = json!({ fork: [entry] });
        });
        let mut file = parse_file(&text).unwrap();
        let test = &mut file.tests[0].1;
        let mut after = test.pre.clone();
        let coinbase = test.env.coinbase;
        if exists_after {
            after.alloc.entry(coinbase).or_default();
        } else {
            after.alloc.remove(&coinbase);
        }
        test.post[0].1[0].hash = eth::genesis_state_root(&after);
        let report = run_file(&file, &mut InMemory);
        assert_eq!(report.passed(), 1, "{fork}, coinbase in pre: {in_pre}: {report:?}");
    }
}

#[test]
fn an_entry_built_by_hand_with_bad_indexes_is_an_error_not_a_panic() {
    let file = parse_file(&base()).unwrap();
    let test = &file.tests[0].1;
    let mut entry = test.post[0].1[0].clone();
    entry.indexes.value = 9;
    let spec = evm::statetest::spec_of("Cancun").unwrap();
    let failure = evm::statetest::run_entry(test, spec, &entry, &mut InMemory).unwrap_err();
    assert!(failure.to_string().contains("value index 9 is out of range"), "{failure}");
}
