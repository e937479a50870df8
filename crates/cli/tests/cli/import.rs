//! `arbor gen-chain` and `arbor import`: SIGKILL of a pipelined import at random moments
//! (`ARBOR_CRASH_ITERATIONS` kills, default 3), bad chain files, resumption.

use std::time::Instant;

use chain::chainfile::ChainReader;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::crash::{iterations, kill_after, seed};
use super::{arbor, fresh_db, stderr, stdout};

/// A chain file of `blocks` blocks; its per-height roots (genesis first).
fn gen_chain(name: &str, accounts: &str, blocks: &str, transfers: &str) -> (String, Vec<String>) {
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.chain"));
    let file = path.to_str().unwrap().to_owned();
    let o = arbor(&[
        "gen-chain",
        "--accounts",
        accounts,
        "--blocks",
        blocks,
        "--transfers",
        transfers,
        "--seed",
        "5",
        "--out",
        &file,
        "--force",
    ]);
    assert!(o.status.success(), "gen-chain: {}", stderr(&o));
    let reader = ChainReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let mut roots = vec![reader.header().genesis_root.to_string()];
    roots.extend(reader.map(|b| b.unwrap().state_root.to_string()));
    (file, roots)
}

/// `arbor import --json`'s report; the command must succeed.
fn import(db: &str, chain: &str, extra: &[&str]) -> Value {
    let mut args = vec!["import", "--db", db, "--chain", chain, "--json"];
    args.extend_from_slice(extra);
    let o = arbor(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// The root of an empty state (a database created but not loaded yet).
const EMPTY_ROOT: &str = "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421";

/// `verify`'s `ok <number> <root>`, or `None` for no database, an empty one, or an
/// unfinished genesis load.
fn verified(db: &str) -> Option<(usize, String)> {
    let o = arbor(&["verify", "--db", db]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!err.contains("panicked"), "{err}");
    if !o.status.success() {
        assert!(err.contains("unfinished bulk load") || err.contains("no database"), "{err}");
        return None;
    }
    let mut parts = out.split_whitespace();
    assert_eq!(parts.next(), Some("ok"), "{out}");
    let n = parts.next().unwrap().parse().unwrap();
    let root = parts.next().unwrap().to_owned();
    (n > 0 || root != EMPTY_ROOT).then_some((n, root))
}

#[test]
fn pipelined_import_killed_at_random_moments() {
    let mut rng = ChaCha8Rng::seed_from_u64(seed("pipelined_import_killed_at_random_moments"));
    let (chain, roots) = gen_chain("crash-import", "20000", "40", "400");
    let last = roots.len() - 1;
    let reference = fresh_db("import-reference");
    let start = Instant::now();
    let report = import(&reference, &chain, &[]);
    let full = start.elapsed();
    assert_eq!(report["block"], last);
    assert_eq!(report["root"], roots[last].as_str());
    let mut seen = Vec::new();
    for i in 0..iterations() {
        let db = fresh_db(&format!("import-crash-{i}"));
        let delay = full.mul_f64(rng.gen_range(0.0..1.1));
        let args = ["import", "--db", db.as_str(), "--chain", chain.as_str()];
        let killed = kill_after(&args, delay);
        let left = verified(&db);
        if let Some((n, root)) = &left {
            // Whatever the moment, the head is a whole block of the chain.
            assert_eq!(root, &roots[*n], "kill {i}: head {n}");
        }
        let report = import(&db, &chain, &[]);
        assert_eq!(report["block"], last, "resumed after {left:?}");
        assert_eq!(report["root"], roots[last].as_str());
        assert_eq!(verified(&db), Some((last, roots[last].clone())));
        eprintln!("kill {i} after {delay:?} (killed: {killed}): {left:?}");
        seen.push(left.map(|(n, _)| n));
        let _ = std::fs::remove_dir_all(&db);
    }
    eprintln!("import: {} kills over a {full:?} run, heads left: {seen:?}", seen.len());
}

#[test]
fn bad_chain_files_stop_at_the_block_before() {
    let (chain, roots) = gen_chain("bad-import", "500", "6", "40");
    let bytes = std::fs::read(&chain).unwrap();
    // Record offsets: header 65 bytes, then u32 length ‖ block.
    let mut offsets = Vec::new();
    let mut at = 65;
    while at < bytes.len() {
        offsets.push(at);
        at += 4 + u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    let write = |name: &str, b: &[u8]| {
        let p = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&p, b).unwrap();
        p.to_str().unwrap().to_owned()
    };
    for pipeline in [&[][..], &["--no-pipeline"][..]] {
        // A transfer's amount changed in block 4: its post-state root no longer matches
        // (or a transfer fails validity); head 3.
        let mut spoiled = bytes.clone();
        let amount_byte = offsets[3] + 4 + 4 + 1 + 8 + 96 + 4 + 64 + 10;
        spoiled[amount_byte] ^= 0x40;
        let db = fresh_db("bad-import-root");
        let o = arbor(
            &[&["import", "--db", &db, "--chain", &write("spoiled.chain", &spoiled)][..], pipeline]
                .concat(),
        );
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("invalid block 4: "), "{}", stderr(&o));
        assert_eq!(verified(&db), Some((3, roots[3].clone())));
        // Truncated inside block 5's record: a typed error naming it; head 4.
        let cut = write("cut.chain", &bytes[..offsets[4] + 20]);
        let db = fresh_db("bad-import-cut");
        let o = arbor(&[&["import", "--db", &db, "--chain", &cut][..], pipeline].concat());
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("truncated inside block record 4"), "{}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
        assert_eq!(verified(&db), Some((4, roots[4].clone())));
        // Resuming with the whole file reaches the end.
        let report = import(&db, &chain, pipeline);
        assert_eq!(report["block"], 6);
        assert_eq!(report["skipped"], 4);
        assert_eq!(report["root"], roots[6].as_str());
        // Everything again: all skipped, nothing changes.
        let report = import(&db, &chain, pipeline);
        assert_eq!(report["skipped"], 6);
        assert_eq!(report["root"], roots[6].as_str());
    }
    // Another chain's file on this database: refused at the head's block, exit 1.
    let (other, _) = gen_chain("bad-import-other", "600", "6", "40");
    let db = fresh_db("bad-import-other");
    let o = arbor(&["import", "--db", &db, "--chain", &chain]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = arbor(&["import", "--db", &db, "--chain", &other]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds another chain"), "{}", stderr(&o));
    // A chain that ends below the head (here another one): no block of it reaches the
    // head, so nothing shows the database holds it; exit 1, the head unchanged.
    let (short, _) = gen_chain("bad-import-short", "600", "3", "40");
    for pipeline in [&[][..], &["--no-pipeline"][..]] {
        let o = arbor(&[&["import", "--db", &db, "--chain", &short][..], pipeline].concat());
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("nothing shows that the database holds this chain"));
        assert_eq!(verified(&db), Some((6, roots[6].clone())));
    }
    // Not a chain file at all.
    let o = arbor(&[
        "import",
        "--db",
        &fresh_db("bad-import-junk"),
        "--chain",
        &write("junk.chain", b"hello"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    // A header naming another genesis root: refused before the genesis is loaded, so the
    // same database then takes the right file.
    let mut forged = bytes.clone();
    forged[40] ^= 0x01;
    let db = fresh_db("bad-import-genesis");
    let o = arbor(&["import", "--db", &db, "--chain", &write("forged.chain", &forged)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("damaged or forged; nothing was written"), "{}", stderr(&o));
    assert_eq!(verified(&db), None);
    assert_eq!(import(&db, &chain, &[])["root"], roots[6].as_str());
}

/// SIGTERM (as Ctrl-C) stops a pipelined import at a block boundary: exit 0, a summary,
/// a head that is a whole block of the chain; the next run finishes the chain.
#[test]
fn sigterm_stops_at_a_block_boundary() {
    let (chain, roots) = gen_chain("sigterm-import", "20000", "60", "500");
    let last = roots.len() - 1;
    let db = fresh_db("import-sigterm");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["import", "--db", db.as_str(), "--chain", chain.as_str(), "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let report: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let head = report["block"].as_u64().unwrap() as usize;
    assert_eq!(report["root"], roots[head].as_str());
    if head < last {
        assert_eq!(report["stopped"], true, "{report}");
        assert!(stderr(&o).contains("stopped by signal"), "{}", stderr(&o));
    }
    assert_eq!(verified(&db), Some((head, roots[head].clone())));
    let report = import(&db, &chain, &[]);
    assert_eq!(report["root"], roots[last].as_str());
}
