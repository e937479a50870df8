//! The command-line conventions the README documents: `--json` on every command, one set
//! of field names, and the four exit code classes (0 ok, 1 negative verdict, 2 usage
//! error, 3 could not run), also for a damaged database (a MANIFEST cut short).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{arbor, fresh_db, ok, stderr, stdout, testdata};

/// Spellings the convention replaced: `block` (not `number`, `head`, `head_number`),
/// `root` (not `head_root`, `stored_root`), `valid` (not `ok`), durations with their
/// unit (not `seconds`).
const RETIRED: &[&str] =
    &["number", "head", "head_number", "head_root", "stored_root", "ok", "seconds"];

/// Every object key in `v` (recursively) is snake_case and not a retired spelling;
/// `block` is a number, `valid` a boolean, a string `root` or `*_root` a 32-byte hash,
/// `*_s`, `*_ms`, `*_bytes` and `*_per_s` numbers (or null, or arrays of numbers).
pub(crate) fn assert_json_names(v: &Value) {
    match v {
        Value::Array(items) => items.iter().for_each(assert_json_names),
        Value::Object(map) => {
            for (k, x) in map {
                let snake = k.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && k.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                assert!(snake, "key {k:?} is not snake_case in {v}");
                assert!(!RETIRED.contains(&k.as_str()), "retired key {k:?} in {v}");
                check_field(k, x);
                assert_json_names(x);
            }
        }
        _ => {}
    }
}

fn check_field(k: &str, x: &Value) {
    let is_hash = |s: &str| {
        s.len() == 66 && s.starts_with("0x") && s[2..].bytes().all(|b| b.is_ascii_hexdigit())
    };
    match k {
        "block" => assert!(x.is_u64(), "block {x}"),
        "valid" => assert!(x.is_boolean(), "valid {x}"),
        _ if k == "root" || k.ends_with("_root") => {
            if let Value::String(s) = x {
                assert!(is_hash(s), "{k} {s:?} is not 0x + 64 hex digits");
            }
        }
        _ if ["_s", "_ms", "_ns", "_bytes", "_per_s"].iter().any(|u| k.ends_with(u)) => {
            // A list of figures, or figures by name (`column_sst_bytes`).
            let numbers = x.as_array().is_some_and(|a| a.iter().all(Value::is_number))
                || x.as_object().is_some_and(|o| o.values().all(Value::is_number));
            assert!(x.is_number() || x.is_null() || numbers, "{k} {x} is not a number");
        }
        _ => {}
    }
}

/// Run a command that must succeed and print one JSON document; check its names.
fn json_of(args: &[&str]) -> Value {
    let out = ok(args);
    let v: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"));
    assert_json_names(&v);
    v
}

fn tmp(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&p);
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// The block and root of a command's JSON.
fn head(v: &Value) -> (u64, String) {
    (v["block"].as_u64().unwrap(), v["root"].as_str().unwrap().to_string())
}

