//! `arbor bench blockstm`: Block-STM against the sequential executor on the Cosmos SDK
//! benchmark's workloads (seed 4: `bench_test.go` / `mock_block.go`) and one of ours.
//!
//! State: an in-memory ordered map holding the stores `acc`, `bank` and 26 unused stores
//! `"0"`…`"25"` (keys are `store ‖ "/" ‖ key`); accounts `account00000`…; nonce keys
//! `acc/nonce<name>` and balance keys `bank/<name>`, 8-byte big-endian values. Every
//! account starts with nonce 0 and a balance of 10^12 (the Go mock starts from empty stores
//! and skips the debit when funds are short; funding keeps every transfer a real one).
//!
//! Each transaction first verifies a secp256k1 ECDSA signature (SHA-256) over its own
//! 1,024-byte random message, signed before timing; only the first incarnation verifies
//! (a per-transaction cache). Then: read nonce, write nonce + 1, read it back; a transfer
//! also reads both balances, debits the sender if funds suffice, credits the receiver and
//! writes both. Workloads: `random-10000/100`, `no-conflict-10000`, `worst-case-10000`,
//! `iterate-10000/100` (each transaction also scans the `acc` store from its sender's
//! nonce key, forward or in reverse, takes the sixth key and, if present, makes an extra
//! transfer from that account), and `hot-fee-10000` (no-conflict transfers that also pay a
//! fee into one collector and bump a block counter, both through deltas). `--no-sig`
//! drops the signature check. The chain-runtime workload on RocksDB is not in this report
//! yet.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::{ensure, Result};
use exec::{execute_parallel, execute_sequential, Blocked, Transaction, View};
use k256::ecdsa::signature::{Signer, Verifier};
use k256::ecdsa::{Signature, SigningKey, VerifyingKey};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::machine::MachineInfo;
use crate::timing::{median_sorted, ratio, sorted};

/// Options of `arbor bench blockstm`.
#[derive(Debug, Clone)]
pub struct BlockStmOpts {
    /// Worker counts to run.
    pub workers: Vec<usize>,
    /// Skip the signature check.
    pub no_sig: bool,
    /// Timed runs per workload and worker count.
    pub runs: usize,
    /// Transactions per block.
    pub txs: usize,
}

impl Default for BlockStmOpts {
    fn default() -> Self {
        Self { workers: vec![1, 2, 4, 8], no_sig: false, runs: 5, txs: 10_000 }
    }
}

/// Reads the allocator's running totals (allocations, bytes); the binary installs it.
pub type AllocCounter = fn() -> (u64, u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Transfer,
    Iterate { reverse: bool },
    HotFee,
}

struct Sig {
    key: VerifyingKey,
    sig: Signature,
    msg: Vec<u8>,
}

/// One Cosmos-style transaction.
struct CosmosTx {
    from: u32,
    to: u32,
    kind: Kind,
    sig: Option<Arc<Sig>>,
    verified: OnceLock<bool>,
}

#[derive(Debug, Clone, PartialEq)]
enum Receipt {
    Ok,
    BadSignature,
}

const BALANCE: u64 = 1_000_000_000_000;
const FEE: u64 = 10;

fn name(i: u32) -> String {
    format!("account{i:05}")
}

fn nonce_key(i: u32) -> Vec<u8> {
    format!("acc/nonce{}", name(i)).into_bytes()
}

fn balance_key(i: u32) -> Vec<u8> {
    format!("bank/{}", name(i)).into_bytes()
}

fn read_u64(v: &mut dyn View, key: &[u8]) -> Result<u64, Blocked> {
    Ok(v.get(key)?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map_or(0, u64::from_be_bytes))
}

fn noop(v: &mut dyn View, who: u32) -> Result<(), Blocked> {
    let k = nonce_key(who);
    let n = read_u64(v, &k)?;
    v.set(&k, (n + 1).to_be_bytes().to_vec());
    read_u64(v, &k)?;
    Ok(())
}

fn transfer(v: &mut dyn View, from: u32, to: u32, amount: u64) -> Result<(), Blocked> {
    let (fk, tk) = (balance_key(from), balance_key(to));
    let fb = read_u64(v, &fk)?;
    let tb = read_u64(v, &tk)?;
    if fb >= amount {
        v.set(&fk, (fb - amount).to_be_bytes().to_vec());
        // Read again: the receiver may be the sender.
        let tb = if from == to { fb - amount } else { tb };
        v.set(&tk, (tb + amount).to_be_bytes().to_vec());
    }
    Ok(())
}

impl Transaction for CosmosTx {
    type Output = Receipt;

