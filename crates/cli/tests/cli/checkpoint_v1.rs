//! Checkpoints of the first format (chunks named by keccak256, manifest versions 1 and 2),
//! as an earlier build wrote them (`testdata/arbor/checkpoints-v1`, see its `SOURCES.md`):
//! still listed, verified, served and restored; a damaged copy is still refused; and what
//! `create` writes now is version 3, named by BLAKE3, with the contract code (which the
//! Ethereum fixture's checkpoint lacks: a version 3 checkpoint of what it restores is
//! refused, one of the database it was cut from restores).

use std::path::{Path, PathBuf};

use super::checkpoint::Server;
use super::{arbor, fresh_db, ok, stderr};

/// A kept checkpoint: its folder, manifest id, block and root.
struct Kept {
    dir: String,
    id: &'static str,
    block: &'static str,
    root: &'static str,
    layout: &'static str,
    version: u8,
}

/// A folder of `testdata/arbor` (Arbor's own outputs; `ARBOR_TESTDATA` names the
/// Ethereum vectors only).
fn kept_dir(rel: &str) -> String {
    format!("{}/../../testdata/arbor/checkpoints-v1/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn kept() -> [Kept; 2] {
    [
        Kept {
            dir: kept_dir("ethereum"),
            id: "c1e70be742c146bbb4497566ccc10e79b2d38af97702189ece9fcdf71a713d89",
            block: "0",
            root: "0x587643b490767d500da9d10e7368b3d1f0c169fdbb14918d3b264f0193d1d341",
            layout: "ethereum",
            version: 1,
        },
        Kept {
            dir: kept_dir("substrate-v1"),
            id: "9c7a3aa8cd1ad15c7cf54a9092cc5412c355aed92db47bcc548cfbe597bebcca",
            block: "2",
            root: "0xd57f650d9e6577c3d1a867cbf6890b7443b1171ebab2af8aedffca4139daf4a3",
            layout: "substrate-v1",
            version: 2,
        },
    ]
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

fn restore(db: &str, k: &Kept, source: &str) -> String {
    ok(&[
        "checkpoint",
        "restore",
        "--db",
        db,
        "--block",
        k.block,
        "--root",
        k.root,
        "--source",
        source,
    ])
}

#[test]
fn first_format_checkpoints_list_verify_serve_and_restore() {
    for k in kept() {
        let manifest = Path::new(&k.dir).join("checkpoints").join(k.id).join("manifest");
        assert_eq!(std::fs::read(&manifest).unwrap()[8], k.version, "{}", k.layout);
        let listed = json(&ok(&["checkpoint", "list", "--source", &k.dir, "--json"]));
        assert_eq!(listed[0]["id"], k.id);
        assert_eq!(listed[0]["layout"], k.layout);
        assert_eq!(listed[0]["chunk_hash"], "keccak256");
        let out =
            ok(&["checkpoint", "verify", "--source", &k.dir, "--block", k.block, "--root", k.root]);
        assert!(out.starts_with(&format!("valid {} block {} root {}", k.id, k.block, k.root)));

        // Restored from the directory and from a server of it: the same verified state.
        let want = format!("ok {} {}", k.block, k.root);
        let db = fresh_db(&format!("v1-dir-{}", k.layout));
        restore(&db, &k, &k.dir);
        assert_eq!(ok(&["verify", "--db", &db]).trim_end(), want);
        let server = Server::start(Path::new(&k.dir));
        let db = fresh_db(&format!("v1-http-{}", k.layout));
        restore(&db, &k, &server.url);
        assert_eq!(ok(&["verify", "--db", &db]).trim_end(), want);

        // A checkpoint created now, of the restored state: version 3, chunks named by
        // BLAKE3, the same state.
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("v3-of-{}", k.layout));
        let _ = std::fs::remove_dir_all(&out);
        let made = json(&ok(&[
            "checkpoint",
            "create",
            "--db",
            &db,
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]));
        let id = made["id"].as_str().unwrap();
        let bytes = std::fs::read(out.join("checkpoints").join(id).join("manifest")).unwrap();
        assert_eq!(bytes[8], checkpoint::MANIFEST_BLAKE3_VERSION);
        let listed =
            json(&ok(&["checkpoint", "list", "--source", out.to_str().unwrap(), "--json"]));
        assert_eq!(listed[0]["chunk_hash"], "blake3");
        let again = fresh_db(&format!("v3-of-{}", k.layout));
        if k.layout == "ethereum" {
            // The fixture's accounts refer to code (every fiftieth) that a first-format
            // checkpoint could not carry: the state restored from it lacks that code, and
            // a version 3 checkpoint of it, which would restore a node that cannot
            // execute, is refused.
            assert_eq!(made["codes"], 0, "{made}");
            let o = arbor(&strs(&restore_args(&again, &k, out.to_str().unwrap())));
            assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
            assert!(
                stderr(&o).contains("contract code(s) that accounts refer to"),
                "{}",
                stderr(&o)
            );
            // One of the database the fixture was cut from carries its code (one, shared by
            // six accounts) and restores.
            let src = fresh_db("v1-genesis-source");
            let genesis = kept_dir("ethereum-genesis.json");
            assert_eq!(ok(&["init", "--db", &src, "--genesis", &genesis]).trim_end(), k.root);
            let out = out.with_file_name("v3-of-genesis");
            let _ = std::fs::remove_dir_all(&out);
            let made = json(&ok(&[
                "checkpoint",
                "create",
                "--db",
                &src,
                "--out",
                out.to_str().unwrap(),
                "--json",
            ]));
            assert_eq!(made["codes"], 1, "{made}");
            let again = fresh_db("v3-of-genesis");
            restore(&again, &k, out.to_str().unwrap());
            assert_eq!(ok(&["verify", "--db", &again]).trim_end(), want);
            continue;
        }
        restore(&again, &k, out.to_str().unwrap());
        assert_eq!(ok(&["verify", "--db", &again]).trim_end(), want);
    }
}

/// `checkpoint restore` of `k` from `source`.
fn restore_args(db: &str, k: &Kept, source: &str) -> Vec<String> {
    let args = ["checkpoint", "restore", "--db", db, "--block", k.block, "--root", k.root];
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.extend(["--source".to_string(), source.to_string()]);
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn a_damaged_first_format_chunk_is_refused() {
    let k = &kept()[0];
    let copy = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("v1-damaged");
    let _ = std::fs::remove_dir_all(&copy);
    copy_dir(Path::new(&k.dir), &copy);
    let chunks: Vec<PathBuf> =
        std::fs::read_dir(copy.join("chunks")).unwrap().map(|e| e.unwrap().path()).collect();
    let victim = &chunks[chunks.len() / 2];
    let mut bytes = std::fs::read(victim).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(victim, &bytes).unwrap();
    let src = copy.to_str().unwrap();
    let o = arbor(&["checkpoint", "verify", "--source", src, "--block", k.block, "--root", k.root]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let db = fresh_db("v1-damaged");
    let o = arbor(&[
        "checkpoint",
        "restore",
        "--db",
        &db,
        "--block",
        k.block,
        "--root",
        k.root,
        "--source",
        src,
    ]);
    assert!(!o.status.success(), "a damaged chunk restored");
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}
