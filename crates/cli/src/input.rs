//! Reading user-supplied files: every failure names the file and what is wrong with it.
//!
//! Inputs are read whole into memory, at most [`INPUT_BYTES_MAX`] of binary input (a block,
//! a witness under the largest PoV limit) and [`TEXT_BYTES_MAX`] of JSON text (mainnet's
//! genesis is under a megabyte). A regular file over its limit is refused from its size,
//! before it is read; a stream (stdin, a FIFO, `/dev/zero`) is read in growing steps that
//! stop one byte past the limit, so memory stays within about 1.5 times the limit.

use std::path::Path;

use anyhow::{Context, Result};
use eth::Genesis;
use store::read_capped;

/// The largest binary input read whole (a block, a witness).
pub(crate) const INPUT_BYTES_MAX: u64 = 1 << 30;
/// The largest text input read whole (a genesis, a key/value object, a proof).
pub(crate) const TEXT_BYTES_MAX: u64 = 256 << 20;

/// The bytes of `path`, or of stdin when `path` is `-`; an error past [`INPUT_BYTES_MAX`].
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    read_at_most(path, INPUT_BYTES_MAX)
}

fn read_at_most(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let name = display_name(path);
    let too_large = || anyhow::anyhow!("cannot read {name}: larger than {limit} bytes");
    let read = if path == Path::new("-") {
        read_capped(std::io::stdin().lock(), limit, 0)
    } else {
        let file = std::fs::File::open(path).with_context(|| format!("cannot read {name}"))?;
        let meta = file.metadata().with_context(|| format!("cannot read {name}"))?;
        if meta.is_file() && meta.len() > limit {
            return Err(too_large());
        }
        let size = if meta.is_file() { meta.len() } else { 0 };
        read_capped(file, limit, size)
    };
    let bytes = read.with_context(|| format!("cannot read {name}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The text of `path`, or of stdin when `path` is `-`: UTF-8, at most [`TEXT_BYTES_MAX`].
pub(crate) fn read_text(path: &Path) -> Result<String> {
    utf8_text(path, read_text_bytes(path)?)
}

/// The bytes of a text input, at most [`TEXT_BYTES_MAX`], not yet decoded: a caller that
/// judges its content reads it apart from decoding it ([`utf8_text`]).
pub(crate) fn read_text_bytes(path: &Path) -> Result<Vec<u8>> {
    read_at_most(path, TEXT_BYTES_MAX)
}

/// `bytes` (read from `path`) as UTF-8 text.
pub(crate) fn utf8_text(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{} is not UTF-8 text ({e})", display_name(path)))
}

/// clap's parser of a 32-byte hash argument (a root, a checkpoint id): 0x optional.
pub(crate) fn parse_h256(s: &str) -> Result<state::H256, String> {
    let bytes = state::decode_hex(s).map_err(|e| format!("{s:?} is not hex: {e}"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{s:?} is {} bytes; expected 32 (64 hex digits)", b.len()))?;
    Ok(state::H256(bytes))
}

/// A trie key given on the command line.
#[derive(Debug, Clone)]
pub(crate) struct HexKey(pub(crate) Vec<u8>);

/// clap's parser of a trie key argument: hex digits, 0x optional, at most the store's
/// key length ([`store::KEY_BYTES_MAX`] bytes).
pub(crate) fn parse_key(s: &str) -> Result<HexKey, String> {
    let key = state::decode_hex(s).map_err(|e| format!("{s:?} is not a hex key: {e}"))?;
    if key.len() > store::KEY_BYTES_MAX {
        return Err(format!(
            "a key of {} bytes exceeds the {}-byte limit",
            key.len(),
            store::KEY_BYTES_MAX
        ));
    }
    Ok(HexKey(key))
}

/// Parse `path` as a genesis allocation (a full genesis with `alloc`, or a bare alloc).
/// Content that does not parse or check is a usage error naming the file (exit 2, like a
/// flag's value); a file that cannot be read is not.
pub(crate) fn read_genesis(path: &Path) -> Result<Genesis> {
    let text = read_text(path)?;
    Genesis::from_json_str(&text).map_err(|e| file_usage(path, &anyhow::Error::new(e)))
}

/// A usage error about the content of input file `path`: `<file>: <e on one line>`.
pub(crate) fn file_usage(path: &Path, e: &anyhow::Error) -> anyhow::Error {
    crate::usage(format!("{}: {}", display_name(path), crate::error_line(e)))
}

/// How a path is named in messages (`stdin` for `-`).
pub(crate) fn display_name(path: &Path) -> String {
    if path == Path::new("-") {
        "stdin".to_string()
    } else {
        path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_past_the_limit_are_refused_without_reading_them_whole() {
        let zero = Path::new("/dev/zero");
        let e = read_at_most(zero, 1 << 16).unwrap_err();
        assert_eq!(e.to_string(), "cannot read /dev/zero: larger than 65536 bytes");
        let dir = std::env::temp_dir().join(format!("arbor-input-{}", std::process::id()));
        std::fs::write(&dir, [7u8; 100]).unwrap();
        assert_eq!(read_at_most(&dir, 100).unwrap().len(), 100);
        assert!(read_at_most(&dir, 99).is_err());
        // Every step boundary: the limit is exact wherever it falls.
        for len in [0usize, 1, 65_535, 65_536, 65_537, 200_000] {
            std::fs::write(&dir, vec![1u8; len]).unwrap();
            assert_eq!(read_at_most(&dir, len as u64).unwrap().len(), len);
            if len > 0 {
                assert!(read_at_most(&dir, len as u64 - 1).is_err());
            }
            let streamed = read_capped(std::fs::File::open(&dir).unwrap(), len as u64, 0);
            assert_eq!(streamed.unwrap().len(), len);
            let cut = read_capped(std::fs::File::open(&dir).unwrap(), 1000, 0).unwrap();
            assert_eq!(cut.len(), len.min(1001));
        }
        std::fs::write(&dir, [0xff, 0xfe]).unwrap();
        assert!(read_text(&dir).unwrap_err().to_string().contains("not UTF-8"));
        std::fs::remove_file(&dir).unwrap();
    }
}
