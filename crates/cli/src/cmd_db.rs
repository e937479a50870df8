//! Database commands: `arbor init`, `verify`, `repair`, `config`, `get`, `revert`,
//! `stats` (the opening rules they share are in [`crate::db_args`]). Every store error
//! becomes one `error: …` line.
//!
//! `get` and `prove --db` read at the head, or with `--block N` at any block of the recent
//! window (head - `history.recent_blocks` to the head, see [`at_block`]); a block outside
//! it is a usage error naming the window.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use state::{TrieId, H256};
use store::{AtError, BlockView, RevertError, StateDb, StoreStats};
use trie::LayoutName;

use crate::cmd_root::CHILD_STORAGE_DEFAULT_PREFIX;
use crate::db_args::{open_existing, open_for_load, open_reading, DbArgs};
use crate::genesis_load::{genesis_label, load_genesis};
use crate::limits;

/// Arguments of `arbor init`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("state").required(true).args(["genesis", "chain_spec"])))]
pub(crate) struct InitArgs {
    #[command(flatten)]
    db: DbArgs,
    /// The genesis allocation (a full genesis file or a bare `alloc` object); Ethereum
    /// layout.
    #[arg(long, value_name = "FILE")]
    genesis: Option<PathBuf>,
    /// A raw Substrate chain spec: its genesis storage (`genesis.raw.top` or
    /// `genesis.top`) becomes the main trie, each non-empty child trie of
    /// `childrenDefault` a storage trie named by the Blake2-256 hash of its key, with its
    /// root under `:child_storage:default:<key>` in the main trie. Layout substrate-v0
    /// unless --layout says otherwise.
    #[arg(long, value_name = "FILE")]
    chain_spec: Option<PathBuf>,
    /// Trie layout of the new database, recorded in it (ethereum, substrate-v0,
    /// substrate-v1) [default: ethereum; substrate-v0 with --chain-spec].
    #[arg(long, value_name = "LAYOUT", value_parser = crate::layout_arg::parser())]
    layout: Option<LayoutName>,
    /// Print {"block", "root", "accounts"} ("entries" with --chain-spec) instead of the
    /// root alone.
    #[arg(long)]
    json: bool,
}

/// Arguments of `arbor verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Also check every stored node against the trie recomputed from flat state.
    #[arg(long)]
    deep: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `arbor config`.
#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    /// What to print: `defaults`, the commented default configuration.
    #[arg(value_name = "WHAT", value_parser = ["defaults"])]
    what: String,
    /// Print the defaults as JSON (sizes in bytes) instead of the commented TOML.
    #[arg(long)]
    json: bool,
}

/// Run `arbor config defaults`.
pub(crate) fn config(args: &ConfigArgs) -> Result<ExitCode> {
    debug_assert_eq!(args.what, "defaults");
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&store::StoreConfig::default())?)?;
    } else {
        out!("{}", store::DEFAULT_CONFIG_TOML)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `arbor repair`.
#[derive(Debug, Args)]
pub(crate) struct RepairArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Print {"block", "root", "nodes_rebuilt"}.
    #[arg(long)]
    json: bool,
}

/// Arguments of `arbor get`.
#[derive(Debug, Args)]
pub(crate) struct GetArgs {
    #[command(flatten)]
    db: DbArgs,
    /// The main-trie key, in hex (0x optional).
    #[arg(value_name = "KEY", value_parser = crate::input::parse_key)]
    key: crate::input::HexKey,
    /// Read at block N instead of the head: any block from head - `history.recent_blocks`
    /// (128 by default) to the head; 0 to 9,223,372,036,854,775,807.
    #[arg(long, value_name = "N", value_parser = limits::u64_in(0, limits::BLOCK_MAX))]
    block: Option<u64>,
    /// Print {"block", "root", "key", "value"} (value null when absent) of the block read.
    #[arg(long)]
    json: bool,
}