    fn execute(&self, v: &mut dyn View) -> Result<Receipt, Blocked> {
        if let Some(s) = &self.sig {
            let ok = *self.verified.get_or_init(|| s.key.verify(&s.msg, &s.sig).is_ok());
            if !ok {
                return Ok(Receipt::BadSignature);
            }
        }
        noop(v, self.from)?;
        transfer(v, self.from, self.to, 1)?;
        match self.kind {
            Kind::Transfer => {}
            Kind::Iterate { reverse } => {
                let entries = v.scan(&nonce_key(self.from), reverse, 6)?;
                let prefix = b"acc/nonce";
                if let Some((k, _)) = entries.get(5).filter(|(k, _)| k.starts_with(prefix)) {
                    let other = std::str::from_utf8(&k[prefix.len() + 7..])
                        .ok()
                        .and_then(|s| s.parse::<u32>().ok());
                    if let Some(other) = other {
                        transfer(v, other, self.to, 1)?;
                    }
                }
            }
            Kind::HotFee => {
                let k = balance_key(self.from);
                let b = read_u64(v, &k)?;
                v.set(&k, b.saturating_sub(FEE).to_be_bytes().to_vec());
                v.add_delta(b"bank/feecollector", FEE as i64);
                v.add_delta(b"acc/blocktxcount", 1);
            }
        }
        Ok(Receipt::Ok)
    }
}

/// A workload: its name and its transactions' (from, to, kind).
struct Workload {
    name: &'static str,
    accounts: u32,
    txs: Vec<(u32, u32, Kind)>,
}

fn workloads(n: usize) -> Vec<Workload> {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let random = |rng: &mut ChaCha8Rng, kind: &dyn Fn(&mut ChaCha8Rng) -> Kind| {
        (0..n).map(|_| (rng.gen_range(0..100), rng.gen_range(0..100), kind(rng))).collect()
    };
    let n32 = n as u32;
    vec![
        Workload {
            name: "random-10000/100",
            accounts: 100,
            txs: random(&mut rng, &|_| Kind::Transfer),
        },
        Workload {
            name: "no-conflict-10000",
            accounts: n32,
            txs: (0..n32).map(|i| (i, i, Kind::Transfer)).collect(),
        },
        Workload {
            name: "worst-case-10000",
            accounts: 1,
            txs: (0..n).map(|_| (0, 0, Kind::Transfer)).collect(),
        },
        Workload {
            name: "iterate-10000/100",
            accounts: 100,
            txs: random(&mut rng, &|r| Kind::Iterate { reverse: r.gen_bool(0.5) }),
        },
        Workload {
            name: "hot-fee-10000",
            accounts: n32,
            txs: (0..n32).map(|i| (i, i, Kind::HotFee)).collect(),
        },
    ]
}

fn genesis(accounts: u32) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    (0..accounts)
        .flat_map(|i| {
            [
                (nonce_key(i), 0u64.to_be_bytes().to_vec()),
                (balance_key(i), BALANCE.to_be_bytes().to_vec()),
            ]
        })
        .collect()
}

