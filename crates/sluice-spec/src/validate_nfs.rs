//! Checks on one NF of the spec: its name, type, and the fields that
//! depend on one another (weights, replicas, pools, steering, rollouts,
//! sandboxes). Cross-references are checked elsewhere (`validate_chains`,
//! `domains`, `wakeup_resolve`, `validate_tenants`).

use crate::check::{name, Ctx};
use crate::fields::{suggest, Res};
use crate::model::{Isolation, NfSpec, MAX_REPLICAS};

/// Checks NF `i` of the spec, `nf`; `known_nf_types` lists the NF types
/// that exist.
pub(crate) fn nf(cx: &Ctx<'_>, i: usize, nf: &NfSpec, known_nf_types: &[&str]) -> Res<()> {
    name(cx, || format!("nfs[{i}].name"), &nf.name)?;
    if !known_nf_types.contains(&nf.nf_type.as_str()) {
        let mut msg = if known_nf_types.is_empty() {
            format!("unknown NF type \"{}\" (no NF types are known)", nf.nf_type)
        } else {
            format!(
                "unknown NF type \"{}\" (known types: {})",
                nf.nf_type,
                known_nf_types.join(", ")
            )
        };
        if let Some(s) = suggest(&nf.nf_type, known_nf_types.iter().copied()) {
            msg.push_str(&format!("; did you mean \"{s}\"?"));
        }
        return Err(cx.err(format!("nfs[{i}].type"), msg));
    }
    if let Some(w) = nf.cpu_weight.filter(|w| !(1..=10_000).contains(w)) {
        return Err(cx.err(
            format!("nfs[{i}].cpu_weight"),
            format!("cpu_weight {w} is out of range (1 to 10000; the default share is 100)"),
        ));
    }
    if nf.cpu_weight.is_some() && nf.isolation == Isolation::Inline {
        return Err(cx.err(
            format!("nfs[{i}].cpu_weight"),
            "cpu_weight applies to process NFs: an inline NF runs in its worker's thread, \
             whose core it does not share by weight",
        ));
    }
    if !(1..=MAX_REPLICAS).contains(&nf.replicas) {
        return Err(cx.err(
            format!("nfs[{i}].replicas"),
            format!(
                "replicas {} is out of range (1 to {MAX_REPLICAS})",
                nf.replicas
            ),
        ));
    }
    if nf.fallback != crate::model::Fallback::default() && !nf.steer.exclusive() {
        return Err(cx.err(
            format!("nfs[{i}].fallback"),
            "fallback applies to `steer: per_flow` and `per_class` (what a new flow gets \
             when every replica serves one)",
        ));
    }
    if nf.reset == crate::model::ResetMode::Refork {
        if !nf.steer.exclusive() {
            return Err(cx.err(
                format!("nfs[{i}].reset"),
                "reset applies to `steer: per_flow` and `per_class` (how a released \
                 instance is made new)",
            ));
        }
        if nf.isolation != crate::Isolation::Process {
            return Err(cx.err(
                format!("nfs[{i}].reset"),
                "reset: refork forks a fresh process: it needs `isolation: process`",
            ));
        }
    }
    match (nf.steer, &nf.class) {
        (crate::Steer::PerClass, None) => {
            return Err(cx.err(
                format!("nfs[{i}].class"),
                "steer: per_class needs a class, e.g. `class: { by: src, prefix: 24 }`",
            ))
        }
        (s, Some(_)) if s != crate::Steer::PerClass => {
            return Err(cx.err(
                format!("nfs[{i}].class"),
                "class applies to `steer: per_class` (one instance per class of flows)",
            ))
        }
        _ => {}
    }
    if let Some(p) = &nf.pool {
        let at = format!("nfs[{i}].pool");
        if !nf.steer.exclusive() {
            return Err(cx.err(
                at,
                "pool applies to `steer: per_flow` and `per_class` (its instances are the pool)",
            ));
        }
        if !(1..=MAX_REPLICAS).contains(&p.min) || !(p.min..=MAX_REPLICAS).contains(&p.max) {
            return Err(cx.err(
                at,
                format!(
                    "pool min {} and max {} must hold 1 <= min <= max <= {MAX_REPLICAS}",
                    p.min, p.max
                ),
            ));
        }
        if !(p.min..=p.max).contains(&nf.replicas) {
            return Err(cx.err(
                format!("nfs[{i}].replicas"),
                format!(
                    "replicas {} is outside the pool's bounds ({} to {}): it is the pool's size now",
                    nf.replicas, p.min, p.max
                ),
            ));
        }
    }
    if let Some(d) = &nf.draining {
        if d.generation == nf.generation {
            return Err(cx.err(
                format!("nfs[{i}].draining.generation"),
                format!(
                    "the draining version's generation {} is the NF's own: a rollout \
                     retires an earlier version",
                    d.generation
                ),
            ));
        }
        if !(1..=MAX_REPLICAS).contains(&d.replicas) {
            return Err(cx.err(
                format!("nfs[{i}].draining.replicas"),
                format!(
                    "replicas {} is out of range (1 to {MAX_REPLICAS})",
                    d.replicas
                ),
            ));
        }
    }
    if nf.sandbox.is_some() && nf.isolation == Isolation::Inline {
        return Err(cx.err(
            format!("nfs[{i}].sandbox"),
            "sandbox applies to process NFs: an inline NF runs in its worker's thread, \
             with the platform's rights (use isolation: process to sandbox it)",
        ));
    }
    Ok(())
}
