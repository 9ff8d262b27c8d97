//! Additions: a partial spec (ports, NFs and chains, nothing else) added to
//! a whole one, so a client can create one NF and its chain without
//! sending, and the daemon without parsing, everything that runs already.
//!
//! [`parse_additions`] reads the partial document (the same YAML as a
//! spec's `ports`, `nfs` and `chains`); [`add`] refuses a name that exists
//! already ([`AddError::Exists`]) and validates the result as a whole spec
//! ([`AddError::Invalid`]), so an addition is all or nothing; [`add_to`]
//! does the same to the spec itself rather than to a copy. Errors about
//! an added object point into the partial document: its source, line and
//! field path (`nfs[0]`, not the index it takes in the whole spec).

use crate::check::{Locate, SpecLocator};
use crate::error::SpecError;
use crate::index::Grown;
use crate::index::{IndexedSpec, SpecIndex};
use crate::location::{Location, SourceName};
use crate::model::Spec;
use crate::settings::Settings;
use crate::valid::ValidSpec;
use crate::validate;
use crate::{decode, load};

/// Parses a partial spec: `ports`, `nfs` and `chains` lists only, at least
/// one object. Decoded (types, ranges, unknown keys) but not validated:
/// its references may name objects of the spec it is added to.
///
/// # Errors
/// A located [`SpecError`]: syntax, a wrong field, `settings` or `version`
/// (those belong to a whole spec), or nothing to add.
pub fn parse_additions(text: &str, source: &str) -> Result<Spec, SpecError> {
    let source = SourceName::new(source);
    let tree = load::tree(text, &source)?;
    for key in ["settings", "version"] {
        if let Some(node) = tree.get(key) {
            return Err(node.error(format!(
                "an addition carries only ports, nfs and chains; `{key}` belongs to a whole \
                 spec (PUT /v1/spec, `sluice apply`)"
            )));
        }
    }
    let spec = decode::decode(&tree, &source, load::base_dir(&source))?;
    if spec.ports.is_empty() && spec.nfs.is_empty() && spec.chains.is_empty() {
        return Err(SpecError::new(
            source.as_str(),
            Location::GENERATED,
            "",
            "nothing to add: expected `ports`, `nfs` or `chains`",
        ));
    }
    Ok(spec)
}

/// Why an addition was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum AddError {
    /// An added object's name is taken (by an object of any kind).
    Exists {
        /// `port`, `NF` or `chain`: what the taken name names now.
        kind: &'static str,
        /// The name.
        name: String,
        /// Its field in the addition, e.g. `nfs[0].name`.
        field: String,
    },
    /// The spec with the addition is not valid.
    Invalid(SpecError),
}

/// `base` with `addition`'s objects appended (each list in order), checked
/// as a whole spec. `base` is `None` when nothing runs: the addition is
/// then the whole spec, with default settings.
///
/// # Errors
/// [`AddError::Exists`] for a name `base` has; [`AddError::Invalid`] for
/// any error of the result, located in `addition` where it concerns an
/// added object.
pub fn add(
    base: Option<&Spec>,
    addition: Spec,
    known_nf_types: &[&str],
) -> Result<ValidSpec, AddError> {
    add_to(
        base.cloned().map(IndexedSpec::from),
        addition,
        known_nf_types,
    )
    .map_err(|r| r.error)
}

/// An addition refused by [`add_to`], with the spec it was to be added to,
/// unchanged.
#[derive(Debug)]
pub struct Refused {
    /// Why.
    pub error: AddError,
    /// The spec given to [`add_to`].
    pub base: Option<IndexedSpec>,
}

