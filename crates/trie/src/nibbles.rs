//! Nibble paths and hex-prefix (compact) encoding.
//!
//! Two shapes: [`NibbleSlice`], a zero-copy window over packed key bytes used by the root
//! builder and proofs, and [`Nibbles`], an owned unpacked path (one nibble per byte) used
//! by the mutable trie where paths are split and joined.

/// Nibble `i` of the packed bytes `key` (high nibble first).
#[inline]
pub fn nibble_at(key: &[u8], i: usize) -> u8 {
    let b = key[i / 2];
    if i.is_multiple_of(2) {
        b >> 4
    } else {
        b & 0x0f
    }
}

/// Length in nibbles of the longest common prefix of two packed keys.
#[inline]
pub fn common_prefix_nibbles(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    // Compare 8 bytes at a time: keys here are mostly 32-byte hashes.
    while i + 8 <= n {
        let x = u64::from_be_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return 2 * i + ((x ^ y).leading_zeros() as usize / 4);
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return 2 * i + usize::from(a[i] >> 4 == b[i] >> 4);
        }
        i += 1;
    }
    2 * n
}

/// A window `[start, end)` of nibbles over packed bytes.
#[derive(Clone, Copy, Debug)]
pub struct NibbleSlice<'a> {
    data: &'a [u8],
    start: usize,
    end: usize,
}

impl<'a> NibbleSlice<'a> {
    /// All nibbles of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        NibbleSlice { data, start: 0, end: data.len() * 2 }
    }

    /// Nibbles `[start, end)` of `data`.
    pub fn range(data: &'a [u8], start: usize, end: usize) -> Self {
        assert!(start <= end && end <= data.len() * 2, "nibble range out of bounds");
        NibbleSlice { data, start, end }
    }

    /// Number of nibbles.
    #[inline]
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Nibble `i` of the window.
    #[inline]
    pub fn at(&self, i: usize) -> u8 {
        nibble_at(self.data, self.start + i)
    }

    /// Unpack into an owned path.
    pub fn to_nibbles(&self) -> Nibbles {
        Nibbles((0..self.len()).map(|i| self.at(i)).collect())
    }

    /// Length of the hex-prefix encoding.
    #[inline]
    pub(crate) fn hp_len(&self) -> usize {
        self.len() / 2 + 1
    }

    /// Append the hex-prefix encoding (flag 2 for a leaf, 0 for an extension).
    pub(crate) fn write_hp(&self, leaf: bool, out: &mut Vec<u8>) {
        let flag = if leaf { 0x20 } else { 0x00 };
        let odd = self.len() % 2 == 1;
        let mut pos = self.start;
        if odd {
            out.push(flag | 0x10 | nibble_at(self.data, pos));
            pos += 1;
        } else {
            out.push(flag);
        }
        self.write_pairs(pos, out);
    }

    /// Append the nibbles two per byte, an odd count's first nibble alone in the low half
    /// of the first byte (Substrate's partial keys; hex-prefix without its flag nibble).
    pub(crate) fn write_packed(&self, out: &mut Vec<u8>) {
        let mut pos = self.start;
        if self.len() % 2 == 1 {
            out.push(nibble_at(self.data, pos));
            pos += 1;
        }
        self.write_pairs(pos, out);
    }

    /// Append nibbles `[pos, end)` (an even count) two per byte.
    #[inline]
    fn write_pairs(&self, mut pos: usize, out: &mut Vec<u8>) {
        if pos.is_multiple_of(2) {
            // Byte aligned: copy the packed bytes as they are.
            out.extend_from_slice(&self.data[pos / 2..self.end / 2]);
        } else {
            while pos < self.end {
                out.push((nibble_at(self.data, pos) << 4) | nibble_at(self.data, pos + 1));
                pos += 2;
            }
        }
    }
}

/// An owned, unpacked nibble path (each byte holds one nibble, 0..=15).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Nibbles(pub Vec<u8>);

