//! `arbor gen-chain --evm` and its chains through `arbor import --chain … --genesis …`:
//! a generated chain imports (pipelined and not) to its last header's root, which `verify`
//! rebuilds; the same seed writes the same files; a database made by `init --genesis`
//! continues with the chain, one loaded from an allocation without a post-merge config is
//! refused with its reason; flipped bytes of its blocks (length prefixes, headers,
//! transactions, withdrawals) are refused with the head left on the chain below the
//! flipped block; and an import killed with SIGKILL at random moments
//! (`ARBOR_CRASH_ITERATIONS`, default 3) leaves a head of the chain (or an unfinished
//! creation), from which a rerun reaches the same root. The generated chains hold
//! deployments, self-destructs of contracts with storage and re-creations (the generator's
//! own test in `evm` counts them), so the kills land in commits of storage wipes and code.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::crash::{iterations, kill_after, seed};
use super::{arbor, fresh_db, stderr, stdout};

/// A generated chain on disk.
struct EvmChain {
    genesis: String,
    blocks: String,
    /// The state root at each height, the genesis's first.
    roots: Vec<String>,
    /// The bytes of `blocks`.
    bytes: Vec<u8>,
}

/// An RLP item at `at`: where its payload starts and where the item ends.
fn item(bytes: &[u8], at: usize) -> (usize, usize) {
    let b = bytes[at];
    let wide = |base: u8| {
        let n = usize::from(b - base);
        let len = bytes[at + 1..at + 1 + n].iter().fold(0usize, |a, x| a << 8 | usize::from(*x));
        (at + 1 + n, at + 1 + n + len)
    };
    match b {
        0x00..=0x7f => (at, at + 1),
        0x80..=0xb7 => (at + 1, at + 1 + usize::from(b - 0x80)),
        0xb8..=0xbf => wide(0xb7),
        0xc0..=0xf7 => (at + 1, at + 1 + usize::from(b - 0xc0)),
        0xf8..=0xff => wide(0xf7),
    }
}

/// The records of an RLP block file: (start, end) of each block.
fn records(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (_, end) = item(bytes, at);
        out.push((at, end));
        at = end;
    }
    out
}

