//! Unit tests of the recent window.

use super::*;
use crate::tiers::layer::Entry;

fn v(b: u8) -> Option<Arc<[u8]>> {
    Some(Arc::from(vec![b]))
}

fn block(number: u64, flat: Vec<Entry>) -> RecentBlock {
    let mut b = RecentBlock {
        number,
        parent_root: H256([number as u8; 32]),
        flat: Arc::new(ChangeMap::from_writes(flat)),
        meta: Arc::default(),
        nodes: Some(Arc::default()),
        bytes: 0,
    };
    b.measure();
    b
}

#[test]
fn values_at_each_block() {
    values_at_each_block_with(false);
    values_at_each_block_with(true);
}

fn values_at_each_block_with(indexed: bool) {
    let mut r = Recent::new(3, u64::MAX, (10, H256([10; 32])));
    if indexed {
        r.ensure_index();
    }
    // Block 11 changes a (was 1) and b (was absent); block 12 changes a (was 2).
    r.push(block(11, vec![(b"a".to_vec(), v(1)), (b"b".to_vec(), None)]));
    r.set_head((11, H256([11; 32])));
    r.push(block(12, vec![(b"a".to_vec(), v(2))]));
    r.set_head((12, H256([12; 32])));
    assert_eq!(r.oldest(), 10);
    assert_eq!(r.changed_after(Column::Flat, b"a", 10), Some(v(1).as_ref()));
    assert_eq!(r.changed_after(Column::Flat, b"a", 11), Some(v(2).as_ref()));
    assert_eq!(r.changed_after(Column::Flat, b"a", 12), None);
    assert_eq!(r.changed_after(Column::Flat, b"b", 10), Some(None));
    assert_eq!(r.changed_after(Column::Flat, b"b", 11), None);
    assert_eq!(r.changed_after(Column::Flat, b"c", 10), None);
    assert_eq!(r.root_at(10), Some(H256([11; 32])));
    assert_eq!(r.root_at(12), Some(H256([12; 32])));
    // The bound of 3 blocks: 13, 14 push 11 out (head 14 - 3 = 11 is the floor).
    for n in 13..=14 {
        r.push(block(n, vec![(vec![n as u8], None)]));
        r.set_head((n, H256([n as u8; 32])));
    }
    assert_eq!(r.oldest(), 11);
    assert_eq!(r.changed_after(Column::Flat, b"a", 11), Some(v(2).as_ref()));
    // A revert to 12 drops 13 and 14.
    r.set_head((12, H256([12; 32])));
    assert_eq!(r.changed_after(Column::Flat, &[13], 12), None);
    assert_eq!(r.stats().blocks, 1);
    // The byte bound keeps the newest block only.
    let mut r = Recent::new(8, 1, (0, H256([0; 32])));
    for n in 1..=3 {
        r.push(block(n, vec![(vec![n as u8], v(n as u8))]));
        r.set_head((n, H256([0; 32])));
    }
    assert_eq!((r.oldest(), r.stats().blocks, r.stats().shrunk_blocks), (2, 1, 2));
}

/// Evicted blocks stay in the index until a sweep; a revert between sweeps and blocks
/// committed again with the same numbers must still find each key's first change.
#[test]
fn stale_index_entries_never_answer() {
    let mut r = Recent::new(3, u64::MAX, (0, H256([0; 32])));
    r.ensure_index();
    let commit = |r: &mut Recent, n: u64, tag: u8| {
        r.push(block(n, vec![(b"a".to_vec(), v(tag)), (vec![tag, n as u8], None)]));
        r.set_head((n, H256([n as u8; 32])));
    };
    for n in 1..=40 {
        commit(&mut r, n, n as u8);
    }
    assert_eq!(r.oldest(), 37);
    assert_eq!(r.changed_after(Column::Flat, b"a", 37), Some(v(38).as_ref()));
    // Back to 38 (39, 40 undone), then 39 and 40 again with other old values.
    r.set_head((38, H256([38; 32])));
    for n in 39..=40 {
        commit(&mut r, n, 100 + n as u8);
    }
    assert_eq!(r.changed_after(Column::Flat, b"a", 37), Some(v(38).as_ref()));
    assert_eq!(r.changed_after(Column::Flat, b"a", 38), Some(v(139).as_ref()));
    assert_eq!(r.changed_after(Column::Flat, b"a", 39), Some(v(140).as_ref()));
    // A key only evicted blocks changed reads from the head.
    assert_eq!(r.changed_after(Column::Flat, &[5, 5], 37), None);
    for n in 41..=120 {
        commit(&mut r, n, n as u8);
    }
    assert_eq!(r.changed_after(Column::Flat, b"a", 118), Some(v(119).as_ref()));
    let index = r.index.as_ref().expect("no idle drop yet: 120 < INDEX_IDLE_BLOCKS");
    assert!(index.shards.iter().map(|s| s.len()).sum::<usize>() < 3 * 40);
}

