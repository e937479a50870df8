//! Bounded input: every numeric flag of every command refuses 0, the maximum of its type
//! and the value just past its stated limit with a usage error (exit code 2, one
//! `error: …` line, no panic), states its bounds in `--help`, and still works in range;
//! `build-block` refuses colliding or existing outputs and a PoV limit below the smallest
//! witness, writing nothing.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{arbor, assert_one_line_error, fresh_db, ok, stderr, stdout};

const U64_MAX: &str = "18446744073709551615";
const PAST_U64: &str = "18446744073709551616";

/// One bounded flag: the command line it belongs to (every other argument valid), the
/// flag (empty for a positional argument), its bounds and the `--help` text stating them.
struct Flag<'a> {
    command: Vec<&'a str>,
    flag: &'static str,
    min: u64,
    max: u64,
    help: &'static str,
}

/// A scratch path under cargo's per-test-binary temp dir (removed if present).
fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-limits-{name}"));
    let _ = std::fs::remove_file(&p);
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A usage error: exit code 2, one `error:` line naming `mentions`, no panic or signal.
fn assert_usage_error(o: &Output, mentions: &str) {
    assert_one_line_error(o, mentions);
    assert_eq!(o.status.code(), Some(2), "not a usage error: {}", stderr(o));
}

/// Every bounded numeric flag. The database commands name a database that is never
/// created: a bad number is refused before anything is opened.
fn flags(db: &str) -> Vec<Flag<'_>> {
    let trie = vec!["bench", "trie"];
    let store = vec!["bench", "store"];
    let pov = vec!["bench", "pov"];
    let history = vec!["bench", "history"];
    let stm = vec!["bench", "blockstm"];
    let evm = vec!["bench", "evm"];
    let load = vec!["load", "--db", db, "--blocks", "1", "--updates-per-block", "1", "--seed", "1"];
    let revert = vec!["revert", "--db", db];
    let build = vec!["build-block", "--block", "/nonexistent/b", "--witness", "/nonexistent/w"];
    let gen_evm = vec!["gen-chain", "--evm", "--out", "/nonexistent/evm-chain"];
    vec![
        f(&trie, "--keys", 1, 50_000_000, "1 to 50,000,000"),
        f(&trie, "--runs", 1, 1_000, "1 to 1,000"),
        f(&trie, "--rounds", 1, 1_000_000, "1 to 1,000,000"),
        f(&trie, "--incremental-keys", 1, 10_000_000, "1 to 10,000,000"),
        f(&trie, "--proofs", 1, 1_000_000, "1 to 1,000,000"),
        f(&store, "--keys", 1, 100_000_000, "1 to 100,000,000"),
        f(&store, "--blocks", 1, 1_000_000, "1 to 1,000,000"),
        f(&store, "--updates-per-block", 1, 1_000_000, "1 to 1,000,000"),
        f(&history, "--keys", 1, 100_000_000, "1 to 100,000,000"),
        f(&history, "--blocks", 3, 1_000_000, "3 to 1,000,000"),
        f(&history, "--read-blocks", 1, 1_000_000, "1 to 1,000,000"),
        f(&history, "--updates-per-block", 1, 1_000_000, "1 to 1,000,000"),
        f(&history, "--recent-blocks", 2, 1_024, "2 to 1,024"),
        f(&history, "--reads-per-block", 1, 100_000, "1 to 100,000"),
        f(&pov, "--accounts", 2, 10_000_000, "2 to 10,000,000"),
        f(&pov, "--runs", 1, 1_000, "1 to 1,000"),
        f(&stm, "--runs", 1, 1_000, "1 to 1,000"),
        f(&stm, "--txs", 1, 1_000_000, "1 to 1,000,000"),
        f(&evm, "--accounts", 16, 10_000_000, "16 to 10,000,000"),
        f(&evm, "--blocks", 1, 10_000, "1 to 10,000"),
        f(&evm, "--gas-limit", 1_000_000, 1_000_000_000, "1,000,000 to 1,000,000,000"),
        f(&load, "--blocks", 1, 1_000_000, "1 to 1,000,000"),
        f(&load, "--updates-per-block", 1, 1_000_000, "1 to 1,000,000"),
        f(&load, "--keys", 1, 100_000_000, "1 to 100,000,000"),
        f(&revert, "", 1, 1_000_000, "1 to 1,000,000"),
        f(&build, "--accounts", 2, 1_000_000, "2 to 1,000,000"),
        f(&build, "--transfers", 1, 1_000_000, "1 to 1,000,000"),
        f(&build, "--pov-limit", 1, 1 << 30, "1 to 1,073,741,824"),
        f(&gen_evm, "--txs-per-block", 1, 10_000, "1 to 10,000"),
    ]
}

