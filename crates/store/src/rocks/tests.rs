//! Unit tests of the RocksDB options and opening.

use super::open::open_db;
use super::*;

/// The options string took: the OPTIONS file names the hint extractor and the cache's
/// prepopulation on flush for every column family the store uses (not `default`, which
/// it never writes), and the block cache and bloom filters of the base options survived
/// the copy.
#[test]
fn string_options_are_set_on_every_family() {
    let text = options_file_of(&StoreConfig::default());
    let hinted = text.matches("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.1");
    assert_eq!(hinted.count(), COLUMN_FAMILIES.len(), "{text}");
    let warmed = text.matches("prepopulate_block_cache=kFlushOnly").count();
    assert_eq!(warmed, COLUMN_FAMILIES.len(), "{text}");
    assert!(text.contains("bloomfilter"), "{text}");
    // Set only with a block cache (see `base_options`).
    let cached = text.matches("cache_index_and_filter_blocks=true").count();
    assert_eq!(cached, COLUMN_FAMILIES.len(), "{text}");
    // Without a block cache there is nothing to prepopulate; the hints still take.
    let mut uncached = StoreConfig::default();
    uncached.rocksdb.block_cache_bytes = 0;
    let text = options_file_of(&uncached);
    assert!(!text.contains("kFlushOnly"), "{text}");
    let hinted = text.matches("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.1");
    assert_eq!(hinted.count(), COLUMN_FAMILIES.len(), "{text}");
}

/// The OPTIONS file RocksDB writes for a new store with `config`.
fn options_file_of(config: &StoreConfig) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(open_db(&path, config, None).unwrap().0);
    let options = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("OPTIONS-"))
        .unwrap();
    std::fs::read_to_string(options).unwrap()
}

/// `flat`, and only `flat`, has the prefix extractor its leaf scans' prefix mode needs.
#[test]
fn only_flat_has_a_prefix_filter() {
    let text = options_file_of(&StoreConfig::default());
    let ours = format!("\n  prefix_extractor=rocksdb.FixedPrefix.{FLAT_PREFIX_BYTES}\n");
    assert_eq!(text.matches(&ours).count(), 1, "{text}");
    let flat = text.find(&format!("[CFOptions \"{CF_FLAT}\"]")).unwrap();
    let next = text[flat + 1..].find("[CFOptions").map_or(text.len(), |i| flat + 1 + i);
    assert!(text[flat..next].contains(&ours), "{text}");
}

/// A scan may seek in prefix mode exactly when its range lies within one prefix.
#[test]
fn scans_one_prefix_when_the_range_shares_its_prefix() {
    let storage = TrieId::Storage(state::H256([0xab; 32]));
    for trie in [TrieId::Main, storage] {
        for len in 0..12 {
            let path: Vec<u8> = (0..len).map(|i| (i as u8 * 7 + 3) & 0x0f).collect();
            let (lo, hi) = crate::keys::flat_range_for_path(&trie, &path);
            let one =
                lo.len() >= FLAT_PREFIX_BYTES && lo[..FLAT_PREFIX_BYTES] == hi[..FLAT_PREFIX_BYTES];
            assert_eq!(scans_one_prefix(&trie, &path), one, "{trie:?} {path:?}");
        }
    }
}

/// Leaf scans in either mode, and the total-order iterator, see every key wherever it
/// lies: in the memtable or in table files written before and after, some holding no
/// key under the scanned path (the files their prefix filters skip).
#[test]
fn flat_iterators_see_every_key_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open_db(&dir.path().join("db"), &StoreConfig::default(), None).unwrap();
    let mut model = Model::new();
    for round in 0..4 {
        put_keys(&db, &mut model, round, round < 3);
    }
    check_every_mode(&db, &model);
}

/// A database whose `flat` files were written without the prefix extractor (by a build
/// before it) is read right by one with it: its old files carry no prefixes in their
/// filters, its new ones do.
#[test]
fn files_written_before_the_prefix_filter_are_read_right() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let families = |with_prefix: bool| {
        let mut o = Options::default();
        if with_prefix {
            o.set_prefix_extractor(SliceTransform::create_fixed_prefix(FLAT_PREFIX_BYTES));
        }
        vec![ColumnFamilyDescriptor::new(CF_FLAT, o)]
    };
    let mut o = Options::default();
    o.create_if_missing(true);
    o.create_missing_column_families(true);
    let mut model = Model::new();
    {
        let db = DB::open_cf_descriptors(&o, &path, families(false)).unwrap();
        put_keys(&db, &mut model, 0, true);
        put_keys(&db, &mut model, 1, true);
    }
    let db = DB::open_cf_descriptors(&o, &path, families(true)).unwrap();
    put_keys(&db, &mut model, 2, true);
    put_keys(&db, &mut model, 3, false);
    check_every_mode(&db, &model);
}

/// Full `flat` keys and their tries.
type Model = std::collections::BTreeMap<Vec<u8>, TrieId>;

/// 300 random keys of the main trie and one storage trie, with few distinct first bytes
/// (so that scans of short paths find keys), written to `flat` and `model`; flushed to a
/// table file when `flush`.
fn put_keys(db: &DB, model: &mut Model, round: u8, flush: bool) {
    use rand::{Rng, SeedableRng};
    let flat = cf(db, CF_FLAT).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7 + u64::from(round));
    let storage = TrieId::Storage(state::H256([0x5a; 32]));
    for _ in 0..300 {
        let trie = if rng.gen_bool(0.3) { storage } else { TrieId::Main };
        let mut key = [0u8; 32];
        rng.fill(&mut key[..]);
        key[0] &= 0x13;
        let full = crate::keys::flat_key(&trie, &key).unwrap();
        db.put_cf(flat, &full, [round]).unwrap();
        model.insert(full, trie);
    }
    if flush {
        db.flush_cf(flat).unwrap();
    }
}

/// `flat_iter` sees `model`'s keys in order and seeks from keys of every length (as the
/// scans across tries make) land where the model says; leaf scans in both modes find
/// the model's first key under paths of 0 to 10 nibbles.
fn check_every_mode(db: &DB, model: &Model) {
    let mut all = flat_iter(db).unwrap();
    all.seek_to_first();
    let mut seen = Vec::new();
    while let Some(k) = all.key() {
        seen.push(k.to_vec());
        all.next();
    }
    assert_eq!(seen, model.keys().cloned().collect::<Vec<_>>());
    for full in model.keys().step_by(11) {
        for len in 1..full.len() {
            let mut from = full[..len].to_vec();
            *from.last_mut().unwrap() ^= 0x01;
            all.seek(&from);
            let next = model.range(from..).next().map(|(k, _)| k.as_slice());
            assert_eq!(all.key(), next);
        }
    }
    for (full, trie) in model.iter().step_by(7) {
        let nibbles = trie::Nibbles::from_bytes(&full[trie.prefix_len()..]).0;
        for len in 0..=10 {
            let path = &nibbles[..len];
            let (lo, hi) = crate::keys::flat_range_for_path(trie, path);
            let first = model.range(lo..=hi).next().map(|(k, _)| k.clone());
            for prefix_mode in [false, scans_one_prefix(trie, path)] {
                let mut iter = leaf_scan_iter(db, prefix_mode).unwrap();
                let found =
                    crate::tiers::reader::leaf_under_in(&[], &mut iter, trie, path).unwrap();
                assert_eq!(found.map(|(k, _)| k), first, "{path:?} {prefix_mode}");
            }
        }
    }
}
