//! The daemon's request parsing on arbitrary input, through the functions
//! its handlers call: `PUT /v1/spec` bodies (then the spec inside, as a
//! dry run checks it), the query strings of `DELETE`, `GET
//! /v1/nfs/{name}/logs` and `GET /v1/capture` (its filter included).
//! Never a panic; every refusal is a 400, 413 or 422 with a message and a
//! JSON body; a 422 names a line inside the spec text.
//!
//! The first byte picks the request; the rest is its body or query
//! string. `scripts/api-fuzz.sh` fuzzes the running daemon over HTTP from
//! its OpenAPI document; this target reaches the parsing deeper and
//! thousands of times faster.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sluice_daemon::capture::CaptureRequest;
use sluice_daemon::error::ApiError;
use sluice_daemon::extract::{parse_body, parse_query};
use sluice_daemon::types::{ApplyRequest, DeleteQuery, LogsQuery};

#[path = "common/spec.rs"]
mod spec;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let query = || std::str::from_utf8(rest).ok().map(str::to_string);
    let refused = match which % 4 {
        0 => apply(rest),
        1 => parse_query::<DeleteQuery>(query()).err(),
        2 => parse_query::<LogsQuery>(query()).err(),
        _ => CaptureRequest::parse(query()).err(),
    };
    if let Some(e) = refused {
        assert!(
            matches!(e.status.as_u16(), 400 | 413 | 422),
            "status {}: {:?}",
            e.status,
            e.body
        );
        assert!(!e.body.error.message.is_empty());
        let json = serde_json::to_value(&e.body).expect("an error body serialises");
        assert!(json["error"]["code"].is_string());
    }
});

/// `PUT /v1/spec`: the body, then the spec in it.
fn apply(body: &[u8]) -> Option<ApiError> {
    let req: ApplyRequest = match parse_body(Ok(Bytes::copy_from_slice(body))) {
        Ok(r) => r,
        Err(e) => return Some(e),
    };
    // The handler names the spec `<api>` unless the request gives a file;
    // a fuzzed file name must not make the loader read the machine's files.
    let source = "<api>";
    match spec::check_spec_text(&req.spec, source) {
        Ok(()) => None,
        Err(e) => {
            let api = ApiError::invalid_spec(&e);
            if let Some(line) = api.body.error.line {
                assert!(line <= spec::yaml_lines(&req.spec));
            }
            Some(api)
        }
    }
}
