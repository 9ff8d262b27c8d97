//! Checks on trust domains (`settings.domains`, `nfs[].domain`; see
//! `domains` for what they are).

use crate::check::{name, Ctx};
use std::collections::HashMap;

use crate::domains::{DomainSpec, MAX_DOMAINS, PACKET_INDEX_LIMIT, PLATFORM_DOMAIN};
use crate::fields::{suggest, Res};
use crate::limits;
use crate::model::Isolation;

/// Checks `settings.domains`: names, count and buffers.
pub(crate) fn settings(cx: &Ctx<'_>) -> Res<()> {
    let s = &cx.spec.settings;
    if s.domains.len() > MAX_DOMAINS {
        return Err(cx.err(
            format!("settings.domains[{MAX_DOMAINS}]"),
            format!(
                "{} domains declared: at most {MAX_DOMAINS} besides the platform's own",
                s.domains.len()
            ),
        ));
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, d) in s.domains.iter().enumerate() {
        let at = format!("settings.domains[{i}]");
        name(cx, || format!("{at}.name"), &d.name)?;
        if d.name == PLATFORM_DOMAIN {
            return Err(cx.err(
                format!("{at}.name"),
                "domain name \"platform\" is reserved: it is the platform's own domain \
                 (settings.buffers, where ports receive), which needs no declaration",
            ));
        }
        if let Some(first) = seen.get(d.name.as_str()) {
            let first = format!("settings.domains[{first}]");
            return Err(cx.err(
                format!("{at}.name"),
                format!(
                    "duplicate domain \"{}\": already declared by {first}{}",
                    d.name,
                    cx.line_note(&format!("{first}.name"))
                ),
            ));
        }
        seen.insert(&d.name, i);
        cx.limit(
            format!("{at}.buffers"),
            limits::DOMAIN_BUFFERS,
            d.buffers.into(),
        )?;
    }
    total_buffers(s.buffers, &s.domains).map_err(|m| cx.err("settings.domains", m))
}

/// The platform's and the domains' buffers together stay below
/// [`PACKET_INDEX_LIMIT`].
fn total_buffers(platform: u32, domains: &[DomainSpec]) -> Result<(), String> {
    let own: u64 = domains.iter().map(|d| u64::from(d.buffers)).sum();
    let total = u64::from(platform) + own;
    if total < PACKET_INDEX_LIMIT {
        return Ok(());
    }
    Err(format!(
        "settings.buffers ({platform}) and the domains' buffers ({own}) add up to {total}: \
         packet indices are below 2^30, so together they must stay below {PACKET_INDEX_LIMIT}"
    ))
}

/// Checks `nfs[].domain`: declared, and only on NFs that cannot reach
/// other domains' memory.
pub(crate) fn nfs(cx: &Ctx<'_>) -> Res<()> {
    let domains = &cx.spec.settings.domains;
    for (i, nf) in cx.spec.nfs.iter().enumerate().skip(cx.from.nfs) {
        let Some(d) = nf.domain.as_deref().filter(|d| *d != PLATFORM_DOMAIN) else {
            continue;
        };
        let at = format!("nfs[{i}].domain");
        if !domains.iter().any(|x| x.name == d) {
            let mut msg = if domains.is_empty() {
                format!(
                    "no domain named \"{d}\" (settings.domains declares none; \
                     \"{PLATFORM_DOMAIN}\" is the platform's own)"
                )
            } else {
                let names: Vec<&str> = domains.iter().map(|x| x.name.as_str()).collect();
                format!(
                    "no domain named \"{d}\" (declared domains: {}; \"{PLATFORM_DOMAIN}\" is \
                     the platform's own)",
                    names.join(", ")
                )
            };
            let all = domains
                .iter()
                .map(|x| x.name.as_str())
                .chain([PLATFORM_DOMAIN]);
            if let Some(s) = suggest(d, all) {
                msg.push_str(&format!("; did you mean \"{s}\"?"));
            }
            return Err(cx.err(at, msg));
        }
        if nf.isolation == Isolation::Inline {
            return Err(cx.err(
                at,
                format!(
                    "domain \"{d}\" needs isolation: process: an inline NF runs inside the \
                     platform's worker, which maps every domain, so it is always in the \
                     \"{PLATFORM_DOMAIN}\" domain"
                ),
            ));
        }
        if !nf.sandbox_or_default().seccomp {
            return Err(cx.err(
                at,
                format!(
                    "domain \"{d}\" needs the system-call filter, but the NF's sandbox has \
                     seccomp off: without the filter the NF could map the packet memory \
                     of other domains again (keep seccomp on, or leave the NF in the \
                     \"{PLATFORM_DOMAIN}\" domain)"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_stays_below_the_packet_index_limit() {
        let big = |n: usize| vec![DomainSpec::new("d", 1 << 24); n];
        assert!(total_buffers(4_194_304, &big(MAX_DOMAINS)).is_ok());
        // Unreachable through the limits; at the boundary by hand.
        assert!(total_buffers((1 << 24) - 1, &big(63)).is_ok());
        assert_eq!(
            total_buffers(1 << 24, &big(63)).unwrap_err(),
            "settings.buffers (16777216) and the domains' buffers (1056964608) add up to \
             1073741824: packet indices are below 2^30, so together they must stay below \
             1073741824"
        );
    }
}
