//! Store configuration: RocksDB tuning, cache budgets and diff-layer bounds.
//!
//! A [`StoreConfig`] is read from a TOML file in which every key is optional (a missing key
//! takes its default) and unknown keys are rejected, so a typo never silently falls back to
//! a default. Every key, its comment and its default are written once, in the
//! `config_table!` invocation below, which generates the structs, their `Default` impls and
//! [`DEFAULT_CONFIG_TOML`], the commented file `arbor` shows operators.
//!
//! Invariant: every constructor that reads outside input ([`StoreConfig::from_toml_str`],
//! [`StoreConfig::from_file`]) runs [`StoreConfig::validate`], so a config obtained from them
//! is within the ranges the store relies on. Parsing is a one-off cost at open time.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One mebibyte.
const MIB: u64 = 1 << 20;
/// The largest byte size a key takes (1 PiB): past it a budget bounds nothing.
const SIZE_MAX: u64 = 1 << 50;
/// The most blocks of reverse diffs kept (2^24: over six years of 12-second blocks).
const HISTORY_DEPTH_MAX: u64 = 1 << 24;
/// The most automatic checkpoints kept.
const CHECKPOINTS_KEPT_MAX: u64 = 1 << 16;

/// A default as written in the table: a TOML literal (number or string) that also
/// converts to the field's Rust type.
trait FromLiteral {
    type Literal;
    fn from_literal(literal: Self::Literal) -> Self;
}

macro_rules! identity_literal {
    ($($t:ty),*) => {$(
        impl FromLiteral for $t {
            type Literal = $t;
            fn from_literal(literal: $t) -> $t {
                literal
            }
        }
    )*};
}
identity_literal!(u64, i32, f64, bool);

impl FromLiteral for String {
    type Literal = &'static str;
    fn from_literal(literal: &'static str) -> String {
        literal.to_owned()
    }
}

impl FromLiteral for Compression {
    type Literal = &'static str;
    fn from_literal(literal: &'static str) -> Compression {
        match literal {
            "none" => Compression::None,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            other => panic!("config table: unknown compression default {other:?}"),
        }
    }
}

