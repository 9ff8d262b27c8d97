//! Trust domains (`settings.domains`, `nfs[].domain`): NFs with separate
//! packet memory, as NetVM's trust groups.
//!
//! ```yaml
//! settings:
//!   domains:
//!     - { name: tenant-a, buffers: 4096 }
//! nfs:
//!   - { name: acl, type: acl, domain: tenant-a }
//! ```
//!
//! Each domain has packet buffers of its own and an NF process maps only
//! its domain's; a packet entering an NF of another domain is copied into a
//! buffer of that domain by the platform, so no handle crosses domains. The
//! platform's own domain, [`PLATFORM_DOMAIN`], holds `settings.buffers`
//! buffers, is where ports receive, and is every NF's domain unless it
//! names another. Inline NFs run inside the platform's worker, which maps
//! every domain, so they are always in the platform's domain.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::config_node::ConfigNode;
use crate::fields::{self, suggest, Fields, Res};
use crate::limits;
use crate::model::{Isolation, NfSpec, Spec};
use crate::validate::{name, Ctx};

/// The name of the platform's own domain: where ports receive, and the
/// domain of every NF that names none. It is never declared.
pub const PLATFORM_DOMAIN: &str = "platform";

/// Most domains `settings.domains` may declare (the platform's own comes
/// on top: 16 in all).
pub const MAX_DOMAINS: usize = 15;

/// Packet indices are below 2^30: the platform's buffers and every
/// domain's together stay below this.
const PACKET_INDEX_LIMIT: u64 = 1 << 30;

// The limits keep the total below the index limit by themselves; the check
// in `settings` guards specs should they ever be raised.
const _: () = assert!(
    limits::BUFFERS.hi + MAX_DOMAINS as u64 * limits::DOMAIN_BUFFERS.hi < PACKET_INDEX_LIMIT
);

/// A trust domain (`settings.domains[i]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DomainSpec {
    /// Its name (`name`, a name as NFs have, unique among domains, not
    /// `platform`). NFs join it with `nfs[].domain`.
    pub name: String,
    /// Its packet buffers (`buffers`, 256..=16777216).
    pub buffers: u32,
}

impl DomainSpec {
    /// A domain built by code.
    pub fn new(name: impl Into<String>, buffers: u32) -> DomainSpec {
        DomainSpec {
            name: name.into(),
            buffers,
        }
    }
}

impl NfSpec {
    /// The name of its domain: its `domain`, else [`PLATFORM_DOMAIN`].
    pub fn domain_name(&self) -> &str {
        self.domain.as_deref().unwrap_or(PLATFORM_DOMAIN)
    }
}

impl Spec {
    /// The index of NF `nf`'s domain: 0 for the platform's own (no
    /// `domain`, or `platform`), 1 + its position in `settings.domains`
    /// for a declared one. `None` for a domain that is not declared, which
    /// only a spec that failed validation has.
    pub fn domain_index(&self, nf: &NfSpec) -> Option<usize> {
        match nf.domain.as_deref() {
            None | Some(PLATFORM_DOMAIN) => Some(0),
            Some(d) => self
                .settings
                .domains
                .iter()
                .position(|x| x.name == d)
                .map(|i| i + 1),
        }
    }

    /// [`Spec::domain_index`] of the NF named `nf` (at most
    /// [`MAX_DOMAINS`] in a valid spec); `None` if there is no such NF.
    pub fn domain_of(&self, nf: &str) -> Option<u8> {
        let nf = self.nfs.iter().find(|n| n.name == nf)?;
        self.domain_index(nf).and_then(|i| u8::try_from(i).ok())
    }
}

/// `settings.domains`: a list of `{ name, buffers }`.
pub(crate) fn decode(node: &ConfigNode) -> Res<Vec<DomainSpec>> {
    let items = node
        .as_seq()
        .ok_or_else(|| fields::type_error(node, "a list of domains ({ name, buffers })"))?;
    items
        .iter()
        .map(|item| {
            let f = Fields::of(item, "a domain")?;
            f.deny_unknown("a domain", &["name", "buffers"])?;
            Ok(DomainSpec {
                name: fields::string(f.req("name", "every domain needs a unique name")?)?
                    .to_string(),
                buffers: fields::int_as(
                    f.req("buffers", "the domain's packet buffers, e.g. 4096")?,
                    limits::DOMAIN_BUFFERS,
                )?,
            })
        })
        .collect()
}

/// `settings.domains` as written by [`Spec::to_json`].
pub(crate) fn emit(domains: &[DomainSpec]) -> Value {
    domains
        .iter()
        .map(|d| json!({ "name": d.name, "buffers": d.buffers }))
        .collect()
}

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
