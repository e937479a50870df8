//! Databases in Substrate's layouts from the command line: `init --chain-spec`, `load
//! --layout`, the layout recorded and enforced, proofs that name their layout, and the
//! usage errors (exit 2, nothing created) of inputs a Substrate database cannot take.

use serde_json::Value;

use super::{arbor, fresh_db, heads, ok, stderr, stdout, temp_file};

const WESTEND_ROOT: &str = "0x7e92439a94f79671f9cade9dff96a094519b9001a7432244d46ab644bb6f746f";

fn westend() -> String {
    format!("{}/../../testdata/substrate/westend2.json", env!("CARGO_MANIFEST_DIR"))
}

/// A usage error: exit 2, one `error:` line naming `mentions`.
fn assert_usage(args: &[&str], mentions: &str) {
    let o = arbor(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(mentions), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The first key of Westend's genesis storage, in hex.
fn westend_key() -> String {
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(westend()).unwrap()).unwrap();
    let top = spec["genesis"]["top"].as_object().unwrap();
    top.keys().min().unwrap().clone()
}

#[test]
fn westend_genesis_database_proves_its_keys() {
    let db = fresh_db("substrate-westend");
    let out: Value =
        serde_json::from_str(&ok(&["init", "--db", &db, "--chain-spec", &westend(), "--json"]))
            .unwrap();
    assert_eq!(out["root"], WESTEND_ROOT);
    assert_eq!(out["layout"], "substrate-v0");
    assert!(ok(&["verify", "--db", &db, "--deep"]).contains(WESTEND_ROOT));
    let stats: Value = serde_json::from_str(&ok(&["stats", "--db", &db, "--json"])).unwrap();
    assert_eq!(stats["layout"], "substrate-v0");

    let key = westend_key();
    let proof = ok(&["prove", "--db", &db, &key]);
    let p: Value = serde_json::from_str(&proof).unwrap();
    assert_eq!(p["layout"], "substrate-v0");
    let file = temp_file("substrate-westend-proof.json", &proof);
    let file = file.to_str().unwrap();
    assert_eq!(ok(&["verify-proof", "--root", WESTEND_ROOT, file]).trim(), "valid");
    let same = ["verify-proof", "--root", WESTEND_ROOT, "--layout", "substrate-v0", file];
    assert_eq!(ok(&same).trim(), "valid");
    // Checked in another layout: invalid, with the reason.
    let o = arbor(&["verify-proof", "--root", WESTEND_ROOT, "--layout", "substrate-v1", file]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("invalid: ") && stdout(&o).contains("substrate-v0"));
    // A proof whose layout field was swapped is checked in that layout, and fails.
    let swapped = proof.replace("\"substrate-v0\"", "\"ethereum\"");
    let swapped = temp_file("substrate-westend-swapped.json", &swapped);
    let o = arbor(&["verify-proof", "--root", WESTEND_ROOT, swapped.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    // The database refuses to be read as another layout.
    assert_usage(&["prove", "--db", &db, "--layout", "ethereum", &key], "substrate-v0");
}

#[test]
fn chain_spec_child_tries_become_storage_tries() {
    let spec = r#"{"genesis": {"raw": {
        "top": {"0x01": "0x02"},
        "childrenDefault": {"0x6368696c64": {"0x10": "0x11", "0x12": "0x1313"}, "0xeeee": {}}
    }}}"#;
    let path = temp_file("substrate-db-children.json", spec);
    let path = path.to_str().unwrap();
    let want = ok(&["root", "--chain-spec", path, "--layout", "substrate-v1"]);
    let db = fresh_db("substrate-children");
    let root = ok(&["init", "--db", &db, "--chain-spec", path, "--layout", "substrate-v1"]);
    assert_eq!(root, want);
    assert!(ok(&["verify", "--db", &db, "--deep"]).starts_with("ok 0"));
}

