//! A checkpoint of an Ethereum account database (blocks committed with the account-model
//! commit: a contract with storage and code) carries its code: `create`, `list` and
//! `verify` count it, `restore` brings it back (the same root, `verify --db` ok, the code
//! readable), and a copy of the checkpoint without its code chunk is refused by `verify`
//! and by `restore`, which leaves an empty database.

use store::{StateDb, StoreConfig};

use super::*;

/// The contract code of the blocks `eth_proof` builds (its block 1 deploys it).
const CODE: &[u8] = &[0x60, 0x2a, 0x60, 0x00, 0x55, 0x00];

/// The code under `CODE`'s hash in the database at `db`.
fn code_in(db: &str) -> Option<Vec<u8>> {
    let db = StateDb::open(Path::new(db), StoreConfig::default()).unwrap();
    let code = db.code(&trie::keccak256(CODE)).unwrap();
    db.close().unwrap();
    code
}

#[test]
fn an_account_database_checkpoint_carries_its_code() {
    let (src, _) = super::super::eth_proof::build("ckpt-code-src");
    assert_eq!(code_in(&src).as_deref(), Some(CODE));
    let dir = fresh_dir("code");
    let created = json(&ok(&["checkpoint", "create", "--db", &src, "--out", s(&dir), "--json"]));
    assert_eq!((created["codes"].as_u64(), created["code_chunks"].as_u64()), (Some(1), Some(1)));
    let (id, root) = (created["id"].as_str().unwrap(), created["root"].as_str().unwrap());
    let block = created["block"].as_u64().unwrap().to_string();
    let chunks = created["chunks"].as_u64().unwrap();
    assert_eq!(std::fs::read_dir(dir.join("chunks")).unwrap().count() as u64, chunks);

    let listed = json(&ok(&["checkpoint", "list", "--source", s(&dir), "--json"]));
    assert_eq!(
        (listed[0]["codes"].as_u64(), listed[0]["chunks"].as_u64()),
        (Some(1), Some(chunks))
    );
    let text = ok(&["checkpoint", "list", "--source", s(&dir)]);
    assert!(text.contains(&format!(" {chunks} chunks 1 codes ")), "{text}");
    let verify: [&str; 8] =
        ["checkpoint", "verify", "--source", s(&dir), "--block", &block, "--root", root];
    let v = json(&ok(&[&verify[..], &["--json"]].concat()));
    assert_eq!((v["codes"].as_u64(), v["chunks"].as_u64()), (Some(1), Some(chunks)), "{v}");

    let db = fresh_restore_db("code");
    let restore = |db: &str, source: &Path| {
        let args: [&str; 8] =
            ["checkpoint", "restore", "--db", db, "--block", &block, "--root", root];
        arbor(&[&args[..], &["--source", s(source)]].concat())
    };
    let o = restore(&db, &dir);
    assert!(o.status.success(), "restore: {}{}", stdout(&o), stderr(&o));
    assert_eq!(ok(&["verify", "--db", &db]), format!("ok {block} {root}\n"));
    assert_eq!(code_in(&db).as_deref(), Some(CODE));

    // The code chunk (the manifest's last chunk) gone: refused, nothing left behind.
    let manifest = std::fs::read(dir.join("checkpoints").join(id).join("manifest")).unwrap();
    let m = checkpoint::Manifest::decode(&manifest).unwrap();
    let lacking = fresh_dir("code-lacking");
    test_support::copy_tree(&dir, &lacking);
    std::fs::remove_file(lacking.join(checkpoint::chunk_path(&m.code.chunks[0].digest))).unwrap();
    let verify: [&str; 8] =
        ["checkpoint", "verify", "--source", s(&lacking), "--block", &block, "--root", root];
    let o = arbor(&verify);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let chunk = format!("chunk {}", m.chunks.len());
    assert!(stdout(&o).starts_with(&format!("invalid {id}")) && stdout(&o).contains(&chunk));
    let db = fresh_restore_db("code-lacking");
    let o = restore(&db, &lacking);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert_one_line_error(&o, &format!("no source serves chunk {}", m.chunks.len()));
    assert_eq!(ok(&["verify", "--db", &db]), format!("{EMPTY_HEAD}\n"));
    assert_eq!(code_in(&db), None);
}
