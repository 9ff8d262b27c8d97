//! The spec a change would make desired.

use sluice_spec::{IndexedSpec, Spec, ValidSpec};

/// A spec to make the desired state: validated already (an addition's
/// result), or not yet (the runtime validates it as it compiles).
#[derive(Debug)]
pub enum Candidate {
    /// Not validated yet.
    Unchecked(Spec),
    /// Validated against this daemon's NF types.
    Valid(ValidSpec),
}

impl From<Spec> for Candidate {
    fn from(s: Spec) -> Self {
        Candidate::Unchecked(s)
    }
}

impl From<ValidSpec> for Candidate {
    fn from(s: ValidSpec) -> Self {
        Candidate::Valid(s)
    }
}

impl Candidate {
    /// The spec.
    pub fn spec(&self) -> &Spec {
        match self {
            Candidate::Unchecked(s) => s,
            Candidate::Valid(v) => v,
        }
    }

    /// Whether it is an addition's result ([`ValidSpec::grown_from`]).
    pub fn grown(&self) -> bool {
        matches!(self, Candidate::Valid(v) if v.grown_from().is_some())
    }

    /// The spec an addition's result was grown from, the addition taken
    /// off ([`ValidSpec::into_base`]); `None` for anything else.
    pub fn into_base(self) -> Option<IndexedSpec> {
        match self {
            Candidate::Valid(v) => v.into_base(),
            Candidate::Unchecked(_) => None,
        }
    }

    /// The spec, to hold as the desired state: an addition's result
    /// keeps its base's index up to date ([`ValidSpec::into_indexed`]).
    pub fn into_desired(self) -> IndexedSpec {
        match self {
            Candidate::Unchecked(s) => s.into(),
            Candidate::Valid(v) => v.into_indexed(),
        }
    }
}
