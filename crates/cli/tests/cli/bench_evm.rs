//! `arbor bench evm`: the report of a tiny run (three workloads, three engines in their
//! worker processes, one final root, the temporary files removed), and the hidden worker
//! command refusing a spec past the flags' bounds.

use std::path::PathBuf;

use serde_json::Value;

use super::{arbor, conventions, html_path, parse_svgs, stderr, stdout};

/// A fresh directory for one test's benchmark files.
fn bench_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-evm-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn bench_evm_smoke() {
    let html = html_path("evm");
    let dir = bench_dir("smoke");
    let o = arbor(&[
        "bench",
        "evm",
        "--accounts",
        "40",
        "--blocks",
        "2",
        "--gas-limit",
        "1000000",
        "--json",
        "--html",
        html.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    let names: Vec<&str> =
        v["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["eth-transfer", "erc20-transfer", "storage-heavy"]);
    for w in v["workloads"].as_array().unwrap() {
        let name = &w["name"];
        assert_eq!(w["blocks"], 2, "{name}");
        // Blocks of 1M gas are filled by their transactions' gas limits: over half used.
        assert!(w["gas"].as_u64().unwrap() > 1_000_000, "{name}: {}", w["gas"]);
        for field in ["mgas_per_s", "tx_per_s", "arbor_over_plain_undo", "arbor_over_memory"] {
            assert!(w[field].as_f64().unwrap() > 0.0, "{name}: {field}");
        }
        let share = w["commit_share"].as_f64().unwrap();
        assert!(share > 0.0 && share < 1.0, "{name}: commit share {share}");
        for engine in ["arbor", "memory", "plain_undo"] {
            assert!(w[engine]["peak_rss_bytes"].as_u64().is_some(), "{name} {engine}");
            assert_eq!(w[engine]["block_ms_series"].as_array().unwrap().len(), 2);
        }
        assert_eq!(w["memory"]["commit_s"], 0.0, "the in-memory engine commits nothing");
    }
    assert_eq!(v["roots"]["agree"], true);
    assert_eq!(v["roots"]["arbor_verified"], true);
    assert_eq!(v["roots"]["memory"], v["roots"]["arbor_head"]);
    assert_eq!(v["roots"]["plain_undo"], v["roots"]["arbor_head"]);
    assert!(v["compiler"].as_str().unwrap().starts_with("0.8.30"), "{}", v["compiler"]);
    // Per workload: Mgas/s bars and a block-time line chart; then the ratios' bars.
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(parse_svgs(&page), 7);
    assert_eq!(page.matches("<polyline").count(), 9, "one block-time line per engine");
    // The databases, block files and the workers' specs are gone.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn a_configuration_in_another_layout_is_a_usage_error() {
    let dir = bench_dir("layout");
    let config = dir.join("substrate.toml");
    std::fs::write(&config, "layout = \"substrate-v1\"\n").unwrap();
    let o = arbor(&[
        "bench",
        "evm",
        "--accounts",
        "16",
        "--blocks",
        "1",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--config names layout substrate-v1"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_evm_worker_refuses_a_spec_past_the_bounds() {
    let dir = bench_dir("worker");
    let o = arbor(&["bench", "evm-worker", "--spec", dir.join("absent.json").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot read the worker spec"), "{}", stderr(&o));
    let spec = |accounts: u64, blocks: u64, gas_limit: u64| {
        let path = dir.join(format!("spec-{accounts}-{blocks}-{gas_limit}.json"));
        let spec = serde_json::json!({
            "engine": "memory", "dir": dir.join("db"), "seed": 1, "accounts": accounts,
            "senders_file": dir.join("senders"), "gas_limit": gas_limit, "blocks": blocks,
            "workloads": [["eth-transfer", dir.join("blocks")]], "config": {},
        });
        std::fs::write(&path, spec.to_string()).unwrap();
        path
    };
    for (accounts, blocks, gas_limit, says) in [
        (15, 1, 1_000_000, "accounts must be 16 to 10000000"),
        (20_000_000, 1, 1_000_000, "accounts must be 16 to 10000000"),
        (16, 0, 1_000_000, "blocks must be 1 to 10000"),
        (16, 10_001, 1_000_000, "blocks must be 1 to 10000"),
        (16, 1, 999_999, "gas limit must be in"),
        (16, 1, 1 << 40, "gas limit must be in"),
    ] {
        let path = spec(accounts, blocks, gas_limit);
        let o = arbor(&["bench", "evm-worker", "--spec", path.to_str().unwrap()]);
        assert!(!o.status.success(), "{accounts} {blocks} {gas_limit}");
        assert!(stderr(&o).contains(says), "{says}: {}", stderr(&o));
    }
    // Within the bounds, a senders file of the wrong size is refused before any state.
    std::fs::write(dir.join("senders"), [0u8; 19]).unwrap();
    let o = arbor(&["bench", "evm-worker", "--spec", spec(16, 1, 1_000_000).to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("the senders file holds 19 bytes"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
