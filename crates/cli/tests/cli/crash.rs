//! Crash tests of the bulk phases: `arbor init` and the bulk load of `arbor load`, killed
//! with SIGKILL at random moments (`ARBOR_CRASH_ITERATIONS` kills each, default 3; the
//! moments are uniform over an uninterrupted run's duration). Afterwards the database must
//! be empty, or complete with the right root, or reported as an unfinished bulk load —
//! never a wrong root with exit 0. An unfinished directory refuses another genesis or
//! workload, and the same command finishes it with the uninterrupted root.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{arbor, fresh_db, stderr, stdout, testdata, MAINNET_ROOT};

/// What a killed command left behind, as `arbor verify` reports it.
#[derive(Debug, PartialEq, Eq)]
enum Left {
    /// No database, or one without state.
    Empty,
    /// A finished state: verify's `ok <number> <root>` line.
    Complete(String),
    /// An unfinished bulk load, refused by verify with a one-line error.
    Unfinished,
}

pub(super) fn iterations() -> u64 {
    std::env::var("ARBOR_CRASH_ITERATIONS").ok().and_then(|s| s.parse().ok()).unwrap_or(3)
}

pub(super) fn seed(test: &str) -> u64 {
    let seed = match std::env::var("ARBOR_SEED") {
        Ok(s) => s.parse().unwrap(),
        Err(_) => rand::thread_rng().gen(),
    };
    eprintln!("{test}: seed {seed} (replay with ARBOR_SEED={seed})");
    seed
}

/// Run `args` to completion and return how long it took; it must succeed.
fn timed(args: &[&str]) -> (Duration, String) {
    let start = Instant::now();
    let o = arbor(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    (start.elapsed(), stdout(&o))
}

/// Start `args`, SIGKILL it after `delay` (unless it finished first).
pub(super) fn kill_after(args: &[&str], delay: Duration) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(status.signal() == Some(9) || status.success(), "{args:?} ended with {status}");
    status.signal() == Some(9)
}

/// Classify the directory with `arbor verify`; a wrong root never passes.
fn left_behind(db: &str, empty_root_line: &str) -> Left {
    let o = arbor(&["verify", "--db", db]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!err.contains("panicked"), "{err}");
    if o.status.success() {
        let line = out.trim().to_owned();
        if line == empty_root_line {
            return Left::Empty;
        }
        return Left::Complete(line);
    }
    assert_eq!(err.trim_end().lines().count(), 1, "verify: {err}");
    if err.contains("no database at") {
        return Left::Empty;
    }
    assert!(err.contains("unfinished bulk load"), "verify failed otherwise: {out}{err}");
    assert_eq!(o.status.code(), Some(3), "{err}");
    Left::Unfinished
}

const EMPTY_HEAD: &str = "ok 0 0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421";