/// [`add`], appending to `base` itself rather than to a copy, and checking
/// only the added objects against `base`'s index (built here the first
/// time, see [`crate::index`]): a daemon that holds a thousand NFs copied
/// and validated all of them for each one created. A refusal gives `base`
/// back unchanged; [`ValidSpec::into_base`] takes the addition off a
/// result that could not be applied, [`ValidSpec::into_indexed`] keeps it
/// with the index brought up to date.
///
/// # Errors
/// As [`add`], in a [`Refused`] that holds `base` (boxed: a spec is
/// large, and the result is mostly `Ok`).
pub fn add_to(
    base: Option<IndexedSpec>,
    addition: Spec,
    known_nf_types: &[&str],
) -> Result<ValidSpec, Box<Refused>> {
    let (base, mut index) = match base {
        Some(b) => {
            let (spec, index) = b.into_parts();
            (Some(spec), index)
        }
        None => (None, None),
    };
    if let Some(b) = &base {
        if !index.as_ref().is_some_and(|i| i.covers(Grown::of(b))) {
            // The first addition since the spec was set whole. Indexed
            // only once known valid: the index assumes unique names, and
            // an invalid spec makes every addition to it invalid anyway.
            index = validate::validate(b, known_nf_types, &SpecLocator(b))
                .is_ok()
                .then(|| SpecIndex::of(b));
        }
        if let Err(error) = names_free(b, index.as_ref(), &addition) {
            let base = base.map(|b| IndexedSpec::with(b, index));
            return Err(Box::new(Refused { error, base }));
        }
    }
    let had_base = base.is_some();
    let mut whole = match base {
        Some(b) => b,
        None => Spec {
            source: addition.source.clone(),
            settings: Settings::default(),
            ports: Vec::new(),
            nfs: Vec::new(),
            chains: Vec::new(),
        },
    };
    let first = Counts::of(&whole);
    let base_source = std::mem::replace(&mut whole.source, addition.source.clone());
    append(&mut whole, addition);
    let locator = AddedLocator {
        spec: &whole,
        first,
    };
    let checked = match &index {
        Some(i) => validate::validate_addition(&whole, known_nf_types, &locator, i),
        None => validate::validate(&whole, known_nf_types, &locator),
    };
    // The safety net of checking only what was added: every debug build
    // that adds (the API's tests) checks the whole spec as well.
    #[cfg(debug_assertions)]
    if index.is_some() {
        let all = validate::validate(&whole, known_nf_types, &locator);
        assert_eq!(checked, all, "an addition checked alone and whole disagree");
    }
    whole.source = base_source;
    let grown = Grown {
        ports: first.ports,
        nfs: first.nfs,
        chains: first.chains,
    };
    if let Err(mut e) = checked {
        e.field = first.rebase(&e.field);
        let base = had_base.then(|| IndexedSpec::with(crate::valid::shrink(whole, grown), index));
        return Err(Box::new(Refused {
            error: AddError::Invalid(e),
            base,
        }));
    }
    Ok(if had_base {
        ValidSpec::grown(whole, grown, index)
    } else {
        ValidSpec::checked(whole)
    })
}

/// `addition`'s objects appended to `whole`'s lists (its source and
/// settings stay).
pub(crate) fn append(whole: &mut Spec, addition: Spec) {
    whole.ports.extend(addition.ports);
    whole.nfs.extend(addition.nfs);
    whole.chains.extend(addition.chains);
}

/// A [`AddError::Exists`] for the first name of `addition` that `base`
/// has (looked up in its index when it has one).
pub(crate) fn names_free(
    base: &Spec,
    index: Option<&SpecIndex>,
    addition: &Spec,
) -> Result<(), AddError> {
    let taken = |name: &str| -> Option<&'static str> {
        if let Some(i) = index {
            i.names.get(name).map(|n| n.kind())
        } else if base.ports.iter().any(|p| p.name == name) {
            Some("port")
        } else if base.nfs.iter().any(|n| n.name == name) {
            Some("NF")
        } else if base.chains.iter().any(|c| c.name == name) {
            Some("chain")
        } else {
            None
        }
    };
    let names = (addition.ports.iter().map(|p| ("ports", &p.name)))
        .enumerate()
        .chain((addition.nfs.iter().map(|n| ("nfs", &n.name))).enumerate())
        .chain((addition.chains.iter().map(|c| ("chains", &c.name))).enumerate());
    for (i, (list, name)) in names {
        if let Some(kind) = taken(name) {
            return Err(AddError::Exists {
                kind,
                name: name.clone(),
                field: format!("{list}[{i}].name"),
            });
        }
    }
    Ok(())
}

