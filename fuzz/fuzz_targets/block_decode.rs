//! `chain::Block::decode` on arbitrary bytes: errors are fine, panics are not, and a block
//! that decodes re-encodes to exactly the same bytes (the encoding has one form).
#![no_main]
use chain::Block;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(block) = Block::decode(data) {
        assert_eq!(block.encode(), data, "a decoded block re-encodes to other bytes");
    }
});