/// `gen-chain --evm` into a fresh directory `name`.
fn gen_evm(name: &str, accounts: &str, blocks: &str, txs: &str) -> EvmChain {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("evm-chain-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let args = ["gen-chain", "--evm", "--accounts", accounts, "--blocks", blocks];
    let more = ["--txs-per-block", txs, "--seed", "9", "--out", out, "--json"];
    let o = arbor(&[&args[..], &more[..]].concat());
    assert!(o.status.success(), "gen-chain --evm: {}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let bytes = std::fs::read(dir.join("blocks.rlp")).unwrap();
    let mut roots = vec![v["genesis_root"].as_str().unwrap().to_owned()];
    for (start, end) in records(&bytes) {
        let block = evm::block::decode_block(&bytes[start..end]).unwrap();
        roots.push(format!("0x{}", hex::encode(block.header.state_root.0)));
    }
    assert_eq!(roots.len() as u64 - 1, v["blocks"].as_u64().unwrap());
    assert_eq!(v["root"].as_str(), Some(roots[roots.len() - 1].as_str()), "{v}");
    EvmChain {
        genesis: dir.join("genesis.json").to_str().unwrap().to_owned(),
        blocks: dir.join("blocks.rlp").to_str().unwrap().to_owned(),
        roots,
        bytes,
    }
}

/// `import --json` of `chain` (its genesis) into `db`: success and the report.
fn import(db: &str, blocks: &str, genesis: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec!["import", "--db", db, "--chain", blocks, "--genesis", genesis, "--json"];
    args.extend_from_slice(extra);
    let o = arbor(&args);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    (o.status.code(), serde_json::from_str(&stdout(&o)).unwrap())
}

/// `verify`'s `(number, root)`, or `None` for no database or an unfinished creation.
fn verified(db: &str) -> Option<(usize, String)> {
    let o = arbor(&["verify", "--db", db]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!err.contains("panicked"), "{err}");
    if !o.status.success() {
        let unfinished = ["unfinished bulk load", "no database", "being created"];
        assert!(unfinished.iter().any(|m| err.contains(m)), "verify: {err}");
        return None;
    }
    let mut parts = out.split_whitespace();
    assert_eq!(parts.next(), Some("ok"), "{out}");
    Some((parts.next().unwrap().parse().unwrap(), parts.next().unwrap().to_owned()))
}

#[test]
fn a_generated_chain_imports_verifies_and_continues_an_init() {
    let chain = gen_evm("ok", "200", "12", "30");
    let last = chain.roots.len() - 1;
    let db = fresh_db("evm-chain-piped");
    let (code, v) = import(&db, &chain.blocks, &chain.genesis, &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!((v["block"].as_u64(), v["blocks"].as_u64()), (Some(12), Some(12)), "{v}");
    assert_eq!(v["root"].as_str(), Some(chain.roots[last].as_str()));
    assert!(v["gas_used"].as_u64().unwrap() > 12 * 30 * 21_000, "{v}");
    assert_eq!(verified(&db), Some((last, chain.roots[last].clone())));
    let (code, v) = import(&db, &chain.blocks, &chain.genesis, &[]);
    assert!(code == Some(0) && v["skipped"] == 12 && v["blocks"] == 0, "a rerun skips: {v}");
    let flat = fresh_db("evm-chain-flat");
    let (code, v) = import(&flat, &chain.blocks, &chain.genesis, &["--no-pipeline"]);
    assert!(code == Some(0) && v["root"].as_str() == Some(chain.roots[last].as_str()), "{v}");
    assert_eq!(v["exec_workers"], 1, "an Ethereum block executes in order: {v}");
    let o = arbor(
        &[
            &["import", "--db", &flat, "--exec-workers", "2", "--chain"][..],
            &[chain.blocks.as_str(), "--genesis", &chain.genesis],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("in order"), "{}", stderr(&o));
    // The same seed writes the same files.
    let again = gen_evm("again", "200", "12", "30");
    assert_eq!(again.bytes, chain.bytes);
    assert_eq!(std::fs::read(&again.genesis).unwrap(), std::fs::read(&chain.genesis).unwrap());

    // `init --genesis` stores the genesis header: an import continues that database.
    let inited = fresh_db("evm-chain-init");
    let o = arbor(&["init", "--db", &inited, "--genesis", &chain.genesis]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), chain.roots[0]);
    let (code, v) = import(&inited, &chain.blocks, &chain.genesis, &[]);
    assert!(code == Some(0) && v["root"].as_str() == Some(chain.roots[last].as_str()), "{v}");
    // Without a config section there is no header to store: the import says so.
    let mut bare: Value = serde_json::from_slice(&std::fs::read(&chain.genesis).unwrap()).unwrap();
    bare.as_object_mut().unwrap().remove("config");
    let bare_path = Path::new(&chain.genesis).with_file_name("bare.json");
    std::fs::write(&bare_path, bare.to_string()).unwrap();
    let no_header = fresh_db("evm-chain-no-header");
    let o = arbor(&["init", "--db", &no_header, "--genesis", bare_path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let args = ["--chain", &chain.blocks, "--genesis", &chain.genesis];
    let o = arbor(&[&["import", "--db", &no_header][..], &args[..]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let error = stderr(&o);
    assert!(error.contains("no genesis header") && !error.contains("another chain"), "{error}");
    assert_eq!(verified(&no_header), Some((0, chain.roots[0].clone())), "left unchanged");
}

/// Positions to flip in block `n` (1-based) of `chain`: its length prefix, its header's,
/// bytes of the header, the transaction list's prefix, a transaction's prefix and bytes
/// inside it, and the withdrawals.
fn positions(chain: &EvmChain, n: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let (start, end) = records(&chain.bytes)[n - 1];
    let (body, _) = item(&chain.bytes, start);
    let (header_payload, header_end) = item(&chain.bytes, body);
    let (txs_payload, txs_end) = item(&chain.bytes, header_end);
    // The ommers' list (empty) opens where the transactions' ends, the withdrawals' after.
    let (ommers, withdrawals) = (txs_end, item(&chain.bytes, txs_end).1);
    let (_, tx_end) = item(&chain.bytes, txs_payload);
    let mut at = vec![start, start + 1, body, header_payload, header_end, txs_payload, ommers];
    at.push(rng.gen_range(header_payload..header_end));
    at.push(rng.gen_range(header_payload..header_end));
    at.push(rng.gen_range(txs_payload..tx_end));
    at.push(rng.gen_range(txs_payload..txs_end));
    at.push(rng.gen_range(withdrawals..end));
    at
}

#[test]
fn flipped_bytes_of_a_generated_chain_are_refused() {
    let mut rng = ChaCha8Rng::seed_from_u64(seed("flipped_bytes_of_a_generated_chain_are_refused"));
    let chain = gen_evm("flip", "100", "6", "12");
    let last = chain.roots.len() - 1;
    // Every block but the last: nothing after the last block names its hash, so a flip
    // there that leaves a valid header (one-byte extra data for the empty one) would make
    // another valid chain rather than a refused one.
    for n in [1, 3, last - 1] {
        for at in positions(&chain, n, &mut rng) {
            let mask = rng.gen_range(1..=255u8);
            let mut flipped = chain.bytes.clone();
            flipped[at] ^= mask;
            let path = format!("{}.flipped", chain.blocks);
            std::fs::write(&path, flipped).unwrap();
            let db = fresh_db("evm-chain-flip");
            let args = ["import", "--db", &db, "--chain", &path, "--genesis", &chain.genesis];
            let o = arbor(&[&args[..], &["--json"]].concat());
            let (out, err) = (stdout(&o), stderr(&o));
            let what = format!("block {n}, byte {at} ^ {mask:#04x}: {out}{err}");
            assert!(!err.contains("panicked") && err.contains("error: "), "{what}");
            if at == 0 && chain.bytes[0] ^ mask < 0xc0 {
                // No longer an RLP file: --genesis is a usage error, nothing is created.
                assert_eq!(o.status.code(), Some(2), "{what}");
                assert_eq!(verified(&db), None, "{what}");
                continue;
            }
            assert_eq!(o.status.code(), Some(1), "{what}");
            let v: Value = serde_json::from_str(&out).unwrap();
            let error = v["error"].as_str().unwrap_or_default();
            assert!(!error.is_empty(), "{what}");
            let head = v["block"].as_u64().unwrap() as usize;
            // The head is on the chain below the flipped block; or the flip left another
            // valid block there (its header's own fields), refused by its child.
            assert!(
                head < n || (head == n && error.contains("parent hash")),
                "{what}: head {head}"
            );
            assert_eq!(v["root"].as_str(), Some(chain.roots[head].as_str()), "{what}");
        }
    }
}

/// kill -9 at random moments of an EVM import whose store writes every block on its own
/// with its nodes (`persist_blocks = 1`, no node buffer) into 1 MiB memtables (groups are
/// written without a WAL: a block is durable once its memtable is flushed, which small
/// memtables make happen within the chain), so kills land on durable heads inside the
/// chain as well as in its creation: whatever the moment, the database verifies at a
/// whole block of the chain or reports its creation unfinished, and a rerun reaches the
/// chain's last root. Kills go on (at most 12 more) until one has left a head inside the
/// chain.
#[test]
fn an_evm_import_killed_at_random_moments_resumes_to_the_same_root() {
    let mut rng = ChaCha8Rng::seed_from_u64(seed("an_evm_import_killed_at_random_moments"));
    let chain = gen_evm("crash", "500", "80", "80");
    let last = chain.roots.len() - 1;
    let config = Path::new(&chain.genesis).with_file_name("store.toml");
    let small = "[rocksdb]\nwrite_buffer_bytes = 1048576\n";
    let each_block = "[layers]\npersist_blocks = 1\nnode_buffer_bytes = 0\n";
    std::fs::write(&config, format!("{small}{each_block}")).unwrap();
    let config = config.to_str().unwrap();
    let args = |db: &str| -> Vec<String> {
        let fixed = ["import", "--config", config, "--chain", &chain.blocks];
        let mut v: Vec<String> = fixed.iter().map(|a| a.to_string()).collect();
        v.extend(["--genesis", &chain.genesis, "--db", db].map(String::from));
        v
    };
    // The shorter of two uninterrupted runs (the first one also warms the caches).
    let mut full = std::time::Duration::MAX;
    for r in 0..2 {
        let reference = fresh_db(&format!("evm-chain-reference-{r}"));
        let start = Instant::now();
        let (code, v) = import(&reference, &chain.blocks, &chain.genesis, &["--config", config]);
        full = full.min(start.elapsed());
        assert!(code == Some(0) && v["root"].as_str() == Some(chain.roots[last].as_str()), "{v}");
    }
    let mut seen = Vec::new();
    let inside = |seen: &[Option<usize>]| seen.iter().flatten().any(|n| *n > 0 && *n < last);
    for i in 0..iterations() + 14 {
        if i >= iterations() + 2 && inside(&seen) {
            break;
        }
        let db = fresh_db(&format!("evm-chain-crash-{i}"));
        let delay = full.mul_f64(rng.gen_range(0.0..1.0));
        let a = args(&db);
        let killed = kill_after(&a.iter().map(String::as_str).collect::<Vec<_>>(), delay);
        let left = verified(&db);
        if let Some((n, root)) = &left {
            // Whatever the moment, the head is a whole block of the chain.
            assert_eq!(root, &chain.roots[*n], "kill {i}: head {n}");
        }
        let (code, v) = import(&db, &chain.blocks, &chain.genesis, &["--config", config]);
        assert_eq!(code, Some(0), "resumed after {left:?}: {v}");
        assert_eq!(v["root"].as_str(), Some(chain.roots[last].as_str()), "after {left:?}");
        assert_eq!(verified(&db), Some((last, chain.roots[last].clone())));
        eprintln!("kill {i} after {delay:?} (killed: {killed}): {left:?}");
        seen.push(left.map(|(n, _)| n));
        let _ = std::fs::remove_dir_all(&db);
    }
    eprintln!("evm import: {} kills over a {full:?} run, heads left: {seen:?}", seen.len());
    assert!(inside(&seen), "no kill left a durable head inside the chain: {seen:?}");
}

#[test]
fn bench_import_evm_smoke() {
    let o = arbor(&[
        "bench",
        "import",
        "--evm",
        "--accounts",
        "60",
        "--blocks",
        "3",
        "--transfers",
        "8",
        "--runs",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    super::conventions::assert_json_names(&v);
    assert_eq!((v["blocks"].as_u64(), v["transactions"].as_u64()), (Some(3), Some(27)), "{v}");
    assert!(v["gas_used"].as_u64().unwrap() > 27 * 21_000, "{v}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    for (row, pipelined) in rows.iter().zip([false, true]) {
        assert_eq!(row["pipelined"], pipelined, "{row}");
        assert_eq!(row["exec_workers"], 1, "{row}");
        for field in ["mgas_per_s", "blocks_per_s", "cores_busy"] {
            assert!(row[field].as_f64().unwrap() > 0.0, "{field}: {row}");
        }
        assert_eq!(row["speedup"].is_number(), pipelined, "{row}");
        assert_eq!(row["bound"].is_number(), pipelined, "{row}");
        assert_eq!(row["of_bound"].is_number(), pipelined, "{row}");
    }
    // Usage errors: the EVM's own bounds.
    let o = arbor(&["bench", "import", "--evm", "--transfers", "10001"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("at most 10000"), "{}", stderr(&o));
    // An Ethereum block executes in order: one worker, in the benchmark and the import.
    let o = arbor(&["bench", "import", "--evm", "--workers", "1,2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("in order"), "{}", stderr(&o));
}