#[test]
fn every_command_speaks_json_with_one_set_of_names() {
    let genesis = testdata("genesis/dev.json");
    let v = json_of(&["root", "--genesis", &genesis, "--json"]);
    let dev_root = v["root"].as_str().unwrap().to_string();
    let addr = "0x".to_string() + &"00".repeat(20);
    let o = arbor(&["prove", "--genesis", &genesis, "--address", &addr, "--json"]);
    // eth_getProof's own field names (accountProof, storageHash, …): the Ethereum shape.
    let proof: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(proof["accountProof"].is_array(), "{proof}");
    let proof_file = tmp("conv-proof.json");
    std::fs::write(&proof_file, stdout(&o)).unwrap();
    let v = json_of(&["verify-proof", "--root", &dev_root, proof_file.to_str().unwrap(), "--json"]);
    assert_eq!((v["valid"].as_bool(), v["reason"].is_null()), (Some(true), true), "{v}");

    let db = fresh_db("conv-db");
    let v = json_of(&["init", "--db", &db, "--genesis", &genesis, "--json"]);
    assert_eq!(head(&v), (0, dev_root.clone()));
    let load = [
        &["load", "--db", &db, "--blocks", "4", "--updates-per-block", "20"][..],
        &["--seed", "3", "--json"],
    ]
    .concat();
    let v = json_of(&load);
    let (block, root) = head(&v);
    assert_eq!((block, v["blocks"].as_u64()), (4, Some(4)), "{v}");
    for cmd in [&["verify"][..], &["verify", "--deep"], &["stats"]] {
        let v = json_of(&[cmd, &["--db", &db, "--json"]].concat());
        assert_eq!(head(&v), (block, root.clone()), "{cmd:?}: {v}");
    }
    let v = json_of(&["verify", "--db", &db, "--json"]);
    assert_eq!(v["valid"], true, "{v}");
    let v = json_of(&["get", "--db", &db, "0x01", "--json"]);
    assert_eq!(head(&v), (block, root.clone()));
    let v = json_of(&["prove", "--db", &db, "0x01", "--json"]);
    assert_eq!(head(&v), (block, root.clone()));
    let v = json_of(&["revert", "--db", &db, "1", "--json"]);
    assert_eq!((v["block"].as_u64(), v["reverted"].as_u64()), (Some(3), Some(1)), "{v}");
    let v = json_of(&["repair", "--db", &db, "--json"]);
    assert!(v["nodes_rebuilt"].as_u64().unwrap() > 0, "{v}");
    let v = json_of(&["config", "defaults", "--json"]);
    assert!(v["cache"].is_object() && v["rocksdb"].is_object(), "{v}");

    let (block_file, witness_file) = (tmp("conv-block.bin"), tmp("conv-witness.bin"));
    let (b, w) = (block_file.to_str().unwrap(), witness_file.to_str().unwrap());
    let built = json_of(&[
        "build-block",
        "--accounts",
        "50",
        "--transfers",
        "10",
        "--block",
        b,
        "--witness",
        w,
        "--json",
    ]);
    let parent = built["parent_root"].as_str().unwrap();
    let v = json_of(&["verify-block", "--parent-root", parent, b, w, "--json"]);
    assert_eq!((&v["valid"], &v["root"]), (&Value::Bool(true), &built["root"]), "{v}");

    let chain = tmp("conv.chain");
    let c = chain.to_str().unwrap();
    let gen = [
        &["gen-chain", "--accounts", "100", "--blocks", "3", "--transfers", "10"][..],
        &["--out", c, "--json"],
    ];
    let v = json_of(&gen.concat());
    let chain_head = head(&v);
    let v = json_of(&["import", "--db", &fresh_db("conv-import"), "--chain", c, "--json"]);
    assert_eq!(head(&v), chain_head);
    assert!(v["elapsed_s"].as_f64().is_some(), "{v}");

    checkpoint_commands(&db);
}

