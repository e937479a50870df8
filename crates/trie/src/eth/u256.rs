//! An unsigned 256-bit integer for balances and storage values, and the parsers for
//! the number spellings found in Ethereum JSON (genesis files, JSON-RPC).
//!
//! Arbor only needs to parse, compare and serialise these numbers (RLP wants the
//! big-endian bytes without leading zeros), so this is deliberately not an arithmetic
//! library. Invariant: the value is held as four big-endian `u64` limbs (limb 0 is the
//! most significant), so the derived `Ord` is numeric order. Parsing costs one
//! multiply-add over the four limbs per digit.

use std::fmt;
use std::str::FromStr;

/// An unsigned 256-bit integer.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct U256([u64; 4]);

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

impl U256 {
    /// Zero.
    pub const ZERO: U256 = U256([0; 4]);
    /// 2^256 - 1.
    pub const MAX: U256 = U256([u64::MAX; 4]);

    /// The value `v`.
    pub const fn from_u64(v: u64) -> U256 {
        U256([0, 0, 0, v])
    }

    /// Interpret 32 bytes as a big-endian number.
    pub fn from_be_bytes(bytes: [u8; 32]) -> U256 {
        let mut limbs = [0u64; 4];
        for (limb, chunk) in limbs.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            *limb = u64::from_be_bytes(word);
        }
        U256(limbs)
    }

    /// Interpret up to 32 bytes as a big-endian number (shorter input is left-padded
    /// with zeros, as RLP integers are). `None` if `bytes` is longer than 32.
    pub fn from_be_slice(bytes: &[u8]) -> Option<U256> {
        let pad = 32usize.checked_sub(bytes.len())?;
        let mut full = [0u8; 32];
        full[pad..].copy_from_slice(bytes);
        Some(U256::from_be_bytes(full))
    }

    /// The 32-byte big-endian encoding.
    pub fn to_be_bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (chunk, limb) in out.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&limb.to_be_bytes());
        }
        out
    }

    /// The big-endian bytes with leading zeros stripped: the payload of an RLP integer.
    /// Zero gives an empty vector.
    pub fn to_be_bytes_trimmed(&self) -> Vec<u8> {
        let bytes = self.to_be_bytes();
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
        bytes[first..].to_vec()
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The value as a `u64`, or `None` if it is 2^64 or more.
    pub fn to_u64(&self) -> Option<u64> {
        match self.0 {
            [0, 0, 0, v] => Some(v),
            _ => None,
        }
    }

    /// Parse a number as written in Ethereum JSON: `0x`/`0X` followed by hex digits
    /// (any count, odd allowed: `"0x0"`, `"0x1"`), or plain decimal digits
    /// (`"1234567000000000000000"`). Leading zeros are allowed; signs, spaces and
    /// underscores are not.
    pub fn parse_quantity(s: &str) -> Result<U256, NumberError> {
        match strip_hex_prefix(s) {
            Some(digits) => parse_radix(digits, 2, 16),
            None => parse_radix(s, 0, 10),
        }
    }

    /// Parse hex digits, with or without a `0x`/`0X` prefix, odd count allowed. This is
    /// the geth rule for genesis storage keys and values, where `"10"` means sixteen.
    pub fn parse_hex(s: &str) -> Result<U256, NumberError> {
        match strip_hex_prefix(s) {
            Some(digits) => parse_radix(digits, 2, 16),
            None => parse_radix(s, 0, 16),
        }
    }

    /// `self * mul + add`, or `None` on overflow.
    fn mul_add_small(self, mul: u64, add: u64) -> Option<U256> {
        let mut limbs = self.0;
        let mut carry = u128::from(add);
        for limb in limbs.iter_mut().rev() {
            let t = u128::from(*limb) * u128::from(mul) + carry;
            *limb = t as u64;
            carry = t >> 64;
        }
        (carry == 0).then_some(U256(limbs))
    }

    /// `(self / div, self % div)`; `div` must be non-zero.
    fn div_rem_small(self, div: u64) -> (U256, u64) {
        assert!(div != 0, "U256::div_rem_small: division by zero");
        let mut limbs = self.0;
        let mut rem = 0u128;
        for limb in limbs.iter_mut() {
            let t = (rem << 64) | u128::from(*limb);
            *limb = (t / u128::from(div)) as u64;
            rem = t % u128::from(div);
        }
        (U256(limbs), rem as u64)
    }
}

