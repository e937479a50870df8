//! Minimal RLP: the encoders the node codec needs and a strict, panic-free decoder.
//! Public: [`RlpItem`] (decoding), [`RlpListIter`], [`RlpError`], and the two encoders
//! [`rlp_encode_string`] and [`rlp_encode_list`] that account leaves are built with; the
//! header writers stay inside the crate.
//!
//! The decoder accepts only canonical encodings (a single byte below 0x80 is never wrapped,
//! lengths have no leading zeros and use the short form when they can) and checks every
//! length against the bytes actually present, so hostile input yields an [`RlpError`].

/// Why a byte string is not valid RLP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RlpError {
    /// The input ended before the item did.
    #[error("truncated RLP item: need {needed} bytes, have {have}")]
    Truncated {
        /// Bytes the header announced (header included).
        needed: usize,
        /// Bytes present.
        have: usize,
    },
    /// The input is empty where an item was expected.
    #[error("empty input where an RLP item was expected")]
    Empty,
    /// A length does not fit in memory (or in `usize`).
    #[error("RLP length overflows")]
    LengthOverflow,
    /// A non-canonical encoding.
    #[error("non-canonical RLP: {0}")]
    NonCanonical(&'static str),
    /// Bytes left over after the item.
    #[error("{0} trailing bytes after the RLP item")]
    Trailing(usize),
    /// A list was found where a string was expected or the reverse.
    #[error("expected an RLP {expected}")]
    UnexpectedKind {
        /// "string" or "list".
        expected: &'static str,
    },
}

/// One decoded RLP item: a byte string or the payload of a list (RLP has no other kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RlpItem<'a> {
    /// A byte string.
    String(&'a [u8]),
    /// The raw payload of a list (iterate it with [`RlpListIter`]).
    List(&'a [u8]),
}

impl<'a> RlpItem<'a> {
    /// Decode exactly one item spanning all of `buf` (canonical encodings only).
    pub fn decode_exact(buf: &'a [u8]) -> Result<RlpItem<'a>, RlpError> {
        let (item, used) = decode_item(buf)?;
        if used != buf.len() {
            return Err(RlpError::Trailing(buf.len() - used));
        }
        Ok(item)
    }

    /// The string bytes, or an error for a list.
    pub fn string(self) -> Result<&'a [u8], RlpError> {
        match self {
            RlpItem::String(s) => Ok(s),
            RlpItem::List(_) => Err(RlpError::UnexpectedKind { expected: "string" }),
        }
    }
}

/// Decode the first item of `buf`; returns the item and the number of bytes it used.
pub(crate) fn decode_item(buf: &[u8]) -> Result<(RlpItem<'_>, usize), RlpError> {
    let first = *buf.first().ok_or(RlpError::Empty)?;
    let (is_list, header, len) = match first {
        0x00..=0x7f => return Ok((RlpItem::String(&buf[..1]), 1)),
        0x80..=0xb7 => (false, 1, (first - 0x80) as usize),
        0xb8..=0xbf => {
            let n = (first - 0xb7) as usize;
            (false, 1 + n, long_len(buf, n)?)
        }
        0xc0..=0xf7 => (true, 1, (first - 0xc0) as usize),
        0xf8..=0xff => {
            let n = (first - 0xf7) as usize;
            (true, 1 + n, long_len(buf, n)?)
        }
    };
    let total = header.checked_add(len).ok_or(RlpError::LengthOverflow)?;
    if buf.len() < total {
        return Err(RlpError::Truncated { needed: total, have: buf.len() });
    }
    let payload = &buf[header..total];
    if !is_list && header == 1 && len == 1 && payload[0] < 0x80 {
        return Err(RlpError::NonCanonical("single byte below 0x80 wrapped in a string header"));
    }
    Ok((if is_list { RlpItem::List(payload) } else { RlpItem::String(payload) }, total))
}

fn long_len(buf: &[u8], n: usize) -> Result<usize, RlpError> {
    let bytes = buf.get(1..1 + n).ok_or(RlpError::Truncated { needed: 1 + n, have: buf.len() })?;
    if bytes[0] == 0 {
        return Err(RlpError::NonCanonical("length with leading zero"));
    }
    if n > std::mem::size_of::<usize>() {
        return Err(RlpError::LengthOverflow);
    }
    let len = bytes.iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
    if len < 56 {
        return Err(RlpError::NonCanonical("long length form for a length below 56"));
    }
    Ok(len)
}

/// Iterator over the items of a list payload; after an error it yields nothing more.
#[derive(Debug, Clone)]
pub struct RlpListIter<'a> {
    rest: &'a [u8],
}

impl<'a> RlpListIter<'a> {
    /// Iterate the items in a list payload (the bytes of [`RlpItem::List`]).
    pub fn new(payload: &'a [u8]) -> Self {
        RlpListIter { rest: payload }
    }
}

