//! The independent oracle of Substrate's trie that the trie's and the store's differential
//! tests share: trie-db with reference-trie's `SubstrateV0`/`SubstrateV1` layouts over a
//! Blake2-256 hasher from the `blake2` crate (not the `blake2b_simd` Arbor uses), as
//! Substrate's `BlakeTwo256`. Roots and hashes are plain `[u8; 32]` (this crate sits below
//! `trie`).

use std::collections::HashSet;

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};
use memory_db::{HashKey, MemoryDB};
use trie_db::{Trie as _, TrieDBBuilder, TrieDBMutBuilder, TrieLayout, TrieMut as _};

/// Blake2b with a 32-byte digest, as Substrate's `BlakeTwo256`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Blake2Hasher;

impl hash_db::Hasher for Blake2Hasher {
    type Out = [u8; 32];
    type StdHasher = hash256_std_hasher::Hash256StdHasher;
    const LENGTH: usize = 32;

    fn hash(x: &[u8]) -> [u8; 32] {
        Blake2b::<U32>::digest(x).into()
    }
}

/// Substrate's LayoutV0 (every value inline).
pub type OracleV0 = reference_trie::SubstrateV0<Blake2Hasher>;
/// Substrate's LayoutV1 (values of 33 bytes or more in value nodes).
pub type OracleV1 = reference_trie::SubstrateV1<Blake2Hasher>;
/// A node database keyed by hash.
pub type Db = MemoryDB<Blake2Hasher, HashKey<Blake2Hasher>, Vec<u8>>;

/// The oracle's trie of `entries`, inserted in reverse order through trie-db's mutable
/// trie (an order unlike Arbor's sorted builds): its nodes and root.
pub fn oracle_trie<'a, O: TrieLayout<Hash = Blake2Hasher>>(
    entries: impl DoubleEndedIterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>,
) -> (Db, [u8; 32]) {
    let mut db = Db::default();
    let mut root = [0u8; 32];
    {
        let mut t = TrieDBMutBuilder::<O>::new(&mut db, &mut root).build();
        for (k, v) in entries.rev() {
            t.insert(k, v).expect("the oracle inserts into its own trie");
        }
        t.commit();
    }
    (db, root)
}

/// The value of `key` as trie-db reads it from `db` (a full trie or a proof's nodes).
pub fn oracle_get<O: TrieLayout<Hash = Blake2Hasher>>(
    db: &Db,
    root: &[u8; 32],
    key: &[u8],
) -> Result<Option<Vec<u8>>, String> {
    let t = TrieDBBuilder::<O>::new(db, root).build();
    t.get(key).map_err(|e| format!("{e:?}"))
}

/// The nodes trie-db records while reading `keys` (deduplicated, in first-read order).
pub fn oracle_proof<O: TrieLayout<Hash = Blake2Hasher>>(
    db: &Db,
    root: &[u8; 32],
    keys: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let mut recorder = trie_db::recorder::Recorder::<O>::new();
    {
        let t = TrieDBBuilder::<O>::new(db, root).with_recorder(&mut recorder).build();
        for k in keys {
            t.get(k).expect("the oracle reads its own trie");
        }
    }
    let mut seen = HashSet::new();
    recorder.drain().into_iter().filter(|r| seen.insert(r.hash)).map(|r| r.data).collect()
}

/// A proof's nodes as a trie-db database (how Substrate reads a storage proof).
pub fn proof_db(proof: &[Vec<u8>]) -> Db {
    let mut db = Db::default();
    for node in proof {
        hash_db::HashDB::insert(&mut db, hash_db::EMPTY_PREFIX, node);
    }
    db
}
