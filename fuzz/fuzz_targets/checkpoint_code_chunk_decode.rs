//! `checkpoint::CodeChunk::decode` on arbitrary bytes: a typed error or a code chunk that
//! re-encodes to exactly the same bytes (the encoding has one form), never a panic.

#![no_main]

use checkpoint::CodeChunk;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(chunk) = CodeChunk::decode(data) {
        assert_eq!(chunk.encode(), data, "a decoded code chunk re-encodes to other bytes");
    }
});