#[test]
fn inputs_a_substrate_database_cannot_take_are_usage_errors() {
    let empty = r#"{"genesis": {"raw": {"top": {"0x01": "0x02", "0x03": "0x"}}}}"#;
    let empty = temp_file("substrate-db-empty-value.json", empty);
    let db = fresh_db("substrate-refused");
    assert_usage(&["init", "--db", &db, "--chain-spec", empty.to_str().unwrap()], "empty value");
    assert!(!std::path::Path::new(&db).exists(), "a refused init created {db}");
    assert_usage(
        &["init", "--db", &db, "--chain-spec", &westend(), "--layout", "ethereum"],
        "--chain-spec",
    );
    let genesis = temp_file("substrate-db-eth-genesis.json", "{}");
    let genesis = genesis.to_str().unwrap();
    assert_usage(
        &["init", "--db", &db, "--genesis", genesis, "--layout", "substrate-v1"],
        "--genesis",
    );
    assert_usage(
        &["init", "--db", &db, "--chain-spec", &westend(), "--layout", "polkadot"],
        "polkadot",
    );
    assert!(!std::path::Path::new(&db).exists(), "a refused init created {db}");
}

#[test]
fn load_records_the_layout_and_later_commands_use_it() {
    let db = fresh_db("substrate-load");
    let load = |layout: &str, blocks: &str| {
        let args = ["load", "--db", &db, "--blocks", blocks, "--updates-per-block", "300"];
        let mut args = args.to_vec();
        args.extend(["--keys", "3000", "--seed", "7", "--layout", layout]);
        arbor(&args)
    };
    let first = load("substrate-v1", "6");
    assert!(first.status.success(), "{}", stderr(&first));
    let head = heads(&stdout(&first)).pop().unwrap();
    assert!(ok(&["verify", "--db", &db, "--deep"]).contains(&head.1));
    // Another layout is refused; none continues in the recorded one.
    let o = load("ethereum", "2");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let more = arbor(&[
        "load",
        "--db",
        &db,
        "--blocks",
        "2",
        "--updates-per-block",
        "300",
        "--keys",
        "3000",
        "--seed",
        "7",
    ]);
    assert!(more.status.success(), "{}", stderr(&more));
    assert_eq!(heads(&stdout(&more)).pop().unwrap().0, head.0 + 2);
    // A revert recomputes the nodes in the database's layout.
    ok(&["revert", "--db", &db, "2"]);
    assert!(ok(&["verify", "--db", &db, "--deep"]).contains(&head.1));
    // The same blocks in a V0 database give another root.
    let v0 = fresh_db("substrate-load-v0");
    let args = ["load", "--db", &v0, "--blocks", "6", "--updates-per-block", "300"];
    let mut args = args.to_vec();
    args.extend(["--keys", "3000", "--seed", "7", "--layout", "substrate-v0", "--quiet"]);
    let v0_head = heads(&ok(&args)).pop().unwrap();
    assert_eq!(v0_head.0, head.0);
    assert_ne!(v0_head.1, head.1);
}

#[test]
fn blocks_build_and_verify_in_each_layout() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let mut posts = Vec::new();
    for layout in ["ethereum", "substrate-v0", "substrate-v1"] {
        let block = dir.join(format!("layout-block-{layout}.bin"));
        let witness = dir.join(format!("layout-witness-{layout}.bin"));
        let (b, w) = (block.to_str().unwrap(), witness.to_str().unwrap());
        let args = ["build-block", "--accounts", "60", "--transfers", "12", "--block", b];
        let mut args = args.to_vec();
        args.extend(["--witness", w, "--force", "--json", "--layout", layout]);
        let built: Value = serde_json::from_str(&ok(&args)).unwrap();
        assert_eq!(built["layout"], layout);
        let parent = built["parent_root"].as_str().unwrap().to_string();
        let verified = ok(&["verify-block", "--parent-root", &parent, b, w, "--layout", layout]);
        assert_eq!(verified.trim(), format!("ok {}", built["root"].as_str().unwrap()));
        // The other family's rules do not accept it.
        let other = if layout == "ethereum" { "substrate-v1" } else { "ethereum" };
        let o = arbor(&["verify-block", "--parent-root", &parent, b, w, "--layout", other]);
        assert_eq!(o.status.code(), Some(1), "{layout} block verified as {other}");
        assert!(stdout(&o).starts_with("invalid: "), "{}", stdout(&o));
        posts.push(built["root"].as_str().unwrap().to_string());
    }
    assert!(posts[0] != posts[1] && posts[1] != posts[2], "{posts:?}");
    let (b, w) = (dir.join("layout-block-ethereum.bin"), dir.join("layout-witness-ethereum.bin"));
    let (b, w) = (b.to_str().unwrap(), w.to_str().unwrap());
    let zero = format!("0x{}", "00".repeat(32));
    assert_usage(
        &["verify-block", "--parent-root", &zero, b, w, "--layout", "polkadot"],
        "polkadot",
    );
}
