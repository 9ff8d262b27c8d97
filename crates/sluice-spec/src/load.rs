//! Entry points: read, parse, decode and validate a spec.

use std::path::Path;

use crate::check::TreeLocator;
use crate::config_node::ConfigNode;
use crate::decode;
use crate::error::SpecError;
use crate::file::{read_regular_file, MAX_SPEC_BYTES};
use crate::location::{Location, SourceName};
use crate::model::Spec;
use crate::validate;
use crate::yaml;

/// Reads, parses and validates the spec file at `path`, which must be a
/// regular file of at most [`MAX_SPEC_BYTES`]. `known_nf_types` lists the
/// NF types that exist. Relative file paths in the spec resolve
/// against the spec file's directory.
///
/// # Errors
/// A [`SpecError`] naming the file, line, column and field of the first
/// problem; a spec is never partly accepted.
pub fn load(path: &Path, known_nf_types: &[&str]) -> Result<Spec, SpecError> {
    let source = SourceName::from(path);
    let bytes = read_regular_file(path, MAX_SPEC_BYTES).map_err(|e| {
        SpecError::new(
            source.as_str(),
            Location::GENERATED,
            "",
            format!("cannot read spec file: {e}"),
        )
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let column = good.iter().rev().take_while(|b| **b != b'\n').count() + 1;
        SpecError::new(
            source.as_str(),
            Location::new(line, column),
            "",
            "the spec file is not valid UTF-8",
        )
    })?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    parse(&text, source, base_dir, known_nf_types)
}

/// Parses and validates spec text; `source` names it in errors (normally
/// the file path). If `source` is a path, relative file paths in the spec
/// resolve against its directory; otherwise against the current directory.
///
/// # Errors
/// A [`SpecError`] naming `source`, line, column and field of the first
/// problem; a spec is never partly accepted.
pub fn parse_str(text: &str, source: &str, known_nf_types: &[&str]) -> Result<Spec, SpecError> {
    let source = SourceName::new(source);
    parse(text, source.clone(), base_dir(&source), known_nf_types)
}

/// Where relative file paths of text from `source` resolve: beside it if
/// it is a path, else the current directory.
pub(crate) fn base_dir(source: &SourceName) -> &Path {
    if source.is_generated() {
        Path::new("")
    } else {
        Path::new(source.as_str()).parent().unwrap_or(Path::new(""))
    }
}

/// The located document tree of YAML (or JSON) text, a byte-order mark
/// ignored.
pub(crate) fn tree(text: &str, source: &SourceName) -> Result<ConfigNode, SpecError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    yaml::parse(text, source)
}

/// Parses YAML (or JSON) text that is not a spec, such as one NF's
/// config for `sluice rollout`, into JSON; `source` names it in errors.
///
/// # Errors
/// A [`SpecError`] with the line and column of a syntax error.
pub fn parse_value(text: &str, source: &str) -> Result<serde_json::Value, SpecError> {
    Ok(tree(text, &SourceName::new(source))?.to_json())
}

fn parse(
    text: &str,
    source: SourceName,
    base_dir: &Path,
    known_nf_types: &[&str],
) -> Result<Spec, SpecError> {
    let tree = tree(text, &source)?;
    let spec = decode::decode(&tree, &source, base_dir)?;
    validate::validate(&spec, known_nf_types, &TreeLocator(&tree))?;
    Ok(spec)
}