/// Arguments of `arbor revert`.
#[derive(Debug, Args)]
pub(crate) struct RevertArgs {
    #[command(flatten)]
    db: DbArgs,
    /// How many blocks to undo; 1 to 1,000,000 (and at most the head's number; the store
    /// keeps `layers.history_depth` blocks of history, 128 by default).
    #[arg(value_name = "N", value_parser = limits::u64_in(1, limits::REVERT_MAX))]
    blocks: u64,
    /// Print {"block", "root", "reverted", "stopped"}: the new head, the blocks undone, and
    /// whether a signal stopped the revert early.
    #[arg(long)]
    json: bool,
}

/// Arguments of `arbor stats`.
#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Print the counters as JSON.
    #[arg(long)]
    json: bool,
}

/// A trie id as people read it.
fn trie_name(t: &TrieId) -> String {
    match t {
        TrieId::Main => "main trie".to_string(),
        TrieId::Storage(h) => format!("storage trie {h}"),
    }
}

/// Run `arbor init`.
pub(crate) fn init(args: &InitArgs) -> Result<ExitCode> {
    match (&args.genesis, &args.chain_spec) {
        (Some(genesis), None) => init_genesis(args, genesis),
        (None, Some(spec)) => init_chain_spec(args, spec),
        // clap's "state" group makes exactly one of them present.
        _ => bail!("give exactly one of --genesis FILE or --chain-spec FILE"),
    }
}

/// Refuse a database that holds anything but an unfinished load (which the same input
/// finishes, and the store refuses for another one: it checks the label).
fn check_new(db: &store::StateDb, dir: &Path) -> Result<()> {
    if db.unfinished_bulk_load().is_none() && !db.is_empty()? {
        bail!(
            "the database at {} is not empty (head block {}, root {}); init needs a new directory",
            dir.display(),
            db.head_number(),
            db.head_root()
        );
    }
    Ok(())
}

/// Print the new database's root (and, with `--json`, what it holds).
fn print_init(json: bool, root: H256, count: (&str, usize), layout: LayoutName) -> Result<()> {
    if json {
        let v = serde_json::json!({
            "block": 0,
            "root": root.to_string(),
            count.0: count.1,
            "layout": layout.as_str(),
        });
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        outln!("{root}")?;
    }
    Ok(())
}

/// `arbor init --genesis`: an Ethereum genesis allocation.
fn init_genesis(args: &InitArgs, path: &Path) -> Result<ExitCode> {
    if args.layout.is_some_and(|l| l != LayoutName::Ethereum) {
        return Err(crate::usage("--genesis takes an Ethereum genesis: --layout ethereum only"));
    }
    // Parse first: a bad genesis must not leave a new database directory behind.
    let text = crate::input::read_text(path)?;
    let genesis = eth::Genesis::from_json_str(&text)
        .map_err(|e| crate::input::file_usage(path, &anyhow::Error::new(e)))?;
    // A post-merge chain's genesis header is block 0's record, as `import --genesis`
    // stores it, so that an RLP import can continue this database.
    let record = crate::cmd_eth_import::genesis_record(&text);
    let entries = eth::genesis_entries(&genesis);
    let label = genesis_label(&entries.state_root);
    let mut db = open_for_load(&args.db, Some(LayoutName::Ethereum), &label)?;
    check_new(&db, &args.db.db)?;
    let pb = crate::progress::counter(!args.json, Some(0), "loading genesis", "entries");
    let root = load_genesis(&mut db, &genesis, entries, record.as_deref(), &pb)
        .with_context(|| format!("cannot initialise {}", args.db.db.display()))?;
    pb.finish_and_clear();
    db.close().context("cannot close the database")?;
    print_init(args.json, root, ("accounts", genesis.alloc.len()), LayoutName::Ethereum)?;
    Ok(ExitCode::SUCCESS)
}