impl Nibbles {
    /// Unpack bytes into nibbles.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut v = Vec::with_capacity(bytes.len() * 2);
        for b in bytes {
            v.push(b >> 4);
            v.push(b & 0x0f);
        }
        Nibbles(v)
    }

    /// Pack an even-length path back into bytes; `None` for an odd length.
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        if !self.0.len().is_multiple_of(2) {
            return None;
        }
        Some(self.0.chunks(2).map(|c| (c[0] << 4) | c[1]).collect())
    }

    /// Number of nibbles.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Borrow the nibbles.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    /// Append the hex-prefix encoding of `path`.
    pub(crate) fn write_hp_of(path: &[u8], leaf: bool, out: &mut Vec<u8>) {
        let flag = if leaf { 0x20 } else { 0x00 };
        let (first, rest) =
            if path.len() % 2 == 1 { (flag | 0x10 | path[0], &path[1..]) } else { (flag, path) };
        out.push(first);
        for pair in rest.chunks_exact(2) {
            out.push((pair[0] << 4) | pair[1]);
        }
    }

    /// Append `path` packed as by [`NibbleSlice::write_packed`].
    pub(crate) fn write_packed_of(path: &[u8], out: &mut Vec<u8>) {
        let rest = if path.len() % 2 == 1 {
            out.push(path[0]);
            &path[1..]
        } else {
            path
        };
        for pair in rest.chunks_exact(2) {
            out.push((pair[0] << 4) | pair[1]);
        }
    }

    /// Decode a hex-prefix encoded path; returns the nibbles and the leaf flag.
    pub(crate) fn from_hp(hp: &[u8]) -> Option<(Nibbles, bool)> {
        let first = *hp.first()?;
        let flag = first >> 4;
        if flag > 3 {
            return None;
        }
        let leaf = flag & 2 != 0;
        let odd = flag & 1 != 0;
        let mut v = Vec::with_capacity(hp.len() * 2);
        if odd {
            v.push(first & 0x0f);
        } else if first & 0x0f != 0 {
            return None;
        }
        for b in &hp[1..] {
            v.push(b >> 4);
            v.push(b & 0x0f);
        }
        Some((Nibbles(v), leaf))
    }
}

/// Length of the common prefix of two unpacked paths.
#[inline]
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hp_round_trip() {
        for path in [vec![], vec![1], vec![1, 2], vec![0, 15, 1], vec![1, 2, 3, 4, 5]] {
            for leaf in [false, true] {
                let mut out = Vec::new();
                Nibbles::write_hp_of(&path, leaf, &mut out);
                assert_eq!(Nibbles::from_hp(&out), Some((Nibbles(path.clone()), leaf)));
            }
        }
        assert_eq!(Nibbles::from_hp(&[0x01]), None);
        assert_eq!(Nibbles::from_hp(&[0x40]), None);
    }

    #[test]
    fn slice_hp_matches_unpacked() {
        let key = [0x12u8, 0x34, 0x56, 0x78];
        for start in 0..=8 {
            for end in start..=8 {
                let s = NibbleSlice::range(&key, start, end);
                let mut a = Vec::new();
                s.write_hp(true, &mut a);
                let mut b = Vec::new();
                Nibbles::write_hp_of(s.to_nibbles().as_slice(), true, &mut b);
                assert_eq!(a, b, "start {start} end {end}");
                assert_eq!(a.len(), s.hp_len());
            }
        }
    }

    #[test]
    fn packed_matches_unpacked() {
        let key = [0x12u8, 0x34, 0x56, 0x78];
        for start in 0..=8 {
            for end in start..=8 {
                let s = NibbleSlice::range(&key, start, end);
                let mut a = Vec::new();
                s.write_packed(&mut a);
                let mut b = Vec::new();
                Nibbles::write_packed_of(s.to_nibbles().as_slice(), &mut b);
                assert_eq!(a, b, "start {start} end {end}");
                assert_eq!(a.len(), s.len().div_ceil(2));
            }
        }
        let mut out = Vec::new();
        NibbleSlice::range(&key, 1, 4).write_packed(&mut out);
        assert_eq!(out, [0x02, 0x34]);
    }

    #[test]
    fn common_prefix_packed() {
        assert_eq!(common_prefix_nibbles(&[0x12, 0x34], &[0x12, 0x35]), 3);
        assert_eq!(common_prefix_nibbles(&[0x12, 0x34], &[0x12]), 2);
        assert_eq!(common_prefix_nibbles(&[0x22], &[0x12]), 0);
        let a = [7u8; 32];
        let mut b = a;
        b[20] = 0x70;
        assert_eq!(common_prefix_nibbles(&a, &b), 40);
    }
}
