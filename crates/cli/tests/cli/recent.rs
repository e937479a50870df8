//! `get` and `prove --db` at recent blocks (`--block N`): values and proofs of an older
//! block against a model of the workload, proofs that verify against that block's root
//! and not the head's, blocks outside the window and hostile numbers as usage errors, and
//! the window in `stats`.

use std::process::Output;

use bench::workload::Workload;
use serde_json::Value;
use state::H256;
use trie::EthLayout;

use super::conventions::assert_json_names;
use super::{arbor, assert_one_line_error, fresh_db, heads, ok, stdout, temp_file};

const SEED: u64 = 11;
const KEYS: u64 = 300;
const UPDATES: u64 = 40;
const BLOCKS: u64 = 6;

/// A database of the workload's blocks 0 (bulk load) to [`BLOCKS`]; their roots.
fn load(name: &str) -> (String, Vec<String>) {
    let db = fresh_db(name);
    let (keys, blocks, updates, seed) =
        (KEYS.to_string(), BLOCKS.to_string(), UPDATES.to_string(), SEED.to_string());
    let out = ok(&[
        "load",
        "--db",
        &db,
        "--keys",
        &keys,
        "--blocks",
        &blocks,
        "--updates-per-block",
        &updates,
        "--seed",
        &seed,
    ]);
    let roots: Vec<String> = heads(&out).into_iter().map(|(_, r)| r).collect();
    assert_eq!(roots.len() as u64, BLOCKS + 1, "{out}");
    (db, roots)
}

/// The value of key index `i` at each block 0..=BLOCKS (hex, or `absent`), from the
/// workload alone.
fn model(w: &Workload, i: u64) -> Vec<String> {
    let hex = |v: &[u8]| format!("0x{}", hex::encode(v));
    let mut value = (i < KEYS).then(|| hex(&w.initial_value(i)));
    let mut out = vec![value.clone().unwrap_or("absent".into())];
    for b in 1..=BLOCKS {
        if let Some(v) = w.block_changes(b).get(w.key(i).as_slice()) {
            value = v.as_deref().map(hex);
        }
        out.push(value.clone().unwrap_or("absent".into()));
    }
    out
}

/// An initial key that blocks 1 and 2 leave alone and a later block changes: its value at
/// block 2 is not the head's.
fn changed_after_block_2(w: &Workload) -> u64 {
    (0..KEYS)
        .find(|&i| {
            let m = model(w, i);
            m[1] == m[0] && m[2] == m[0] && m[BLOCKS as usize] != m[2]
        })
        .expect("a key the workload changes after block 2")
}

/// A usage error (exit code 2) on one line naming `mentions`.
fn assert_usage(o: &Output, mentions: &str) {
    assert_one_line_error(o, mentions);
    assert_eq!(o.status.code(), Some(2), "{mentions}: {o:?}");
}

#[test]
fn get_at_every_block_matches_the_model() {
    let (db, roots) = load("recent-get");
    let w = Workload::new(SEED, KEYS, UPDATES);
    let i = changed_after_block_2(&w);
    let key = hex::encode(w.key(i));
    let m = model(&w, i);
    for b in 0..=BLOCKS {
        let got = ok(&["get", "--db", &db, "--block", &b.to_string(), &key]);
        assert_eq!(got.trim(), m[b as usize], "key {i} at block {b}");
    }
    assert_ne!(m[2], m[BLOCKS as usize]);
    // Without --block: the head, as before.
    assert_eq!(ok(&["get", "--db", &db, &key]).trim(), m[BLOCKS as usize]);
    // The JSON names the block read and its root.
    let v: Value =
        serde_json::from_str(&ok(&["get", "--db", &db, "--block", "2", &key, "--json"])).unwrap();
    assert_json_names(&v);
    assert_eq!((v["block"].as_u64(), v["root"].as_str()), (Some(2), Some(roots[2].as_str())));
    assert_eq!(v["value"].as_str(), Some(m[2].as_str()));
    let head: Value = serde_json::from_str(&ok(&["get", "--db", &db, &key, "--json"])).unwrap();
    assert_eq!(head["block"].as_u64(), Some(BLOCKS));
    assert_eq!(head["root"].as_str(), Some(roots[BLOCKS as usize].as_str()));
}

