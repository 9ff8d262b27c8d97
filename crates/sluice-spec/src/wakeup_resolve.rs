//! Which wake-up rule applies to which NF (`Spec::wakeup_of`) and the
//! spec-wide checks of the rules (`crate::wakeup` holds the rule itself).

use crate::fields::Res;
use crate::model::{Isolation, Spec};
use crate::validate::Ctx;
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
}

/// Validates every rule of the spec (for specs built by code; parsed ones
/// were checked as they were decoded) and that every NF has one: an NF
/// without a rule of its own whose chains give different rules is an
/// error, since the platform could not tell which applies.
pub(crate) fn validate(cx: &Ctx<'_>) -> Res<()> {
    let spec = cx.spec;
    let rule = |path: String, r: &WakeRule| {
        r.check()
            .map_err(|(key, msg)| cx.err(format!("{path}.{key}"), msg))
    };
    rule("settings.wakeup".into(), &spec.settings.wakeup.rule)?;
    for (i, c) in spec.chains.iter().enumerate() {
        if let Some(r) = &c.wakeup {
            rule(format!("chains[{i}].wakeup"), r)?;
        }
    }
    for (i, n) in spec.nfs.iter().enumerate() {
        if let Some(r) = &n.wakeup {
            rule(format!("nfs[{i}].wakeup"), r)?;
            if n.isolation == Isolation::Inline {
                return Err(cx.err(
                    format!("nfs[{i}].wakeup"),
                    "wakeup applies to process NFs: an inline NF runs in its worker's thread \
                     and is never asleep",
                ));
            }
            continue;
        }
        let mut first: Option<(&str, WakeRule)> = None;
        for (k, c) in spec.chains.iter().enumerate() {
            let Some(r) = c.wakeup.filter(|_| c.nfs.contains(&n.name)) else {
                continue;
            };
            match first {
                None => first = Some((&c.name, r)),
                Some((other, o)) if o != r => {
                    return Err(cx.err(
                        format!("chains[{k}].wakeup"),
                        format!(
                            "NF {} is in chains {other} and {} whose wake-up rules differ; \
                             give the NF a `wakeup` of its own",
                            n.name, c.name
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}
