//! `arbor demo`: a short tour of what the engine does today, checked against references
//! nobody here wrote.
//!
//! It computes mainnet's genesis state root twice (streaming builder, mutable trie) and
//! compares it with the known root; proves a few accounts (inclusion and one exclusion),
//! sends each proof through its JSON form and verifies it; checks that a tampered proof
//! is rejected; computes the root of every other genesis file in `genesis/` against
//! its known root; and runs a temporary database through init, verify, 20 blocks of
//! account updates, a revert of 5 blocks and verify again (`demo_store`). Any mismatch
//! makes the command fail after printing the report.
//! Cost: about a second in a release build (mainnet has 8,893 accounts).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use alloy_primitives::U256;
use anyhow::{bail, Context, Result};
use clap::Args;
use eth::{genesis_state_root, AccountProof, Address, EthState, Genesis};
use serde::Serialize;
use state::H256;
use trie::keccak256;

use crate::demo_store::{self, StoreDemo};
use crate::input::read_genesis;

/// Known genesis state roots (testdata/ethereum/SOURCES.md).
const KNOWN_ROOTS: [(&str, &str); 6] = [
    ("mainnet.json", "0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544"),
    ("sepolia.json", "0x5eb6e371a698b8d68f665192350ffcecbbbf322916f4b51bd79bb6887da3f494"),
    ("holesky.json", "0x69d8c9d72f6fa4ad42d4702b433707212f90db395eb54dc20bc85de253788783"),
    ("hoodi.json", "0xda87d7f5f91c51508791bbcbd4aa5baf04917830b86985eeb9ad3d5bfb657576"),
    ("goerli.json", "0x5d6cded585e73c4e322c30c2f782a336316f17dd85a4863b9d838d2d4b8b3008"),
    ("dev.json", "0xf09d8f7da5bc5036f8dd9536c953e2212390a46fb3e553ece2b7d419131537b1"),
];

/// Accounts of the alloc proven by inclusion (plus one absent account).
const PROVEN_ACCOUNTS: usize = 3;

/// Arguments of `arbor demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// The testdata/ethereum directory [default: $ARBOR_TESTDATA, else testdata/ethereum
    /// under the current directory, else the source tree's the binary was built from].
    #[arg(long, value_name = "DIR")]
    testdata: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct DemoReport {
    testdata: String,
    mainnet: MainnetReport,
    proofs: Vec<ProofCheck>,
    tampered: TamperCheck,
    genesis_roots: Vec<RootCheck>,
    store: StoreDemo,
    chain: crate::demo_chain::ChainDemo,
    checks: usize,
    failures: usize,
}

#[derive(Debug, Serialize)]
struct MainnetReport {
    accounts: usize,
    parse_ms: f64,
    root: String,
    root_expected: String,
    root_ms: f64,
    root_matches: bool,
    state_root: String,
    state_build_ms: f64,
    state_root_matches: bool,
}

#[derive(Debug, Serialize)]
struct ProofCheck {
    address: String,
    kind: &'static str,
    nodes: usize,
    bytes: usize,
    prove_ms: f64,
    verify_ms: f64,
    valid: bool,
    reason: Option<String>,
}

#[derive(Debug, Serialize)]
struct TamperCheck {
    address: String,
    change: &'static str,
    rejected: bool,
    reason: Option<String>,
}

#[derive(Debug, Serialize)]
struct RootCheck {
    file: String,
    accounts: usize,
    root: String,
    root_expected: Option<String>,
    ms: f64,
    matches: Option<bool>,
}

