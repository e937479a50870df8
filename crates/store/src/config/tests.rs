//! Unit tests of the configuration: parsing, defaults, bounds.

#[test]
fn sizes_take_units() {
    assert_eq!(parse_size("134217728"), Some(134_217_728));
    assert_eq!(parse_size("128MiB"), Some(128 << 20));
    assert_eq!(parse_size("4 GiB"), Some(4 << 30));
    assert_eq!(parse_size("2kB"), Some(2000));
    assert_eq!(parse_size("0B"), Some(0));
    for bad in ["", "MiB", "1.5MiB", "12 parsecs", "-1", "99999999999TiB", "1 MiB extra"] {
        assert_eq!(parse_size(bad), None, "{bad:?}");
    }
    let c = StoreConfig::from_toml_str(
        "[cache]\nnode_cache_bytes = \"64MiB\"\n[rocksdb]\nblock_cache_bytes = \"1 GiB\"\n",
    )
    .unwrap();
    assert_eq!(c.cache.node_cache_bytes, 64 << 20);
    assert_eq!(c.rocksdb.block_cache_bytes, 1 << 30);
    let c = StoreConfig::from_toml_str("[layers]\nunpersisted_bytes_max = \"128MiB\"\n");
    assert_eq!(c.unwrap().layers.unpersisted_bytes_max, 128 << 20);
    let e = StoreConfig::from_toml_str("[cache]\nnode_cache_bytes = \"lots\"\n").unwrap_err();
    assert!(e.to_string().contains("cache.node_cache_bytes"), "{e}");
    // A string where a number is expected is still refused elsewhere.
    assert!(StoreConfig::from_toml_str("[layers]\nhistory_depth = \"8\"\n").is_err());
}

use super::*;

fn parse_err(text: &str) -> ConfigError {
    match StoreConfig::from_toml_str(text) {
        Ok(c) => panic!("expected an error for {text:?}, got {c:?}"),
        Err(e) => e,
    }
}

#[test]
fn defaults_are_documented_values() {
    let c = StoreConfig::default();
    assert_eq!(c.rocksdb.block_cache_bytes, 256 * MIB);
    assert_eq!(c.rocksdb.bloom_bits_per_key, 10.0);
    assert_eq!(c.rocksdb.max_open_files, 2048);
    assert_eq!(c.rocksdb.target_file_size_bytes, 64 * MIB);
    assert_eq!(c.rocksdb.write_buffer_bytes, 64 * MIB);
    assert_eq!(c.rocksdb.max_total_wal_bytes, 1024 * MIB);
    assert_eq!(c.rocksdb.compression, Compression::Lz4);
    assert!(c.rocksdb.low_priority_background);
    assert_eq!(c.cache.node_cache_bytes, 128 * MIB);
    assert_eq!(c.cache.flat_cache_bytes, 64 * MIB);
    assert_eq!(c.cache.resident_bytes, 256 * MIB);
    assert_eq!(c.layers.unpersisted_bytes_max, 256 * MIB);
    assert_eq!(c.layers.history_depth, 128);
    assert_eq!(c.layers.node_buffer_bytes, 64 * MIB);
    c.validate().unwrap();
    assert_eq!(c.cache_budget_bytes(), (256 + 128 + 128 + 64 + 256 + 256 + 64 + 256) * MIB);
}

#[test]
fn default_toml_parses_to_default() {
    assert_eq!(StoreConfig::from_toml_str(DEFAULT_CONFIG_TOML).unwrap(), StoreConfig::default());
}

#[test]
fn default_toml_names_every_key() {
    // Every key of the structs appears in the file (the table generates both, but a
    // key renamed by serde would not).
    let text: toml::Table = toml::from_str(DEFAULT_CONFIG_TOML).unwrap();
    let via_serde: toml::Table =
        toml::from_str(&toml::to_string(&StoreConfig::default()).unwrap()).unwrap();
    assert_eq!(text, via_serde);
    assert!(DEFAULT_CONFIG_TOML.contains("# Block compression: \"none\", \"lz4\" or \"zstd\".\n"));
}

