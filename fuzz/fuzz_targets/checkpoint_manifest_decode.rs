//! `checkpoint::Manifest::decode` on arbitrary bytes: a typed error or a manifest that
//! re-encodes to exactly the same bytes (the encoding has one form), never a panic.

#![no_main]

use checkpoint::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(manifest) = Manifest::decode(data) {
        assert_eq!(manifest.encode(), data, "a decoded manifest re-encodes to other bytes");
    }
});
