//! An addition checked alone against its spec's index must say what the
//! whole spec's validation says, error for error, and the index brought
//! up to date by it must be the index of the whole: checked here on
//! random specs and additions that reach every cross-reference the index
//! stands in for (names, chain links, shadowing chains, wake-up rules,
//! tenants), many of them wrong.

use proptest::prelude::*;

use super::SpecIndex;
use crate::additions::{append, names_free, AddedLocator, Counts};
use crate::model::Spec;
use crate::validate;

const TYPES: &[&str] = &["forwarder"];

/// Choices drawn from a list of numbers, so that proptest shrinks a
/// failing case to few, small choices.
struct Dice<'a>(std::slice::Iter<'a, u8>);

impl Dice<'_> {
    fn pick<'s>(&mut self, of: &[&'s str]) -> &'s str {
        of[usize::from(self.0.next().copied().unwrap_or(0)) % of.len()]
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.0.next().copied().unwrap_or(0)) % n
    }
}

const RULES: &[&str] = &[
    "",
    "",
    "",
    ", wakeup: { policy: every_packet }",
    ", wakeup: { policy: threshold, threshold: 16 }",
];
const TENANTS: &[&str] = &["", "", "", ", tenant: a", ", tenant: b"];
const MATCHES: &[&str] = &[
    "",
    ", match: { proto: tcp, dst_port: 80 }",
    ", match: { proto: tcp, dst_port: 80-90 }",
    ", match: { proto: udp }",
];

/// `count` NFs named `prefix0`, `prefix1`, ...
fn nfs(d: &mut Dice<'_>, prefix: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "  - {{ name: {prefix}{i}, type: forwarder{}{}{} }}\n",
                d.pick(&["", "", "", ", isolation: inline"]),
                d.pick(RULES),
                d.pick(TENANTS)
            )
        })
        .collect()
}

/// `count` chains named `prefix0`, ... (the k-th matching its own
/// destination port 1000 + k, or one of `MATCHES`), through NFs of
/// `nf_pool`, to one of `to_pool`.
fn chains(
    d: &mut Dice<'_>,
    prefix: &str,
    count: usize,
    from_pool: &[&str],
    nf_pool: &[&str],
    to_pool: &[&str],
) -> String {
    let mut out = String::new();
    for i in 0..count {
        let through: Vec<&str> = (0..d.below(3)).map(|_| d.pick(nf_pool)).collect();
        let matcher = match d.below(3) {
            0 => format!(", match: {{ proto: tcp, dst_port: {} }}", 1000 + i),
            _ => d.pick(MATCHES).to_string(),
        };
        out += &format!(
            "  - {{ name: {prefix}{i}, from: {}, nfs: [{}], to: {}{matcher}{}{} }}\n",
            d.pick(from_pool),
            through.join(", "),
            d.pick(to_pool),
            d.pick(RULES),
            d.pick(TENANTS)
        );
    }
    out
}

/// A spec (valid or not) and an addition to it.
fn case(dice: &[u8]) -> (String, String) {
    let d = &mut Dice(dice.iter());
    let (n_nfs, n_chains) = (1 + d.below(4), 1 + d.below(4));
    let base = format!(
        "ports:\n  - {{ name: g0, kind: generator }}\n  - {{ name: g1, kind: generator }}\n\
         \x20 - {{ name: o0, kind: sink }}\n  - {{ name: o1, kind: sink }}\n\
         nfs:\n{}chains:\n{}",
        nfs(d, "n", n_nfs),
        chains(
            d,
            "c",
            n_chains,
            &["g0", "g1"],
            &["n0", "n0", "n1", "n2", "n3"],
            &["o0", "o1", "o0", "o1", "c0", "c1", "c2"]
        )
    );
    let mut add = String::new();
    if d.below(3) == 0 {
        add += &format!(
            "ports:\n  - {{ name: {}, kind: {} }}\n",
            d.pick(&["ga", "oa", "o0"]),
            d.pick(&["generator", "sink"])
        );
    }
    let (a_nfs, a_chains) = (d.below(3), d.below(3));
    if a_nfs > 0 {
        add += &format!("nfs:\n{}", nfs(d, "a", a_nfs));
    }
    if a_chains > 0 || add.is_empty() {
        let prefix = d.pick(&["ac", "ac", "ac", "c"]);
        let body = chains(
            d,
            prefix,
            a_chains.max(1),
            &["g0", "g1", "g0", "g1", "ga", "oa", "o0", "n0", "zz"],
            &["n0", "n1", "a0", "a1", "a0", "a1", "zz", "c0", "g0"],
            &[
                "o0", "o0", "o0", "oa", "c0", "c1", "ac0", "ac1", "n0", "zz", "ga",
            ],
        );
        add += &format!("chains:\n{body}");
    }
    (base, add)
}

