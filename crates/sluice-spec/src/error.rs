//! The one error type of this crate.

use std::fmt;

use crate::location::Location;

/// A problem with a spec: where it is (file, line, column, field path) and
/// what is wrong.
///
/// Displays as `file:line:col: field: message`, e.g.
/// `examples/bad.yaml:14:9: chains[0].nfs[2]: no NF named "mon2" (defined NFs: acl, mon)`.
/// When there is no position (line 0, e.g. for specs built by code or a file
/// that cannot be read) the `:line:col` part is left out, and so is the
/// `field: ` part when the field path is empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The spec file (as given to [`crate::load`]) or `"<generated>"`.
    pub file: String,
    /// 1-based line of the offending item, 0 if unknown.
    pub line: usize,
    /// 1-based column of the offending item, 0 if unknown.
    pub column: usize,
    /// Field path of the offending item, e.g. `chains[0].nfs[2]`; empty for
    /// the document as a whole.
    pub field: String,
    /// What is wrong, in words, usually with the valid choices.
    pub message: String,
}

impl SpecError {
    /// An error at `location` in `file`, about `field`.
    pub fn new(
        file: impl Into<String>,
        location: Location,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> SpecError {
        SpecError {
            file: file.into(),
            line: location.line,
            column: location.column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The line and column as a [`Location`].
    pub fn location(&self) -> Location {
        Location::new(self.line, self.column)
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line != 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpecError {}