/// Run `arbor demo`.
pub(crate) fn run(args: &DemoArgs) -> Result<ExitCode> {
    let dir = testdata_dir(args.testdata.as_deref())?;
    let genesis_dir = dir.join("genesis");
    let (genesis, mut state, mainnet) = mainnet(&genesis_dir)?;
    let root = H256::from_hex(&mainnet.root_expected).context("known mainnet root")?;
    let proofs = prove_accounts(&genesis, &mut state, &root)?;
    let tampered = tamper(&genesis, &mut state, &root)?;
    let genesis_roots = other_roots(&genesis_dir)?;
    let store = demo_store::run(&genesis, &root)?;
    let chain = crate::demo_chain::run()?;
    let mut report = DemoReport {
        testdata: dir.display().to_string(),
        mainnet,
        proofs,
        tampered,
        genesis_roots,
        store,
        chain,
        checks: 0,
        failures: 0,
    };
    let outcomes = outcomes(&report);
    report.checks = outcomes.len();
    report.failures = outcomes.iter().filter(|ok| !**ok).count();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        print_report(&report)?;
    }
    if !report.mainnet.root_matches {
        let m = &report.mainnet;
        bail!("mainnet genesis root {} differs from the known root {}", m.root, m.root_expected);
    }
    if report.failures > 0 {
        bail!("{} of {} demo checks failed (see the report above)", report.failures, report.checks);
    }
    Ok(ExitCode::SUCCESS)
}

/// Every pass/fail outcome of the report, in report order.
fn outcomes(r: &DemoReport) -> Vec<bool> {
    let mut v = vec![r.mainnet.root_matches, r.mainnet.state_root_matches];
    v.extend(r.proofs.iter().map(|p| p.valid));
    v.push(r.tampered.rejected);
    v.extend(r.genesis_roots.iter().filter_map(|g| g.matches));
    v.extend(r.store.outcomes());
    v.extend(r.chain.outcomes());
    v
}

/// `--testdata`, else `ARBOR_TESTDATA`, else `testdata/ethereum` under the current
/// directory, else the repository's copy in the source tree this binary was built from.
fn testdata_dir(arg: Option<&Path>) -> Result<PathBuf> {
    let is_testdata = |d: &Path| d.join("genesis").join("mainnet.json").is_file();
    if let Some(dir) = arg {
        if !is_testdata(dir) {
            bail!("--testdata {}: no genesis/mainnet.json in that directory", dir.display());
        }
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("ARBOR_TESTDATA") {
        let dir = PathBuf::from(dir);
        if !is_testdata(&dir) {
            bail!("ARBOR_TESTDATA={}: no genesis/mainnet.json in that directory", dir.display());
        }
        return Ok(dir);
    }
    let candidates = [
        PathBuf::from("testdata/ethereum"),
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/ethereum")),
    ];
    match candidates.iter().find(|d| is_testdata(d)) {
        Some(dir) => Ok(dir.canonicalize().unwrap_or_else(|_| dir.clone())),
        None => bail!(
            "cannot find the Ethereum testdata (tried {} and {}); pass --testdata DIR",
            candidates[0].display(),
            candidates[1].display()
        ),
    }
}

fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn known_root(file: &str) -> Option<&'static str> {
    KNOWN_ROOTS.iter().find(|(name, _)| *name == file).map(|(_, root)| *root)
}

/// Mainnet's root by the streaming builder and by the mutable trie (the proof source).
fn mainnet(genesis_dir: &Path) -> Result<(Genesis, EthState, MainnetReport)> {
    let expected = known_root("mainnet.json").context("mainnet is in the known-root table")?;
    let start = Instant::now();
    let genesis = read_genesis(&genesis_dir.join("mainnet.json"))?;
    let parse_ms = ms_since(start);
    let start = Instant::now();
    let root = genesis_state_root(&genesis);
    let root_ms = ms_since(start);
    let start = Instant::now();
    let mut state = EthState::from_genesis(&genesis).context("cannot build the mainnet state")?;
    let state_root = state.root().context("cannot compute the mainnet state root")?;
    let state_build_ms = ms_since(start);
    let report = MainnetReport {
        accounts: genesis.alloc.len(),
        parse_ms,
        root: root.to_string(),
        root_expected: expected.to_string(),
        root_ms,
        root_matches: root.to_string() == expected,
        state_root: state_root.to_string(),
        state_build_ms,
        state_root_matches: state_root.to_string() == expected,
    };
    Ok((genesis, state, report))
}

/// An address that is not in the alloc, derived deterministically.
fn absent_address(genesis: &Genesis) -> Address {
    (0u32..)
        .map(|i| {
            let h = keccak256(format!("arbor demo absent account {i}").as_bytes());
            let mut a = Address::default();
            a.copy_from_slice(&h.0[12..]);
            a
        })
        .find(|a| !genesis.alloc.contains_key(a))
        .unwrap_or_default()
}