/// `arbor init --chain-spec`: a Substrate chain's genesis storage.
fn init_chain_spec(args: &InitArgs, path: &Path) -> Result<ExitCode> {
    let layout = args.layout.unwrap_or(LayoutName::SubstrateV0);
    if layout == LayoutName::Ethereum {
        return Err(crate::usage("--chain-spec takes a Substrate layout: substrate-v0 or -v1"));
    }
    // Parse and check first: a bad spec must not leave a new database directory behind.
    let spec = crate::cmd_root::read_chain_spec(path, layout)?;
    let name = crate::input::display_name(path);
    let tries = std::iter::once((TrieId::Main, &spec.top))
        .chain(spec.children.iter().map(|(k, e)| (TrieId::Storage(trie::blake2_256(k)), e)));
    let entries: Vec<(TrieId, &[u8], &[u8])> =
        tries.flat_map(|(t, e)| e.iter().map(move |(k, v)| (t, &k[..], &v[..]))).collect();
    if let Some((_, k, _)) = entries.iter().find(|e| e.2.is_empty()) {
        return Err(crate::usage(format!(
            "{name}: key 0x{} has an empty value, which this store cannot hold in a {layout} trie",
            hex::encode(k)
        )));
    }
    if let Some((_, k, _)) = entries.iter().find(|e| e.1.len() > store::KEY_BYTES_MAX) {
        return Err(crate::usage(format!(
            "{name}: key 0x{} is longer than the store's {}-byte limit",
            hex::encode(k),
            store::KEY_BYTES_MAX
        )));
    }
    let expected = crate::cmd_root::file_root(path, layout, &spec.top)?;
    let label = format!("chain spec {expected}");
    let mut db = open_for_load(&args.db, Some(layout), &label)?;
    check_new(&db, &args.db.db)?;
    let summary = db
        .bulk_load(&label, entries.iter().copied())
        .with_context(|| format!("cannot initialise {}", args.db.db.display()))?;
    if summary.root != expected {
        bail!("the store rebuilt root {} from the chain spec, expected {expected}", summary.root);
    }
    // Each child trie's rebuilt root is the one the main trie holds for it.
    for (key, _) in &spec.children {
        let child = TrieId::Storage(trie::blake2_256(key));
        let held = [CHILD_STORAGE_DEFAULT_PREFIX, key].concat();
        let held = spec.top.iter().find(|(k, _)| *k == held).map(|(_, v)| &v[..]);
        let rebuilt = summary.roots.iter().find(|(t, _)| *t == child).map(|(_, r)| &r.0[..]);
        if held != rebuilt {
            bail!("the store rebuilt another root for child trie 0x{}", hex::encode(key));
        }
    }
    db.close().context("cannot close the database")?;
    print_init(args.json, expected, ("entries", entries.len()), layout)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Serialize)]
struct VerifyJson {
    valid: bool,
    /// Why not, when not valid: the first of the lines the text output prints.
    reason: Option<String>,
    block: u64,
    root: String,
    computed_root: String,
    leaves: u64,
    tries_checked: usize,
    trie_mismatches: Vec<TrieMismatch>,
    /// With `--deep`: nodes checked, and every trie whose stored nodes are wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes_checked: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    bad_nodes: Vec<BadNodes>,
}

#[derive(Debug, Serialize)]
struct BadNodes {
    trie: String,
    expected: u64,
    differing: u64,
    missing: u64,
    extra: u64,
    first_bad_path: Option<String>,
}

#[derive(Debug, Serialize)]
struct TrieMismatch {
    trie: String,
    stored: String,
    computed: String,
}

/// Run `arbor verify`: `ok <number> <root>` (exit 0) or `mismatch …` lines (exit 1);
/// with `--deep`, also every stored node.
pub(crate) fn verify(args: &VerifyArgs) -> Result<ExitCode> {
    let db = open_reading(&args.db)?;
    let (r, deep) = with_scan_progress(&db, !args.json, || {
        if args.deep {
            let d = db.verify_deep().context("cannot check the stored nodes")?;
            Ok((d.roots.clone(), Some(d)))
        } else {
            Ok((db.verify().context("cannot recompute the root")?, None))
        }
    })?;
    let ok = r.ok() && deep.as_ref().is_none_or(|d| d.ok());
    let code = if ok { ExitCode::SUCCESS } else { crate::negative() };
    let bad_nodes: Vec<BadNodes> = deep
        .iter()
        .flat_map(|d| &d.bad_tries)
        .map(|b| BadNodes {
            trie: trie_name(&b.trie),
            expected: b.expected,
            differing: b.differing,
            missing: b.missing,
            extra: b.extra,
            first_bad_path: b.first_bad.clone(),
        })
        .collect();
    if args.json {
        let v = VerifyJson {
            valid: ok,
            reason: verify_lines(&r, &bad_nodes).into_iter().next(),
            block: r.number,
            root: r.stored_root.to_string(),
            computed_root: r.computed_root.to_string(),
            leaves: r.leaves,
            tries_checked: r.tries_checked,
            trie_mismatches: r
                .trie_mismatches
                .iter()
                .map(|m| TrieMismatch {
                    trie: trie_name(&m.trie),
                    stored: m.stored.to_string(),
                    computed: m.computed.to_string(),
                })
                .collect(),
            nodes_checked: deep.as_ref().map(|d| d.nodes_checked),
            bad_nodes,
        };
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(code);
    }
    if ok {
        match &deep {
            Some(d) => {
                outln!("ok {} {} ({} nodes checked)", r.number, r.stored_root, d.nodes_checked)?
            }
            None => outln!("ok {} {}", r.number, r.stored_root)?,
        }
        return Ok(code);
    }
    for line in verify_lines(&r, &bad_nodes) {
        outln!("{line}")?;
    }
    Ok(code)
}