/// How many ports, NFs and chains come before the added ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counts {
    ports: usize,
    nfs: usize,
    chains: usize,
}

impl Counts {
    pub(crate) fn of(s: &Spec) -> Counts {
        Counts {
            ports: s.ports.len(),
            nfs: s.nfs.len(),
            chains: s.chains.len(),
        }
    }

    /// The list a path starts in and the index of the first added object.
    fn split<'p>(&self, path: &'p str) -> Option<(&'p str, usize, usize, &'p str)> {
        let (list, rest) = path.split_once('[')?;
        let (index, tail) = rest.split_once(']')?;
        let first = match list {
            "ports" => self.ports,
            "nfs" => self.nfs,
            "chains" => self.chains,
            _ => return None,
        };
        Some((list, index.parse().ok()?, first, tail))
    }

    /// A path in the whole spec as a path in the addition, when it names
    /// an added object (other paths are the whole spec's).
    fn rebase(&self, path: &str) -> String {
        match self.split(path) {
            Some((list, i, first, tail)) if i >= first => format!("{list}[{}]{tail}", i - first),
            _ => path.to_string(),
        }
    }
}

/// Locates added objects where the addition has them; objects of the
/// spec added to have no line in the addition's source.
pub(crate) struct AddedLocator<'a> {
    pub(crate) spec: &'a Spec,
    pub(crate) first: Counts,
}

