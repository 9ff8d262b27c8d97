//! Whole frames: parse, flow_key, verify_checksums, and every view's
//! accessors at the parsed offsets.  Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/sluice-packet/tests/common/exercise.rs"]
mod exercise;

fuzz_target!(|data: &[u8]| {
    exercise::exercise_frame(data);
});
