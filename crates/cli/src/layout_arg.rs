//! `--layout LAYOUT`: the command line's spelling of [`trie::LayoutName`] (ethereum,
//! substrate-v0, substrate-v1), shared by every command that takes a layout. A name that
//! is none of them is a usage error naming it and the accepted ones.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use trie::LayoutName;

/// The parser of a `--layout` value: the possible values with their descriptions (shown by
/// `--help`), mapped onto [`LayoutName`].
pub(crate) fn parser() -> impl TypedValueParser<Value = LayoutName> {
    let values = LayoutName::ALL.map(|l| PossibleValue::new(l.as_str()).help(l.description()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<LayoutName>())
}
