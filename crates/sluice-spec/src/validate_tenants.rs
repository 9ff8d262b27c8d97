//! Tenancy: who owns which NFs and chains (`nfs[].tenant`,
//! `chains[].tenant`; no tenant: the operator's).
//!
//! A daemon lets a tenant's token change only its own objects, so the spec
//! itself must keep tenants apart where packets go: a tenant's chain may
//! run its packets only through its own NFs and the operator's, and
//! continue only into its own chains or the operator's. Otherwise one
//! tenant could push its traffic through another's NAT, or have another's
//! packets pass its NFs. Ports are the operator's and every chain may use
//! them (the operator says which ports a tenant gets).

use crate::check::{name, Ctx};
use crate::fields::Res;
use crate::index::Named;
use crate::validate_chains::Names;

/// Checks tenant names and that no chain crosses into another tenant
/// (of the NFs and chains from `cx.from` on).
pub(crate) fn tenants(cx: &Ctx<'_>, names: &Names<'_>) -> Res<()> {
    let spec = cx.spec;
    for (i, nf) in spec.nfs.iter().enumerate().skip(cx.from.nfs) {
        if let Some(t) = &nf.tenant {
            name(cx, || format!("nfs[{i}].tenant"), t)?;
        }
    }
    // Looked up in the names' index: a search per reference is quadratic
    // in a spec of thousands of NFs.
    let nf_owner = |n: &str| match names.named(n) {
        Some(Named::Nf(i)) => Some(&spec.nfs[i].tenant),
        _ => None,
    };
    let chain_owner = |n: &str| match names.named(n) {
        Some(Named::Chain(i)) => Some(&spec.chains[i].tenant),
        _ => None,
    };
    for (i, c) in spec.chains.iter().enumerate().skip(cx.from.chains) {
        let Some(t) = &c.tenant else { continue };
        name(cx, || format!("chains[{i}].tenant"), t)?;
        // The owner of an object, when it is another tenant.
        fn foreign<'s>(owner: &'s Option<String>, t: &str) -> Option<&'s String> {
            owner.as_ref().filter(|o| *o != t)
        }
        for (j, n) in c.nfs.iter().enumerate() {
            if let Some(o) = nf_owner(n).and_then(|o| foreign(o, t)) {
                return Err(cx.err(
                    format!("chains[{i}].nfs[{j}]"),
                    format!(
                        "NF \"{n}\" belongs to tenant \"{o}\" and chain \"{}\" to tenant \"{t}\": \
                         a tenant's chain may use its own NFs and the operator's (those \
                         without a tenant)",
                        c.name
                    ),
                ));
            }
        }
        if let Some(o) = chain_owner(&c.to).and_then(|o| foreign(o, t)) {
            return Err(cx.err(
                format!("chains[{i}].to"),
                format!(
                    "chain \"{}\" belongs to tenant \"{o}\" and chain \"{}\" to tenant \"{t}\": \
                     a tenant's chain may continue into its own chains and the operator's",
                    c.to, c.name
                ),
            ));
        }
    }
    Ok(())
}
