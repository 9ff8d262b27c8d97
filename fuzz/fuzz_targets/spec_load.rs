//! The spec loader and compiler on arbitrary text (YAML or JSON): never a
//! panic; an accepted spec writes out with `Spec::to_json` and loads back
//! the same, and compiles into a plan with exactly its objects or fails
//! with a message; a refused one gets an error inside the text.
//! `scripts/fuzz.sh` seeds it with `examples/*.yaml`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common/spec.rs"]
mod spec;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = spec::check_spec_text(text, "fuzz.yaml");
    }
});