fn checkpoint_commands(db: &str) {
    let dir = tmp("conv-checkpoints");
    let d = dir.to_str().unwrap();
    let v = json_of(&["checkpoint", "create", "--db", db, "--out", d, "--json"]);
    let (block, root) = head(&v);
    let b = block.to_string();
    let v = json_of(&["checkpoint", "list", "--source", d, "--json"]);
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    let v =
        json_of(&["checkpoint", "verify", "--source", d, "--block", &b, "--root", &root, "--json"]);
    assert_eq!(v["valid"], true, "{v}");
    let target = fresh_db("conv-restored");
    let v = json_of(&[
        "checkpoint",
        "restore",
        "--db",
        &target,
        "--source",
        d,
        "--block",
        &b,
        "--root",
        &root,
        "--json",
    ]);
    assert_eq!(head(&v), (block, root));

    // serve: a JSON line when listening, another when stopped.
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["checkpoint", "serve", "--dir", d, "--listen", "127.0.0.1:0", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_json_names(&first);
    assert!(first["url"].as_str().unwrap().starts_with("http://127.0.0.1:"), "{first}");
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let last: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(last["requests"].is_u64(), "{last}");
    assert!(child.wait().unwrap().success());
}

#[test]
fn exit_codes_have_four_classes() {
    let genesis = testdata("genesis/dev.json");
    // 0: ok.
    assert_eq!(arbor(&["root", "--genesis", &genesis]).status.code(), Some(0));

    // 1: a negative verdict — a proof checked against another root, a file that is no
    // proof at all (a corrupted database: `deep_verify_repair_and_config_defaults`).
    let addr = "0x".to_string() + &"00".repeat(20);
    let proof = ok(&["prove", "--genesis", &genesis, "--address", &addr]);
    let file = tmp("conv-verdict-proof.json");
    std::fs::write(&file, proof).unwrap();
    let other = format!("0x{}", "11".repeat(32));
    let o = arbor(&["verify-proof", "--root", &other, file.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((v["valid"].as_bool(), v["reason"].is_string()), (Some(false), true), "{v}");
    let junk = tmp("conv-junk.json");
    std::fs::write(&junk, "{\"accountProof\": 7}").unwrap();
    let o = arbor(&["verify-proof", "--root", &other, junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // 2: usage errors, from clap and from the commands.
    for args in [
        &["root", "--genesis", &genesis, "--frobnicate"][..],
        &["get", "--db", "x", "0xzz"],
        &["verify-proof", "--root", "0x12", "x.json"],
        &["checkpoint", "list", "--source", "ftp://example"],
        &["load", "--db", "x", "--blocks", "0", "--updates-per-block", "1", "--seed", "1"],
    ] {
        let o = arbor(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} printed {}", stdout(&o));
    }

    // 3: could not run — no database there, a file that cannot be read (a database
    // another process holds: `read_commands_run_beside_a_writer_and_write_nothing`).
    let missing = fresh_db("conv-missing");
    for args in [
        &["get", "--db", &missing, "0x01", "--json"][..],
        &["verify", "--db", &missing],
        &["root", "--genesis", "/nonexistent/genesis.json"],
        &["verify-proof", "--root", &other, "/nonexistent/proof.json"],
    ] {
        let o = arbor(args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} printed {}", stdout(&o));
    }
}

/// An input file a flag names whose content does not parse or check (a genesis, a
/// key/value object, a chain spec, a store configuration) is a usage error naming the
/// file, exit 2 like a flag's own value, whichever flag or command reads it; a file that
/// cannot be read is 3.
#[test]
fn input_files_that_do_not_parse_are_usage_errors() {
    let write = |name: &str, text: &str| {
        let path = tmp(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let cut = write("conv-cut.json", "{\"a\":");
    let array = write("conv-array.json", "[1, 2]");
    let empty = write("conv-empty.json", "");
    let address = write("conv-address.json", r#"{"alloc":{"0xzz":{"balance":"0x1"}}}"#);
    let kv_hex = write("conv-kv-hex.json", r#"{"0x12":"0xzz"}"#);
    let spec_hex = write("conv-spec-hex.json", r#"{"genesis":{"raw":{"top":{"0xzz":"0x00"}}}}"#);
    let depth = write("conv-depth.toml", "[layers]\nhistory_depth = 0\n");
    let toml = write("conv-bad.toml", "[rocksdb\n");
    let db = fresh_db("conv-bad-inputs");
    let addr = "0x".to_string() + &"00".repeat(20);
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for file in [&cut, &array, &empty] {
        cases.push(vec!["root", "--genesis", file]);
        cases.push(vec!["root", "--kv", file]);
        cases.push(vec!["root", "--chain-spec", file]);
    }
    cases.push(vec!["root", "--genesis", &address]);
    cases.push(vec!["prove", "--genesis", &address, "--address", &addr]);
    cases.push(vec!["init", "--db", &db, "--genesis", &address]);
    cases.push(vec!["root", "--kv", &kv_hex]);
    cases.push(vec!["init", "--db", &db, "--chain-spec", &spec_hex]);
    cases.push(vec!["stats", "--db", &db, "--config", &depth]);
    let genesis = testdata("genesis/dev.json");
    cases.push(vec!["init", "--db", &db, "--genesis", &genesis, "--config", &toml]);
    for args in &cases {
        let o = arbor(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.starts_with("error: ") && err.lines().count() == 1, "{args:?}: {err}");
        let file = args.iter().rev().find(|a| a.ends_with(".json") || a.ends_with(".toml"));
        assert!(err.contains(file.unwrap()), "{args:?} does not name the file: {err}");
        assert!(stdout(&o).is_empty(), "{args:?} printed {}", stdout(&o));
    }
    assert!(!std::path::Path::new(&db).join("CURRENT").exists(), "a refused init made a database");
    for args in [
        &["root", "--kv", "/nonexistent/kv.json"][..],
        &["root", "--chain-spec", "/nonexistent/spec.json"],
        &["stats", "--db", &db, "--config", "/nonexistent/arbor.toml"],
    ] {
        let o = arbor(args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", stderr(&o));
    }
}

/// Issue 29, defect 7: `checkpoint restore` when every source answered and none offers
/// the trusted checkpoint is a negative verdict (1, as `checkpoint verify`), but 3 when a
/// source could not be read; `serve --listen` that does not parse is a usage error (2); a
/// proof file that is not UTF-8 text is no proof (1, as one that is not JSON), one that
/// cannot be read is 3.
#[test]
fn exit_classes_of_restore_listen_and_proof_files() {
    let empty = tmp("conv-no-checkpoints");
    std::fs::create_dir_all(&empty).unwrap();
    let e = empty.to_str().unwrap();
    let root = format!("0x{}", "22".repeat(32));
    let trusted = ["--block", "3", "--root", root.as_str()];
    let o = arbor(&[&["checkpoint", "verify", "--source", e][..], &trusted].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    for (source, code) in [(e, 1), ("http://127.0.0.1:1", 3)] {
        let db = fresh_db("conv-restore-none");
        let restore = ["checkpoint", "restore", "--db", &db, "--source", source];
        let o = arbor(&[&restore[..], &trusted, &["--timeout-ms", "5000"]].concat());
        assert_eq!(o.status.code(), Some(code), "{source}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
    }
    let o = arbor(&["checkpoint", "serve", "--dir", e, "--listen", "not-an-address"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let binary = tmp("conv-binary-proof.json");
    std::fs::write(&binary, [0xff, 0xfe, b'{', 0x80]).unwrap();
    for (file, code) in [(binary.to_str().unwrap(), 1), (e, 3)] {
        let o = arbor(&["verify-proof", "--root", &root, file]);
        assert_eq!(o.status.code(), Some(code), "{file}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    }
}

/// A command whose stdout is full (`/dev/full`) or closed (a pipe whose reader has gone)
/// cannot print its result: exit 3 with one error line, never a panic; a full stderr
/// loses the error line but keeps the exit code.
#[test]
fn unwritable_stdout_or_stderr_is_an_error_not_a_panic() {
    let db = fresh_db("conv-full-stdout");
    ok(&small_load(&db));
    let key = format!("0x{}", "00".repeat(32));
    let commands: [&[&str]; 5] = [
        &["config", "defaults"],
        &["config", "defaults", "--json"],
        &["verify", "--db", &db],
        &["get", "--db", &db, &key],
        &["stats", "--db", &db, "--json"],
    ];
    for args in commands {
        let full = std::fs::File::create("/dev/full").unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_arbor")).args(args).stdout(full).output().unwrap();
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("error: "), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
    // A reader that closes at once: the writes fail with a broken pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["config", "defaults"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_ne!(o.status.code(), Some(101), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    // Nowhere to print the error: the exit code still says what happened.
    for (args, code) in
        [(&["get", "--db", "/nonexistent-arbor-db", "00"][..], 3), (&["get"][..], 2)]
    {
        let full = std::fs::File::create("/dev/full").unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_arbor")).args(args).stderr(full).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}");
    }
}

/// The configuration file's `layout` is the database's when the command names none, and a
/// command that names another one is refused (exit 2).
#[test]
fn the_configuration_files_layout_is_checked() {
    let db = fresh_db("conv-config-layout");
    ok(&small_load(&db));
    let substrate = tmp("conv-layout-substrate.toml");
    std::fs::write(&substrate, "layout = \"substrate-v0\"\n").unwrap();
    let s = substrate.to_str().unwrap();
    for args in
        [&["get", "--db", &db, "--config", s, "00"][..], &["verify", "--db", &db, "--config", s]]
    {
        let o = arbor(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    let new = fresh_db("conv-config-layout-new");
    let load = small_load(&new);
    let o = arbor(&[&load[..], &["--config", s, "--layout", "ethereum"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    ok(&[&load[..], &["--config", s]].concat());
    let stats = ok(&["stats", "--db", &new, "--json"]);
    assert!(stats.contains("substrate-v0"), "{stats}");
}

/// A configuration file that never ends (a FIFO no one writes) does not make Ctrl-C
/// powerless: the commands that catch signals to stop at a clean boundary (`revert`,
/// `checkpoint restore`) read it before they install their handler, so SIGINT still ends
/// them while they wait on it.
#[test]
fn ctrl_c_ends_a_command_blocked_on_its_configuration_file() {
    let db = fresh_db("conv-fifo-config");
    ok(&small_load(&db));
    let fifo = tmp("conv-config.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let f = fifo.to_str().unwrap();
    let root = format!("0x{}", "00".repeat(32));
    let restore_db = tmp("conv-fifo-restore-db");
    let restore = [
        "checkpoint",
        "restore",
        "--db",
        restore_db.to_str().unwrap(),
        "--block",
        "1",
        "--root",
        &root,
        "--source",
        &db,
    ];
    for args in [&["revert", "--db", &db, "1"][..], &restore[..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
            .args(args)
            .args(["--config", f])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let pid = child.id().to_string();
        let signal = interrupt_signal();
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let _ = child.kill();
        let status = status.unwrap_or_else(|| panic!("{args:?} ignored {signal}"));
        assert!(!status.success(), "{args:?}: {status}");
    }
    // Nothing was reverted.
    assert!(ok(&["verify", "--db", &db]).starts_with("ok 1 "));
}

/// The signal that stands for Ctrl-C here: `-INT`, unless this test process ignores SIGINT
/// (a background job of a non-interactive shell starts so, and its children inherit the
/// ignore until they install a handler, which a command blocked before that never does);
/// then `-TERM`, which the commands catch alike and such a shell leaves alone.
fn interrupt_signal() -> &'static str {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0);
    // SIGINT is signal 2: bit 1 of the mask.
    match ignored & (1 << 1) {
        0 => "-INT",
        _ => "-TERM",
    }
}

/// `arbor load` of a small database at `db`: 300 keys, one block of 20 changes.
fn small_load(db: &str) -> [&str; 11] {
    [
        "load",
        "--db",
        db,
        "--keys",
        "300",
        "--blocks",
        "1",
        "--updates-per-block",
        "20",
        "--seed",
        "1",
    ]
}

/// A database RocksDB would reopen at an older state (its MANIFEST cut short, found by a
/// hostile sweep: the cut database read as empty, `verify --deep` said ok, and the next
/// `load` deleted its table files) is refused by the read commands and the writing ones
/// alike: exit 3, one line naming the durable record, and the table files are still there.
#[test]
fn a_truncated_manifest_is_reported_not_served() {
    let source = PathBuf::from(fresh_db("manifest-cut"));
    let load = |db: &std::path::Path| {
        let db = db.to_str().unwrap();
        arbor(
            &["load", "--db", db, "--keys", "3000", "--blocks", "4"]
                .into_iter()
                .chain(["--updates-per-block", "100", "--seed", "9", "--quiet"])
                .collect::<Vec<_>>(),
        )
    };
    assert!(load(&source).status.success());
    let verified = ok(&["verify", "--db", source.to_str().unwrap(), "--deep"]);
    let name = std::fs::read_to_string(source.join("CURRENT")).unwrap();
    let manifest = std::fs::read(source.join(name.trim())).unwrap();
    let cut = source.with_extension("cut");
    let mut refused = 0;
    for len in (0..manifest.len()).step_by(32) {
        let _ = std::fs::remove_dir_all(&cut);
        std::fs::create_dir(&cut).unwrap();
        for e in std::fs::read_dir(&source).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), cut.join(e.file_name())).unwrap();
        }
        std::fs::write(cut.join(name.trim()), &manifest[..len]).unwrap();
        let tables = |dir: &std::path::Path| {
            let names = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name());
            names.filter(|n| n.to_string_lossy().ends_with(".sst")).count()
        };
        let before = tables(&cut);
        let o = arbor(&["verify", "--db", cut.to_str().unwrap(), "--deep"]);
        if o.status.success() {
            assert_eq!(stdout(&o), verified, "cut at {len}: verified another state");
            continue;
        }
        let err = stderr(&o);
        assert!(err.starts_with("error: ") && err.lines().count() == 1, "{err}");
        if !err.contains("ARBOR-DURABLE") {
            continue;
        }
        refused += 1;
        assert_eq!(o.status.code(), Some(3), "{err}");
        let o = load(&cut);
        assert!(o.status.code() == Some(3) && stderr(&o).contains("ARBOR-DURABLE"), "{o:?}");
        assert_eq!(tables(&cut), before, "cut at {len}: table files deleted");
    }
    assert!(refused > 0, "no cut of the MANIFEST made RocksDB open an older state");
    let _ = std::fs::remove_dir_all(&cut);
}