fn f<'a>(
    command: &[&'a str],
    flag: &'static str,
    min: u64,
    max: u64,
    help: &'static str,
) -> Flag<'a> {
    Flag { command: command.to_vec(), flag, min, max, help }
}

/// Whether `line` states `bounds` as a whole (not as the start of a longer number).
fn states(line: &str, bounds: &str) -> bool {
    line.match_indices(bounds).any(|(i, _)| {
        let rest = &line[i + bounds.len()..];
        let digit = |s: &str| s.starts_with(|c: char| c.is_ascii_digit());
        let longer = digit(rest) || (rest.starts_with(',') && digit(&rest[1..]));
        !longer
    })
}

/// The help text of the option or argument whose line starts with `token`: that line and
/// the indented lines below it (clap puts the text there when option names are long).
fn help_entry(text: &str, token: &str) -> String {
    let mut lines = text.lines().skip_while(|l| !l.trim_start().starts_with(token));
    let first = lines.next().unwrap_or_else(|| panic!("no help entry for {token}:\n{text}"));
    let rest = lines.take_while(|l| !l.trim_start().starts_with(['-', '<']) && !l.is_empty());
    std::iter::once(first).chain(rest).collect::<Vec<_>>().join(" ")
}

fn with(command: &[&str], flag: &str, value: &str) -> Vec<String> {
    let mut args: Vec<String> = command.iter().map(|a| a.to_string()).collect();
    if !flag.is_empty() {
        args.push(flag.to_string());
    }
    args.push(value.to_string());
    args
}

