//! Any string either parses into a filter or gives an error pointing
//! inside it; a parsed filter evaluates on any frame without panicking,
//! and `not` always inverts it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nfs::elements::filter::{parse_filter, Fields};

fuzz_target!(|data: &[u8]| {
    // First byte: split point between the expression and a frame.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let cut = usize::from(split).min(rest.len());
    let (text, frame) = rest.split_at(cut);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    match parse_filter(text) {
        Ok(e) => {
            if let Ok(h) = sluice_packet::parse(frame) {
                let f = Fields::new(frame, &h);
                // Fails only past the nesting limit.
                if let Ok(neg) = parse_filter(&format!("not ({text})")) {
                    assert_eq!(neg.eval(&f), !e.eval(&f));
                }
            }
        }
        Err(err) => assert!(err.at <= text.len().max(4096)),
    }
});