/// The same window answered with and without the index, built late, dropped when idle
/// and built again, with reverts and evictions on the way: every key at every block.
#[test]
fn the_lazy_index_answers_as_the_blocks_do() {
    let (mut plain, mut lazy) = (window(), window());
    let keys: Vec<Vec<u8>> = (0u8..24).map(|k| vec![k]).collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut head = 0u64;
    for step in 0..(2 * INDEX_IDLE_BLOCKS + 200) {
        if next() % 13 == 0 && head > 2 {
            // A revert of one or two blocks.
            head -= 1 + next() % 2;
            for r in [&mut plain, &mut lazy] {
                r.set_head((head, H256([head as u8; 32])));
            }
        }
        head += 1;
        let writes: Vec<Entry> = (0..1 + next() % 5)
            .map(|_| (keys[(next() % 24) as usize].clone(), v((next() % 200) as u8)))
            .collect();
        for r in [&mut plain, &mut lazy] {
            r.push(block(head, writes.clone()));
            r.set_head((head, H256([head as u8; 32])));
        }
        // Reads below the head for a while (the index is built), then none for longer
        // than the idle bound (dropped), then reads again (built again).
        let reading = step < 40 || (step > 40 + 2 * INDEX_IDLE_BLOCKS && step % 3 == 0);
        if reading {
            lazy.ensure_index();
            lazy.note_read();
        }
        if step == 40 + 2 * INDEX_IDLE_BLOCKS {
            // The head moved more than the idle bound since the last read (reverts take
            // back at most two blocks in 13 steps).
            assert!(!lazy.indexed(), "dropped after {INDEX_IDLE_BLOCKS} idle blocks");
        }
        assert!(plain.index.is_none());
        for n in plain.oldest()..=head {
            for k in &keys {
                let want = plain.changed_after(Column::Flat, k, n);
                assert_eq!(lazy.changed_after(Column::Flat, k, n), want, "{k:?} at {n}");
            }
        }
    }
    assert!(lazy.indexed());
}

fn window() -> Recent {
    Recent::new(8, u64::MAX, (0, H256([0; 32])))
}

/// An index built from the maps of one moment and installed later must answer as the
/// blocks do after whatever happened in between: commits, a revert and blocks committed
/// again under the same numbers, evictions, old nodes found for a block.
#[test]
fn an_index_built_outside_the_lock_covers_what_changed_meanwhile() {
    let (mut plain, mut lazy) = (window(), window());
    let commit = |r: &mut Recent, n: u64, tag: u8, nodes: bool| {
        let mut b = block(n, vec![(b"a".to_vec(), v(tag)), (vec![tag], None)]);
        if !nodes {
            b.nodes = None;
            b.measure();
        }
        r.push(b);
        r.set_head((n, H256([n as u8; 32])));
    };
    for n in 1..=6 {
        commit(&mut plain, n, n as u8, n != 6);
        commit(&mut lazy, n, n as u8, n != 6);
    }
    let sources = lazy.index_sources().expect("not built and nobody building");
    assert!(lazy.index_sources().is_none(), "one build at a time");
    // Meanwhile: back to 4, then 5 to 12 again with other values (5 and 6 reuse their
    // numbers; the bound of 8 evicts the oldest), and block 5's old nodes are found.
    for r in [&mut plain, &mut lazy] {
        r.set_head((4, H256([4; 32])));
        for n in 5..=12 {
            commit(r, n, 100 + n as u8, n != 5);
        }
        let found = ChangeMap::from_writes(vec![(b"node".to_vec(), v(55))]);
        r.set_nodes(5, found);
    }
    lazy.install_index(sources.build(false));
    assert!(lazy.indexed() && plain.index.is_none());
    let keys: Vec<Vec<u8>> =
        [b"a".to_vec(), b"node".to_vec()].into_iter().chain((0u8..=255).map(|t| vec![t])).collect();
    for n in plain.oldest()..=12 {
        for k in &keys {
            for column in [Column::Flat, Column::Nodes] {
                let want = plain.changed_after(column, k, n);
                assert_eq!(lazy.changed_after(column, k, n), want, "{k:?} at {n}");
            }
        }
    }
    assert_eq!(lazy.changed_after(Column::Nodes, b"node", 4), Some(v(55).as_ref()));
    // A build given up lets the next one start.
    let mut r = window();
    commit(&mut r, 1, 1, true);
    assert!(r.index_sources().is_some());
    r.abandon_index_build();
    assert!(r.index_sources().is_some());
}
