//! `arbor gen-chain` and `arbor import`: SIGKILL of a pipelined import at random moments
//! (`ARBOR_CRASH_ITERATIONS` kills, default 3), bad chain files, resumption.

use std::time::Instant;

use chain::{Block, ChainHeader, ChainReader};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::crash::{iterations, kill_after, seed};
use super::{arbor, assert_one_line_error, fresh_db, stderr, stdout};

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
fn import_killed_while_it_creates_its_database() {
    // Killed while the database is being created and the genesis loaded, an import leaves
    // no database, an unfinished creation or an unfinished genesis load — never a finished
    // database that is not the chain's genesis or later (an empty one, say).
    let mut rng = ChaCha8Rng::seed_from_u64(seed("import_killed_while_it_creates_its_database"));
    let (chain, roots) = gen_chain("crash-import-create", "20000", "2", "10");
    let mut seen = Vec::new();
    for i in 0..iterations() + 12 {
        let db = fresh_db(&format!("import-create-{i}"));
        let delay = std::time::Duration::from_micros(rng.gen_range(0..250_000));
        let args = ["import", "--db", db.as_str(), "--chain", chain.as_str()];
        let killed = kill_after(&args, delay);
        let o = arbor(&["verify", "--db", &db]);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(!err.contains("panicked"), "{err}");
        let left = if o.status.success() {
            let mut parts = out.split_whitespace();
            assert_eq!(parts.next(), Some("ok"), "{out}");
            let n: usize = parts.next().unwrap().parse().unwrap();
            assert_eq!(parts.next(), Some(roots[n].as_str()), "kill {i} after {delay:?}: {out}");
            format!("block {n}")
        } else {
            let unfinished = ["unfinished bulk load", "no database", "being created"];
            assert!(unfinished.iter().any(|m| err.contains(m)), "kill {i}: {err}");
            err.trim().to_owned()
        };
        let report = import(&db, &chain, &[]);
        assert_eq!(report["root"], roots[roots.len() - 1].as_str(), "resumed after {left}");
        eprintln!("kill {i} after {delay:?} (killed: {killed}): {left}");
        seen.push(left);
        let _ = std::fs::remove_dir_all(&db);
    }
    eprintln!("import creation: {seen:?}");
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
    // A chain that ends below the head (here the first blocks of the database's own): no
    // block of it reaches the head, so nothing shows the database holds it; exit 1, the
    // head unchanged.
    let short = write("short.chain", &bytes[..offsets[3]]);
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
    // The handler is installed before the database is opened: once the directory exists,
    // SIGTERM asks for a clean stop.
    let started = Instant::now();
    while !std::path::Path::new(&db).exists() && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
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
        // With --json, the summary is the JSON document alone.
        assert_eq!(report["stopped"], true, "{report}");
    }
    assert_eq!(verified(&db), Some((head, roots[head].clone())));
    let report = import(&db, &chain, &[]);
    assert_eq!(report["root"], roots[last].as_str());
}

/// A chain file's header and blocks.
fn blocks_of(chain: &str) -> (ChainHeader, Vec<Block>) {
    let reader = ChainReader::new(std::fs::File::open(chain).unwrap()).unwrap();
    let header = *reader.header();
    (header, reader.map(Result::unwrap).collect())
}