/// What a failed verify found, a line per finding.
fn verify_lines(r: &store::VerifyReport, bad_nodes: &[BadNodes]) -> Vec<String> {
    let mut lines = Vec::new();
    if r.stored_root != r.computed_root {
        lines.push(format!(
            "mismatch {}: stored {} computed {}",
            r.number, r.stored_root, r.computed_root
        ));
    }
    for m in &r.trie_mismatches {
        lines.push(format!(
            "mismatch {} {}: stored {} computed {}",
            r.number,
            trie_name(&m.trie),
            m.stored,
            m.computed
        ));
    }
    for b in bad_nodes {
        lines.push(format!(
            "bad nodes {} {}: {} differ, {} missing, {} stray of {} (first at path {}); run `arbor repair`",
            r.number,
            b.trie,
            b.differing,
            b.missing,
            b.extra,
            b.expected,
            b.first_bad_path.as_deref().unwrap_or("-")
        ));
    }
    lines
}

/// Run `work` (a verify) with a progress bar on stderr (unless `show` is false): flat
/// entries scanned against the estimate, with the rate and an ETA.
fn with_scan_progress<T>(db: &StateDb, show: bool, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let pb = crate::progress::counter(
        show,
        Some(crate::progress::flat_entries_estimate(db)),
        "verifying",
        "entries",
    );
    let start = db.scanned_entries();
    let out = crate::progress::polled(&pb, || db.scanned_entries() - start, work);
    pb.finish_and_clear();
    out
}

/// Run `arbor repair`: rebuild every trie's nodes from flat state (refused when flat
/// state does not hold the recorded roots), then check them.
pub(crate) fn repair(args: &RepairArgs) -> Result<ExitCode> {
    let mut db = open_existing(&args.db)?;
    let nodes = db.repair().context("cannot repair the nodes")?;
    let d = db.verify_deep().context("cannot check the repaired nodes")?;
    if !d.ok() {
        bail!("the repaired nodes still do not check out");
    }
    if args.json {
        let v = serde_json::json!({
            "block": db.head_number(),
            "root": db.head_root().to_string(),
            "nodes_rebuilt": nodes,
        });
        outln!("{v}")?;
    } else {
        outln!(
            "repaired {} {}: {nodes} nodes rebuilt from flat state",
            db.head_number(),
            db.head_root()
        )?;
    }
    db.close().context("cannot close the database")?;
    Ok(ExitCode::SUCCESS)
}

/// A view of recent block `block`; a block outside the window is a usage error (exit
/// code 2) whose message names the window.
pub(crate) fn at_block(db: &StateDb, block: u64) -> Result<BlockView<'_>> {
    db.at(block).map_err(|e| at_error(e, "cannot read at the block"))
}

/// A failed read or proof at a recent block as the CLI reports it: a block outside the
/// window is a usage error (its message alone), anything else could not run (`what`
/// failed, because …).
pub(crate) fn at_error(e: AtError, what: &'static str) -> anyhow::Error {
    match e {
        AtError::Outside { .. } => crate::usage(e.to_string()),
        e => anyhow::Error::new(e).context(what),
    }
}

