//! What every check works with: the spec, where its fields are
//! ([`Locate`]), which of its objects are checked ([`Ctx`]), and the
//! small checks shared by many fields (names, port ranges). Apart from
//! `validate` so that the checks of each part (`validate_nfs`,
//! `validate_chains`, `validate_domains`, ...) depend on this and not on
//! each other.

use std::fmt::Display;

use crate::config_node::ConfigNode;
use crate::error::SpecError;
use crate::fields::Res;
use crate::index::{Grown, SpecIndex};
use crate::limits::{self, Limit};
use crate::location::Location;
use crate::model::Spec;
use crate::net::PortRange;
use crate::path::{self, Seg};

/// Finds the location of a field path.
pub(crate) trait Locate {
    /// The best location for `path` (the deepest known enclosing item).
    fn locate(&self, path: &str) -> Location;
}

/// Locates paths in the parsed document.
pub(crate) struct TreeLocator<'a>(pub &'a ConfigNode);

impl Locate for TreeLocator<'_> {
    fn locate(&self, path: &str) -> Location {
        self.0.find_nearest(path).location()
    }
}

/// Locates paths by the locations recorded in the spec's ports, NFs and chains.
pub(crate) struct SpecLocator<'a>(pub &'a Spec);

impl Locate for SpecLocator<'_> {
    fn locate(&self, path: &str) -> Location {
        let segs = path::parse(path);
        let spec = self.0;
        match (segs.first(), segs.get(1)) {
            (Some(Seg::Key(k)), Some(Seg::Index(i))) => match k.as_str() {
                "ports" => spec.ports.get(*i).map(|p| p.location),
                "nfs" => spec.nfs.get(*i).map(|n| n.location),
                "chains" => spec.chains.get(*i).map(|c| c.location),
                _ => None,
            },
            _ => None,
        }
        .unwrap_or(Location::GENERATED)
    }
}

/// Validation context: the spec, how to locate its fields, and which of
/// its objects to check.
pub(crate) struct Ctx<'a> {
    pub spec: &'a Spec,
    pub(crate) locator: &'a dyn Locate,
    /// The first port, NF and chain to check: all of them (zeros), or
    /// those an addition appended to a valid spec ([`crate::index`]).
    pub from: Grown,
    /// The index of the objects before `from` (`None` when that is
    /// nothing): what the checked objects' references are looked up in.
    pub base: Option<&'a SpecIndex>,
}

impl Ctx<'_> {
    /// An error about the field at `path`.
    pub(crate) fn err(&self, path: impl Into<String>, msg: impl Display) -> SpecError {
        let path = path.into();
        SpecError::new(
            self.spec.source.as_str(),
            self.locator.locate(&path),
            path,
            msg.to_string(),
        )
    }

    /// ` (line N)` for the item at `path`, or nothing if it has no position.
    pub(crate) fn line_note(&self, path: &str) -> String {
        let loc = self.locator.locate(path);
        if loc.is_generated() {
            String::new()
        } else {
            format!(" (line {})", loc.line)
        }
    }

    pub(crate) fn limit(&self, path: impl Into<String>, limit: Limit, v: u64) -> Res<()> {
        limit.check(v).map_err(|m| self.err(path, m))
    }
}

/// Names are `[a-z0-9_-]{1,32}`.
/// Checks a name; `path` (its field) is made only for an error.
pub(crate) fn name(cx: &Ctx<'_>, path: impl FnOnce() -> String, name: &str) -> Res<()> {
    let ok = !name.is_empty()
        && name.len() <= limits::NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(cx.err(
            path(),
            format!(
                "invalid name {name:?}: names are 1 to {} characters of a-z, 0-9, _ and -",
                limits::NAME_MAX
            ),
        ))
    }
}

/// Ranges built by code may have `lo > hi`.
pub(crate) fn port_range(cx: &Ctx<'_>, path: &str, r: &PortRange) -> Res<()> {
    if r.lo > r.hi {
        return Err(cx.err(
            path,
            format!(
                "invalid port range {}-{}: the first port must not exceed the last",
                r.lo, r.hi
            ),
        ));
    }
    Ok(())
}
