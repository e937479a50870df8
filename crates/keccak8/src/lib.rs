//! Keccak-256 of many independent messages at once.
//!
//! A trie commit hashes tens of thousands of nodes whose encodings are all known at the
//! same moment (one level of the trie at a time). One Keccak-f\[1600\] state does not
//! vectorise, but eight independent states do: on a CPU with AVX-512F, [`keccak256_many`]
//! keeps eight sponges in the eight 64-bit lanes of 25 ZMM registers (θ's column parities
//! and χ are three-input `vpternlogq`s, ρ is `vprolq`), which measured 2.6–3.2× the
//! throughput of one-at-a-time `keccak-asm` on this project's machine (AMD Zen 4) for
//! 137- and 532-byte messages. On CPUs with AVX2 but not AVX-512F, four sponges sit in the
//! lanes of YMM registers (2.3–2.7× `keccak-asm` on an AMD EPYC host without AVX-512).
//! Elsewhere, or with `ARBOR_KECCAK8=scalar` in the environment, every message goes through
//! `keccak-asm` one by one (`ARBOR_KECCAK8=avx2` picks the four-lane kernel where AVX-512
//! is present). Every path gives the same bytes (tested against each other and against
//! known digests).
//!
//! Messages of different lengths may share a batch: a lane whose message ends early is
//! read out after its last block and then only absorbs zeros. Batches are filled in
//! order of block count, so that lanes rarely wait for each other.
//!
//! Unsafe code: one call per kernel, entering it after the CPU was seen to support its
//! features. The kernels' intrinsics are safe inside them.

use std::sync::OnceLock;

/// Bytes absorbed per permutation (Keccak-256's rate).
const RATE: usize = 136;

/// Which implementation [`keccak256_many`] uses on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Eight states per AVX-512 register set.
    Avx512x8,
    /// Four states per AVX2 register set.
    Avx2x4,
    /// `keccak-asm`, one message at a time.
    Scalar,
}

impl Backend {
    /// Messages hashed together (1 for the scalar path).
    fn width(self) -> usize {
        match self {
            Backend::Avx512x8 => 8,
            Backend::Avx2x4 => 4,
            Backend::Scalar => 1,
        }
    }
}

/// The implementation in use: the widest the CPU has (AVX-512F, else AVX2), unless
/// `ARBOR_KECCAK8` names a narrower one (`avx2` or `scalar`; other values are ignored).
pub fn backend() -> Backend {
    static CHOSEN: OnceLock<Backend> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let forced = std::env::var("ARBOR_KECCAK8").unwrap_or_default();
        if forced == "scalar" {
            Backend::Scalar
        } else if forced != "avx2" && simd::available() {
            Backend::Avx512x8
        } else if avx2::available() {
            Backend::Avx2x4
        } else {
            Backend::Scalar
        }
    })
}

/// One Keccak-256 digest.
pub fn keccak256(msg: &[u8]) -> [u8; 32] {
    keccak_asm::Keccak256::digest(msg).into()
}

/// `out[i] = keccak256(msgs[i])` for every `i`.
///
/// # Panics
/// If `msgs` and `out` differ in length.
pub fn keccak256_many(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
    assert_eq!(msgs.len(), out.len(), "keccak256_many: one output per message");
    let backend = backend();
    let width = backend.width();
    if width == 1 || msgs.len() < 2 {
        for (m, o) in msgs.iter().zip(out.iter_mut()) {
            *o = keccak256(m);
        }
        return;
    }
    // Batches in order of block count: lanes of one batch then finish together.
    let mut order: Vec<u32> = (0..msgs.len() as u32).collect();
    order.sort_by_key(|&i| msgs[i as usize].len() / RATE);
    for chunk in order.chunks(width) {
        if chunk.len() == 1 {
            let i = chunk[0] as usize;
            out[i] = keccak256(msgs[i]);
            continue;
        }
        let mut batch: [&[u8]; 8] = [&[]; 8];
        for (slot, &i) in batch.iter_mut().zip(chunk) {
            *slot = msgs[i as usize];
        }
        let batch = &batch[..chunk.len()];
        let mut digests = [[0u8; 32]; 8];
        match backend {
            Backend::Avx512x8 => digests = simd::hash8(batch),
            Backend::Avx2x4 => digests[..4].copy_from_slice(&avx2::hash4(batch)),
            Backend::Scalar => unreachable!("the scalar backend (width 1) returned above"),
        }
        for (d, &i) in digests.iter().zip(chunk) {
            out[i as usize] = *d;
        }
    }
}

