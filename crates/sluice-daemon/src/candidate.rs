//! The spec a change would make desired.

use sluice_spec::{Spec, ValidSpec};

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
    pub fn into_base(self) -> Option<Spec> {
        match self {
            Candidate::Valid(v) => v.into_base(),
            Candidate::Unchecked(_) => None,
        }
    }

    /// The spec, owned.
    pub fn into_spec(self) -> Spec {
        match self {
            Candidate::Unchecked(s) => s,
            Candidate::Valid(v) => v.into_spec(),
        }
    }
}
