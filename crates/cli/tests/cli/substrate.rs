//! `arbor root` in Substrate's layouts: Westend's genesis root from its raw chain spec,
//! `--layout` on key/value files, child tries, and the usage-error contract for bad chain
//! specs (exit code 2, one `error: …` line naming the problem).

use std::process::Output;

use serde_json::Value;
use state::H256;
use trie::{Layout, SubstrateV0, SubstrateV1};

use super::{arbor, assert_one_line_error, stderr, stdout, temp_file};

const WESTEND_ROOT: &str = "0x7e92439a94f79671f9cade9dff96a094519b9001a7432244d46ab644bb6f746f";

fn westend() -> String {
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{dir}/../../testdata/substrate/westend2.json")
}

/// The command printed one root and succeeded.
fn root_of(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o).trim_end().to_string()
}

/// A usage error: exit code 2, one `error:` line naming `mentions`.
fn assert_usage_error(o: &Output, mentions: &str) {
    assert_one_line_error(o, mentions);
    assert_eq!(o.status.code(), Some(2), "not a usage error: {}", stderr(o));
}

#[test]
fn westend_genesis_root_from_its_chain_spec() {
    // Without --layout a chain spec is read in substrate-v0.
    assert_eq!(root_of(&arbor(&["root", "--chain-spec", &westend()])), WESTEND_ROOT);
    let o = arbor(&["root", "--layout", "substrate-v0", "--chain-spec", &westend(), "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["root"].as_str(), v["layout"].as_str()),
        (Some(WESTEND_ROOT), Some("substrate-v0"))
    );
    let v1 = root_of(&arbor(&["root", "--layout", "substrate-v1", "--chain-spec", &westend()]));
    assert_ne!(v1, WESTEND_ROOT);
}

#[test]
fn key_values_in_each_layout() {
    let kv = temp_file("substrate-kv.json", r#"{"0xaa": "0xbb"}"#);
    let kv = kv.to_str().unwrap();
    // sp-trie's single tuple: the root node is 42 aa 04 bb.
    let node = SubstrateV0::hash(&[0x42, 0xaa, 0x04, 0xbb]).to_string();
    assert_eq!(root_of(&arbor(&["root", "--kv", kv, "--layout", "substrate-v0"])), node);
    assert_eq!(root_of(&arbor(&["root", "--kv", kv, "--layout", "substrate-v1"])), node);
    let eth = root_of(&arbor(&["root", "--kv", kv]));
    assert_eq!(root_of(&arbor(&["root", "--kv", kv, "--layout", "ethereum"])), eth);
    assert_ne!(eth, node);

    // An empty value is absent in Ethereum's layout and a value in Substrate's.
    let with_empty = temp_file("substrate-kv-empty.json", r#"{"0xaa": "0xbb", "0x01": ""}"#);
    let with_empty = with_empty.to_str().unwrap();
    assert_eq!(root_of(&arbor(&["root", "--kv", with_empty])), eth);
    let sub = root_of(&arbor(&["root", "--kv", with_empty, "--layout", "substrate-v0"]));
    assert_ne!(sub, node);
    let items = [(vec![0x01u8], vec![]), (vec![0xaa], vec![0xbb])];
    let want = trie::root_from_sorted::<SubstrateV0, _, _>(&items).unwrap().0;
    assert_eq!(sub, want.to_string());
}

#[test]
fn child_tries_are_committed_under_their_prefixed_key() {
    let spec = r#"{"genesis": {"raw": {
        "top": {"0x01": "0x02"},
        "childrenDefault": {"0x6368696c64": {"0x10": "0x11", "0x12": ""}, "0xeeee": {}}
    }}}"#;
    let path = temp_file("substrate-children.json", spec);
    let o = arbor(&["root", "--chain-spec", path.to_str().unwrap(), "--layout", "substrate-v1"]);
    let child = [(vec![0x10u8], vec![0x11u8]), (vec![0x12], vec![])];
    let child_root = trie::root_from_sorted::<SubstrateV1, _, _>(&child).unwrap().0;
    // An empty child trie has no entry.
    let top = [
        (vec![0x01u8], vec![0x02u8]),
        ([&b":child_storage:default:"[..], b"child"].concat(), child_root.as_bytes().to_vec()),
    ];
    let want: H256 = trie::root_from_sorted::<SubstrateV1, _, _>(&top).unwrap().0;
    assert_eq!(root_of(&o), want.to_string());
}

#[test]
fn bad_chain_specs_are_usage_errors() {
    let cases = [
        ("not-json", "{\"genesis\": ", "JSON"),
        ("odd", r#"{"genesis": {"raw": {"top": {"0x123": "0x04"}}}}"#, "\"0x123\""),
        ("odd-value", r#"{"genesis": {"raw": {"top": {"0x12": "0x045"}}}}"#, "odd"),
        ("non-hex", r#"{"genesis": {"top": {"0x12": "0xzz"}}}"#, "invalid hex"),
        ("dup", r#"{"genesis": {"raw": {"top": {"0x0a": "0x02", "0x0A": "0x03"}}}}"#, "same key"),
        ("literal-dup", r#"{"genesis": {"top": {"0x0a": "0x02", "0x0a": "0x03"}}}"#, "same key"),
        ("not-raw", r#"{"genesis": {"runtimeGenesis": {}}}"#, "not a raw chain spec"),
        ("number", r#"{"genesis": {"top": {"0x0a": 5}}}"#, "hex string"),
        // `:child_storage:default:x` and `:child_storage:other`, given in the top trie.
        (
            "child-in-top",
            r#"{"genesis": {"raw": {"top": {"0x3a6368696c645f73746f726167653a64656661756c743a78": "0x01"}}}}"#,
            "childrenDefault",
        ),
        (
            "other-child-in-top",
            r#"{"genesis": {"top": {"0x3a6368696c645f73746f726167653a6f74686572": "0x01"}}}"#,
            "child trie's key",
        ),
        (
            "child-dup",
            r#"{"genesis": {"top": {}, "childrenDefault":
                {"0xaa": {"0x01": "0x01"}, "0xAA": {"0x02": "0x02"}}}}"#,
            "twice",
        ),
    ];
    for (name, text, mentions) in cases {
        let path = temp_file(&format!("substrate-bad-{name}.json"), text);
        let o = arbor(&["root", "--chain-spec", path.to_str().unwrap()]);
        assert_usage_error(&o, mentions);
        assert!(stderr(&o).contains(path.to_str().unwrap()), "{name}: {}", stderr(&o));
    }
    let w = westend();
    assert_usage_error(&arbor(&["root", "--chain-spec", &w, "--layout", "polkadot"]), "polkadot");
    let g = temp_file("substrate-eth-genesis.json", "{}");
    let g = g.to_str().unwrap();
    assert_usage_error(&arbor(&["root", "--genesis", g, "--layout", "substrate-v0"]), "--layout");
    assert_usage_error(&arbor(&["root", "--chain-spec", &w, "--secure"]), "--secure");
    let kv = temp_file("substrate-secure.json", r#"{"0x01": "0x02"}"#);
    let o = arbor(&["root", "--kv", kv.to_str().unwrap(), "--secure", "--layout", "substrate-v1"]);
    assert_usage_error(&o, "--secure");
    assert_usage_error(&arbor(&["root", "--chain-spec", &w, "--kv", &w]), "cannot be used");
}
