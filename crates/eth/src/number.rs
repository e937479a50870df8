//! The number spellings found in Ethereum JSON (genesis files, JSON-RPC), parsed into
//! [`U256`] (alloy-primitives) with typed errors.
//!
//! Generic parsers (`U256::from_str_radix`, `FromStr`) accept spellings geth does not, or
//! refuse ones it does, so the rules live here: a quantity is `0x`/`0X` hex or plain
//! decimal digits; a storage word is hex with or without `0x`. Leading zeros are allowed
//! (any count: they do not overflow); signs, spaces and underscores are not. Errors give
//! the byte offset of the first bad character in the string the user wrote. Cost: one
//! 256-bit multiply-add per digit.

use alloy_primitives::U256;

/// A string that is not a valid unsigned number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumberError {
    /// The string (or the part after `0x`) has no digits.
    #[error(
        "empty number: expected decimal digits or 0x-prefixed hex digits (write 0 or 0x0 for zero)"
    )]
    Empty,
    /// A character is not a digit of the expected base.
    #[error("invalid base-{radix} digit {ch:?} at byte {index}{}", hex_hint(*radix))]
    InvalidDigit {
        /// The offending character.
        ch: char,
        /// Its byte offset in the input, counting any `0x` prefix.
        index: usize,
        /// 10 for decimal, 16 for hex.
        radix: u32,
    },
    /// The value is larger than the target type can hold.
    #[error("number does not fit in {bits} bits")]
    Overflow {
        /// Width of the target type: 256 or 64.
        bits: u32,
    },
}

/// Parse a number as written in Ethereum JSON: `0x`/`0X` followed by hex digits (any
/// count, odd allowed: `"0x0"`, `"0x1"`), or plain decimal digits
/// (`"1234567000000000000000"`). Leading zeros are allowed; signs, spaces and underscores
/// are not.
pub fn parse_quantity(s: &str) -> Result<U256, NumberError> {
    match strip_hex_prefix(s) {
        Some(digits) => parse_radix(digits, 2, 16),
        None => parse_radix(s, 0, 10),
    }
}

/// Parse hex digits, with or without a `0x`/`0X` prefix, odd count allowed. This is the
/// geth rule for genesis storage keys and values, where `"10"` means sixteen.
pub(crate) fn parse_hex_word(s: &str) -> Result<U256, NumberError> {
    match strip_hex_prefix(s) {
        Some(digits) => parse_radix(digits, 2, 16),
        None => parse_radix(s, 0, 16),
    }
}

/// `value` as a `u64`, or the 64-bit overflow error.
pub(crate) fn to_u64(value: U256) -> Result<u64, NumberError> {
    u64::try_from(value).map_err(|_| NumberError::Overflow { bits: 64 })
}

/// Decimal is the fallback spelling, so a stray hex digit there usually means a lost `0x`.
fn hex_hint(radix: u32) -> &'static str {
    if radix == 10 {
        " (hex numbers need a 0x prefix)"
    } else {
        ""
    }
}

fn strip_hex_prefix(s: &str) -> Option<&str> {
    s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))
}

