//! [`LayoutName`]: a layout chosen at run time, by the name a command line or a database
//! records it under. The code below the choice is generic over [`Layout`]; the caller that
//! holds a name hands that code to [`LayoutName::dispatch`] as a [`WithLayout`], so the one
//! `match` from names to layout types is here and nothing below it names a layout.

use std::fmt;
use std::str::FromStr;

use crate::node::{EthLayout, Layout};
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
        struct EmptyRoot;
        impl WithLayout for EmptyRoot {
            type Output = state::H256;
            fn run<L: Layout>(self) -> state::H256 {
                L::empty_root()
            }
        }
        assert_eq!(LayoutName::Ethereum.dispatch(EmptyRoot), crate::EMPTY_ROOT);
        assert_eq!(LayoutName::SubstrateV0.dispatch(EmptyRoot), crate::SUBSTRATE_EMPTY_ROOT);
        assert_eq!(LayoutName::SubstrateV1.dispatch(EmptyRoot), crate::SUBSTRATE_EMPTY_ROOT);
    }
}