/// The message's blocks as the sponge absorbs them: the full ones, then the padded last.
struct Blocks<'a> {
    msg: &'a [u8],
    /// The last block, padded (`0x01 … 0x80`).
    tail: [u8; RATE],
}

impl<'a> Blocks<'a> {
    fn new(msg: &'a [u8]) -> Blocks<'a> {
        let full = msg.len() / RATE * RATE;
        let rest = &msg[full..];
        let mut tail = [0u8; RATE];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] ^= 0x01;
        tail[RATE - 1] ^= 0x80;
        Blocks { msg: &msg[..full], tail }
    }

    /// Permutations this message needs.
    fn count(&self) -> usize {
        self.msg.len() / RATE + 1
    }

    /// Block `b`, or `None` past the last.
    fn get(&self, b: usize) -> Option<&[u8]> {
        let start = b * RATE;
        if start < self.msg.len() {
            Some(&self.msg[start..start + RATE])
        } else if start == self.msg.len() {
            Some(&self.tail)
        } else {
            None
        }
    }
}

/// Keccak-f\[1600\]'s ρ and π over the 25 lanes `$a` of any kernel: lane (x, y) rotated
/// by its offset into position (y, 2x + 3y), with `$rol!(lane, n)` the kernel's rotate left.
macro_rules! rho_pi {
    ($a:ident, $rol:ident) => {
        [
            $a[0],
            $rol!($a[6], 44),
            $rol!($a[12], 43),
            $rol!($a[18], 21),
            $rol!($a[24], 14),
            $rol!($a[3], 28),
            $rol!($a[9], 20),
            $rol!($a[10], 3),
            $rol!($a[16], 45),
            $rol!($a[22], 61),
            $rol!($a[1], 1),
            $rol!($a[7], 6),
            $rol!($a[13], 25),
            $rol!($a[19], 8),
            $rol!($a[20], 18),
            $rol!($a[4], 27),
            $rol!($a[5], 36),
            $rol!($a[11], 10),
            $rol!($a[17], 15),
            $rol!($a[23], 56),
            $rol!($a[2], 62),
            $rol!($a[8], 55),
            $rol!($a[14], 39),
            $rol!($a[15], 41),
            $rol!($a[21], 2),
        ]
    };
}

/// One batch's messages as a sponge of `N` lanes absorbs them (lanes past the messages
/// absorb zeros).
struct Batch<'a, const N: usize> {
    /// The first `len` lanes' messages (the rest unused): an array, not a `Vec`, so that a
    /// batch costs no allocation (the update pass hashes a few thousand per block).
    lanes: [Blocks<'a>; N],
    len: usize,
}

impl<'a, const N: usize> Batch<'a, N> {
    fn new(msgs: &[&'a [u8]]) -> Self {
        assert!(msgs.len() <= N, "a batch holds at most {N} messages");
        let lanes = std::array::from_fn(|k| Blocks::new(msgs.get(k).copied().unwrap_or_default()));
        Batch { lanes, len: msgs.len() }
    }

    /// The lanes that carry a message.
    fn blocks(&self) -> &[Blocks<'a>] {
        &self.lanes[..self.len]
    }

    /// Permutations the longest message needs.
    fn rounds(&self) -> usize {
        self.blocks().iter().map(Blocks::count).max().unwrap_or(0)
    }

    /// Each lane's block `b` (zeros past its message's end).
    fn inputs(&self, b: usize) -> [&[u8]; N] {
        let mut input: [&[u8]; N] = [&ZERO_BLOCK; N];
        for (slot, m) in input.iter_mut().zip(self.blocks()) {
            *slot = m.get(b).unwrap_or(&ZERO_BLOCK);
        }
        input
    }

    /// True when some message's last block is block `b`.
    fn ends_at(&self, b: usize) -> bool {
        self.blocks().iter().any(|m| m.count() == b + 1)
    }

    /// After the permutation of block `b`: the digest of every message that ended there,
    /// from the first four words of the state (`words[w][k]`: word `w` of lane `k`).
    fn emit(&self, b: usize, words: [[u64; N]; 4], out: &mut [[u8; 32]; N]) {
        for (k, m) in self.blocks().iter().enumerate() {
            if m.count() == b + 1 {
                for (w, word) in words.iter().enumerate() {
                    out[k][w * 8..w * 8 + 8].copy_from_slice(&word[k].to_le_bytes());
                }
            }
        }
    }
}

/// An all-zero block, absorbed by lanes whose message has ended.
const ZERO_BLOCK: [u8; RATE] = [0u8; RATE];

/// Word `l` (little-endian) of each lane's block.
#[inline]
fn word<const N: usize>(input: &[&[u8]; N], l: usize) -> [i64; N] {
    input.map(|block| {
        let bytes: [u8; 8] = block[l * 8..l * 8 + 8].try_into().unwrap_or_default();
        u64::from_le_bytes(bytes) as i64
    })
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{word, Batch, RATE};

    /// Keccak-f\[1600\]'s round constants.
    pub(super) const RC: [u64; 24] = [
        0x0000000000000001,
        0x0000000000008082,
        0x800000000000808a,
        0x8000000080008000,
        0x000000000000808b,
        0x0000000080000001,
        0x8000000080008081,
        0x8000000000008009,
        0x000000000000008a,
        0x0000000000000088,
        0x0000000080008009,
        0x000000008000000a,
        0x000000008000808b,
        0x800000000000008b,
        0x8000000000008089,
        0x8000000000008003,
        0x8000000000008002,
        0x8000000000000080,
        0x000000000000800a,
        0x800000008000000a,
        0x8000000080008081,
        0x8000000000008080,
        0x0000000080000001,
        0x8000000080008008,
    ];

    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx512f")
    }