#[test]
fn proof_at_an_older_block_verifies_against_its_root_only() {
    let (db, roots) = load("recent-prove");
    let w = Workload::new(SEED, KEYS, UPDATES);
    let i = changed_after_block_2(&w);
    let key = hex::encode(w.key(i));
    let text = ok(&["prove", "--db", &db, "--block", "2", &key]);
    let p: Value = serde_json::from_str(&text).unwrap();
    assert_json_names(&p);
    assert_eq!((p["block"].as_u64(), p["root"].as_str()), (Some(2), Some(roots[2].as_str())));
    assert_eq!(p["value"].as_str(), Some(model(&w, i)[2].as_str()));
    let nodes: Vec<Vec<u8>> = p["proof"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| hex::decode(&n.as_str().unwrap()[2..]).unwrap())
        .collect();
    let root2 = H256::from_hex(&roots[2]).unwrap();
    let proven = trie::verify_proof::<EthLayout>(&root2, &w.key(i), &nodes).unwrap();
    assert_eq!(proven, Some(w.initial_value(i).to_vec()));

    let file = temp_file("recent-proof-2.json", &text);
    let file = file.to_str().unwrap();
    assert_eq!(ok(&["verify-proof", "--root", &roots[2], file]), "valid\n");
    let head_root = &roots[BLOCKS as usize];
    let o = arbor(&["verify-proof", "--root", head_root, file]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(stdout(&o).starts_with("invalid: "), "{o:?}");
    // The same nodes relabelled as a proof of the head's root do not verify either.
    let mut relabelled = p.clone();
    relabelled["root"] = Value::from(head_root.as_str());
    let file = temp_file("recent-proof-relabelled.json", &relabelled.to_string());
    let o = arbor(&["verify-proof", "--root", head_root, file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(stdout(&o).starts_with("invalid: "), "{o:?}");

    // At the head's number, --block gives what the head gives.
    let at_head = ok(&["prove", "--db", &db, "--block", &BLOCKS.to_string(), &key]);
    assert_eq!(at_head, ok(&["prove", "--db", &db, &key]));
}

#[test]
fn blocks_outside_the_window_are_usage_errors() {
    let (db, _) = load("recent-outside");
    let key = hex::encode(Workload::new(SEED, KEYS, UPDATES).key(0));
    for command in ["get", "prove"] {
        let o = arbor(&[command, "--db", &db, "--block", "7", &key]);
        assert_usage(&o, "block 7 is outside the readable window: blocks 0 to 6");
        let o = arbor(&[command, "--db", &db, "--block", "9223372036854775807", &key]);
        assert_usage(&o, "blocks 0 to 6");
    }
    // A window of 2 blocks: 4 to 6.
    let config = temp_file("recent-2.toml", "[history]\nrecent_blocks = 2\n");
    let config = config.to_str().unwrap();
    for command in ["get", "prove"] {
        let o = arbor(&[command, "--db", &db, "--config", config, "--block", "3", &key]);
        assert_usage(
            &o,
            "block 3 is outside the readable window: blocks 4 to 6 (history.recent_blocks = 2)",
        );
        ok(&[command, "--db", &db, "--config", config, "--block", "4", &key]);
    }
}

#[test]
fn hostile_block_numbers_are_usage_errors() {
    let db = fresh_db("recent-never-created");
    for command in ["get", "prove"] {
        for bad in ["99999999999999999999", "9223372036854775808", "-1", "x", "", "0x10"] {
            let o = arbor(&[command, "--db", &db, &format!("--block={bad}"), "0x01"]);
            assert_usage(&o, "--block");
        }
    }
    // --block needs --db: a genesis has no blocks.
    let address = format!("0x{}", "00".repeat(20));
    let o = arbor(&["prove", "--genesis", "g.json", "--address", &address, "--block", "1"]);
    assert_usage(&o, "--db");
    assert!(!std::path::Path::new(&db).exists(), "a refused command created the database");
}

#[test]
fn stats_show_the_window() {
    let (db, _) = load("recent-stats");
    let text = ok(&["stats", "--db", &db]);
    let line = text.lines().find(|l| l.starts_with("recent window")).expect("a window line");
    assert!(line.contains("blocks 0 to 6 (history.recent_blocks 128)"), "{line}");
    assert!(line.contains("dropped for the byte bound"), "{line}");
    let v: Value = serde_json::from_str(&ok(&["stats", "--db", &db, "--json"])).unwrap();
    assert_eq!(v["recent"]["limit_blocks"].as_u64(), Some(128), "{v}");
}
