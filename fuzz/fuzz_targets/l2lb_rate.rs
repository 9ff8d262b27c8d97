//! The tc-style rate and size parser: never panics, and what it accepts
//! is within the documented bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nfs::policer::rate::{parse_rate, parse_size, MAX_RATE_BYTES, MAX_SIZE_BYTES};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(r) = parse_rate(s) {
        assert!((1..=MAX_RATE_BYTES).contains(&r));
    }
    if let Ok(n) = parse_size(s) {
        assert!((1..=MAX_SIZE_BYTES).contains(&n));
    }
});