    /// The digests of up to eight messages.
    pub(super) fn hash8(msgs: &[&[u8]]) -> [[u8; 32]; 8] {
        assert!(msgs.len() <= 8 && available(), "hash8: at most 8 messages, on AVX-512F");
        // SAFETY: `kernel` only requires AVX-512F (and what it implies), which the CPU was
        // just seen to support; its arguments are ordinary references.
        #[allow(unsafe_code)]
        unsafe {
            kernel(msgs)
        }
    }

    /// `x` rotated left by `n` bits: `vprolq`.
    macro_rules! rol {
        ($x:expr, $n:literal) => {
            _mm512_rol_epi64::<$n>($x)
        };
    }

    /// XOR, three ways: `vpternlogq` with the truth table of `a ^ b ^ c`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn xor3(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
        _mm512_ternarylogic_epi64::<0x96>(a, b, c)
    }

    /// χ for one lane: `a ^ (!b & c)`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn chi(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
        _mm512_ternarylogic_epi64::<0xD2>(a, b, c)
    }

    /// The eight 64-bit lanes of `v`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn lanes(v: __m512i) -> [u64; 8] {
        let lo = _mm512_extracti64x4_epi64::<0>(v);
        let hi = _mm512_extracti64x4_epi64::<1>(v);
        [
            _mm256_extract_epi64::<0>(lo) as u64,
            _mm256_extract_epi64::<1>(lo) as u64,
            _mm256_extract_epi64::<2>(lo) as u64,
            _mm256_extract_epi64::<3>(lo) as u64,
            _mm256_extract_epi64::<0>(hi) as u64,
            _mm256_extract_epi64::<1>(hi) as u64,
            _mm256_extract_epi64::<2>(hi) as u64,
            _mm256_extract_epi64::<3>(hi) as u64,
        ]
    }

    /// Keccak-f\[1600\] on eight states (state lane `i` of sponge `k` in `s[i]`, lane `k`).
    #[target_feature(enable = "avx512f")]
    fn permute(s: &mut [__m512i; 25]) {
        let mut a = *s;
        for rc in RC {
            // θ: column parities, then each lane takes two neighbouring columns.
            let c: [__m512i; 5] = std::array::from_fn(|x| {
                xor3(xor3(a[x], a[x + 5], a[x + 10]), a[x + 15], a[x + 20])
            });
            let d: [__m512i; 5] = std::array::from_fn(|x| {
                _mm512_xor_si512(c[(x + 4) % 5], _mm512_rol_epi64::<1>(c[(x + 1) % 5]))
            });
            for (i, lane) in a.iter_mut().enumerate() {
                *lane = _mm512_xor_si512(*lane, d[i % 5]);
            }
            // ρ and π: lane (x, y) rotates into position (y, 2x + 3y).
            let b = rho_pi!(a, rol);
            // χ along each row, then ι.
            for y in 0..5 {
                let r = 5 * y;
                for x in 0..5 {
                    a[r + x] = chi(b[r + x], b[r + (x + 1) % 5], b[r + (x + 2) % 5]);
                }
            }
            a[0] = _mm512_xor_si512(a[0], _mm512_set1_epi64(rc as i64));
        }
        *s = a;
    }

    /// The sponge over up to eight messages; lanes past `msgs.len()` hash nothing.
    #[target_feature(enable = "avx512f")]
    fn kernel(msgs: &[&[u8]]) -> [[u8; 32]; 8] {
        let batch = Batch::<8>::new(msgs);
        let mut s = [_mm512_setzero_si512(); 25];
        let mut out = [[0u8; 32]; 8];
        for b in 0..batch.rounds() {
            let input = batch.inputs(b);
            for (l, lane) in s.iter_mut().enumerate().take(RATE / 8) {
                let w = word(&input, l);
                let v = _mm512_set_epi64(w[7], w[6], w[5], w[4], w[3], w[2], w[1], w[0]);
                *lane = _mm512_xor_si512(*lane, v);
            }
            permute(&mut s);
            if batch.ends_at(b) {
                batch.emit(b, [lanes(s[0]), lanes(s[1]), lanes(s[2]), lanes(s[3])], &mut out);
            }
        }
        out
    }
}

