//! What `spec_load` and `api_request` both check of spec text: the loader
//! either accepts it, and then what it accepted writes out and loads back
//! the same and compiles or fails with an error, or refuses it with an
//! error located in the text. Included by both targets with `#[path]`.

use sluice_dataplane::compile::{compile, Target};
use sluice_spec::{Location, Spec, SpecError};

/// The flow table every fuzzed spec is compiled with at most. The spec
/// allows up to 16,777,216 entries, and NFs with per-flow state allocate
/// their tables for all of them when built: gigabytes, as designed, which
/// libFuzzer's memory limit would report as a crash.
const FLOW_CAPACITY_CAP: u32 = 65_536;

/// The registry's type names.
pub fn type_names() -> Vec<&'static str> {
    sluice_nfs::REGISTRY.iter().map(|t| t.name).collect()
}

/// Loads `text` as `source` and checks every outcome; returns the error
/// when the text was refused.
pub fn check_spec_text(text: &str, source: &str) -> Result<(), SpecError> {
    let names = type_names();
    let spec = match sluice_spec::parse_str(text, source, &names) {
        Ok(spec) => spec,
        Err(e) => {
            assert_eq!(e.file, source);
            let lines = yaml_lines(text);
            assert!(e.line <= lines, "line {} beyond {lines}: {e}", e.line);
            assert!(!e.message.is_empty());
            return Err(e);
        }
    };
    // What the loader accepted writes out and loads back the same.
    let written = serde_json::to_string(&spec.to_json()).expect("a spec serialises");
    let back = sluice_spec::parse_str(&written, source, &names)
        .unwrap_or_else(|e| panic!("written spec does not load: {e}\n{written}"));
    assert_eq!(
        located_nowhere(back),
        located_nowhere(spec.clone()),
        "{written}"
    );
    // The compiler (what `sluice validate` and a dry run run) takes it or
    // says why; a plan holds exactly the spec's objects.
    let mut spec = spec;
    let cap = &mut spec.settings.flow_table.capacity;
    *cap = (*cap).min(FLOW_CAPACITY_CAP);
    match compile(&spec, sluice_nfs::REGISTRY, &Target::of_spec(&spec), None) {
        Ok(plan) => assert_eq!(
            plan.counts(),
            (spec.ports.len(), spec.nfs.len(), spec.chains.len())
        ),
        Err(e) => assert!(!e.message.is_empty()),
    }
    Ok(())
}

/// Lines of `text` as YAML counts them (and so the loader's errors): a
/// lone CR ends a line too (YAML 1.2 §5.4), where `str::lines` only
/// knows LF and CRLF. One more for an error at the end of the text.
pub fn yaml_lines(text: &str) -> usize {
    let b = text.as_bytes();
    let breaks = (0..b.len())
        .filter(|&i| b[i] == b'\n' || (b[i] == b'\r' && b.get(i + 1) != Some(&b'\n')))
        .count();
    breaks + 1
}

/// The spec with every location cleared (they differ between texts).
fn located_nowhere(mut s: Spec) -> Spec {
    s.source = Default::default();
    for p in &mut s.ports {
        p.location = Location::GENERATED;
    }
    for n in &mut s.nfs {
        n.location = Location::GENERATED;
    }
    for c in &mut s.chains {
        c.location = Location::GENERATED;
    }
    s
}