/// A genesis big enough that `init` spends most of its time in the bulk load: `accounts`
/// funded accounts, every tenth with 20 storage slots (so thousands of storage tries).
fn big_genesis(accounts: u32, salt: u8) -> String {
    let mut alloc = Vec::with_capacity(accounts as usize);
    for i in 0..accounts {
        let address = format!("{:02x}{:038x}", salt, u128::from(i) * 0x9e37_79b9);
        let storage = if i % 10 == 0 {
            let slots: Vec<String> =
                (1..=20u32).map(|s| format!("\"0x{s:064x}\": \"0x{:x}\"", i + s)).collect();
            format!(", \"storage\": {{{}}}", slots.join(", "))
        } else {
            String::new()
        };
        alloc.push(format!("\"0x{address}\": {{\"balance\": \"0x{:x}\"{storage}}}", i + 1));
    }
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-big-genesis-{salt}.json"));
    std::fs::write(&path, format!("{{\"alloc\": {{{}}}}}", alloc.join(", "))).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn init_killed_at_random_moments() {
    let mut rng = ChaCha8Rng::seed_from_u64(seed("init_killed_at_random_moments"));
    let genesis = big_genesis(40_000, 0xa1);
    let other = big_genesis(1_000, 0xb2);
    let root = stdout(&arbor(&["root", "--genesis", &genesis])).trim().to_owned();
    assert!(root.starts_with("0x") && root.len() == 66, "{root}");
    let reference = fresh_db("crash-init-reference");
    let (full, out) = timed(&["init", "--db", &reference, "--genesis", &genesis]);
    assert_eq!(out.trim(), root);
    let complete = format!("ok 0 {root}");
    let mut seen = Vec::new();
    for i in 0..iterations() {
        let db = fresh_db(&format!("crash-init-{i}"));
        let delay = full.mul_f64(rng.gen_range(0.0..1.1));
        let args = ["init", "--db", db.as_str(), "--genesis", genesis.as_str()];
        let killed = kill_after(&args, delay);
        let left = left_behind(&db, EMPTY_HEAD);
        match &left {
            Left::Complete(line) => assert_eq!(*line, complete),
            Left::Unfinished => {
                let o = arbor(&["init", "--db", &db, "--genesis", &other]);
                assert_eq!(o.status.code(), Some(3), "another genesis: {}", stderr(&o));
                assert!(stderr(&o).contains("unfinished bulk load"), "{}", stderr(&o));
            }
            Left::Empty => {}
        }
        if left != Left::Complete(complete.clone()) {
            let (_, out) = timed(&["init", "--db", &db, "--genesis", &genesis]);
            assert_eq!(out.trim(), root, "init after {left:?}");
        }
        let o = arbor(&["verify", "--db", &db]);
        assert_eq!(stdout(&o).trim(), complete, "{}", stderr(&o));
        eprintln!("kill {i} after {delay:?} (killed: {killed}): {left:?}");
        seen.push(left);
        let _ = std::fs::remove_dir_all(&db);
    }
    eprintln!("init: {} kills over a {full:?} run: {seen:?}", seen.len());
    // The shipped mainnet genesis still initialises to its known root.
    let db = fresh_db("crash-init-mainnet");
    let (_, out) = timed(&["init", "--db", &db, "--genesis", &testdata("genesis/mainnet.json")]);
    assert_eq!(out.trim(), MAINNET_ROOT);
}

#[test]
fn bulk_load_killed_at_random_moments() {
    let mut rng = ChaCha8Rng::seed_from_u64(seed("bulk_load_killed_at_random_moments"));
    let load = |db: &str, seed: &str| -> Vec<String> {
        ["load", "--db", db, "--blocks", "2", "--updates-per-block", "50", "--seed", seed]
            .iter()
            .chain(&["--keys", "60000", "--quiet"])
            .map(|s| s.to_string())
            .collect()
    };
    let reference = fresh_db("crash-load-reference");
    let args = load(&reference, "11");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (full, out) = timed(&args);
    let final_line = out.trim().to_owned();
    let mut seen = Vec::new();
    for i in 0..iterations() {
        let db = fresh_db(&format!("crash-load-{i}"));
        let owned = load(&db, "11");
        let args: Vec<&str> = owned.iter().map(String::as_str).collect();
        let delay = full.mul_f64(rng.gen_range(0.0..1.1));
        let killed = kill_after(&args, delay);
        let left = left_behind(&db, EMPTY_HEAD);
        match &left {
            // Block 0 (the bulk state) or a later block: its root must be the reference's.
            Left::Complete(_) => {}
            Left::Unfinished => {
                let other = load(&db, "12");
                let other: Vec<&str> = other.iter().map(String::as_str).collect();
                let o = arbor(&other);
                assert_eq!(o.status.code(), Some(3), "another workload: {}", stderr(&o));
                assert!(stderr(&o).contains("unfinished bulk load"), "{}", stderr(&o));
            }
            Left::Empty => {}
        }
        // Resuming reaches the uninterrupted final root (blocks continue from the head).
        let o = arbor(&["stats", "--db", &db, "--json"]);
        let head: u64 = serde_json::from_str::<serde_json::Value>(&stdout(&o))
            .ok()
            .and_then(|v| v["block"].as_u64())
            .unwrap_or(0);
        if head < 2 {
            let remaining = (2 - head).to_string();
            let mut resume = owned.clone();
            resume[4] = remaining;
            let resume: Vec<&str> = resume.iter().map(String::as_str).collect();
            let (_, out) = timed(&resume);
            assert_eq!(out.trim(), final_line, "resumed after {left:?}");
        }
        let o = arbor(&["verify", "--db", &db]);
        let root = final_line.split_once(' ').unwrap().1;
        assert_eq!(stdout(&o).trim(), format!("ok 2 {root}"), "{}", stderr(&o));
        eprintln!("kill {i} after {delay:?} (killed: {killed}): {left:?}");
        seen.push(left);
        let _ = std::fs::remove_dir_all(&db);
    }
    eprintln!("load: {} kills over a {full:?} run: {seen:?}", seen.len());
}