/// One workload at one worker count.
#[derive(Debug, Clone, Serialize)]
pub struct BlockStmRow {
    /// Workload.
    pub workload: &'static str,
    /// Workers (1 = the sequential fallback).
    pub workers: usize,
    /// Median block time, ms.
    pub median_ms: f64,
    /// Transactions per second at the median.
    pub tps: f64,
    /// Sequential median / this median.
    pub speedup: f64,
    /// Allocations per block (median run).
    pub allocations: u64,
    /// Bytes allocated per block (median run).
    pub bytes: u64,
    /// Re-executions per transaction.
    pub reexecutions_per_tx: f64,
    /// Validations per transaction.
    pub validations_per_tx: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct BlockStmReport {
    /// The machine.
    pub machine: MachineInfo,
    /// Signatures verified.
    pub signatures: bool,
    /// Transactions per block.
    pub txs: usize,
    /// Timed runs per row.
    pub runs: usize,
    /// Sequential executor median per workload, ms.
    pub sequential_ms: Vec<(&'static str, f64)>,
    /// Rows.
    pub rows: Vec<BlockStmRow>,
}

fn make_txs(w: &Workload, sigs: &[Option<Arc<Sig>>]) -> Vec<CosmosTx> {
    w.txs
        .iter()
        .zip(sigs)
        .map(|(&(from, to, kind), sig)| CosmosTx {
            from,
            to,
            kind,
            sig: sig.clone(),
            verified: OnceLock::new(),
        })
        .collect()
}

/// Run the benchmark; `allocs` reads the binary's allocation counters.
pub fn blockstm_bench(
    opts: &BlockStmOpts,
    allocs: AllocCounter,
    progress: bool,
) -> Result<BlockStmReport> {
    ensure!(opts.runs >= 1, "--runs must be at least 1");
    ensure!(opts.txs >= 1, "the block needs transactions");
    let loads = workloads(opts.txs);
    let total = (loads.len() * (opts.workers.len() + 1) * opts.runs) as u64;
    let pb = crate::progress::bar(progress, total, "executing blocks");
    let mut rng = ChaCha8Rng::seed_from_u64(44);
    // One key, message and signature per transaction slot, made before any timing.
    let sigs: Vec<Option<Arc<Sig>>> = (0..opts.txs)
        .map(|_| {
            (!opts.no_sig).then(|| {
                let sk = SigningKey::random(&mut rng);
                let mut msg = vec![0u8; 1024];
                rng.fill_bytes(&mut msg);
                let sig: Signature = sk.sign(&msg);
                Arc::new(Sig { key: *sk.verifying_key(), sig, msg })
            })
        })
        .collect();
    let mut rows = Vec::new();
    let mut sequential_ms = Vec::new();
    for w in &loads {
        let storage = genesis(w.accounts);
        let reference = execute_sequential(&make_txs(w, &sigs), &storage);
        let mut seq_runs = Vec::new();
        for _ in 0..opts.runs {
            let txs = make_txs(w, &sigs);
            let start = Instant::now();
            let out = execute_sequential(&txs, &storage);
            seq_runs.push(start.elapsed().as_secs_f64() * 1e3);
            ensure!(out.writes == reference.writes, "{}: sequential runs differ", w.name);
            pb.inc(1);
        }
        let seq = median_sorted(&sorted(&seq_runs));
        sequential_ms.push((w.name, seq));
        for &workers in &opts.workers {
            let mut samples = Vec::new();
            for _ in 0..opts.runs {
                let txs = make_txs(w, &sigs);
                let (a0, b0) = allocs();
                let start = Instant::now();
                let out = execute_parallel(&txs, &storage, workers);
                let ms = start.elapsed().as_secs_f64() * 1e3;
                let (a1, b1) = allocs();
                ensure!(
                    out.writes == reference.writes && out.outputs == reference.outputs,
                    "{} with {workers} workers differs from the sequential result",
                    w.name
                );
                samples.push((ms, a1 - a0, b1 - b0, out.counters));
                pb.inc(1);
            }
            samples.sort_by(|x, y| x.0.total_cmp(&y.0));
            let (ms, a, b, c) = samples[samples.len() / 2];
            let n = opts.txs as f64;
            rows.push(BlockStmRow {
                workload: w.name,
                workers,
                median_ms: ms,
                tps: ratio(n, ms / 1e3),
                speedup: ratio(seq, ms),
                allocations: a,
                bytes: b,
                reexecutions_per_tx: c.reexecutions as f64 / n,
                validations_per_tx: c.validations as f64 / n,
            });
        }
    }
    pb.finish_and_clear();
    Ok(BlockStmReport {
        machine: MachineInfo::detect(),
        signatures: !opts.no_sig,
        txs: opts.txs,
        runs: opts.runs,
        sequential_ms,
        rows,
    })
}

impl BlockStmReport {
    /// The human-readable table.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "arbor bench blockstm: {} transactions per block, signatures {}, median of {} runs ({} cores)",
            self.txs,
            if self.signatures { "verified" } else { "off (--no-sig)" },
            self.runs,
            self.machine.logical_cores
        );
        let _ = writeln!(
            out,
            "{:<20} {:>7} {:>10} {:>10} {:>8} {:>10} {:>12} {:>8} {:>8}",
            "workload",
            "workers",
            "ms/block",
            "tx/s",
            "speedup",
            "allocs",
            "bytes",
            "reexec",
            "valid"
        );
        for (name, seq) in &self.sequential_ms {
            let _ = writeln!(
                out,
                "{:<20} {:>7} {:>10.1} {:>10.0} {:>8} {:>10} {:>12} {:>8} {:>8}",
                name,
                "seq",
                seq,
                ratio(self.txs as f64, seq / 1e3),
                "1.00",
                "",
                "",
                "",
                ""
            );
            for r in self.rows.iter().filter(|r| r.workload == *name) {
                let _ = writeln!(
                    out,
                    "{:<20} {:>7} {:>10.1} {:>10.0} {:>8.2} {:>10} {:>12} {:>8.3} {:>8.3}",
                    "",
                    r.workers,
                    r.median_ms,
                    r.tps,
                    r.speedup,
                    r.allocations,
                    r.bytes,
                    r.reexecutions_per_tx,
                    r.validations_per_tx
                );
            }
        }
        let _ = writeln!(
            out,
            "(1 worker runs the sequential fallback; chain-transfers on RocksDB: not yet)"
        );
        out
    }
}