/// Parse a `u64` quantity (a nonce, a block number): `0x` hex or plain decimal, with
/// the same rules as [`U256::parse_quantity`].
pub fn parse_u64_quantity(s: &str) -> Result<u64, NumberError> {
    U256::parse_quantity(s)?.to_u64().ok_or(NumberError::Overflow { bits: 64 })
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
    let mut value = U256::ZERO;
    for (i, ch) in digits.char_indices() {
        let digit =
            ch.to_digit(radix).ok_or(NumberError::InvalidDigit { ch, index: offset + i, radix })?;
        value = value
            .mul_add_small(u64::from(radix), u64::from(digit))
            .ok_or(NumberError::Overflow { bits: 256 })?;
    }
    Ok(value)
}

impl From<u64> for U256 {
    fn from(v: u64) -> U256 {
        U256::from_u64(v)
    }
}

impl FromStr for U256 {
    type Err = NumberError;

    /// Same as [`U256::parse_quantity`].
    fn from_str(s: &str) -> Result<U256, NumberError> {
        U256::parse_quantity(s)
    }
}

/// Decimal, like the JSON decimal spelling.
impl fmt::Display for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Peel off 19 decimal digits at a time: 10^19 is the largest power of ten in a u64.
        const CHUNK: u64 = 10_000_000_000_000_000_000;
        let mut chunks = Vec::with_capacity(5);
        let mut rest = *self;
        loop {
            let (quotient, rem) = rest.div_rem_small(CHUNK);
            chunks.push(rem);
            rest = quotient;
            if rest.is_zero() {
                break;
            }
        }
        let mut text = String::with_capacity(chunks.len() * 19);
        for (i, chunk) in chunks.iter().rev().enumerate() {
            if i == 0 {
                text.push_str(&chunk.to_string());
            } else {
                text.push_str(&format!("{chunk:019}"));
            }
        }
        f.pad(&text)
    }
}

/// Lower-case hex without leading zeros; `{:#x}` adds `0x`, giving a JSON-RPC quantity.
impl fmt::LowerHex for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.to_be_bytes_trimmed();
        let text = match bytes.split_first() {
            None => "0".to_string(),
            Some((first, rest)) => format!("{first:x}{}", hex::encode(rest)),
        };
        f.pad_integral(true, "0x", &text)
    }
}

