//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod exercise;

/// Decodes a hex string (panics on bad input: test helper only).
pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}
