//! SCALE's compact integer encoding, as far as Substrate's trie uses it: the lengths of
//! values and inline children inside nodes, and the length prefix of each node a storage
//! proof counts.
//!
//! Four forms, chosen by the two low bits of the first byte: `00` one byte (0..=63), `01`
//! two bytes little-endian (64..=2^14-1), `10` four bytes (2^14..=2^30-1), `11` with a byte
//! count (here always 4: a `u32`) followed by that many bytes (2^30..=2^32-1). Only the
//! shortest form of a number is canonical; the decoder refuses the others, as
//! `parity-scale-codec` does for `Compact<u32>`.

/// Why bytes are not what the reader expected (the node decoder turns this into its
/// `NodeError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScaleError {
    /// The bytes end early.
    Truncated,
    /// A compact integer in a non-canonical or over-long form.
    BadCompact,
    /// Bytes left after the last field.
    Trailing(usize),
}

/// Bytes the compact encoding of `n` takes.
#[inline]
pub(crate) fn compact_len(n: usize) -> usize {
    match n {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 5,
    }
}

/// Append the compact encoding of `n`, which must fit a `u32` (a node field of 4 GiB or
/// more is outside Substrate's format).
#[inline]
pub(crate) fn write_compact(n: usize, out: &mut Vec<u8>) {
    let n = u32::try_from(n).expect("a Substrate trie length must fit in a u32");
    match n {
        0..=0x3f => out.push((n as u8) << 2),
        0x40..=0x3fff => out.extend_from_slice(&(((n as u16) << 2) | 1).to_le_bytes()),
        0x4000..=0x3fff_ffff => out.extend_from_slice(&((n << 2) | 2).to_le_bytes()),
        _ => {
            out.push(0b11);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// A cursor over a node's bytes: every read checks the length first and fails with
/// [`ScaleError::Truncated`] instead of panicking.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// The next byte.
    #[inline]
    pub(crate) fn byte(&mut self) -> Result<u8, ScaleError> {
        let b = *self.bytes.get(self.pos).ok_or(ScaleError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// The next `n` bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], ScaleError> {
        let end = self.pos.checked_add(n).ok_or(ScaleError::Truncated)?;
        let s = self.bytes.get(self.pos..end).ok_or(ScaleError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ScaleError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A canonical compact `u32`, as a length.
    pub(crate) fn compact(&mut self) -> Result<usize, ScaleError> {
        let b0 = self.byte()?;
        let (n, min) = match b0 & 0b11 {
            0b00 => return Ok(usize::from(b0 >> 2)),
            0b01 => (u32::from(u16::from_le_bytes([b0, self.byte()?]) >> 2), 0x40),
            0b10 => {
                let rest: [u8; 3] = self.array()?;
                (u32::from_le_bytes([b0, rest[0], rest[1], rest[2]]) >> 2, 0x4000)
            }
            _ => {
                // The upper six bits count the bytes beyond four: a u32 has none.
                if b0 >> 2 != 0 {
                    return Err(ScaleError::BadCompact);
                }
                (u32::from_le_bytes(self.array()?), 0x4000_0000)
            }
        };
        if n < min {
            return Err(ScaleError::BadCompact);
        }
        usize::try_from(n).map_err(|_| ScaleError::BadCompact)
    }

    /// Fail unless every byte was read.
    pub(crate) fn finish(self) -> Result<(), ScaleError> {
        match self.bytes.len() - self.pos {
            0 => Ok(()),
            n => Err(ScaleError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_round_trip_at_the_form_boundaries() {
        let cases = [0usize, 1, 63, 64, 65, 0x3fff, 0x4000, 0x3fff_ffff, 0x4000_0000, 0xffff_ffff];
        for n in cases {
            let mut out = Vec::new();
            write_compact(n, &mut out);
            assert_eq!(out.len(), compact_len(n), "{n}");
            let mut r = Reader::new(&out);
            assert_eq!(r.compact(), Ok(n), "{n}");
            r.finish().unwrap();
        }
        let mut out = Vec::new();
        write_compact(64, &mut out);
        assert_eq!(out, [0x01, 0x01]);
    }

    #[test]
    fn compact_refuses_long_forms_and_truncation() {
        // 1 in the two-, four- and five-byte forms; a 5-byte count in the big form.
        for bad in
            [&[0x05u8, 0x00][..], &[0x06, 0, 0, 0], &[0x03, 1, 0, 0, 0], &[0x07, 0, 0, 0, 0, 0x40]]
        {
            assert_eq!(Reader::new(bad).compact(), Err(ScaleError::BadCompact), "{bad:?}");
        }
        for short in [&[][..], &[0x01], &[0x02, 0, 0], &[0x03, 0, 0, 0]] {
            assert_eq!(Reader::new(short).compact(), Err(ScaleError::Truncated), "{short:?}");
        }
    }
}