/// Parse `digits` in `radix`; `offset` is the byte position of `digits` in the caller's
/// input, so errors point into the string the user wrote.
fn parse_radix(digits: &str, offset: usize, radix: u32) -> Result<U256, NumberError> {
    if digits.is_empty() {
        return Err(NumberError::Empty);
    }
    let base = U256::from(radix);
    let mut value = U256::ZERO;
    for (i, ch) in digits.char_indices() {
        let digit =
            ch.to_digit(radix).ok_or(NumberError::InvalidDigit { ch, index: offset + i, radix })?;
        value = value
            .checked_mul(base)
            .and_then(|v| v.checked_add(U256::from(digit)))
            .ok_or(NumberError::Overflow { bits: 256 })?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_DEC: &str =
        "115792089237316195423570985008687907853269984665640564039457584007913129639935";
    const MAX_HEX: &str = "0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

    fn n(v: u64) -> U256 {
        U256::from(v)
    }

    #[test]
    fn parses_hex_quantities() {
        assert_eq!(parse_quantity("0x0"), Ok(U256::ZERO));
        assert_eq!(parse_quantity("0x1"), Ok(n(1)));
        assert_eq!(parse_quantity("0X2a"), Ok(n(42)));
        assert_eq!(parse_quantity("0x00ff"), Ok(n(255)));
        assert_eq!(parse_quantity(MAX_HEX), Ok(U256::MAX));
        // Leading zeros beyond 64 digits do not overflow.
        let padded = format!("0x{}1", "0".repeat(80));
        assert_eq!(parse_quantity(&padded), Ok(n(1)));
        let big = parse_quantity("0x4b8ed0283a6d3df769fb7e0b75e52f01a").unwrap();
        assert_eq!(
            hex::encode(big.to_be_bytes_trimmed_vec()),
            "04b8ed0283a6d3df769fb7e0b75e52f01a"
        );
    }

    #[test]
    fn parses_decimal_quantities() {
        assert_eq!(parse_quantity("0"), Ok(U256::ZERO));
        assert_eq!(parse_quantity("007"), Ok(n(7)));
        let v = parse_quantity("1234567000000000000000").unwrap();
        assert_eq!(v, parse_quantity("0x42ed0f117bd3ad8000").unwrap());
        assert_eq!(parse_quantity(MAX_DEC), Ok(U256::MAX));
        assert!(to_u64(parse_quantity("18446744073709551616").unwrap()).is_err());
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(parse_quantity(""), Err(NumberError::Empty));
        assert_eq!(parse_quantity("0x"), Err(NumberError::Empty));
        assert_eq!(
            parse_quantity("0xfg"),
            Err(NumberError::InvalidDigit { ch: 'g', index: 3, radix: 16 })
        );
        assert_eq!(
            parse_quantity("12a"),
            Err(NumberError::InvalidDigit { ch: 'a', index: 2, radix: 10 })
        );
        for bad in ["-1", "+1", " 1", "1 ", "1_000", "1.5", "1e3", "0x-1", "ox1", "0xé", "0x1_0"] {
            assert!(
                matches!(parse_quantity(bad), Err(NumberError::InvalidDigit { .. })),
                "{bad:?}"
            );
        }
        let over_dec =
            "115792089237316195423570985008687907853269984665640564039457584007913129639936";
        assert_eq!(parse_quantity(over_dec), Err(NumberError::Overflow { bits: 256 }));
        let over_hex = format!("0x1{}", "0".repeat(64));
        assert_eq!(parse_quantity(&over_hex), Err(NumberError::Overflow { bits: 256 }));
    }

    #[test]
    fn parses_hex_without_prefix() {
        assert_eq!(parse_hex_word("10"), Ok(n(16)));
        assert_eq!(parse_hex_word("0x03"), Ok(n(3)));
        assert_eq!(parse_hex_word(&MAX_HEX[2..]), Ok(U256::MAX));
        assert_eq!(parse_hex_word(""), Err(NumberError::Empty));
        assert!(parse_hex_word("xyz").is_err());
    }

    #[test]
    fn u64_quantities() {
        let parse_u64 = |s: &str| to_u64(parse_quantity(s)?);
        assert_eq!(parse_u64("0x0"), Ok(0));
        assert_eq!(parse_u64("1"), Ok(1));
        assert_eq!(parse_u64("0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(parse_u64("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_u64("0x10000000000000000"), Err(NumberError::Overflow { bits: 64 }));
        assert_eq!(parse_u64(""), Err(NumberError::Empty));
    }

    /// The spellings Arbor emits (JSON-RPC quantities, decimal) survive the move from the
    /// hand-written integer to alloy's: `{:#x}` is minimal `0x` hex, `{}` is decimal.
    #[test]
    fn formatting() {
        assert_eq!(U256::ZERO.to_string(), "0");
        assert_eq!(U256::MAX.to_string(), MAX_DEC);
        assert_eq!(
            parse_quantity("1606938044258990275541962092341162602522").unwrap().to_string(),
            "1606938044258990275541962092341162602522"
        );
        assert_eq!(format!("{:#x}", U256::ZERO), "0x0");
        assert_eq!(format!("{:#x}", n(0x2a)), "0x2a");
        assert_eq!(format!("{:x}", n(0x100)), "100");
        assert_eq!(format!("{:#x}", U256::MAX), MAX_HEX);
        let big = parse_quantity("0x4b8ed0283a6d3df769fb7e0b75e52f01a").unwrap();
        assert_eq!(format!("{big:#x}"), "0x4b8ed0283a6d3df769fb7e0b75e52f01a");
        assert!(U256::ZERO.to_be_bytes_trimmed_vec().is_empty());
        assert_eq!(n(0x0100).to_be_bytes_trimmed_vec(), vec![1, 0]);
    }
}
