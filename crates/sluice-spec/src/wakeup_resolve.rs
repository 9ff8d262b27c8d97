//! Which wake-up rule applies to which NF (`Spec::wakeup_of`) and the
//! spec-wide checks of the rules (`crate::wakeup` holds the rule itself).

use std::collections::{HashMap, HashSet};

use crate::check::Ctx;
use crate::fields::Res;
use crate::model::{Isolation, Spec};
use crate::wakeup::WakeRule;

impl Spec {
    /// The wake-up rule of NF `nf`: its own, else its chains' (validation
    /// makes sure they agree), else `settings.wakeup`'s.
    pub fn wakeup_of(&self, nf: &str) -> WakeRule {
        let own = self
            .nfs
            .iter()
            .find(|n| n.name == nf)
            .and_then(|n| n.wakeup);
        own.or_else(|| {
            self.chains
                .iter()
                .filter(|c| c.nfs.iter().any(|n| n == nf))
                .find_map(|c| c.wakeup)
        })
        .unwrap_or(self.settings.wakeup.rule)
    }

    /// [`Spec::wakeup_of`] for every NF at once, in one pass over the
    /// chains (the compiler's way: asking NF by NF reads every chain for
    /// each NF, quadratic in the spec's size).
    pub fn wakeup_rules(&self) -> HashMap<&str, WakeRule> {
        self.wakeup_rules_among(&self.nfs, &self.chains)
    }

    /// [`Spec::wakeup_rules`] of `nfs` (some of the spec's), when
    /// `chains` are every chain of the spec that passes one of them: an
    /// addition's NFs, which only its chains can name.
    pub fn wakeup_rules_among<'s>(
        &'s self,
        nfs: &'s [crate::model::NfSpec],
        chains: &'s [crate::model::ChainSpec],
    ) -> HashMap<&'s str, WakeRule> {
        let mut of_chains: HashMap<&str, WakeRule> = HashMap::new();
        for c in chains {
            if let Some(r) = c.wakeup {
                for n in &c.nfs {
                    of_chains.entry(n.as_str()).or_insert(r);
                }
            }
        }
        nfs.iter()
            .map(|n| {
                let rule = n
                    .wakeup
                    .or_else(|| of_chains.get(n.name.as_str()).copied())
                    .unwrap_or(self.settings.wakeup.rule);
                (n.name.as_str(), rule)
            })
            .collect()
    }
}

/// Validates every rule of the spec (for specs built by code; parsed ones
/// were checked as they were decoded) and that every NF has one: an NF
/// without a rule of its own whose chains give different rules is an
/// error, since the platform could not tell which applies. Checks the
/// chains and NFs from `cx.from` on; the rules of the chains before them
/// are in the base's index.
pub(crate) fn validate(cx: &Ctx<'_>) -> Res<()> {
    let (spec, from) = (cx.spec, cx.from);
    let rule = |path: String, r: &WakeRule| {
        r.check()
            .map_err(|(key, msg)| cx.err(format!("{path}.{key}"), msg))
    };
    rule("settings.wakeup".into(), &spec.settings.wakeup.rule)?;
    for (i, c) in spec.chains.iter().enumerate().skip(from.chains) {
        if let Some(r) = &c.wakeup {
            rule(format!("chains[{i}].wakeup"), r)?;
        }
    }
    for (i, n) in spec.nfs.iter().enumerate().skip(from.nfs) {
        if let Some(r) = &n.wakeup {
            rule(format!("nfs[{i}].wakeup"), r)?;
            if n.isolation == Isolation::Inline {
                return Err(cx.err(
                    format!("nfs[{i}].wakeup"),
                    "wakeup applies to process NFs: an inline NF runs in its worker's thread \
                     and is never asleep",
                ));
            }
        }
    }
    // NFs without a rule of their own: their chains' rules must agree.
    // One pass over the chains that have a rule (usually none).
    let own: HashSet<&str> = (spec.nfs[from.nfs..].iter())
        .filter(|n| n.wakeup.is_some())
        .map(|n| n.name.as_str())
        .collect();
    let own = |n: &str| own.contains(n) || cx.base.is_some_and(|b| b.has_own_rule(spec, n));
    let mut first: HashMap<&str, (&str, WakeRule)> = HashMap::new();
    for (k, c) in spec.chains.iter().enumerate().skip(from.chains) {
        let Some(r) = c.wakeup else { continue };
        for n in c.nfs.iter().map(String::as_str) {
            if own(n) {
                continue;
            }
            let in_base = (cx.base)
                .and_then(|b| b.chain_rules.get(n))
                .map(|&(j, rule)| (spec.chains[j].name.as_str(), rule));
            match in_base.or_else(|| first.get(n).copied()) {
                None => {
                    first.insert(n, (&c.name, r));
                }
                Some((other, o)) if o != r => {
                    return Err(cx.err(
                        format!("chains[{k}].wakeup"),
                        format!(
                            "NF {n} is in chains {other} and {} whose wake-up rules differ; \
                             give the NF a `wakeup` of its own",
                            c.name
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}