#[test]
fn layout_is_a_top_level_key() {
    let c = StoreConfig::from_toml_str("layout = \"substrate-v1\"\n").unwrap();
    assert_eq!(c.layout, Some(trie::LayoutName::SubstrateV1));
    assert_eq!(StoreConfig::from_toml_str(&toml::to_string(&c).unwrap()).unwrap(), c);
    let e = parse_err("layout = \"polkadot\"\n");
    assert!(e.to_string().contains("polkadot"), "{e}");
    assert!(matches!(parse_err("layout = 3\n"), ConfigError::Parse { .. }));
}

#[test]
fn empty_text_is_default() {
    assert_eq!(StoreConfig::from_toml_str("").unwrap(), StoreConfig::default());
}

#[test]
fn partial_file_keeps_other_defaults() {
    let c = StoreConfig::from_toml_str(
        "[rocksdb]\nmax_open_files = -1\ncompression = \"zstd\"\n[layers]\nhistory_depth = 7\n",
    )
    .unwrap();
    let mut want = StoreConfig::default();
    want.rocksdb.max_open_files = -1;
    want.rocksdb.compression = Compression::Zstd;
    want.layers.history_depth = 7;
    assert_eq!(c, want);
}

#[test]
fn round_trips_non_default_values() {
    let mut c = StoreConfig::default();
    c.rocksdb.bloom_bits_per_key = 0.5;
    c.rocksdb.compression = Compression::None;
    c.rocksdb.low_priority_background = false;
    c.cache.node_cache_bytes = 0;
    c.layers.unpersisted_bytes_max = 3 * MIB;
    let via_serde = toml::to_string(&c).unwrap();
    assert_eq!(StoreConfig::from_toml_str(&via_serde).unwrap(), c);
}

#[test]
fn unknown_keys_are_rejected() {
    for text in ["[rocksdb]\nblock_cache_byte = 1\n", "[caches]\n", "verbose = true\n"] {
        let e = parse_err(text);
        assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
        assert!(e.to_string().contains("unknown"), "{e}");
    }
    let e = parse_err("[rocksdb]\nblock_cache_byte = 1\n");
    let msg = e.to_string();
    assert!(msg.contains("block_cache_byte") && msg.contains("line 2"), "{msg}");
}

#[test]
fn wrong_types_are_rejected() {
    for text in [
        "[rocksdb]\nblock_cache_bytes = \"big\"\n",
        "[rocksdb]\nblock_cache_bytes = -1\n",
        "[rocksdb]\nmax_open_files = 1.5\n",
        "[rocksdb]\nmax_open_files = 99999999999\n",
        "[rocksdb]\ncompression = \"snappy\"\n",
        "[rocksdb]\ncompression = 3\n",
        "rocksdb = 5\n",
        "[layers]\nhistory_depth = true\n",
        "[rocksdb]\nlow_priority_background = 1\n",
        "[rocksdb]\nlow_priority_background = \"no\"\n",
    ] {
        let e = parse_err(text);
        assert!(matches!(e, ConfigError::Parse { .. }), "{text}: {e:?}");
        assert!(e.to_string().starts_with("store config <text>: line"), "{e}");
    }
}

