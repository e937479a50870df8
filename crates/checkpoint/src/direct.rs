//! Chunk files written around the page cache (`O_DIRECT`). A creator writes each chunk
//! once and never reads it back, yet a buffered `write` copies every byte into the page
//! cache first, and that copy (with its page allocation) was a third of creation's CPU
//! (measured: docs/benchmarks.md, "Checkpoints"); a direct write hands the buffer to the
//! device instead. It needs the buffer's address and length on a block boundary
//! ([`ALIGN`]): the creator encodes each chunk at an aligned place of a reused buffer
//! ([`prepare`]), the file is written padded to a whole block and cut back to its length.
//! A file system that refuses direct writes (tmpfs) gets a buffered one.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Alignment of direct writes' buffers, offsets and lengths: 4 KiB, the largest logical
/// block of the devices Linux writes directly to (512-byte devices accept it too).
pub(crate) const ALIGN: usize = 4096;

/// Empty `buf`, reserve room for about `bytes` bytes of chunk, and fill it up to the first
/// [`ALIGN`]ed address; returns that length, where the chunk's bytes are to start.
pub(crate) fn prepare(buf: &mut Vec<u8>, bytes: usize) -> usize {
    buf.clear();
    buf.reserve(bytes.saturating_add(2 * ALIGN));
    let start = misalignment(buf);
    buf.resize(start, 0);
    start
}

/// Bytes from `buf`'s address to the next [`ALIGN`]ed one.
fn misalignment(buf: &[u8]) -> usize {
    (ALIGN - buf.as_ptr() as usize % ALIGN) % ALIGN
}

/// Write `buf[start..]` to a new file at `path` (created, or truncated), directly where the
/// file system allows it and through the page cache otherwise. `buf` may be moved within
/// and padded; `buf[start..]` holds the same bytes again when this returns. The caller
/// makes the file durable.
pub(crate) fn write_new(path: &Path, buf: &mut Vec<u8>, start: usize) -> io::Result<fs::File> {
    let len = buf.len() - start;
    #[cfg(target_os = "linux")]
    {
        let at = align(buf, start, len);
        let direct = write_direct(path, &buf[at..at + len.next_multiple_of(ALIGN)], len);
        restore(buf, at, start, len);
        if let Ok(f) = direct {
            return Ok(f);
        }
    }
    write_buffered(path, &buf[start..])
}

/// Write `bytes` to a new file at `path` (created, or truncated) through the page cache.
/// The caller makes the file durable.
pub(crate) fn write_buffered(path: &Path, bytes: &[u8]) -> io::Result<fs::File> {
    let mut f = fs::File::create(path)?;
    f.write_all(bytes)?;
    Ok(f)
}

/// Place the `len` bytes at `buf[start..]` on an [`ALIGN`]ed address (moving them if
/// `buf` is not laid out by [`prepare`], or grew past what it reserved) and zero-pad them
/// to a whole block; returns where they are.
fn align(buf: &mut Vec<u8>, start: usize, len: usize) -> usize {
    let padded = len.next_multiple_of(ALIGN);
    buf.reserve(padded - len + ALIGN);
    let at = misalignment(buf);
    if at != start {
        // Capacity holds start + padded + ALIGN, and at < ALIGN.
        buf.resize(buf.len().max(at + len), 0);
        buf.copy_within(start..start + len, at);
    }
    buf.truncate(at + len);
    buf.resize(at + padded, 0);
    at
}

/// Undo [`align`]: the bytes back at `buf[start..start + len]`, nothing after them.
fn restore(buf: &mut Vec<u8>, at: usize, start: usize, len: usize) {
    if at != start {
        buf.resize(buf.len().max(start + len), 0);
        buf.copy_within(at..at + len, start);
    }
    buf.truncate(start + len);
}

/// Write `padded` (aligned, a whole number of blocks) directly to a new file at `path`,
/// then cut the file to `len` bytes.
#[cfg(target_os = "linux")]
fn write_direct(path: &Path, padded: &[u8], len: usize) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    f.write_all(padded)?;
    f.set_len(len as u64)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_of_a_buffer_writes_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chunk");
        for len in [0usize, 1, 511, 4095, 4096, 4097, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            // Laid out by `prepare`, and at an arbitrary start of an unprepared buffer.
            let mut prepared = Vec::new();
            let start = prepare(&mut prepared, len);
            prepared.extend_from_slice(&bytes);
            let mut loose = vec![9u8; 3];
            loose.extend_from_slice(&bytes);
            for (buf, start) in [(&mut prepared, start), (&mut loose, 3)] {
                let before = buf.clone();
                drop(write_new(&path, buf, start).unwrap());
                assert_eq!(fs::read(&path).unwrap(), bytes, "{len} bytes");
                assert_eq!(buf[start..], before[start..], "the buffer holds its bytes again");
            }
        }
    }
}