/// The index's maps, comparable.
fn maps(i: &SpecIndex) -> impl PartialEq + std::fmt::Debug + '_ {
    let mut names: Vec<_> = i.names.iter().collect();
    names.sort();
    let mut from: Vec<_> = i.chains_from.iter().map(|(k, e)| (k, e.sorted())).collect();
    from.sort();
    let mut rules: Vec<_> = i
        .chain_rules
        .iter()
        .map(|(k, v)| (k, v.0, format!("{:?}", v.1)))
        .collect();
    rules.sort();
    (i.of_lengths(), names, from, rules)
}

fn check(dice: &[u8]) -> Result<(), TestCaseError> {
    let (base_text, add_text) = case(dice);
    let Ok(base) = crate::parse_str(&base_text, "base.yaml", TYPES) else {
        return Ok(()); // an invalid spec is never indexed
    };
    let Ok(addition) = crate::parse_additions(&add_text, "add.yaml") else {
        return Ok(());
    };
    let index = SpecIndex::of(&base);
    if names_free(&base, Some(&index), &addition).is_err() {
        return Ok(()); // refused before any check (`add_to`)
    }
    let first = Counts::of(&base);
    let mut whole: Spec = base;
    append(&mut whole, addition);
    let locator = AddedLocator {
        spec: &whole,
        first,
    };
    let alone = validate::validate_addition(&whole, TYPES, &locator, &index);
    let all = validate::validate(&whole, TYPES, &locator);
    prop_assert_eq!(&alone, &all, "spec:\n{}addition:\n{}", base_text, add_text);
    if all.is_ok() {
        let mut grown = index.clone();
        grown.extend(&whole);
        let fresh = SpecIndex::of(&whole);
        prop_assert_eq!(maps(&grown), maps(&fresh));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn an_addition_checked_alone_says_what_the_whole_check_says(
        dice in prop::collection::vec(any::<u8>(), 0..64)
    ) {
        check(&dice)?;
    }
}

#[test]
fn the_random_cases_reach_valid_and_invalid_additions_of_every_kind() {
    // Without this, a generator that only ever made invalid specs would
    // pass the property above while checking nothing.
    let (mut valid, mut refused) = (0, std::collections::BTreeSet::new());
    let mut seed = 0x9e37_79b9_u32;
    for _ in 0..10_000 {
        let dice: Vec<u8> = (0..64)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                seed as u8
            })
            .collect();
        let (b, a) = case(&dice);
        let (Ok(base), Ok(add)) = (
            crate::parse_str(&b, "base.yaml", TYPES),
            crate::parse_additions(&a, "add.yaml"),
        ) else {
            continue;
        };
        match crate::add(Some(&base), add, TYPES) {
            Ok(_) => valid += 1,
            Err(crate::AddError::Invalid(e)) => {
                refused.insert(e.field.split('.').nth(1).unwrap_or("").to_string());
            }
            Err(crate::AddError::Exists { .. }) => {}
        }
    }
    assert!(valid > 100, "{valid} valid additions");
    for field in ["from", "to", "match", "wakeup", "nfs[0]", "nfs[1]"] {
        assert!(
            refused.contains(field),
            "no addition was refused at {field}: {refused:?}"
        );
    }
}
