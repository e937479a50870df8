//! The reverse-diff decoder on arbitrary bytes: a typed error or entries that re-encode to
//! the same bytes, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use store::test_hooks::ReverseDiff;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = ReverseDiff::decode(data) {
        let mut diff = ReverseDiff::new();
        for (column, key, old) in entries {
            diff.record(column, key, old);
        }
        assert_eq!(diff.encode(), data, "decoded entries re-encode to the input");
    }
});