impl Locate for AddedLocator<'_> {
    fn locate(&self, path: &str) -> Location {
        match self.first.split(path) {
            Some((_, i, first, _)) if i >= first => SpecLocator(self.spec).locate(path),
            _ => Location::GENERATED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &[&str] = &["forwarder", "acl"];

    fn base() -> Spec {
        crate::parse_str(
            "ports:\n  - { name: gen, kind: generator, rate_pps: 1000 }\n  - { name: out, kind: sink }\n\
             nfs:\n  - { name: fwd, type: forwarder }\n\
             chains:\n  - { name: main, from: gen, nfs: [fwd], to: out }\n",
            "base.yaml",
            TYPES,
        )
        .unwrap()
    }

    #[test]
    fn an_nf_and_its_chain_are_appended_and_the_base_keeps_its_source() {
        let a = parse_additions(
            "ports:\n  - { name: gen2, kind: generator, rate_pps: 10 }\n\
             nfs:\n  - { name: acl1, type: acl }\n\
             chains:\n  - { name: second, from: gen2, nfs: [fwd, acl1], to: out }\n",
            "add.yaml",
        )
        .unwrap();
        let b = base();
        let w = add(Some(&b), a, TYPES).unwrap();
        assert_eq!(w.source.as_str(), "base.yaml");
        let names = |v: Vec<&String>| v.into_iter().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(w.ports.iter().map(|p| &p.name).collect()),
            ["gen", "out", "gen2"]
        );
        assert_eq!(
            names(w.nfs.iter().map(|n| &n.name).collect()),
            ["fwd", "acl1"]
        );
        assert_eq!(
            names(w.chains.iter().map(|c| &c.name).collect()),
            ["main", "second"]
        );
        assert_eq!(w.settings, b.settings);
    }

    #[test]
    fn a_taken_name_of_any_kind_is_refused_naming_its_field() {
        let a = parse_additions(
            "nfs:\n  - { name: x, type: forwarder }\n  - { name: main, type: forwarder }\n",
            "add.yaml",
        )
        .unwrap();
        assert_eq!(
            add(Some(&base()), a, TYPES),
            Err(AddError::Exists {
                kind: "chain",
                name: "main".into(),
                field: "nfs[1].name".into(),
            })
        );
    }

    #[test]
    fn an_error_in_an_added_object_points_into_the_addition() {
        let text = "nfs:\n  - { name: a1, type: forwarder }\n\
                    chains:\n  - { name: c2, from: gen, nfs: [a1], to: nowhere }\n";
        let a = parse_additions(text, "add.yaml").unwrap();
        let Err(AddError::Invalid(e)) = add(Some(&base()), a, TYPES) else {
            panic!("a chain to no port must be refused");
        };
        assert_eq!(e.file, "add.yaml");
        assert!(e.field.starts_with("chains[0]"), "{e}");
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("nowhere"), "{e}");
    }

    #[test]
    fn adding_in_place_gives_the_base_back_unchanged_whatever_happens() {
        let add_text = |t: &str| parse_additions(t, "<api>").unwrap();
        // Refused for a taken name, and for an invalid result.
        for text in [
            "nfs:\n  - { name: main, type: forwarder }\n",
            "nfs:\n  - { name: a1, type: forwarder }\nchains:\n  - { name: c2, from: gen, nfs: [a1], to: nowhere }\n",
        ] {
            let r = add_to(Some(base().into()), add_text(text), TYPES).unwrap_err();
            assert_eq!(r.base.map(IndexedSpec::into_spec), Some(base()), "{:?}", r.error);
        }
        let r = add_to(
            None,
            add_text("nfs:\n  - { name: a, type: forwarder }\n"),
            TYPES,
        );
        assert!(r.unwrap_err().base.is_none());
        // Added, then taken off again (an apply that failed).
        let ok =
            "ports:\n  - { name: g2, kind: generator }\nnfs:\n  - { name: a1, type: forwarder }\n\
                  chains:\n  - { name: c2, from: g2, nfs: [a1], to: out }\n";
        let grown = add_to(Some(base().into()), add_text(ok), TYPES).unwrap();
        assert_eq!(grown.grown_from(), Some(crate::Grown::of(&base())));
        assert_eq!(*grown, *add(Some(&base()), add_text(ok), TYPES).unwrap());
        assert_eq!(grown.into_base().map(IndexedSpec::into_spec), Some(base()));
    }

    #[test]
    fn an_unknown_type_is_refused() {
        let a = parse_additions("nfs:\n  - { name: z, type: teleporter }\n", "<api>").unwrap();
        let Err(AddError::Invalid(e)) = add(Some(&base()), a, TYPES) else {
            panic!("an unknown type must be refused");
        };
        assert_eq!(e.field, "nfs[0].type", "{e}");
    }

    #[test]
    fn settings_version_and_nothing_are_not_additions() {
        for (text, says) in [
            (
                "settings: { buffers: 4096 }\nnfs: []\n",
                "`settings` belongs",
            ),
            ("version: 1\n", "`version` belongs"),
            ("nfs: []\n", "nothing to add"),
            ("{}\n", "nothing to add"),
            ("nfs: [ { name: q } ]\n", "type"),
            ("nfs: 5\n", "sequence"),
            ("- a\n", "mapping"),
        ] {
            let e = parse_additions(text, "<api>").expect_err(text);
            assert!(e.to_string().contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn with_nothing_running_the_addition_is_the_whole_spec() {
        let a = parse_additions(
            "ports:\n  - { name: g, kind: generator, rate_pps: 5 }\n  - { name: o, kind: sink }\n\
             chains:\n  - { name: c, from: g, to: o }\n",
            "<api>",
        )
        .unwrap();
        let w = add(None, a, TYPES).unwrap();
        assert_eq!(w.chains.len(), 1);
        let lone = parse_additions("nfs:\n  - { name: f, type: forwarder }\n", "<api>").unwrap();
        assert!(
            matches!(add(None, lone, TYPES), Err(AddError::Invalid(_))),
            "a spec needs ports and a chain"
        );
    }
}
