//! Reading untrusted input whole, bounded: the store's config files, and through the
//! re-export the CLI's input files and the checkpoint sources' bodies.

use std::io::Read;

/// The first read step when no size is known.
const STEP_BYTES_MIN: usize = 64 << 10;

/// Read `r` to its end or to one byte past `limit`, whichever comes first (so a result
/// longer than `limit` means the input is), starting with room for `size_hint` bytes and
/// growing by doubling but never past `limit + 1`: an endless stream (`/dev/zero`, a server
/// that never stops) costs at most about 1.5 times the limit, where `read_to_end` would
/// double past it.
pub fn read_capped(mut r: impl Read, limit: u64, size_hint: u64) -> std::io::Result<Vec<u8>> {
    let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let first = usize::try_from(size_hint.saturating_add(1)).unwrap_or(cap).min(cap);
    let mut bytes = Vec::with_capacity(first);
    loop {
        let spare = bytes.capacity() - bytes.len();
        let got = (&mut r).take(spare as u64).read_to_end(&mut bytes)?;
        if bytes.len() >= cap || got < spare {
            return Ok(bytes);
        }
        let step = bytes.capacity().max(STEP_BYTES_MIN).min(cap - bytes.len());
        bytes.reserve_exact(step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_one_byte_past_the_limit_wherever_it_falls() {
        for len in [0usize, 1, 65_535, 65_536, 65_537, 200_000] {
            let input = vec![1u8; len];
            assert_eq!(read_capped(input.as_slice(), len as u64, 0).unwrap().len(), len);
            assert_eq!(read_capped(input.as_slice(), len as u64, len as u64).unwrap().len(), len);
            let cut = read_capped(input.as_slice(), 1000, 0).unwrap();
            assert_eq!(cut.len(), len.min(1001));
        }
        let zero = std::fs::File::open("/dev/zero").unwrap();
        assert_eq!(read_capped(zero, 1 << 16, 0).unwrap().len(), (1 << 16) + 1);
    }
}