impl<'a> Iterator for RlpListIter<'a> {
    type Item = Result<RlpItem<'a>, RlpError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match decode_item(self.rest) {
            Ok((item, used)) => {
                self.rest = &self.rest[used..];
                Some(Ok(item))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// Length of the header for a payload of `len` bytes.
#[inline]
pub(crate) fn header_len(len: usize) -> usize {
    if len < 56 {
        1
    } else {
        1 + be_len(len)
    }
}

#[inline]
fn be_len(len: usize) -> usize {
    (usize::BITS as usize / 8) - (len.leading_zeros() as usize / 8)
}

#[inline]
fn write_header(out: &mut Vec<u8>, len: usize, short: u8, long: u8) {
    if len < 56 {
        out.push(short + len as u8);
    } else {
        let n = be_len(len);
        out.push(long + n as u8);
        out.extend_from_slice(&len.to_be_bytes()[std::mem::size_of::<usize>() - n..]);
    }
}

/// Write a list header for a payload of `len` bytes.
#[inline]
pub(crate) fn write_list_header(out: &mut Vec<u8>, len: usize) {
    write_header(out, len, 0xc0, 0xf7);
}

/// Write a string header for a payload of `len` bytes (the caller writes the payload; a
/// single byte below 0x80 must go through [`write_string`] instead).
#[inline]
pub(crate) fn write_string_header(out: &mut Vec<u8>, len: usize) {
    write_header(out, len, 0x80, 0xb7);
}

/// Encoded length of the byte string `s`.
#[inline]
pub(crate) fn string_len(s: &[u8]) -> usize {
    if s.len() == 1 && s[0] < 0x80 {
        1
    } else {
        header_len(s.len()) + s.len()
    }
}

/// Write the byte string `s`.
#[inline]
pub(crate) fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() == 1 && s[0] < 0x80 {
        out.push(s[0]);
    } else {
        write_string_header(out, s.len());
        out.extend_from_slice(s);
    }
}

/// The RLP encoding of the byte string `s`.
pub fn rlp_encode_string(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(string_len(s));
    write_string(&mut out, s);
    out
}

/// The RLP encoding of a list whose items are the byte strings `items` (one allocation).
pub fn rlp_encode_list(items: &[&[u8]]) -> Vec<u8> {
    let payload: usize = items.iter().map(|s| string_len(s)).sum();
    let mut out = Vec::with_capacity(header_len(payload) + payload);
    write_list_header(&mut out, payload);
    for s in items {
        write_string(&mut out, s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_strings() {
        for len in [0usize, 1, 2, 55, 56, 255, 256, 70_000] {
            let s = vec![0xabu8; len];
            let mut out = Vec::new();
            write_string(&mut out, &s);
            assert_eq!(out.len(), string_len(&s));
            assert_eq!(RlpItem::decode_exact(&out).unwrap(), RlpItem::String(&s));
        }
        let mut out = Vec::new();
        write_string(&mut out, &[0x05]);
        assert_eq!(out, vec![0x05]);
    }

    #[test]
    fn encodes_string_lists() {
        let long = [0xabu8; 60];
        let list = rlp_encode_list(&[&[], &[0x05], &[0x80], &long]);
        let RlpItem::List(payload) = RlpItem::decode_exact(&list).unwrap() else {
            panic!("not a list: {list:?}")
        };
        let items: Vec<_> = RlpListIter::new(payload).collect::<Result<_, _>>().unwrap();
        let want = [&[][..], &[0x05], &[0x80], &long].map(RlpItem::String);
        assert_eq!(items, want);
        assert_eq!(rlp_encode_list(&[]), vec![0xc0]);
        assert_eq!(rlp_encode_string(&[0x80]), vec![0x81, 0x80]);
        assert_eq!(rlp_encode_string(&[0x05]), vec![0x05]);
        assert_eq!(rlp_encode_string(&[]), vec![0x80]);
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(decode_item(&[]), Err(RlpError::Empty));
        assert!(matches!(decode_item(&[0x83, 1, 2]), Err(RlpError::Truncated { .. })));
        assert_eq!(
            decode_item(&[0x81, 0x05]).unwrap_err(),
            RlpError::NonCanonical("single byte below 0x80 wrapped in a string header")
        );
        assert!(matches!(decode_item(&[0xb8, 0x10]), Err(RlpError::NonCanonical(_))));
        assert!(matches!(decode_item(&[0xb9, 0x00, 0x40]), Err(RlpError::NonCanonical(_))));
        assert!(matches!(
            decode_item(&[0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Err(RlpError::LengthOverflow | RlpError::Truncated { .. })
        ));
        assert!(matches!(decode_item(&[0xff, 1]), Err(RlpError::Truncated { .. })));
        assert_eq!(RlpItem::decode_exact(&[0x01, 0x02]), Err(RlpError::Trailing(1)));
    }
}
