//! The store's calls into layout-generic code: each is a [`WithLayout`] that the database's
//! recorded [`LayoutName`] dispatches, so nothing in the store names a layout type.

use state::{TrieId, H256};
use trie::{
    update_trie, Change, Layout, LayoutName, NodeSource, PreState, Trie, TrieError, TrieUpdates,
    UpdateError, Updated, WithLayout,
};

use crate::error::{Corruption, StoreError};

/// The keys a proof covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keys<'k> {
    /// One key: its path, and the value node of a proven value.
    One(&'k [u8]),
    /// Several keys: the union of their paths.
    Many(&'k [Vec<u8>]),
}

/// A proof of `keys` in the trie with `root` over `source`.
pub(crate) fn prove<S: NodeSource>(
    layout: LayoutName,
    source: S,
    root: H256,
    keys: Keys<'_>,
) -> Result<Vec<Vec<u8>>, TrieError> {
    struct Prove<'k, S> {
        source: S,
        root: H256,
        keys: Keys<'k>,
    }
    impl<S: NodeSource> WithLayout for Prove<'_, S> {
        type Output = Result<Vec<Vec<u8>>, TrieError>;
        fn run<L: Layout>(self) -> Self::Output {
            let mut t = Trie::<S, L>::from_root(self.source, self.root);
            match self.keys {
                Keys::One(k) => t.prove(k),
                Keys::Many(ks) => t.prove_many(ks),
            }
        }
    }
    layout.dispatch(Prove { source, root, keys })
}

/// The trie with `root` over `source` after `writes` (key → value, `None` deleting), as
/// the mutable trie commits it: how reverts and the recent window recompute nodes.
pub(crate) fn rewrite<'w, S: NodeSource>(
    layout: LayoutName,
    source: S,
    root: H256,
    writes: impl IntoIterator<Item = (&'w [u8], Option<&'w [u8]>)>,
) -> Result<TrieUpdates, TrieError> {
    struct Rewrite<S, I> {
        source: S,
        root: H256,
        writes: I,
    }
    impl<'w, S: NodeSource, I: IntoIterator<Item = (&'w [u8], Option<&'w [u8]>)>> WithLayout
        for Rewrite<S, I>
    {
        type Output = Result<TrieUpdates, TrieError>;
        fn run<L: Layout>(self) -> Self::Output {
            let mut t = Trie::<S, L>::from_root(self.source, self.root);
            for (k, v) in self.writes {
                t.write(k, v)?;
            }
            t.commit()
        }
    }
    layout.dispatch(Rewrite { source, root, writes })
}

/// [`update_trie`] of trie `trie` in `layout`; what contradicts the trie is a
/// [`Corruption`] naming `trie`.
pub(crate) fn update<P: PreState<Error = StoreError>>(
    layout: LayoutName,
    trie: TrieId,
    pre: &P,
    root: H256,
    changes: &[Change<'_>],
    verify_old: bool,
) -> Result<Updated, StoreError> {
    struct Update<'a, 'c, P> {
        pre: &'a P,
        root: H256,
        changes: &'a [Change<'c>],
        verify_old: bool,
    }
    impl<P: PreState> WithLayout for Update<'_, '_, P> {
        type Output = Result<Updated, UpdateError<P::Error>>;
        fn run<L: Layout>(self) -> Self::Output {
            update_trie::<L, P>(self.pre, self.root, self.changes, self.verify_old)
        }
    }
    layout.dispatch(Update { pre, root, changes, verify_old }).map_err(|e| update_error(trie, e))
}

/// An update's failure as the store reports it.
fn update_error(trie: TrieId, e: UpdateError<StoreError>) -> StoreError {
    let corruption = match e {
        UpdateError::Source(e) => return e,
        UpdateError::NodeHash { path, expected } => Corruption::NodeHash { trie, path, expected },
        UpdateError::Node { path, source } => Corruption::Node { trie, path, source },
        UpdateError::OddKey { path } => Corruption::OddKey { trie, path },
        UpdateError::OldValue { key } => Corruption::OldValue { trie, key },
        UpdateError::MissingLeaf { path } => Corruption::MissingLeaf { trie, path },
        UpdateError::KeyOrder(source) => Corruption::FlatOrder { trie, source },
    };
    corruption.into()
}