/// Run `arbor get`: the value in hex, or `absent`; at the head, or at `--block`.
pub(crate) fn get(args: &GetArgs) -> Result<ExitCode> {
    let key = &args.key.0;
    let db = open_reading(&args.db)?;
    let (block, root, value) = match args.block {
        None => {
            let value = db.get(&TrieId::Main, key).context("cannot read the key")?;
            (db.head_number(), db.head_root(), value)
        }
        Some(n) => {
            let view = at_block(&db, n)?;
            let value =
                view.get(&TrieId::Main, key).map_err(|e| at_error(e, "cannot read the key"))?;
            (view.number(), view.root(), value)
        }
    };
    let hex_value = value.map(|v| format!("0x{}", hex::encode(v)));
    if args.json {
        let v = serde_json::json!({
            "block": block,
            "root": root.to_string(),
            "key": format!("0x{}", hex::encode(key)),
            "value": hex_value,
        });
        outln!("{v}")?;
    } else {
        outln!("{}", hex_value.as_deref().unwrap_or("absent"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `arbor revert`: undo the last N blocks, print the new head. Ctrl-C or SIGTERM
/// stops after the block being undone (each block is one synced batch), with the summary.
pub(crate) fn revert(args: &RevertArgs) -> Result<ExitCode> {
    // The configuration file is read before the handler is installed: a stream that never
    // ends (a FIFO) is then still interrupted by Ctrl-C.
    let config = crate::db_args::load_config(args.db.config.as_deref())?;
    // The handler before the open: a signal while the database opens stops the revert after
    // its first block too, instead of killing the process (which a slow open made likely).
    let stop = crate::signals::stop_flag()?;
    let mut db = crate::db_args::open_existing_with(&args.db, config)?;
    let head = db.head_number();
    let pb = crate::progress::counter(!args.json, Some(args.blocks), "reverting", "blocks");
    let reverted = db
        .revert_with_progress(args.blocks, &mut |n| {
            pb.set_position(n);
            !stop.load(std::sync::atomic::Ordering::SeqCst)
        })
        .map_err(|e| {
            let context = format!("cannot revert {} blocks from block {head}", args.blocks);
            match e {
                // The count the head or the kept history makes impossible: a usage error
                // (nothing was undone).
                RevertError::TooFar { .. } | RevertError::Pruned { .. } => {
                    crate::usage(format!("{context}: {e}"))
                }
                e => anyhow::Error::new(e).context(context),
            }
        })?;
    pb.finish_and_clear();
    let (number, root) = (db.head_number(), db.head_root());
    db.close().context("cannot close the database")?;
    let stopped = reverted < args.blocks;
    if stopped {
        errln!("stopped by signal after reverting {reverted} of {} blocks", args.blocks);
    }
    if args.json {
        let v = serde_json::json!({
            "block": number,
            "root": root.to_string(),
            "reverted": reverted,
            "stopped": stopped,
        });
        outln!("{v}")?;
    } else {
        outln!("{number} {root}")?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Serialize)]
struct StatsJson<'a> {
    #[serde(flatten)]
    stats: &'a StoreStats,
    node_cache_hit_rate: f64,
    flat_cache_hit_rate: f64,
    cache_budget_bytes: u64,
    /// The trie layout the database records.
    layout: &'static str,
}

/// Run `arbor stats`.
pub(crate) fn stats(args: &StatsArgs) -> Result<ExitCode> {
    let db = open_reading(&args.db)?;
    let s = db.stats();
    let budget = db.config().cache_budget_bytes();
    let mut out = std::io::stdout().lock();
    if args.json {
        let v = StatsJson {
            stats: &s,
            node_cache_hit_rate: s.node_cache.hit_rate(),
            flat_cache_hit_rate: s.flat_cache.hit_rate(),
            cache_budget_bytes: budget,
            layout: db.layout().as_str(),
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(label) = &s.unfinished_bulk_load {
        writeln!(
            out,
            "bulk load      UNFINISHED ({label}): the state is partial; run the same load again"
        )?;
    }
    writeln!(out, "head           {} {}", s.head_number, s.head_root)?;
    writeln!(out, "layout         {}", db.layout())?;
    writeln!(out, "persisted      {}", s.persisted_number)?;
    writeln!(
        out,
        "layers         {} unpersisted ({} bytes), {} persisted since open, {} commit waits",
        s.unpersisted_layers, s.unpersisted_bytes, s.layers_persisted, s.commit_waits
    )?;
    writeln!(
        out,
        "nodes          at block {} ({} bytes buffered, peak {}, {} write-backs since open)",
        s.nodes_at, s.node_buffer_bytes, s.peak_node_buffer_bytes, s.node_write_backs
    )?;
    if let Some(c) = &s.catch_up {
        writeln!(
            out,
            "catch-up       at open: nodes brought from block {} to {} ({} keys) in {:.3} s",
            c.from_block,
            c.to_block,
            c.keys,
            c.time.as_secs_f64()
        )?;
    }
    write_recent(&mut out, &s)?;
    write_caches(&mut out, &s)?;
    write_files(&mut out, &s)?;
    writeln!(
        out,
        "memory budget  {budget} bytes (block cache + memtables + caches + unpersisted layers + \
         node buffer)"
    )?;
    writeln!(
        out,
        "(the first two cache lines count this process only; `all sessions` adds every \
         earlier session closed cleanly)"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `arbor stats`' recent-window line: the blocks `get`/`prove --block` may read (the
/// window's bound), then what this process holds of them in memory (the rest is read
/// back from the reverse diffs on disk when asked for).
fn write_recent(out: &mut impl Write, s: &StoreStats) -> std::io::Result<()> {
    let r = &s.recent;
    writeln!(
        out,
        "recent window  blocks {} to {} (history.recent_blocks {}); in memory: from block {} \
         ({} blocks, {} of {}), provable from {}; {} dropped for the byte bound",
        s.head_number.saturating_sub(r.limit_blocks),
        s.head_number,
        r.limit_blocks,
        r.oldest_block,
        r.blocks,
        crate::output::human_bytes(r.bytes),
        crate::output::human_bytes(r.limit_bytes),
        r.provable_block,
        r.shrunk_blocks
    )
}

/// `arbor stats`' cache lines: this process's node and flat caches and resident trie,
/// then the totals of every session.
fn write_caches(out: &mut impl Write, s: &StoreStats) -> std::io::Result<()> {
    let caches = [("node cache", &s.node_cache), ("flat cache", &s.flat_cache)];
    for (name, c) in caches {
        writeln!(
            out,
            "{name:<14} {} hits, {} misses, {} evictions, hit rate {:.1}%, {} of {} bytes",
            c.hits,
            c.misses,
            c.evictions,
            c.hit_rate() * 100.0,
            c.bytes,
            c.bytes_max
        )?;
    }
    let r = &s.resident;
    writeln!(
        out,
        "resident trie  {} nodes, {} of {} bytes (filter of deeper nodes {}), depth limit {}, \
         {} hits, {} misses",
        r.entries, r.bytes, r.bytes_max, r.deep_filter_bytes, r.depth_limit, r.hits, r.misses
    )?;
    let t = &s.cache_totals;
    writeln!(
        out,
        "all sessions   node cache {} hits, {} misses, {} evictions (hit rate {:.1}%); \
         flat cache {} hits, {} misses, {} evictions (hit rate {:.1}%)",
        t.node_hits,
        t.node_misses,
        t.node_evictions,
        t.node_hit_rate() * 100.0,
        t.flat_hits,
        t.flat_misses,
        t.flat_evictions,
        t.flat_hit_rate() * 100.0
    )
}

/// `arbor stats`' file lines: the SST bytes, then per column family.
fn write_files(out: &mut impl Write, s: &StoreStats) -> std::io::Result<()> {
    writeln!(
        out,
        "sst bytes      {} (live data estimate {}, about {} keys)",
        crate::output::human_bytes(s.sst_bytes),
        crate::output::human_bytes(s.live_data_bytes),
        s.estimated_keys
    )?;
    for c in &s.column_families {
        writeln!(
            out,
            "  {:<12} {:>10} in SST files, {:>10} in memtables, about {} keys",
            c.name,
            crate::output::human_bytes(c.sst_bytes),
            crate::output::human_bytes(c.memtable_bytes),
            c.estimated_keys
        )?;
    }
    Ok(())
}
