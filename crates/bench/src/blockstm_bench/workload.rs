//! The transactions and states of `arbor bench blockstm`'s Cosmos SDK workloads (see
//! [`crate::blockstm_bench`]): Cosmos-style transactions with an optional signature check,
//! a nonce bump and a transfer (plus a scan or a fee, per workload), over `acc` and `bank`
//! stores of 8-byte big-endian values.

use std::sync::{Arc, OnceLock};

use exec::{Stop, Transaction, View};
use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// What a transaction does besides its transfer.
pub(crate) enum Kind {
    Transfer,
    Iterate { reverse: bool },
    HotFee,
}

/// A transaction's signature check: key, signature and signed message.
pub(crate) struct Sig {
    pub(crate) key: VerifyingKey,
    pub(crate) sig: Signature,
    pub(crate) msg: Vec<u8>,
}

/// One Cosmos-style transaction.
pub(crate) struct CosmosTx {
    from: u32,
    to: u32,
    kind: Kind,
    sig: Option<Arc<Sig>>,
    verified: OnceLock<bool>,
}

#[derive(Debug, Clone, PartialEq)]
/// A transaction's outcome.
pub(crate) enum Receipt {
    Ok,
    BadSignature,
}

const BALANCE: u64 = 1_000_000_000_000;
const FEE: u64 = 10;

// Account names are `account{i:05}`; each key is formatted in one allocation (formatting
// the name first and then the key took two, 6 of the ~53 allocations of an `iterate`
// transaction).

fn nonce_key(i: u32) -> Vec<u8> {
    format!("acc/nonceaccount{i:05}").into_bytes()
}

fn balance_key(i: u32) -> Vec<u8> {
    format!("bank/account{i:05}").into_bytes()
}

fn read_u64(v: &mut dyn View, key: &[u8]) -> Result<u64, Stop> {
    Ok(v.get(key)?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map_or(0, u64::from_be_bytes))
}

fn noop(v: &mut dyn View, who: u32) -> Result<(), Stop> {
    let k = nonce_key(who);
    let n = read_u64(v, &k)?;
    v.set(&k, (n + 1).to_be_bytes().to_vec());
    read_u64(v, &k)?;
    Ok(())
}

fn transfer(v: &mut dyn View, from: u32, to: u32, amount: u64) -> Result<(), Stop> {
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

    fn execute(&self, v: &mut dyn View) -> Result<Receipt, Stop> {
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
                v.add_delta(b"bank/feecollector", FEE as i64)?;
                v.add_delta(b"acc/blocktxcount", 1)?;
            }
        }
        Ok(Receipt::Ok)
    }
}

/// A workload: its name and its transactions' (from, to, kind).
pub(crate) struct Workload {
    pub(crate) name: &'static str,
    pub(crate) accounts: u32,
    txs: Vec<(u32, u32, Kind)>,
}

/// The Cosmos SDK workloads of `n` transactions (seed 4).
pub(crate) fn workloads(n: usize) -> Vec<Workload> {
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

/// The initial state of `accounts` accounts: nonce 0, balance 10^12 each.
pub(crate) fn genesis(accounts: u32) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    (0..accounts)
        .flat_map(|i| {
            [
                (nonce_key(i), 0u64.to_be_bytes().to_vec()),
                (balance_key(i), BALANCE.to_be_bytes().to_vec()),
            ]
        })
        .collect()
}

/// A workload's transactions with their signatures.
pub(crate) fn make_txs(w: &Workload, sigs: &[Option<Arc<Sig>>]) -> Vec<CosmosTx> {
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
