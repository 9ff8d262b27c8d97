//! Tunnel NFs: VXLAN (RFC 7348) and GRE (RFC 2784/2890) encapsulation and
//! decapsulation, in place in the packet's headroom.

pub mod gre_decap;
pub mod gre_encap;
pub mod outer;
pub mod vxlan_decap;
pub mod vxlan_encap;

use sluice_nf::BuildContext;
use sluice_spec::SpecError;

/// Outer-header keys every encapsulating NF accepts.
pub(crate) const OUTER_KEYS: &[&str] = &[
    "local", "remote", "src_mac", "dst_mac", "ttl", "dscp", "mtu",
];

/// Rejects config keys outside `allowed` (serde's `deny_unknown_fields`
/// does not work with flattened structs), naming the key.
pub(crate) fn deny_unknown(ctx: &BuildContext<'_>, allowed: &[&[&str]]) -> Result<(), SpecError> {
    let Some(map) = ctx.config.as_map() else {
        return Ok(());
    };
    for e in map {
        let k = e.key.as_str();
        if !allowed.iter().any(|set| set.contains(&k)) {
            let all: Vec<&str> = allowed.iter().flat_map(|s| s.iter().copied()).collect();
            return Err(ctx.config.error_at_path(
                k,
                format!("unknown key `{k}` (expected one of: {})", all.join(", ")),
            ));
        }
    }
    Ok(())
}
