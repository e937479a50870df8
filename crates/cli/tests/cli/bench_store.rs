//! `arbor bench store`: the report of a small run (every engine given the same blocks, the
//! databases cross-checked and removed), the hidden worker command refusing what the
//! driver would never send, and no worker outliving a driver killed mid-run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{arbor, arbor_stdin, conventions, html_path, parse_svgs, stderr, stdout};

/// A fresh directory for one test's benchmark databases.
fn bench_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-store-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn bench_store_smoke() {
    let html = html_path("store");
    let dir = bench_dir("smoke");
    let o = arbor(&[
        "bench",
        "store",
        "--html",
        html.to_str().unwrap(),
        "--keys",
        "1000",
        "--blocks",
        "3",
        "--updates-per-block",
        "50",
        "--json",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    conventions::assert_json_names(&v);
    assert_eq!(v["options"]["keys"], 1000);
    assert_eq!(v["root_verified"], true);
    assert_eq!(v["values_cross_checked"], 1000);
    assert!(v["ratios"]["merkle_overhead"].as_f64().unwrap() > 0.0);
    assert!(v["ratios"]["over_nomt"].as_f64().unwrap() > 0.0);
    // Every engine, in its own worker, bulk-loaded the same keys and wrote the same blocks.
    let writes = &v["arbor"]["writes"];
    assert!(writes.as_u64().unwrap() > 3 * 40, "{writes}");
    for engine in ["arbor", "arbor_reading", "plain_undo", "plain", "nomt"] {
        assert_eq!(&v[engine]["writes"], writes, "{engine}");
        assert_eq!(v[engine]["bulk_keys"], 1000, "{engine}");
        assert_eq!(v[engine]["blocks"], 3, "{engine}");
        assert!(v[engine]["peak_rss_bytes"].as_u64().unwrap() > 0, "{engine}");
    }
    let undo = v["plain_undo"]["bytes_written_per_block"].as_f64().unwrap();
    assert!(undo > v["plain"]["bytes_written_per_block"].as_f64().unwrap());
    assert!(v["arbor"]["column_sst_bytes"]["flat"].as_u64().unwrap() > 0);
    assert!(v["arbor_caches"]["budget_bytes"].as_u64().unwrap() > 0);
    // Commit latency over the blocks (one line per engine), p50/p99, blocks/s, two ratios.
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(parse_svgs(&page), 5);
    assert_eq!(page.matches("<polyline").count(), 5, "one latency line per engine");
    assert_eq!(v["arbor"]["commit_ms_series"].as_array().unwrap().len(), 3, "a point per block");
    // The temporary databases and the workers' specs are gone.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn the_worker_command_refuses_what_the_driver_never_sends() {
    let dir = bench_dir("worker");
    let o = arbor(&["bench", "store-worker", "--spec", dir.join("absent.json").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot read the worker spec"), "{}", stderr(&o));
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, b"{\"engine\": \"nomt\", \"keys\": ").unwrap();
    let o = arbor(&["bench", "store-worker", "--spec", garbage.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is not a worker spec"), "{}", stderr(&o));
    // A spec past the bounds, then commands out of order or unknown: refused, no panic.
    let spec = |blocks: u64, keys: u64| {
        let path = dir.join(format!("spec-{blocks}-{keys}.json"));
        let db = dir.join(format!("db-{blocks}-{keys}"));
        // Every key of the store's configuration is optional: `{}` is the defaults.
        let spec = serde_json::json!({
            "engine": "blind", "dir": db, "keys": keys, "blocks": blocks,
            "updates_per_block": 10, "seed": 1, "config": {},
        });
        std::fs::write(&path, spec.to_string()).unwrap();
        path
    };
    let o = arbor(&["bench", "store-worker", "--spec", spec(0, 10).to_str().unwrap()]);
    assert!(stderr(&o).contains("blocks must be"), "{}", stderr(&o));
    let o = arbor(&["bench", "store-worker", "--spec", spec(2, 200_000_000).to_str().unwrap()]);
    assert!(stderr(&o).contains("over 100000000"), "{}", stderr(&o));
    let good = spec(2, 10);
    let long = format!("blocks 1 1{}\n", " ".repeat(300));
    for (commands, says) in [
        ("blocks 2 2\n", "out of order"),
        ("blocks 1 3\n", "out of order"),
        ("blocks 1 18446744073709551616\n", "number too large"),
        ("rm -rf /\n", "unknown worker command"),
        (long.as_str(), "longer than 256 bytes"),
        ("blocks 1 1", "in the middle of a command"),
        ("", "driver left"),
    ] {
        let _ = std::fs::remove_dir_all(dir.join("db-2-10"));
        let o = arbor_stdin(&["bench", "store-worker", "--spec", good.to_str().unwrap()], commands);
        assert!(!o.status.success(), "{commands:?}");
        assert!(stderr(&o).contains(says), "{commands:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    }
    // The commands the driver sends: one round, then the report as one JSON line.
    let _ = std::fs::remove_dir_all(dir.join("db-2-10"));
    let o = arbor_stdin(
        &["bench", "store-worker", "--spec", good.to_str().unwrap()],
        "blocks 1 1\nblocks 2 2\nfinish\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let report: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(report["report"]["blocks"], 2, "{out}");
}

/// The processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn workers_die_with_a_driver_killed_mid_run() {
    let dir = bench_dir("killed");
    let needle = dir.to_str().unwrap().to_string();
    let mut driver = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["bench", "store", "--keys", "20000", "--blocks", "100000", "--json"])
        .args(["--updates-per-block", "100", "--skip-nomt", "--dir", &needle])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Every engine's worker started (the later ones stopped between rounds), then blocks.
    wait_until("four workers run", || processes_mentioning(&needle).len() >= 4);
    std::thread::sleep(Duration::from_millis(300));
    driver.kill().unwrap();
    driver.wait().unwrap();
    wait_until("no worker is left", || processes_mentioning(&needle).is_empty());
    remove_tree(&dir);
}

fn remove_tree(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}
