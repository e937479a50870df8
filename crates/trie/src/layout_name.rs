//! [`LayoutName`]: a layout chosen at run time, by the name a command line or a database
//! records it under. The code below the choice is generic over [`Layout`]; the caller that
//! holds a name hands that code to [`LayoutName::dispatch`] as a [`WithLayout`], so the one
//! `match` from names to layout types is here and nothing below it names a layout.

use std::fmt;
use std::str::FromStr;

use state::H256;

use crate::ethereum::EthLayout;
use crate::nibbles::NibbleSlice;
use crate::node::{Family, Layout};
use crate::substrate::{SubstrateV0, SubstrateV1};

/// A computation generic over the layout, run in a layout named at run time by
/// [`LayoutName::dispatch`].
pub trait WithLayout {
    /// What the computation gives.
    type Output;
    /// Run it in layout `L`.
    fn run<L: Layout>(self) -> Self::Output;
}

/// A trie layout by name: `ethereum`, `substrate-v0` or `substrate-v1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LayoutName {
    /// Ethereum: keccak256, RLP, extension nodes; an empty value means absent.
    #[default]
    Ethereum,
    /// Substrate LayoutV0: Blake2-256, SCALE, no extension nodes, every value inline.
    SubstrateV0,
    /// Substrate LayoutV1: as V0, values of 33 bytes or more stored as hashed value nodes.
    SubstrateV1,
}

impl LayoutName {
    /// Every layout, in the order a usage message lists them.
    pub const ALL: [LayoutName; 3] =
        [LayoutName::Ethereum, LayoutName::SubstrateV0, LayoutName::SubstrateV1];

    /// Run `f` in this layout: the one `match` from names to layout types.
    pub fn dispatch<F: WithLayout>(self, f: F) -> F::Output {
        match self {
            LayoutName::Ethereum => f.run::<EthLayout>(),
            LayoutName::SubstrateV0 => f.run::<SubstrateV0>(),
            LayoutName::SubstrateV1 => f.run::<SubstrateV1>(),
        }
    }

    /// The root of the empty trie.
    pub fn empty_root(self) -> H256 {
        self.dispatch(EmptyRoot)
    }

    /// The hash of a node encoding (or of a value node's value).
    pub fn hash(self, data: &[u8]) -> H256 {
        self.dispatch(Hash(data))
    }

    /// Append the encoding of the leaf whose remaining key is `path`, holding `value` as
    /// the layout holds a new value.
    pub fn encode_leaf(self, path: NibbleSlice<'_>, value: &[u8], out: &mut Vec<u8>) {
        self.dispatch(EncodeLeaf { path, value, out })
    }

    /// True when the layout keeps values of `len` bytes as separate value nodes.
    pub fn value_node(self, len: usize) -> bool {
        self.dispatch(ValueNode(len))
    }

    /// True when the layout keeps some values as separate value nodes (Substrate V1).
    pub fn has_value_nodes(self) -> bool {
        self.value_node(usize::MAX)
    }

    /// True when an empty value is a value (Substrate), false when it means absent.
    pub fn allows_empty_value(self) -> bool {
        self.dispatch(AllowsEmpty)
    }

    /// The layout's family ([`Layout::FAMILY`] without its codec): what code above the trie
    /// matches on, exhaustively, where the families' conventions differ.
    pub fn family(self) -> Family {
        self.dispatch(FamilyOf)
    }

    /// The name as `--layout` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            LayoutName::Ethereum => "ethereum",
            LayoutName::SubstrateV0 => "substrate-v0",
            LayoutName::SubstrateV1 => "substrate-v1",
        }
    }

    /// One line saying what the layout is (for help texts).
    pub fn description(self) -> &'static str {
        match self {
            LayoutName::Ethereum => {
                "Ethereum: keccak256, RLP, extension nodes; an empty value means absent"
            }
            LayoutName::SubstrateV0 => {
                "Substrate LayoutV0: Blake2-256, SCALE, no extension nodes, every value inline"
            }
            LayoutName::SubstrateV1 => {
                "Substrate LayoutV1: as V0, values of 33 bytes or more stored as hashed value \
                 nodes"
            }
        }
    }
}

impl fmt::Display for LayoutName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

struct EmptyRoot;

impl WithLayout for EmptyRoot {
    type Output = H256;
    fn run<L: Layout>(self) -> H256 {
        L::empty_root()
    }
}

struct Hash<'a>(&'a [u8]);

impl WithLayout for Hash<'_> {
    type Output = H256;
    fn run<L: Layout>(self) -> H256 {
        L::hash(self.0)
    }
}

struct EncodeLeaf<'a, 'o> {
    path: NibbleSlice<'a>,
    value: &'a [u8],
    out: &'o mut Vec<u8>,
}

impl WithLayout for EncodeLeaf<'_, '_> {
    type Output = ();
    fn run<L: Layout>(self) {
        L::encode_leaf(self.path, self.value, self.out)
    }
}

struct ValueNode(usize);

impl WithLayout for ValueNode {
    type Output = bool;
    fn run<L: Layout>(self) -> bool {
        L::FAMILY.value_node_min().is_some_and(|min| self.0 >= min)
    }
}

struct FamilyOf;

impl WithLayout for FamilyOf {
    type Output = Family;
    fn run<L: Layout>(self) -> Family {
        L::FAMILY.name()
    }
}

struct AllowsEmpty;

impl WithLayout for AllowsEmpty {
    type Output = bool;
    fn run<L: Layout>(self) -> bool {
        L::ALLOW_EMPTY_VALUE
    }
}

/// A layout name that is none of [`LayoutName::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown layout {0:?}: expected ethereum, substrate-v0 or substrate-v1")]
pub struct UnknownLayout(pub String);

impl FromStr for LayoutName {
    type Err = UnknownLayout;

    fn from_str(s: &str) -> Result<Self, UnknownLayout> {
        LayoutName::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLayout(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for l in LayoutName::ALL {
            assert_eq!(l.as_str().parse::<LayoutName>(), Ok(l));
            assert_eq!(l.to_string(), l.as_str());
        }
        assert_eq!("polkadot".parse::<LayoutName>(), Err(UnknownLayout("polkadot".into())));
        assert_eq!(LayoutName::default(), LayoutName::Ethereum);
    }

    #[test]
    fn dispatch_runs_the_named_layout() {
        assert_eq!(LayoutName::Ethereum.dispatch(EmptyRoot), crate::EMPTY_ROOT);
        assert_eq!(LayoutName::SubstrateV0.dispatch(EmptyRoot), crate::SUBSTRATE_EMPTY_ROOT);
        assert_eq!(LayoutName::SubstrateV1.dispatch(EmptyRoot), crate::SUBSTRATE_EMPTY_ROOT);
        assert_eq!(LayoutName::SubstrateV0.empty_root(), crate::SUBSTRATE_EMPTY_ROOT);
        assert_eq!(LayoutName::Ethereum.hash(b""), crate::keccak256(b""));
        assert!(LayoutName::SubstrateV1.value_node(33) && !LayoutName::SubstrateV1.value_node(32));
        assert!(!LayoutName::SubstrateV0.value_node(1000) && !LayoutName::Ethereum.value_node(99));
        assert!(LayoutName::SubstrateV0.allows_empty_value());
        assert!(!LayoutName::Ethereum.allows_empty_value());
        assert_eq!(LayoutName::Ethereum.family(), Family::Ethereum(()));
        assert_eq!(LayoutName::SubstrateV0.family(), Family::Substrate(()));
        assert_eq!(LayoutName::SubstrateV1.family(), Family::Substrate(()));
    }
}