/// The JSON-RPC quantity spelling, e.g. `0x2a`.
impl fmt::Debug for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_DEC: &str =
        "115792089237316195423570985008687907853269984665640564039457584007913129639935";
    const MAX_HEX: &str = "0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

    #[test]
    fn parses_hex_quantities() {
        assert_eq!(U256::parse_quantity("0x0"), Ok(U256::ZERO));
        assert_eq!(U256::parse_quantity("0x1"), Ok(U256::from_u64(1)));
        assert_eq!(U256::parse_quantity("0X2a"), Ok(U256::from_u64(42)));
        assert_eq!(U256::parse_quantity("0x00ff"), Ok(U256::from_u64(255)));
        assert_eq!(U256::parse_quantity(MAX_HEX), Ok(U256::MAX));
        // Leading zeros beyond 64 digits do not overflow.
        let padded = format!("0x{}1", "0".repeat(80));
        assert_eq!(U256::parse_quantity(&padded), Ok(U256::from_u64(1)));
        let big = U256::parse_quantity("0x4b8ed0283a6d3df769fb7e0b75e52f01a").unwrap();
        assert_eq!(hex::encode(big.to_be_bytes_trimmed()), "04b8ed0283a6d3df769fb7e0b75e52f01a");
    }

    #[test]
    fn parses_decimal_quantities() {
        assert_eq!(U256::parse_quantity("0"), Ok(U256::ZERO));
        assert_eq!(U256::parse_quantity("007"), Ok(U256::from_u64(7)));
        let v = U256::parse_quantity("1234567000000000000000").unwrap();
        assert_eq!(v, U256::parse_quantity("0x42ed0f117bd3ad8000").unwrap());
        assert_eq!(U256::parse_quantity(MAX_DEC), Ok(U256::MAX));
        assert_eq!("18446744073709551616".parse::<U256>().unwrap().to_u64(), None);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(U256::parse_quantity(""), Err(NumberError::Empty));
        assert_eq!(U256::parse_quantity("0x"), Err(NumberError::Empty));
        assert_eq!(
            U256::parse_quantity("0xfg"),
            Err(NumberError::InvalidDigit { ch: 'g', index: 3, radix: 16 })
        );
        assert_eq!(
            U256::parse_quantity("12a"),
            Err(NumberError::InvalidDigit { ch: 'a', index: 2, radix: 10 })
        );
        for bad in ["-1", "+1", " 1", "1 ", "1_000", "1.5", "1e3", "0x-1", "ox1", "0xé"] {
            assert!(
                matches!(U256::parse_quantity(bad), Err(NumberError::InvalidDigit { .. })),
                "{bad:?}"
            );
        }
        let over_dec =
            "115792089237316195423570985008687907853269984665640564039457584007913129639936";
        assert_eq!(U256::parse_quantity(over_dec), Err(NumberError::Overflow { bits: 256 }));
        let over_hex = format!("0x1{}", "0".repeat(64));
        assert_eq!(U256::parse_quantity(&over_hex), Err(NumberError::Overflow { bits: 256 }));
    }

    #[test]
    fn parses_hex_without_prefix() {
        assert_eq!(U256::parse_hex("10"), Ok(U256::from_u64(16)));
        assert_eq!(U256::parse_hex("0x03"), Ok(U256::from_u64(3)));
        assert_eq!(U256::parse_hex(&MAX_HEX[2..]), Ok(U256::MAX));
        assert_eq!(U256::parse_hex(""), Err(NumberError::Empty));
        assert!(U256::parse_hex("xyz").is_err());
    }

    #[test]
    fn u64_quantities() {
        assert_eq!(parse_u64_quantity("0x0"), Ok(0));
        assert_eq!(parse_u64_quantity("1"), Ok(1));
        assert_eq!(parse_u64_quantity("0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(parse_u64_quantity("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_u64_quantity("0x10000000000000000"),
            Err(NumberError::Overflow { bits: 64 })
        );
        assert_eq!(parse_u64_quantity(""), Err(NumberError::Empty));
    }

    #[test]
    fn byte_conversions() {
        assert!(U256::ZERO.is_zero());
        assert!(U256::ZERO.to_be_bytes_trimmed().is_empty());
        assert_eq!(U256::from_u64(0x38).to_be_bytes_trimmed(), vec![0x38]);
        assert_eq!(U256::from_u64(0x0100).to_be_bytes_trimmed(), vec![1, 0]);
        assert_eq!(U256::MAX.to_be_bytes(), [0xff; 32]);
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = i as u8;
        }
        let v = U256::from_be_bytes(bytes);
        assert_eq!(v.to_be_bytes(), bytes);
        assert_eq!(U256::from_be_slice(&bytes[1..]), Some(v));
        assert_eq!(U256::from_be_slice(&[1, 2]), Some(U256::from_u64(0x0102)));
        assert_eq!(U256::from_be_slice(&[0; 33]), None);
        assert_eq!(U256::from_be_slice(&[]), Some(U256::ZERO));
    }

    #[test]
    fn ordering_is_numeric() {
        let small = U256::from_u64(u64::MAX);
        let big = U256::parse_quantity("0x10000000000000000").unwrap();
        assert!(small < big && big < U256::MAX && U256::ZERO < small);
    }

    #[test]
    fn formatting() {
        assert_eq!(U256::ZERO.to_string(), "0");
        assert_eq!(U256::MAX.to_string(), MAX_DEC);
        assert_eq!(
            U256::parse_quantity("10000000000000000000").unwrap().to_string(),
            "10000000000000000000"
        );
        assert_eq!(
            U256::parse_quantity("1606938044258990275541962092341162602522").unwrap().to_string(),
            "1606938044258990275541962092341162602522"
        );
        assert_eq!(format!("{:?}", U256::ZERO), "0x0");
        assert_eq!(format!("{:?}", U256::from_u64(0x2a)), "0x2a");
        assert_eq!(format!("{:x}", U256::from_u64(0x100)), "100");
        assert_eq!(format!("{:#x}", U256::MAX), MAX_HEX);
    }
}
