//! The bounds of every numeric command-line flag, and the clap parsers that enforce them.
//!
//! A value outside its bounds is a usage error (exit code 2, one `error: …` line), caught
//! while parsing, before any work starts. Counts of work (keys, blocks, updates, runs,
//! workers, sizes, …) are at least 1: zero work is a mistake, never a silent success.
//! Maxima are what this machine class can do without overflowing an integer or an
//! allocation (the benchmark workloads hold whole inputs in memory; see each constant),
//! while keeping every run the README and the issues ask for. Seeds take any `u64`.
//! Each flag's `--help` states its bounds; `tests/cli/limits.rs` checks that the text and the
//! parser agree.

use clap::builder::RangedU64ValueParser;

/// Initial keys of a database workload (`load`, `bench store`): 100 M keys of 132 bytes
/// are about 13 GB per database on disk; issue 12 asks for 10 M.
pub(crate) const STORE_KEYS_MAX: u64 = 100_000_000;
/// Blocks of a database workload (`load`, `bench store`).
pub(crate) const BLOCKS_MAX: u64 = 1_000_000;
/// Genesis accounts of `gen-chain` and `bench import`.
pub(crate) const CHAIN_ACCOUNTS_MAX: u64 = 10_000_000;
/// Blocks of `gen-chain` and `bench import`.
pub(crate) const CHAIN_BLOCKS_MAX: u64 = 100_000;
/// Transfers per block of `gen-chain` and `bench import`.
pub(crate) const CHAIN_TRANSFERS_MAX: u64 = 100_000;
/// Genesis accounts of `gen-chain --evm` and `bench import --evm`: the generator holds the
/// state in memory (an account, its token balance and the genesis file's text, about
/// 1 KB each).
pub(crate) const EVM_CHAIN_ACCOUNTS_MAX: u64 = 2_000_000;
/// Transactions per block of `gen-chain --evm` and `bench import --evm` (each up to
/// 300,000 gas: a block's gas limit stays near 6 billion, far below the header's 2^63).
pub(crate) const EVM_CHAIN_TXS_MAX: u64 = 10_000;
/// Operations per block of a database workload: a block's change set is held in memory
/// (about 250 bytes per operation).
pub(crate) const UPDATES_PER_BLOCK_MAX: u64 = 1_000_000;
/// The largest `--block` of `get` and `prove` (`i64::MAX`): above any head, so that such a
/// block is refused as outside the window, while every number stays exact for JSON
/// readers that hold integers as signed 64-bit.
pub(crate) const BLOCK_MAX: u64 = i64::MAX as u64;
/// Blocks `revert` undoes (the store keeps `layers.history_depth` blocks, 128 by default).
pub(crate) const REVERT_MAX: u64 = 1_000_000;

/// Keys of `bench trie`'s full-root input: held in memory, about 140 bytes per key.
pub(crate) const TRIE_KEYS_MAX: usize = 50_000_000;
/// Keys of `bench trie`'s incremental trie: a mutable in-memory trie, about 500 bytes per key.
pub(crate) const INCREMENTAL_KEYS_MAX: usize = 10_000_000;
/// Incremental rounds of `bench trie`.
pub(crate) const ROUNDS_MAX: usize = 1_000_000;
/// Proofs of `bench trie`: each is kept until verified, a few KB each.
pub(crate) const PROOFS_MAX: usize = 1_000_000;
/// Timed runs of any benchmark.
pub(crate) const RUNS_MAX: usize = 1_000;

/// Funded accounts of `bench pov` (bulk-loaded into RocksDB).
pub(crate) const POV_ACCOUNTS_MAX: u64 = 10_000_000;
/// Block sizes of `bench pov`: the builder's weight limit holds 10,000 transfers.
pub(crate) const BLOCK_TXS_MAX: usize = 10_000;
/// Entries of a comma-separated list flag (`--sizes`, `--workers`).
pub(crate) const LIST_LEN_MAX: usize = 16;
/// Worker threads of `bench blockstm`.
pub(crate) const WORKERS_MAX: usize = 256;
/// Transactions per block of `bench blockstm` (every workload is held in memory).
pub(crate) const BLOCKSTM_TXS_MAX: usize = 1_000_000;