/// Generates the section structs (fields documented by the comments), their `Default`
/// impls, and [`DEFAULT_CONFIG_TOML`] from one table: per section its TOML name and
/// struct, per key its comment, Rust type and default (a TOML literal).
macro_rules! config_table {
    ($(
        $(#[doc = $section_doc:literal])+
        [$section:literal] $name:ident {
            $(
                $(#[doc = $doc:literal])+
                $field:ident: $ty:ty = $value:literal,
            )+
        }
    )+) => {
        $(
            $(#[doc = $section_doc])+
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
            #[serde(deny_unknown_fields, default)]
            pub struct $name {
                $(
                    $(#[doc = $doc])+
                    pub $field: $ty,
                )+
            }

            impl Default for $name {
                fn default() -> Self {
                    Self { $($field: <$ty as FromLiteral>::from_literal($value),)+ }
                }
            }
        )+

        /// The commented TOML file holding every key and default, as `arbor` shows it to
        /// operators. Parses to [`StoreConfig::default()`] (unit-tested).
        pub const DEFAULT_CONFIG_TOML: &str = concat!(
            "# Arbor store configuration (TOML).\n",
            "# Every key is optional: a missing key takes the default shown here.\n",
            "# Unknown keys are rejected. Sizes are in bytes, or with a unit: \"128MiB\", \"4 GiB\";\n",
            "# at most 1 PiB.\n",
            "\n",
            "# The trie layout: \"ethereum\", \"substrate-v0\" or \"substrate-v1\". A new database is\n",
            "# created with it (ethereum when absent); an existing one records its own and must\n",
            "# have this one when it is given.\n",
            "# layout = \"ethereum\"\n",
            $(
                "\n[", $section, "]\n",
                $(
                    $("#", $doc, "\n",)+
                    stringify!($field), " = ", stringify!($value), "\n",
                )+
            )+
        );
    };
}

config_table! {
    /// RocksDB options (`[rocksdb]` section).
    ["rocksdb"] RocksConfig {
        /// Shared LRU block cache for data, index and filter blocks; 0 disables it.
        block_cache_bytes: u64 = 268435456,
        /// Bloom filter bits per key, 0 to 64; 0 disables the filters. 10 gives about 1%
        /// false positives.
        bloom_bits_per_key: f64 = 10.0,
        /// Files RocksDB keeps open; -1 means unlimited, otherwise at least 16.
        max_open_files: i32 = 2048,
        /// Target size of one SST file; at least 1 MiB. Larger files mean fewer open files.
        target_file_size_bytes: u64 = 67108864,
        /// Size of one memtable before it is flushed; at least 1 MiB. All memtables together
        /// are held under twice this (see `RocksConfig::memtable_budget_bytes`).
        write_buffer_bytes: u64 = 67108864,
        /// Total WAL size before RocksDB forces a flush; 0 lets RocksDB choose, otherwise at
        /// least write_buffer_bytes.
        max_total_wal_bytes: u64 = 1073741824,
        /// Block compression: "none", "lz4" or "zstd".
        compression: Compression = "lz4",
        /// Run RocksDB's flush and compaction threads at the lowest CPU priority (nice 19),
        /// so that they use the cores a commit leaves idle instead of slowing it (their work
        /// waits, bounded by RocksDB's write stalls). The threads are shared by every
        /// database in the process, so the setting is too: once a database lowers them,
        /// they stay low.
        low_priority_background: bool = true,
    }

    /// Arbor's own read caches (`[cache]` section); see `docs/design.md`, "Store".
    ["cache"] CacheConfig {
        /// Byte budget of the node cache (compact branch nodes); 0 disables it.
        node_cache_bytes: u64 = 134217728,
        /// Byte budget of the flat-value cache; 0 disables it.
        flat_cache_bytes: u64 = 67108864,
        /// Byte budget of the resident trie: the upper branch and extension nodes the
        /// committer keeps across blocks (nodes deeper than it can hold are read from disk
        /// when a block needs them); 0 keeps none.
        resident_bytes: u64 = 268435456,
    }

    /// Diff-layer and history bounds (`[layers]` section).
    ["layers"] LayerConfig {
        /// Bytes held by committed but unpersisted diff layers before commits block; at
        /// least 1 MiB.
        unpersisted_bytes_max: u64 = 268435456,
        /// Blocks of reverse diffs kept for reverts; 1 to 16,777,216.
        history_depth: u64 = 128,
        /// Committed blocks the background writer gathers into one write (each key written
        /// once per group: the upper trie nodes every block rewrites go to disk once); a
        /// flush, half of unpersisted_bytes_max or a second without a commit write them
        /// sooner. 1 to 1024; 1 writes every block on its own.
        persist_blocks: u64 = 16,
        /// Bytes of trie nodes kept in memory behind the block: the writer persists flat
        /// values, reverse diffs and the head with every group, but holds the groups' node
        /// writes (each path once, its newest version) until they pass this bound, a
        /// flush, the close, or a lag of `history_depth` blocks; on open the nodes are
        /// brought to the head from the reverse diffs. 0 writes nodes with every group.
        /// At most 1 PiB.
        node_buffer_bytes: u64 = 67108864,
    }

    /// Reads and proofs at recent blocks (`[history]` section); see `docs/design.md`,
    /// "Recent blocks".
    ["history"] HistoryConfig {
        /// Blocks below the head readable and provable with `--block` (`StateDb::at`):
        /// head - recent_blocks to head. At most layers.history_depth counts (the reverse
        /// diffs of older blocks are pruned); 0 keeps no window.
        recent_blocks: u64 = 128,
        /// Bytes the window's old values and old trie nodes may hold; past it the oldest
        /// blocks leave the window (`arbor stats` says how many). At most 1 PiB.
        recent_bytes: u64 = 268435456,
    }

    /// Automatic checkpoints (`[checkpoint]` section), created by `arbor load` and `arbor
    /// import` as blocks commit; see `docs/design.md`, "Checkpoints".
    ["checkpoint"] CheckpointConfig {
        /// Create a checkpoint at every block number divisible by this; 0 turns them off.
        every_blocks: u64 = 0,
        /// Checkpoints kept: older ones are deleted, with the chunks only they use; 1 to
        /// 65,536.
        keep: u64 = 2,
        /// Their directory; empty means `<database>.checkpoints` beside the database.
        dir: String = "",
        /// Threads creating a checkpoint; 1 to 256 (the bytes do not depend on it).
        threads: u64 = 2,
    }
}

/// Why a store configuration could not be loaded or was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read store config {}: {source}", path.display())]
    Read {
        /// The file that was being read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The text is not valid UTF-8, not valid TOML, has an unknown key or a value of the
    /// wrong type.
    #[error("store config {origin}: {message}")]
    Parse {
        /// Where the text came from: a file path, or `<text>` for an in-memory string.
        origin: String,
        /// What is wrong and where (line and column when known).
        message: String,
    },
    /// A value parsed but is outside its allowed range.
    #[error("store config {origin}: `{key}` = {value} is invalid: {expected}")]
    Invalid {
        /// Where the text came from: a file path, `<text>`, or `<value>` for a config built
        /// in code.
        origin: String,
        /// The dotted key, e.g. `rocksdb.max_open_files`.
        key: &'static str,
        /// The rejected value, as written in TOML.
        value: String,
        /// The allowed range.
        expected: &'static str,
    },
}

/// Block compression applied to RocksDB SST files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Compression {
    /// No compression.
    None,
    /// LZ4: fast, moderate ratio (the default).
    #[default]
    Lz4,
    /// Zstandard: better ratio, more CPU.
    Zstd,
}

impl Compression {
    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// `layout` as TOML spells it: a layout's name.
mod layout_key {
    use serde::{Deserialize, Deserializer, Serializer};
    use trie::LayoutName;

    pub(super) fn serialize<S: Serializer>(
        l: &Option<LayoutName>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match l {
            Some(l) => s.serialize_str(l.as_str()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<LayoutName>, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// The whole store configuration; see [`DEFAULT_CONFIG_TOML`] for every key and default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// The trie layout (top-level `layout = "substrate-v1"`): a new database is created
    /// with it (Ethereum when `None`); an existing one must have it
    /// ([`crate::OpenError::LayoutMismatch`]), or, when `None`, opens in the layout it
    /// recorded at its creation.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "layout_key")]
    pub layout: Option<trie::LayoutName>,
    /// RocksDB options (`[rocksdb]`).
    pub rocksdb: RocksConfig,
    /// Arbor's own read caches (`[cache]`).
    pub cache: CacheConfig,
    /// Diff layers and history (`[layers]`).
    pub layers: LayerConfig,
    /// Reads and proofs at recent blocks (`[history]`).
    pub history: HistoryConfig,
    /// Automatic checkpoints (`[checkpoint]`).
    pub checkpoint: CheckpointConfig,
}

impl RocksConfig {
    /// Bytes all memtables together may hold: `2 × write_buffer_bytes` (a shared RocksDB
    /// write-buffer manager flushes the largest memtable past it).
    pub fn memtable_budget_bytes(&self) -> u64 {
        self.write_buffer_bytes.saturating_mul(2)
    }

    /// The first `[rocksdb]` value out of its range (sizes past 1 PiB aside).
    fn out_of_range(&self) -> Option<OutOfRange> {
        let bloom = self.bloom_bits_per_key;
        if !(bloom.is_finite() && (0.0..=64.0).contains(&bloom)) {
            let (key, expected) = ("rocksdb.bloom_bits_per_key", "0.0 to 64.0");
            return Some(OutOfRange::new(key, toml_float(bloom), expected));
        }
        if self.max_open_files != -1 && self.max_open_files < 16 {
            let expected = "-1 (unlimited) or at least 16";
            return Some(OutOfRange::new("rocksdb.max_open_files", self.max_open_files, expected));
        }
        if self.target_file_size_bytes < MIB {
            let (key, expected) = ("rocksdb.target_file_size_bytes", "at least 1048576 (1 MiB)");
            return Some(OutOfRange::new(key, self.target_file_size_bytes, expected));
        }
        if self.write_buffer_bytes < MIB {
            let (key, expected) = ("rocksdb.write_buffer_bytes", "at least 1048576 (1 MiB)");
            return Some(OutOfRange::new(key, self.write_buffer_bytes, expected));
        }
        if self.max_total_wal_bytes != 0 && self.max_total_wal_bytes < self.write_buffer_bytes {
            let (key, expected) = (
                "rocksdb.max_total_wal_bytes",
                "0 (RocksDB chooses) or at least rocksdb.write_buffer_bytes",
            );
            return Some(OutOfRange::new(key, self.max_total_wal_bytes, expected));
        }
        None
    }
}

/// A value outside its allowed range (see [`ConfigError::Invalid`]).
struct OutOfRange {
    /// The dotted key.
    key: &'static str,
    /// The value, as written in TOML.
    value: String,
    /// The allowed range.
    expected: &'static str,
}

impl OutOfRange {
    fn new(key: &'static str, value: impl ToString, expected: &'static str) -> Self {
        OutOfRange { key, value: value.to_string(), expected }
    }
}

impl LayerConfig {
    /// The first `[layers]` value out of its range (sizes past 1 PiB aside).
    fn out_of_range(&self) -> Option<OutOfRange> {
        if self.unpersisted_bytes_max < MIB {
            let (key, expected) = ("layers.unpersisted_bytes_max", "at least 1048576 (1 MiB)");
            return Some(OutOfRange::new(key, self.unpersisted_bytes_max, expected));
        }
        if !(1..=1024).contains(&self.persist_blocks) {
            return Some(OutOfRange::new(
                "layers.persist_blocks",
                self.persist_blocks,
                "1 to 1024",
            ));
        }
        if !(1..=HISTORY_DEPTH_MAX).contains(&self.history_depth) {
            return Some(OutOfRange::new(
                "layers.history_depth",
                self.history_depth,
                "1 to 16777216",
            ));
        }
        None
    }
}

impl CheckpointConfig {
    /// The first `[checkpoint]` value out of its range.
    fn out_of_range(&self) -> Option<OutOfRange> {
        if !(1..=CHECKPOINTS_KEPT_MAX).contains(&self.keep) {
            return Some(OutOfRange::new("checkpoint.keep", self.keep, "1 to 65536"));
        }
        if !(1..=256).contains(&self.threads) {
            return Some(OutOfRange::new("checkpoint.threads", self.threads, "1 to 256"));
        }
        None
    }
}

/// Origin label for text that did not come from a file.
const TEXT_ORIGIN: &str = "<text>";

/// The largest config file read (`/dev/zero` must not fill the memory).
const CONFIG_BYTES_MAX: u64 = 1 << 20;

impl StoreConfig {
    /// Parses and validates a TOML config; missing keys take their defaults.
    pub fn from_toml_str(text: &str) -> Result<StoreConfig, ConfigError> {
        Self::parse(text, TEXT_ORIGIN)
    }

    /// Reads, parses and validates a TOML config file; errors name the file.
    pub fn from_file(path: &Path) -> Result<StoreConfig, ConfigError> {
        let read_error = |source| ConfigError::Read { path: path.to_path_buf(), source };
        let bytes = std::fs::File::open(path)
            .and_then(|f| crate::capped::read_capped(f, CONFIG_BYTES_MAX, 0))
            .map_err(read_error)?;
        let origin = path.display().to_string();
        if bytes.len() as u64 > CONFIG_BYTES_MAX {
            return Err(ConfigError::Parse {
                origin,
                message: format!("larger than {CONFIG_BYTES_MAX} bytes: not a store config"),
            });
        }
        let text = std::str::from_utf8(&bytes).map_err(|e| ConfigError::Parse {
            origin: origin.clone(),
            message: format!("not UTF-8 text (invalid byte at offset {})", e.valid_up_to()),
        })?;
        Self::parse(text, &origin)
    }

    fn parse(text: &str, origin: &str) -> Result<StoreConfig, ConfigError> {
        let parse_error = |e: toml::de::Error| ConfigError::Parse {
            origin: origin.to_owned(),
            message: describe_toml_error(text, &e),
        };
        let mut table: toml::Table = toml::from_str(text).map_err(parse_error)?;
        let config: StoreConfig = if sizes_to_bytes(&mut table, "", text, origin)? {
            // Sizes with units became integers: read the rewritten document.
            let rewritten = toml::to_string(&table).map_err(|e| ConfigError::Parse {
                origin: origin.to_owned(),
                message: e.to_string(),
            })?;
            toml::from_str(&rewritten).map_err(|e| ConfigError::Parse {
                origin: origin.to_owned(),
                message: describe_toml_error(&rewritten, &e),
            })?
        } else {
            toml::from_str(text).map_err(parse_error)?
        };
        config.validate_as(origin)?;
        Ok(config)
    }

    /// Checks every value against its allowed range (see [`DEFAULT_CONFIG_TOML`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_as("<value>")
    }

    fn validate_as(&self, origin: &str) -> Result<(), ConfigError> {
        // Sizes past 1 PiB first, then each section in the order of the file.
        let bad = self
            .oversized()
            .or_else(|| self.rocksdb.out_of_range())
            .or_else(|| self.layers.out_of_range())
            .or_else(|| self.checkpoint.out_of_range());
        match bad {
            None => Ok(()),
            Some(OutOfRange { key, value, expected }) => {
                Err(ConfigError::Invalid { origin: origin.to_owned(), key, value, expected })
            }
        }
    }

    /// The first size key past [`SIZE_MAX`].
    fn oversized(&self) -> Option<OutOfRange> {
        let (r, cache, l) = (&self.rocksdb, &self.cache, &self.layers);
        let sizes = [
            ("rocksdb.block_cache_bytes", r.block_cache_bytes),
            ("rocksdb.target_file_size_bytes", r.target_file_size_bytes),
            ("rocksdb.write_buffer_bytes", r.write_buffer_bytes),
            ("rocksdb.max_total_wal_bytes", r.max_total_wal_bytes),
            ("cache.node_cache_bytes", cache.node_cache_bytes),
            ("cache.flat_cache_bytes", cache.flat_cache_bytes),
            ("cache.resident_bytes", cache.resident_bytes),
            ("layers.unpersisted_bytes_max", l.unpersisted_bytes_max),
            ("layers.node_buffer_bytes", l.node_buffer_bytes),
            ("history.recent_bytes", self.history.recent_bytes),
        ];
        let (key, size) = sizes.into_iter().find(|(_, size)| *size > SIZE_MAX)?;
        Some(OutOfRange::new(key, size, "at most 1125899906842624 (1 PiB)"))
    }

    /// Peak memory the store may spend on caches, memtables and unpersisted layers:
    /// RocksDB block cache + memtable budget + node cache + flat cache + resident trie +
    /// `layers.unpersisted_bytes_max` + `layers.node_buffer_bytes` + `history.recent_bytes`
    /// (saturating).
    ///
    /// The benchmark checks peak RSS against this figure; RocksDB's structures outside the
    /// block cache and memtables (table readers of open files, iterators) are not included.
    pub fn cache_budget_bytes(&self) -> u64 {
        self.rocksdb
            .block_cache_bytes
            .saturating_add(self.rocksdb.memtable_budget_bytes())
            .saturating_add(self.cache.node_cache_bytes)
            .saturating_add(self.cache.flat_cache_bytes)
            .saturating_add(self.cache.resident_bytes)
            .saturating_add(self.layers.unpersisted_bytes_max)
            .saturating_add(self.layers.node_buffer_bytes)
            .saturating_add(self.history.recent_bytes)
    }

    /// Blocks below the head the recent window keeps: `history.recent_blocks`, at most
    /// `layers.history_depth`.
    pub fn recent_blocks(&self) -> u64 {
        self.history.recent_blocks.min(self.layers.history_depth)
    }
}

/// A byte size: a whole number of bytes, optionally followed by a unit — `KiB`, `MiB`,
/// `GiB`, `TiB` (powers of 1024) or `kB`, `MB`, `GB`, `TB` (powers of 1000), `B` — with
/// or without a space: `134217728`, `128MiB`, `4 GiB`. `None` for anything else or a
/// size past `u64::MAX`.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// A key whose value is a number of bytes (`…_bytes`, `…_bytes_max`).
fn is_size_key(key: &str) -> bool {
    key.ends_with("_bytes") || key.ends_with("_bytes_max")
}

/// Turn string sizes (`"128MiB"`) of every size key into integers, in place; true
/// when it changed any.
fn sizes_to_bytes(
    table: &mut toml::Table,
    section: &str,
    text: &str,
    origin: &str,
) -> Result<bool, ConfigError> {
    let mut changed = false;
    for (key, value) in table.iter_mut() {
        match value {
            toml::Value::Table(t) => changed |= sizes_to_bytes(t, key, text, origin)?,
            toml::Value::String(size) if is_size_key(key) => {
                let n = parse_size(size).and_then(|n| i64::try_from(n).ok()).ok_or_else(|| {
                    let line = text
                        .lines()
                        .position(|l| l.trim_start().starts_with(key.as_str()))
                        .map_or(0, |i| i + 1);
                    ConfigError::Parse {
                        origin: origin.to_owned(),
                        message: format!(
                            "line {line}: `{section}.{key}` = {size:?} is not a size (a number of \
                             bytes, or one with a unit such as \"128MiB\" or \"4 GiB\")"
                        ),
                    }
                })?;
                *value = toml::Value::Integer(n);
                changed = true;
            }
            _ => {}
        }
    }
    Ok(changed)
}

/// Formats a float as a TOML float literal (always with a `.` or exponent).
fn toml_float(x: f64) -> String {
    if x.is_nan() {
        "nan".to_owned()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        // `{:?}` prints `10.0`, `0.5`, `1e-7`: all valid TOML floats.
        format!("{x:?}")
    }
}

/// A one-line description of a TOML error: `line L, column C: message`.
fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim();
    match error.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests;