#[test]
fn out_of_range_values_are_rejected() {
    let cases = [
        ("[rocksdb]\nbloom_bits_per_key = 65.0\n", "rocksdb.bloom_bits_per_key"),
        ("[rocksdb]\nbloom_bits_per_key = -1.0\n", "rocksdb.bloom_bits_per_key"),
        ("[rocksdb]\nbloom_bits_per_key = nan\n", "rocksdb.bloom_bits_per_key"),
        ("[rocksdb]\nbloom_bits_per_key = inf\n", "rocksdb.bloom_bits_per_key"),
        ("[rocksdb]\nmax_open_files = 0\n", "rocksdb.max_open_files"),
        ("[rocksdb]\nmax_open_files = -2\n", "rocksdb.max_open_files"),
        ("[rocksdb]\nmax_open_files = 15\n", "rocksdb.max_open_files"),
        ("[rocksdb]\ntarget_file_size_bytes = 1000\n", "rocksdb.target_file_size_bytes"),
        ("[rocksdb]\nwrite_buffer_bytes = 0\n", "rocksdb.write_buffer_bytes"),
        ("[rocksdb]\nmax_total_wal_bytes = 1048576\n", "rocksdb.max_total_wal_bytes"),
        ("[layers]\nhistory_depth = 0\n", "layers.history_depth"),
        ("[layers]\nunpersisted_bytes_max = 1048575\n", "layers.unpersisted_bytes_max"),
        ("[layers]\nunpersisted_bytes_max = \"1000000 TiB\"\n", "layers.unpersisted_bytes_max"),
        ("[cache]\nnode_cache_bytes = \"1025 TiB\"\n", "cache.node_cache_bytes"),
        ("[rocksdb]\nblock_cache_bytes = 1125899906842625\n", "rocksdb.block_cache_bytes"),
        ("[layers]\nhistory_depth = 16777217\n", "layers.history_depth"),
        ("[checkpoint]\nkeep = 9223372036854775807\n", "checkpoint.keep"),
    ];
    for (text, want_key) in cases {
        match parse_err(text) {
            ConfigError::Invalid { key, origin, .. } => {
                assert_eq!(key, want_key, "{text}");
                assert_eq!(origin, "<text>");
            }
            e => panic!("{text}: expected Invalid, got {e:?}"),
        }
    }
    // Edges that are allowed.
    for text in [
        "[rocksdb]\nbloom_bits_per_key = 0.0\nmax_open_files = 16\nmax_total_wal_bytes = 0\n",
        "[rocksdb]\nbloom_bits_per_key = 64.0\nmax_open_files = -1\n",
        "[layers]\nhistory_depth = 1\nunpersisted_bytes_max = 1048576\n",
        "[cache]\nnode_cache_bytes = 0\nflat_cache_bytes = 0\n",
        "[cache]\nresident_bytes = 0\n",
        "[cache]\nresident_bytes = \"1024 TiB\"\n[layers]\nhistory_depth = 16777216\n",
        "[checkpoint]\nkeep = 65536\n",
    ] {
        StoreConfig::from_toml_str(text).unwrap();
    }
}

#[test]
fn validate_reports_values_built_in_code() {
    let mut c = StoreConfig::default();
    c.layers.history_depth = 0;
    let e = c.validate().unwrap_err();
    assert_eq!(
        e.to_string(),
        "store config <value>: `layers.history_depth` = 0 is invalid: 1 to 16777216"
    );
}

#[test]
fn garbage_is_a_typed_error() {
    let deep = format!("a = {}", "[".repeat(100_000));
    let garbage: &[&str] = &[
        "\u{0}\u{1}\u{2}",
        "[rocksdb",
        "= = =",
        "[rocksdb]\n[rocksdb]\n",
        "[rocksdb]\nmax_open_files = 1\nmax_open_files = 2\n",
        "\"\"\"",
        &deep,
    ];
    for text in garbage {
        let e = parse_err(text);
        assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
    }
}

#[test]
fn from_file_names_the_file() {
    let dir = std::env::temp_dir().join(format!("arbor-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let missing = dir.join("missing.toml");
    let e = StoreConfig::from_file(&missing).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("missing.toml"), "{e}");

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[layers]\nhistory_depth = 0\n").unwrap();
    let e = StoreConfig::from_file(&bad).unwrap_err();
    assert!(matches!(e, ConfigError::Invalid { .. }), "{e:?}");
    assert!(e.to_string().contains("bad.toml"), "{e}");

    let binary = dir.join("binary.toml");
    std::fs::write(&binary, [b'a', b' ', b'=', 0xff, 0xfe]).unwrap();
    let e = StoreConfig::from_file(&binary).unwrap_err();
    assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
    assert!(e.to_string().contains("binary.toml") && e.to_string().contains("UTF-8"), "{e}");

    let good = dir.join("good.toml");
    std::fs::write(&good, DEFAULT_CONFIG_TOML).unwrap();
    assert_eq!(StoreConfig::from_file(&good).unwrap(), StoreConfig::default());

    std::fs::remove_dir_all(&dir).unwrap();
}
