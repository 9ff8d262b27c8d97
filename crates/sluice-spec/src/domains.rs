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

use serde_json::{json, Value};

use crate::config_node::ConfigNode;
use crate::fields::{self, Fields, Res};
use crate::limits;

/// The name of the platform's own domain: where ports receive, and the
/// domain of every NF that names none. It is never declared.
pub const PLATFORM_DOMAIN: &str = "platform";

/// Most domains `settings.domains` may declare (the platform's own comes
/// on top: 16 in all).
pub const MAX_DOMAINS: usize = 15;

/// Packet indices are below 2^30: the platform's buffers and every
/// domain's together stay below this.
pub(crate) const PACKET_INDEX_LIMIT: u64 = 1 << 30;

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