/// Prove the first accounts of the alloc and one absent account; verify each proof
/// after a round trip through its eth_getProof JSON.
fn prove_accounts(genesis: &Genesis, state: &mut EthState, root: &H256) -> Result<Vec<ProofCheck>> {
    let present = genesis.alloc.keys().take(PROVEN_ACCOUNTS).map(|a| (*a, "inclusion"));
    let targets: Vec<_> = present.chain([(absent_address(genesis), "exclusion")]).collect();
    let mut checks = Vec::with_capacity(targets.len());
    for (address, kind) in targets {
        let start = Instant::now();
        let proof = state.prove(&address, &[]).context("cannot build a proof")?;
        let prove_ms = ms_since(start);
        let start = Instant::now();
        let verdict = AccountProof::from_json(&proof.to_json())
            .and_then(|parsed| parsed.verify(root).map(|()| parsed == proof));
        let verify_ms = ms_since(start);
        let (valid, reason) = match verdict {
            Ok(true) => (true, None),
            Ok(false) => (false, Some("the JSON round trip changed the proof".to_string())),
            Err(e) => (false, Some(e.to_string())),
        };
        checks.push(ProofCheck {
            address: format!("0x{}", hex::encode(address)),
            kind,
            nodes: proof.account_proof.len(),
            bytes: proof.account_proof.iter().map(Vec::len).sum(),
            prove_ms,
            verify_ms,
            valid,
            reason,
        });
    }
    Ok(checks)
}

/// A proof of the first account with its balance raised by one wei must be rejected.
fn tamper(genesis: &Genesis, state: &mut EthState, root: &H256) -> Result<TamperCheck> {
    let address = *genesis.alloc.keys().next().context("mainnet alloc is empty")?;
    let mut proof = state.prove(&address, &[]).context("cannot build a proof")?;
    proof.account.balance = bump(proof.account.balance);
    let verdict = proof.verify(root);
    Ok(TamperCheck {
        address: format!("0x{}", hex::encode(address)),
        change: "balance + 1 wei",
        rejected: verdict.is_err(),
        reason: verdict.err().map(|e| e.to_string()),
    })
}

/// `v + 1` (wrapping to zero at 2^256, which still differs from `v`).
fn bump(v: U256) -> U256 {
    v.wrapping_add(U256::from(1u64))
}

/// The root of every genesis file but mainnet, against its known root if there is one.
fn other_roots(genesis_dir: &Path) -> Result<Vec<RootCheck>> {
    let entries = std::fs::read_dir(genesis_dir)
        .with_context(|| format!("cannot list {}", genesis_dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.with_context(|| format!("cannot list {}", genesis_dir.display()))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(".json") && name != "mainnet.json" {
            files.push((name, path));
        }
    }
    files.sort();
    let mut checks = Vec::with_capacity(files.len());
    for (name, path) in files {
        let start = Instant::now();
        let genesis = read_genesis(&path)?;
        let root = genesis_state_root(&genesis).to_string();
        let expected = known_root(&name);
        checks.push(RootCheck {
            file: name,
            accounts: genesis.alloc.len(),
            matches: expected.map(|e| e == root),
            root,
            root_expected: expected.map(str::to_string),
            ms: start.elapsed().as_secs_f64() * 1e3,
        });
    }
    Ok(checks)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "MISMATCH"
    }
}

