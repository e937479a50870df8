//! Back-pressure: with `layers.unpersisted_bytes_max` = 1 MiB, the bytes held by
//! committed but unpersisted layers never exceed the bound, except when a single layer
//! is larger than the bound on its own (a commit then waits until it is the only one).

use state::TrieId;
use store::StateDb;

use crate::common::{apply, model_root, open, random_block, small_config, test_seed, State};

const MIB: u64 = 1 << 20;

fn assert_bounded(db: &StateDb, max: u64, ctx: &str) -> u64 {
    let s = db.stats();
    assert!(
        s.unpersisted_bytes <= max || s.unpersisted_layers == 1,
        "{ctx}: {} unpersisted bytes in {} layers exceed {max}",
        s.unpersisted_bytes,
        s.unpersisted_layers
    );
    s.unpersisted_bytes
}

#[test]
fn unpersisted_bytes_stay_bounded() {
    let seed = test_seed("unpersisted_bytes_stay_bounded");
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config();
    config.layers.unpersisted_bytes_max = MIB;
    let max = config.layers.unpersisted_bytes_max;
    let mut db = open(dir.path(), &config);
    let mut state = State::new();
    let mut peak = 0;
    for number in 1..=60 {
        // Mostly blocks of a few hundred KiB; every tenth block alone exceeds the bound.
        let updates = if number % 10 == 0 { 6_000 } else { 100 };
        let changes = random_block(seed, number, 50_000, updates);
        db.commit(&changes).unwrap();
        apply(&mut state, &changes);
        peak = peak.max(assert_bounded(&db, max, &format!("block {number}")));
    }
    let stats = db.stats();
    eprintln!(
        "peak unpersisted {peak} bytes, {} commit waits, {} layers persisted",
        stats.commit_waits, stats.layers_persisted
    );
    db.flush().unwrap();
    let stats = db.stats();
    assert_eq!((stats.unpersisted_bytes, stats.unpersisted_layers), (0, 0));
    assert_eq!(stats.persisted_number, 60);
    assert_eq!(db.head_root(), model_root(&state, &TrieId::Main));
    assert!(db.verify().unwrap().ok());
}
