//! Where things are: positions in a spec file and the name of that file.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A position in a spec file: 1-based line and column.
///
/// Items that were built by code rather than read from a file carry
/// [`Location::GENERATED`] (line and column 0).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Location {
    /// 1-based line number (0 for generated items).
    pub line: usize,
    /// 1-based column number, counted in characters (0 for generated items).
    pub column: usize,
}

impl Location {
    /// The location of items that were not read from a file.
    pub const GENERATED: Location = Location { line: 0, column: 0 };

    /// A location at `line`:`column` (both 1-based).
    pub const fn new(line: usize, column: usize) -> Location {
        Location { line, column }
    }

    /// Whether this is [`Location::GENERATED`], i.e. there is no position to show.
    pub const fn is_generated(&self) -> bool {
        self.line == 0
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_generated() {
            f.write_str("<generated>")
        } else {
            write!(f, "{}:{}", self.line, self.column)
        }
    }
}

/// The name of the file a spec came from, as shown in error messages, or
/// `"<generated>"` for specs built by code.
///
/// Cheap to clone (shared string).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceName(Arc<str>);

impl SourceName {
    /// The name used for specs and configs that were built by code.
    pub const GENERATED: &'static str = "<generated>";

    /// A source name shown as `name`.
    pub fn new(name: impl AsRef<str>) -> SourceName {
        SourceName(Arc::from(name.as_ref()))
    }

    /// The `"<generated>"` source name.
    pub fn generated() -> SourceName {
        SourceName::new(Self::GENERATED)
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the `"<generated>"` name.
    pub fn is_generated(&self) -> bool {
        &*self.0 == Self::GENERATED
    }
}

/// Serialised as its text (NF configs travel to the NF template process
/// with their source, so errors and relative paths resolve alike there).
impl serde::Serialize for SourceName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for SourceName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(SourceName::new(s))
    }
}

impl Default for SourceName {
    fn default() -> Self {
        SourceName::generated()
    }
}

impl fmt::Display for SourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SourceName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SourceName {
    fn from(s: &str) -> Self {
        SourceName::new(s)
    }
}

impl From<String> for SourceName {
    fn from(s: String) -> Self {
        SourceName(Arc::from(s))
    }
}

impl From<&Path> for SourceName {
    fn from(p: &Path) -> Self {
        SourceName::new(p.display().to_string())
    }
}

impl PartialEq<str> for SourceName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SourceName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}