/// A chain file `name` of `header` and `blocks`.
fn chain_file(name: &str, header: &ChainHeader, blocks: &[&Block]) -> String {
    let mut bytes = Vec::new();
    chain::write_header(&mut bytes, header).unwrap();
    for b in blocks {
        chain::write_block(&mut bytes, b).unwrap();
    }
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.chain"));
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `arbor import` of `chain` into `db` refused as invalid: exit 1, one `error:` line
/// mentioning `mentions`.
fn refused(db: &str, chain: &str, extra: &[&str], mentions: &str) {
    let o = arbor(&[&["import", "--db", db, "--chain", chain][..], extra].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_one_line_error(&o, mentions);
}

/// Issue 29, defect 4: blocks at or below the head are checked, not skipped blind. After a
/// block above the head such a block is out of order; in order, it must link to the
/// block before it and carry the root the database recorded for its number.
#[test]
fn blocks_at_or_below_the_head_are_checked_before_they_are_skipped() {
    let (chain, roots) = gen_chain("skip-check", "300", "12", "20");
    let (header, blocks) = blocks_of(&chain);
    let (other, _) = gen_chain("skip-check-other", "301", "12", "20");
    let (_, other) = blocks_of(&other);
    let mut damaged = blocks[2].clone();
    damaged.state_root.0[31] ^= 1;
    for pipeline in [&[][..], &["--no-pipeline"][..]] {
        // A damaged block 3 or another chain's block 5 after block 10: out of order.
        for (name, stray) in [("damaged", &damaged), ("other", &other[4])] {
            let mut file: Vec<&Block> = blocks[..10].iter().collect();
            file.push(stray);
            file.extend(&blocks[10..]);
            let file = chain_file(&format!("skip-after-{name}"), &header, &file);
            let db = fresh_db("skip-after");
            let mentions = format!("invalid block 11: number {}, expected 11", stray.number);
            refused(&db, &file, pipeline, &mentions);
            assert_eq!(verified(&db), Some((10, roots[10].clone())));
        }
        // In their place, on a database at block 10: refused, nothing changes.
        let db = fresh_db("skip-in-order");
        let ten: Vec<&Block> = blocks[..10].iter().collect();
        assert_eq!(import(&db, &chain_file("skip-ten", &header, &ten), pipeline)["block"], 10);
        for (number, with, mentions) in [
            (3, &damaged, "invalid block 3: post-state root"),
            (5, &other[4], "invalid block 5: parent root"),
        ] {
            let mut file: Vec<&Block> = blocks.iter().collect();
            file[number - 1] = with;
            let file = chain_file("skip-in-order", &header, &file);
            refused(&db, &file, pipeline, mentions);
            assert_eq!(verified(&db), Some((10, roots[10].clone())));
        }
        let report = import(&db, &chain, pipeline);
        assert_eq!((report["skipped"].as_u64(), report["block"].as_u64()), (Some(10), Some(12)));
        assert_eq!(report["root"], roots[12].as_str());
    }
}

/// Issue 29, defect 5: `invalid block j` names the number expected at the failing
/// position, the head is j − 1, and the reason gives the record's own number.
#[test]
fn an_invalid_block_is_named_by_the_number_expected_there() {
    let (chain, roots) = gen_chain("expected-number", "300", "8", "20");
    let (header, blocks) = blocks_of(&chain);
    let mut swapped: Vec<&Block> = blocks.iter().collect();
    swapped.swap(4, 5);
    let swapped = chain_file("expected-swapped", &header, &swapped);
    // Block 4's number with bit 22 flipped (record: length, magic, version, number).
    let mut bytes = std::fs::read(&chain).unwrap();
    let mut at = 65;
    for _ in 0..3 {
        at += 4 + u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    bytes[at + 4 + 4 + 1 + 5] ^= 0x40;
    let flipped = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("flipped.chain");
    std::fs::write(&flipped, bytes).unwrap();
    for pipeline in [&[][..], &["--no-pipeline"][..]] {
        let db = fresh_db("expected-swapped");
        // Fresh, then resumed past the blocks imported.
        for _ in 0..2 {
            refused(&db, &swapped, pipeline, "invalid block 5: number 6, expected 5");
            assert_eq!(verified(&db), Some((4, roots[4].clone())));
        }
        let db = fresh_db("expected-flipped");
        let mentions = format!("invalid block 4: number {}, expected 4", 4 | 1 << 22);
        refused(&db, flipped.to_str().unwrap(), pipeline, &mentions);
        assert_eq!(verified(&db), Some((3, roots[3].clone())));
    }
}

/// Issue 29, defect 8: a failed import prints its summary where a successful one does
/// (the text line or the JSON document on stdout, the JSON with the failure's `error`),
/// then the one `error:` line on stderr.
#[test]
fn a_failed_import_reports_on_stdout_and_fails_on_one_line() {
    let (chain, roots) = gen_chain("failed-summary", "300", "6", "20");
    let (header, blocks) = blocks_of(&chain);
    let mut damaged = blocks[3].clone();
    damaged.state_root.0[31] ^= 1;
    let mut file: Vec<&Block> = blocks.iter().collect();
    file[3] = &damaged;
    let file = chain_file("failed-summary-damaged", &header, &file);
    let o = arbor(&["import", "--db", &fresh_db("failed-summary-text"), "--chain", &file]);
    assert_eq!(o.status.code(), Some(1));
    assert_one_line_error(&o, "invalid block 4: post-state root");
    let out = stdout(&o);
    assert!(out.starts_with("imported 3 blocks "), "{out}");
    assert!(out.trim_end().ends_with(&format!("head 3 {}", roots[3])), "{out}");
    let db = fresh_db("failed-summary-json");
    let o = arbor(&["import", "--db", &db, "--chain", &file, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_one_line_error(&o, "invalid block 4: post-state root");
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    super::conventions::assert_json_names(&v);
    assert_eq!((v["blocks"].as_u64(), v["block"].as_u64()), (Some(3), Some(3)), "{v}");
    assert_eq!(v["root"], roots[3].as_str());
    let error = v["error"].as_str().unwrap();
    assert!(stderr(&o).trim_end().ends_with(error), "{error} vs {}", stderr(&o));
    // Success: the JSON says so, and nothing else is printed.
    let o = arbor(&["import", "--db", &db, "--chain", &chain, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((v["error"].is_null(), v["block"].as_u64()), (true, Some(6)), "{v}");
    assert_eq!(stderr(&o), "");
}