/// Four states in the 64-bit lanes of 25 YMM registers, for CPUs with AVX2 but not
/// AVX-512F: no three-input logic and no 64-bit rotate, so θ's parities are two XORs each,
/// χ is `vpandn` then XOR, and ρ is two shifts and an OR.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::simd::RC;
    use super::{word, Batch, RATE};

    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx2")
    }

    /// The digests of up to four messages.
    pub(super) fn hash4(msgs: &[&[u8]]) -> [[u8; 32]; 4] {
        assert!(msgs.len() <= 4 && available(), "hash4: at most 4 messages, on AVX2");
        // SAFETY: `kernel` only requires AVX2 (and what it implies), which the CPU was just
        // seen to support; its arguments are ordinary references.
        #[allow(unsafe_code)]
        unsafe {
            kernel(msgs)
        }
    }

    /// `x` rotated left by `n` bits (0 < n < 64).
    macro_rules! rol {
        ($x:expr, $n:literal) => {
            _mm256_or_si256(_mm256_slli_epi64::<$n>($x), _mm256_srli_epi64::<{ 64 - $n }>($x))
        };
    }

    /// Keccak-f\[1600\] on four states (state lane `i` of sponge `k` in `s[i]`, lane `k`).
    #[target_feature(enable = "avx2")]
    fn permute(s: &mut [__m256i; 25]) {
        let mut a = *s;
        for rc in RC {
            // θ: column parities, then each lane takes two neighbouring columns.
            let mut c = [_mm256_setzero_si256(); 5];
            for (i, c) in c.iter_mut().enumerate() {
                let p = _mm256_xor_si256(_mm256_xor_si256(a[i], a[i + 5]), a[i + 10]);
                *c = _mm256_xor_si256(_mm256_xor_si256(p, a[i + 15]), a[i + 20]);
            }
            for i in 0..5 {
                let d = _mm256_xor_si256(c[(i + 4) % 5], rol!(c[(i + 1) % 5], 1));
                for y in 0..5 {
                    a[5 * y + i] = _mm256_xor_si256(a[5 * y + i], d);
                }
            }
            // ρ and π: lane (x, y) rotates into position (y, 2x + 3y).
            let b = rho_pi!(a, rol);
            // χ along each row (`b ^ (!b1 & b2)`), then ι.
            for y in 0..5 {
                let r = 5 * y;
                for i in 0..5 {
                    let t = _mm256_andnot_si256(b[r + (i + 1) % 5], b[r + (i + 2) % 5]);
                    a[r + i] = _mm256_xor_si256(b[r + i], t);
                }
            }
            a[0] = _mm256_xor_si256(a[0], _mm256_set1_epi64x(rc as i64));
        }
        *s = a;
    }

    /// The four 64-bit lanes of `v`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(v: __m256i) -> [u64; 4] {
        [
            _mm256_extract_epi64::<0>(v) as u64,
            _mm256_extract_epi64::<1>(v) as u64,
            _mm256_extract_epi64::<2>(v) as u64,
            _mm256_extract_epi64::<3>(v) as u64,
        ]
    }

    /// The sponge over up to four messages; lanes past `msgs.len()` hash nothing.
    #[target_feature(enable = "avx2")]
    fn kernel(msgs: &[&[u8]]) -> [[u8; 32]; 4] {
        let batch = Batch::<4>::new(msgs);
        let mut s = [_mm256_setzero_si256(); 25];
        let mut out = [[0u8; 32]; 4];
        for b in 0..batch.rounds() {
            let input = batch.inputs(b);
            for (l, lane) in s.iter_mut().enumerate().take(RATE / 8) {
                let w = word(&input, l);
                *lane = _mm256_xor_si256(*lane, _mm256_set_epi64x(w[3], w[2], w[1], w[0]));
            }
            permute(&mut s);
            if batch.ends_at(b) {
                batch.emit(b, [lanes(s[0]), lanes(s[1]), lanes(s[2]), lanes(s[3])], &mut out);
            }
        }
        out
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn hash8(_: &[&[u8]]) -> [[u8; 32]; 8] {
        unreachable!("no SIMD backend on this architecture")
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod avx2 {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn hash4(_: &[&[u8]]) -> [[u8; 32]; 4] {
        unreachable!("no SIMD backend on this architecture")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn hex(d: &[u8; 32]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn known_digests() {
        // keccak256("") and keccak256("abc"), as Ethereum uses them.
        let msgs: [&[u8]; 2] = [b"", b"abc"];
        let mut out = [[0u8; 32]; 2];
        keccak256_many(&msgs, &mut out);
        assert_eq!(
            hex(&out[0]),
            "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
        assert_eq!(
            hex(&out[1]),
            "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
        );
    }

    #[test]
    fn every_length_around_the_block_edges() {
        // Lengths 0..=700 cover every padding case (tail of 0, 135 and 136 bytes) over one
        // to six blocks, in batches that mix lengths.
        let data: Vec<Vec<u8>> =
            (0..=700usize).map(|n| (0..n).map(|i| (i * 7 + n) as u8).collect()).collect();
        let msgs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut out = vec![[0u8; 32]; msgs.len()];
        keccak256_many(&msgs, &mut out);
        for (m, d) in msgs.iter().zip(&out) {
            assert_eq!(*d, keccak256(m), "length {}", m.len());
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_kernel_matches_scalar_with_partial_batches() {
        if !simd::available() {
            return;
        }
        let data: Vec<Vec<u8>> = (0..8).map(|k| vec![k as u8; 100 + 150 * k]).collect();
        for n in 1..=8 {
            let msgs: Vec<&[u8]> = data[..n].iter().map(Vec::as_slice).collect();
            let digests = simd::hash8(&msgs);
            for (m, d) in msgs.iter().zip(&digests) {
                assert_eq!(*d, keccak256(m), "{n} lanes, length {}", m.len());
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_kernel_matches_scalar_with_partial_batches() {
        if !avx2::available() {
            return;
        }
        let data: Vec<Vec<u8>> = (0..4).map(|k| vec![k as u8 + 1; 130 + 150 * k]).collect();
        for n in 1..=4 {
            let msgs: Vec<&[u8]> = data[..n].iter().map(Vec::as_slice).collect();
            let digests = avx2::hash4(&msgs);
            for (m, d) in msgs.iter().zip(&digests) {
                assert_eq!(*d, keccak256(m), "{n} lanes, length {}", m.len());
            }
        }
        // Every length over the block edges, four at a time.
        let data: Vec<Vec<u8>> =
            (0..=700usize).map(|n| (0..n).map(|i| (i * 13 + n) as u8).collect()).collect();
        for group in data.chunks(4) {
            let msgs: Vec<&[u8]> = group.iter().map(Vec::as_slice).collect();
            for (m, d) in msgs.iter().zip(&avx2::hash4(&msgs)) {
                assert_eq!(*d, keccak256(m), "length {}", m.len());
            }
        }
    }

    proptest! {
        #[test]
        fn batches_equal_one_at_a_time(
            msgs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..600), 0..40)
        ) {
            let refs: Vec<&[u8]> = msgs.iter().map(Vec::as_slice).collect();
            let mut out = vec![[0u8; 32]; refs.len()];
            keccak256_many(&refs, &mut out);
            for (m, d) in refs.iter().zip(&out) {
                prop_assert_eq!(*d, keccak256(m));
            }
        }
    }
}

#[cfg(test)]
mod speed {
    //! `cargo test --release -p keccak8 -- --ignored --nocapture`: batched vs one at a time.
    use std::time::Instant;

    use super::*;

    #[test]
    #[ignore]
    fn batch_speed() {
        for len in [137usize, 532] {
            let data: Vec<Vec<u8>> =
                (0..8000).map(|i| (0..len).map(|j| (i * 31 + j * 7) as u8).collect()).collect();
            let msgs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let mut out = vec![[0u8; 32]; msgs.len()];
            for _ in 0..3 {
                let t = Instant::now();
                for (m, o) in msgs.iter().zip(out.iter_mut()) {
                    *o = keccak256(m);
                }
                let one = t.elapsed().as_nanos() as f64 / 8000.0;
                let t = Instant::now();
                keccak256_many(&msgs, &mut out);
                let many = t.elapsed().as_nanos() as f64 / 8000.0;
                eprintln!(
                    "{len} bytes: {one:.0} ns one at a time, {many:.0} ns batched ({:.2}x)",
                    one / many
                );
            }
        }
    }
}