fn print_report(r: &DemoReport) -> Result<()> {
    let m = &r.mainnet;
    outln!("Arbor demo (testdata: {})", r.testdata)?;
    outln!()?;
    outln!("mainnet genesis: {} accounts, parsed in {:.1} ms", m.accounts, m.parse_ms)?;
    outln!("  streaming builder  {}  {:>7.1} ms  {}", m.root, m.root_ms, verdict(m.root_matches))?;
    outln!(
        "  mutable trie       {}  {:>7.1} ms  {}",
        m.state_root,
        m.state_build_ms,
        verdict(m.state_root_matches)
    )?;
    outln!("  known root         {}", m.root_expected)?;
    outln!()?;
    outln!("eth_getProof proofs against the mainnet root (built, sent through JSON, verified):")?;
    for p in &r.proofs {
        let status = match &p.reason {
            None => "valid".to_string(),
            Some(why) => format!("INVALID: {why}"),
        };
        outln!(
            "  {}  {:<9}  {} nodes  {:>5} bytes  prove {:.3} ms  verify {:.3} ms  {status}",
            p.address,
            p.kind,
            p.nodes,
            p.bytes,
            p.prove_ms,
            p.verify_ms
        )?;
    }
    let t = &r.tampered;
    match &t.reason {
        Some(why) => outln!("  {}  tampered ({}): rejected: {why}", t.address, t.change)?,
        None => outln!("  {}  tampered ({}): ACCEPTED (bug)", t.address, t.change)?,
    }
    outln!()?;
    outln!("other genesis files:")?;
    for g in &r.genesis_roots {
        let status = g.matches.map_or("no known root", verdict);
        outln!(
            "  {:<13} {:>5} accounts  {}  {:>6.1} ms  {status}",
            g.file,
            g.accounts,
            g.root,
            g.ms
        )?;
    }
    print_store(&r.store)?;
    print_chain(&r.chain)?;
    outln!()?;
    if r.failures == 0 {
        outln!("all {} checks passed", r.checks)
    } else {
        outln!("{} of {} checks FAILED", r.failures, r.checks)
    }
}

fn print_store(s: &StoreDemo) -> Result<()> {
    let ok = |b: bool| if b { "ok" } else { "FAILED" };
    outln!()?;
    outln!("database (temporary directory, removed at the end):")?;
    outln!(
        "  init from mainnet genesis  {}  {:>7.1} ms  {}",
        s.genesis_root,
        s.init_ms,
        verdict(s.genesis_root_matches)
    )?;
    outln!("  verify from flat state     {}", ok(s.genesis_verified))?;
    outln!(
        "  {} blocks x {} account writes in {:.1} ms, head {}; verify {}",
        s.blocks,
        s.updates_per_block,
        s.load_ms,
        s.loaded_root,
        ok(s.loaded_verified)
    )?;
    outln!(
        "  revert {} blocks in {:.1} ms: root {} equals block {}'s: {}; verify {}",
        s.reverted,
        s.revert_ms,
        s.reverted_root,
        s.blocks - s.reverted,
        ok(s.revert_matches),
        ok(s.reverted_verified)
    )?;
    outln!(
        "  checkpoint: {} chunks in {:.1} ms; restored from them in {:.1} ms: root {} {}",
        s.checkpoint_chunks,
        s.checkpoint_ms,
        s.restore_ms,
        s.restored_root,
        verdict(s.restored_matches)
    )?;
    outln!("  (3 verifies: {:.1} ms in all)", s.verify_ms)
}

fn print_chain(c: &crate::demo_chain::ChainDemo) -> Result<()> {
    let ok = |b: bool| if b { "ok" } else { "FAILED" };
    outln!()?;
    outln!("transfer blocks with proofs of validity (in-memory chain of 2,000 accounts):")?;
    for b in &c.blocks {
        outln!(
            "  {:<30} {:>3}/{:<3} txs ({}), witness {} nodes {:>7} bytes, built {:.1} ms, \
             verified statelessly in {:.1} ms: {}",
            b.label,
            b.included,
            b.offered,
            b.stop,
            b.witness_nodes,
            b.proof_size,
            b.build_ms,
            b.verify_ms,
            b.reason.as_deref().unwrap_or(ok(b.verified))
        )?;
    }
    outln!(
        "  witness with one node dropped: {} ({})",
        ok(c.dropped_node_refused),
        c.dropped_node_reason
    )?;
    outln!("  PoV limit respected and filled: {}", ok(c.limit_respected))?;
    let b = &c.block_stm;
    outln!(
        "  block 1 by Block-STM on {} workers ({} txs, {} executions, {} validations, {:.1} ms): \
         same post-state root: {}",
        b.workers,
        b.transactions,
        b.executions,
        b.validations,
        b.ms,
        ok(b.same_root)
    )
}
