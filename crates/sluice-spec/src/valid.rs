//! A spec known to be valid, so that the code after a check need not check
//! again.
//!
//! Validating a whole spec costs time in proportion to it; a daemon that
//! validated an addition's result ([`crate::add`]) and then compiled it
//! validated it twice per change. A [`ValidSpec`] can only be made by
//! validating, and cannot be changed after (no `DerefMut`, no public
//! field), so whoever holds one may skip the check.

use std::ops::Deref;

use crate::error::SpecError;
use crate::index::{Grown, IndexedSpec, SpecIndex};
use crate::model::Spec;

/// A spec that passed [`Spec::validate`] against the NF types its maker
/// was given.
#[derive(Debug, Clone)]
pub struct ValidSpec {
    spec: Spec,
    grown: Option<Grown>,
    /// For an addition's result: the index of the spec it was added to.
    index: Option<SpecIndex>,
}

impl PartialEq for ValidSpec {
    /// The index is derived from the spec.
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec && self.grown == other.grown
    }
}

impl ValidSpec {
    /// Only for code of this crate that has just validated `spec`.
    pub(crate) fn checked(spec: Spec) -> ValidSpec {
        ValidSpec {
            spec,
            grown: None,
            index: None,
        }
    }

    /// Only for [`crate::add_to`]: `spec` is a valid spec of `from`'s
    /// counts (indexed by `index`, if given) with objects appended, and
    /// was validated.
    pub(crate) fn grown(spec: Spec, from: Grown, index: Option<SpecIndex>) -> ValidSpec {
        ValidSpec {
            spec,
            grown: Some(from),
            index,
        }
    }

    /// When the spec is an addition's result: the counts of the spec it
    /// was added to. A compiler that holds the plan of that spec need
    /// only compile the added objects (`sluice_dataplane::compile`).
    pub fn grown_from(&self) -> Option<Grown> {
        self.grown
    }

    /// The spec, to change it (it must be checked again after).
    pub fn into_spec(self) -> Spec {
        self.spec
    }

    /// The spec an addition was made to ([`crate::add_to`]), the added
    /// objects taken off again: for a result that could not be applied.
    /// `None` when it was no addition to a spec.
    pub fn into_base(self) -> Option<IndexedSpec> {
        let from = self.grown?;
        Some(IndexedSpec::with(shrink(self.spec, from), self.index))
    }

    /// The spec, to hold for the next addition: an addition's result
    /// keeps its base's index, brought up to date with the added objects
    /// only.
    pub fn into_indexed(self) -> IndexedSpec {
        let index = self.grown.and(self.index).map(|mut index| {
            index.extend(&self.spec);
            index
        });
        IndexedSpec::with(self.spec, index)
    }
}

/// `spec` cut back to `to`'s lengths.
pub(crate) fn shrink(mut spec: Spec, to: Grown) -> Spec {
    spec.ports.truncate(to.ports);
    spec.nfs.truncate(to.nfs);
    spec.chains.truncate(to.chains);
    spec
}

impl Deref for ValidSpec {
    type Target = Spec;

    fn deref(&self) -> &Spec {
        &self.spec
    }
}

impl Spec {
    /// Validates the spec ([`Spec::validate`]) and keeps the proof.
    ///
    /// # Errors
    /// The first problem found.
    pub fn into_valid(self, known_nf_types: &[&str]) -> Result<ValidSpec, SpecError> {
        self.validate(known_nf_types)?;
        Ok(ValidSpec::checked(self))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_valid_spec_becomes_one() {
        let text = "ports:\n  - { name: a, kind: generator }\n  - { name: b, kind: sink }\nchains:\n  - { name: c, from: a, to: b }\n";
        let spec = crate::parse_str(text, "t.yaml", &[]).unwrap();
        let valid = spec.clone().into_valid(&[]).unwrap();
        assert_eq!(*valid, spec);
        let mut broken = spec;
        broken.chains[0].to = "nowhere".into();
        assert!(broken.into_valid(&[]).is_err());
    }
}