/// Accounts of `bench evm`'s genesis (each also holds a token balance and a slot of the
/// storage-heavy contract; revm's in-memory engine holds them all).
pub(crate) const EVM_ACCOUNTS_MAX: u64 = 10_000_000;
/// Blocks per workload of `bench evm` (signed before the run and kept in files: about
/// 190 KB per block of value transfers at 36M gas).
pub(crate) const EVM_BLOCKS_MAX: u64 = 10_000;
/// `bench evm --gas-limit` at least: a block holds one storage-heavy call (175,000 gas).
pub(crate) const EVM_GAS_LIMIT_MIN: u64 = 1_000_000;
/// `bench evm --gas-limit` at most (47,619 value transfers a block).
pub(crate) const EVM_GAS_LIMIT_MAX: u64 = 1_000_000_000;

/// Funded accounts of `build-block`'s in-memory genesis.
pub(crate) const BUILD_ACCOUNTS_MAX: u64 = 1_000_000;
/// Transfers offered to `build-block` (a block takes at most 10,000 of them).
pub(crate) const BUILD_TRANSFERS_MAX: u64 = 1_000_000;
/// `build-block --pov-limit` in bytes (the default is 5 MiB); the least accepted limit
/// depends on the genesis and is checked when the block is built.
pub(crate) const POV_LIMIT_MAX: usize = 1 << 30;

/// A `u64` flag in `min..=max`.
pub(crate) fn u64_in(min: u64, max: u64) -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(min..=max)
}

/// A byte-size flag in `min..=max`: a number of bytes, or one with a unit (`4MiB`,
/// `1 GiB`, `500kB`; see `store::parse_size`).
pub(crate) fn size_in(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |text: &str| {
        let n = store::parse_size(text).ok_or_else(|| {
            format!("{text:?} is not a size (bytes, or a number with a unit such as 4MiB)")
        })?;
        if (min..=max).contains(&n) {
            Ok(n)
        } else {
            Err(format!("{n} bytes is not in {min}..={max}"))
        }
    }
}

/// A `usize` flag in `min..=max`.
pub(crate) fn usize_in(min: usize, max: usize) -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(widen(min)..=widen(max))
}

fn widen(n: usize) -> u64 {
    // usize is at most 64 bits on every target Rust supports.
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A comma-separated list of counts (`1,2,4`): a single flag value, so that its length
/// is bounded whatever the shell passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Counts(pub(crate) Vec<usize>);

/// A [`Counts`] flag: 1 to `len_max` entries, each in `min..=max`.
pub(crate) fn counts(
    min: usize,
    max: usize,
    len_max: usize,
) -> impl Fn(&str) -> Result<Counts, String> + Clone + Send + Sync + 'static {
    move |text| check_counts(text, min, max, len_max).map(Counts)
}

fn check_counts(text: &str, min: usize, max: usize, len_max: usize) -> Result<Vec<usize>, String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() > len_max {
        return Err(format!("{} entries, at most {len_max} are allowed", parts.len()));
    }
    parts
        .iter()
        .map(|p| {
            if p.is_empty() {
                return Err("empty entry in the comma-separated list".to_string());
            }
            match p.parse::<usize>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                Ok(n) => Err(format!("{n} is not in {min}..={max}")),
                Err(_) => Err(format!("{p:?} is not a whole number in {min}..={max}")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bound_each_entry_and_the_length() {
        let p = |s: &str| check_counts(s, 1, 10, 3);
        assert_eq!(p("1,2, 10"), Ok(vec![1, 2, 10]));
        assert!(p("0,1").unwrap_err().contains("0 is not in 1..=10"));
        assert!(p("11").unwrap_err().contains("11 is not in 1..=10"));
        assert!(p("1,2,3,4").unwrap_err().contains("at most 3"));
        assert!(p("1,,2").unwrap_err().contains("empty entry"));
        assert!(p("18446744073709551616").unwrap_err().contains("not a whole number"));
        assert!(p("-1").unwrap_err().contains("not a whole number"));
    }
}