fn run(args: &[String]) -> Output {
    arbor(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn numeric_flags_refuse_values_outside_their_bounds() {
    let db = fresh_db("limits-never-created");
    for f in flags(&db) {
        let name = if f.flag.is_empty() { "<N>" } else { f.flag };
        let bad = [
            "0".to_string(),
            U64_MAX.to_string(),
            PAST_U64.to_string(),
            (f.max + 1).to_string(),
            (f.min - 1).to_string(),
        ];
        for value in &bad {
            assert_usage_error(&run(&with(&f.command, f.flag, value)), name);
        }
        // The flag's own help entry states the bounds.
        let mut help: Vec<&str> =
            f.command.iter().take_while(|a| !a.starts_with("--")).copied().collect();
        help.push("--help");
        let text = ok(&help);
        let token = if f.flag.is_empty() { "<N>".to_string() } else { format!("{} ", f.flag) };
        let entry = help_entry(&text, &token);
        assert!(states(&entry, f.help), "{help:?} {name}: no {:?} in: {entry}", f.help);
    }
    assert!(!PathBuf::from(&db).exists(), "a refused command created the database");
}

#[test]
fn list_flags_bound_each_entry_and_their_length() {
    let long = vec!["1"; 17].join(",");
    let lists: [(&[&str], &str, &str, &str); 2] = [
        (&["bench", "pov"], "--sizes", "10001", "each 1 to 10,000"),
        (&["bench", "blockstm"], "--workers", "257", "each 1 to 256"),
    ];
    for (command, flag, past, help) in lists {
        for value in ["0", "1,0", U64_MAX, PAST_U64, past, "1,,2", "", "x", long.as_str()] {
            assert_usage_error(&run(&with(command, flag, value)), flag);
        }
        // Given twice: refused rather than appended past the length bound.
        let twice = [command, &[flag, "1", flag, "2"]].concat();
        assert_usage_error(&arbor(&twice), flag);
        let text = ok(&[command, &["--help"]].concat());
        assert!(text.contains(help) && text.contains("1 to 16 entries"), "{text}");
    }
}

#[test]
fn seeds_take_every_u64() {
    let o = run(&with(
        &[
            "bench", "trie", "--keys", "40", "--runs", "1", "--rounds", "1", "--proofs", "1",
            "--json",
        ],
        "--seed",
        U64_MAX,
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_usage_error(&run(&with(&["bench", "trie"], "--seed", PAST_U64)), "--seed");
    assert_usage_error(&arbor(&["bench", "store", "--seed=-1"]), "--seed");
}

#[test]
fn in_range_values_still_work() {
    let db = fresh_db("limits-in-range");
    let load = |blocks: &str| {
        ok(&[
            "load",
            "--db",
            &db,
            "--keys",
            "1",
            "--blocks",
            blocks,
            "--updates-per-block",
            "1",
            "--seed",
            U64_MAX,
            "--quiet",
        ])
    };
    assert!(load("2").starts_with("2 0x"));
    assert_eq!(ok(&["revert", "--db", &db, "1"]).split(' ').next(), Some("1"));
    let o = arbor(&["revert", "--db", &db, "2"]);
    assert_one_line_error(&o, "cannot revert 2 blocks");

    let html = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("limits-pov.html");
    let _ = std::fs::remove_file(&html);
    let o = arbor(&[
        "bench",
        "pov",
        "--accounts",
        "4",
        "--runs",
        "1",
        "--sizes",
        "1,2",
        "--json",
        "--html",
        html.to_str().unwrap(),
        "--dir",
        env!("CARGO_TARGET_TMPDIR"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    super::conventions::assert_json_names(&v);
    assert_eq!(v["workloads"].as_array().unwrap().len(), 4);
    // Per workload: the per-transaction PoV ratios against their targets, and the modes.
    assert_eq!(super::parse_svgs(&std::fs::read_to_string(&html).unwrap()), 8);
}

/// `build-block` with small in-range numbers, writing to `block` and `witness`.
fn build(block: &Path, witness: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "build-block",
        "--accounts",
        "20",
        "--transfers",
        "4",
        "--block",
        s(block),
        "--witness",
        s(witness),
    ];
    args.extend_from_slice(extra);
    arbor(&args)
}

#[test]
fn build_block_refuses_colliding_and_existing_outputs() {
    let (block, witness) = (scratch("block.bin"), scratch("witness.bin"));
    let dir = block.parent().unwrap().to_path_buf();

    // One file under two spellings: refused, nothing written.
    let dotted = dir.join(".").join(block.file_name().unwrap());
    assert_usage_error(&build(&block, &dotted, &[]), "name the same file");
    let link = scratch("link.bin");
    std::os::unix::fs::symlink(&block, &link).unwrap();
    assert_usage_error(&build(&block, &link, &["--force"]), "name the same file");
    assert!(!block.exists(), "a refused build wrote its block");

    // Fresh files: written. Again: refused without --force, files untouched.
    let o = build(&block, &witness, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let written = std::fs::read(&block).unwrap();
    std::fs::write(&witness, b"keep me").unwrap();
    assert_usage_error(&build(&block, &witness, &[]), "exists; pass --force");
    assert_eq!(std::fs::read(&witness).unwrap(), b"keep me");
    let o = build(&block, &witness, &["--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&block).unwrap(), written);
    assert_ne!(std::fs::read(&witness).unwrap(), b"keep me");

    // A directory, a missing directory.
    assert_usage_error(&build(&dir, &witness, &["--force"]), "is a directory");
    assert_usage_error(
        &build(&dir.join("no-such-dir").join("b"), &witness, &["--force"]),
        "cannot write --block",
    );
}

#[test]
fn build_block_refuses_a_pov_limit_below_the_smallest_witness() {
    let (block, witness) = (scratch("pov-block.bin"), scratch("pov-witness.bin"));
    let o = build(&block, &witness, &["--pov-limit", "1"]);
    assert_usage_error(&o, "--pov-limit 1 is below");
    assert!(!block.exists() && !witness.exists(), "a refused build wrote a file");
    let err = stderr(&o);
    let min: usize = err
        .split("use --pov-limit ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no smallest limit named: {err}"));
    let o = build(&block, &witness, &["--pov-limit", &(min - 1).to_string()]);
    assert_usage_error(&o, &format!("use --pov-limit {min} or more"));

    // At the smallest limit: an empty block whose witness fits exactly.
    let o = build(&block, &witness, &["--pov-limit", &min.to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("0 of 4 transfers included (PovLimit), witness"), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!(", {min} bytes (limit {min})")), "{}", stderr(&o));
    let parent = stdout(&o).lines().next().unwrap().strip_prefix("parent ").unwrap().to_string();
    let verified = ok(&["verify-block", "--parent-root", &parent, s(&block), s(&witness)]);
    assert!(verified.starts_with("ok 0x"), "{verified}");
    // A validator with a smaller limit refuses the same witness.
    let below = (min - 1).to_string();
    let args = ["verify-block", "--parent-root", &parent, s(&block), s(&witness), "--pov-limit"];
    let o = arbor(&[&args[..], &[below.as_str()]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("over the proof-of-validity limit"), "{out}");
}

/// Arguments the database commands cannot use are usage errors found before any work: a
/// metrics address that does not parse (no database created), a key over the store's
/// 127 bytes, a revert deeper than the head.
#[test]
fn database_arguments_are_checked_before_work() {
    let db = fresh_db("limits-db-args");
    let load = ["load", "--db", &db, "--keys", "1000", "--updates-per-block", "10", "--seed", "1"];
    for addr in ["nonsense", "127.0.0.1:99999", "localhost"] {
        let o = arbor(&[&load[..], &["--blocks", "1", "--metrics", addr]].concat());
        assert_usage_error(&o, addr);
        assert!(!Path::new(&db).exists(), "--metrics {addr}: a database was created");
    }
    ok(&[&load[..], &["--blocks", "2"]].concat());
    let long = "ab".repeat(128);
    for cmd in [&["get", "--db", &db][..], &["prove", "--db", &db]] {
        let o = arbor(&[cmd, &[long.as_str()][..]].concat());
        assert_usage_error(&o, "exceeds the 127-byte limit");
    }
    assert_eq!(ok(&["get", "--db", &db, &"ab".repeat(127)]).trim(), "absent");
    let o = arbor(&["revert", "--db", &db, "3"]);
    assert_usage_error(&o, "the head is block 2");
    assert!(ok(&["verify", "--db", &db]).starts_with("ok 2 "));
}

/// Output paths and source addresses a command cannot use are refused before any work:
/// `gen-chain --out` ending in `/`, a chain staged beside its output without touching a
/// file there (its old fixed staging name was overwritten), a checkpoint directory inside
/// the database, an HTTP source naming no host, a bucketless `--to s3://`, and a
/// `bench blockstm --only` entry that selects nothing.
#[test]
fn outputs_and_sources_are_checked_before_work() {
    let dir = scratch("outputs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let gen = |out: &Path, force: bool| {
        let mut args = vec!["gen-chain", "--accounts", "20", "--blocks", "2", "--transfers", "3"];
        args.extend(["--seed", "1", "--out", s(out)]);
        if force {
            args.push("--force");
        }
        arbor(&args)
    };
    let slash = format!("{}/", s(&dir.join("newfile")));
    assert_usage_error(&gen(Path::new(&slash), false), "names a directory");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "a refused gen-chain wrote");
    let partial = dir.join("chain.arbor-partial");
    std::fs::write(&partial, "my notes").unwrap();
    let out = dir.join("chain.bin");
    assert!(gen(&out, false).status.success());
    assert_eq!(std::fs::read_to_string(&partial).unwrap(), "my notes");
    assert!(std::fs::read(&out).unwrap().starts_with(b"ARBCHAIN"));
    assert_usage_error(&gen(&out, false), "exists");
    assert!(gen(&out, true).status.success());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "a staging file was left");

    let db = fresh_db("limits-outputs");
    ok(&[
        "load",
        "--db",
        &db,
        "--keys",
        "500",
        "--blocks",
        "1",
        "--updates-per-block",
        "5",
        "--seed",
        "1",
    ]);
    for inner in [db.clone(), format!("{db}/cp"), format!("{db}/../{}/x", db_name(&db))] {
        let o = arbor(&["checkpoint", "create", "--db", &db, "--out", &inner]);
        assert_usage_error(&o, "inside the database");
    }
    assert!(!Path::new(&db).join("checkpoints").exists());
    for addr in ["http://", "http://[::1", "http://256.0.0.1/", "https://"] {
        assert_usage_error(&arbor(&["checkpoint", "list", "--source", addr]), "unsupported");
    }
    let cp = dir.join("cp");
    ok(&["checkpoint", "create", "--db", &db, "--out", s(&cp)]);
    let o = arbor(&["checkpoint", "push", "--dir", s(&cp), "--to", "s3://"]);
    assert_usage_error(&o, "--to s3://");
    for only in ["nosuchworkload", ""] {
        // (A debug build warns on its first line: only the exit code and the error.)
        let o = arbor(&["bench", "blockstm", "--only", only]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("names no workload"), "{}", stderr(&o));
    }
}

/// The last component of a database path.
fn db_name(db: &str) -> &str {
    Path::new(db).file_name().unwrap().to_str().unwrap()
}

/// `-` names stdin where a command reads; as an output it is refused (exit 2) before any
/// work, and no file named `-` appears.
#[test]
fn a_dash_is_not_an_output_file() {
    let dir = scratch("dash");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_arbor"))
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let gen = ["gen-chain", "--accounts", "20", "--blocks", "2", "--transfers", "3"];
    let build = ["build-block", "--accounts", "20", "--transfers", "3"];
    for args in [
        [gen.as_slice(), &["--seed", "1", "--out", "-"]].concat(),
        [build.as_slice(), &["--block", "-", "--witness", "w.bin"]].concat(),
        [build.as_slice(), &["--block", "b.bin", "--witness", "-"]].concat(),
        vec!["bench", "store", "--keys", "100", "--blocks", "1", "--out", "-"],
        vec!["bench", "pov", "--html", "-"],
    ] {
        assert_usage_error(&run(&args), "is not a file");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "a refused command wrote");
}
