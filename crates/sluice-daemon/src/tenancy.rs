//! Who may change what.
//!
//! The operator (anyone on the UNIX socket, whose file mode is the access
//! control, and the TCP token of `--token-file`) may do anything. A tenant
//! (a token of `--tenant NAME=FILE`) may:
//!
//! - read what the operator reads (the spec, stats, metrics, dashboard);
//! - add, change and remove only NFs and chains that are its own
//!   (`tenant: NAME` in the spec) before and after the change, so it can
//!   neither take the operator's or another tenant's objects nor give its
//!   own away; ports and `settings` are the operator's;
//! - read the logs of, and capture at, only its own NFs (a capture at a
//!   port would show every tenant's packets).
//!
//! A refused change is a 403 naming the first object in the way, and
//! changes nothing. The spec keeps tenants' packets apart on its own (a
//! tenant's chain passes only its own and the operator's NFs; see
//! `sluice-spec`'s tenancy check), so these rules are all the API adds.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_spec::Spec;

use crate::error::ApiError;

/// Who sent a request (set by the listener's authentication).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The operator: everything.
    Operator,
    /// A tenant: its own NFs and chains.
    Tenant(String),
}

/// `name` → definition of the entries of `key` in a spec's JSON.
fn by_name(spec: &Value, key: &str) -> BTreeMap<String, Value> {
    spec[key]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default().to_string(),
                e.clone(),
            )
        })
        .collect()
}

/// An owner, as words for an error message.
fn whose(tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!("tenant \"{t}\"'s"),
        None => "the operator's".into(),
    }
}

impl Caller {
    /// Whether this caller may make `new` the desired state in place of
    /// `old` (`None`: nothing applied yet).
    pub fn may_change(&self, old: Option<&Spec>, new: &Spec) -> Result<(), ApiError> {
        let Caller::Tenant(me) = self else {
            return Ok(());
        };
        let refuse = |what: String| {
            ApiError::forbidden(format!(
                "tenant \"{me}\" may change only its own NFs and chains: {what}"
            ))
        };
        let Some(old) = old else {
            return Err(refuse("the operator applies the first spec".into()));
        };
        let (old, new) = (old.to_json(), new.to_json());
        if old["settings"] != new["settings"] {
            return Err(refuse("settings are the operator's".into()));
        }
        if by_name(&old, "ports") != by_name(&new, "ports") {
            return Err(refuse("ports are the operator's".into()));
        }
        for (key, what) in [("nfs", "NF"), ("chains", "chain")] {
            let (was, will) = (by_name(&old, key), by_name(&new, key));
            let names = was
                .keys()
                .chain(will.keys().filter(|k| !was.contains_key(*k)));
            for name in names {
                let (a, b) = (was.get(name), will.get(name));
                if a == b {
                    continue;
                }
                // Its own before (if it existed) and after (if it stays).
                for def in [a, b].into_iter().flatten() {
                    if def["tenant"].as_str() != Some(me.as_str()) {
                        return Err(refuse(format!(
                            "{what} \"{name}\" is {}",
                            whose(def["tenant"].as_str())
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Caller::may_change`] for an addition's result (`grown`, the
    /// desired state with objects appended): only the added objects can
    /// differ, so only they are looked at, not the whole spec twice as
    /// JSON.
    pub fn may_add(&self, grown: &sluice_spec::ValidSpec) -> Result<(), ApiError> {
        let Caller::Tenant(me) = self else {
            return Ok(());
        };
        let refuse = |what: String| {
            ApiError::forbidden(format!(
                "tenant \"{me}\" may change only its own NFs and chains: {what}"
            ))
        };
        let Some(from) = grown.grown_from() else {
            return Err(refuse("the operator applies the first spec".into()));
        };
        if grown.ports.len() > from.ports {
            return Err(refuse("ports are the operator's".into()));
        }
        let added = (grown.nfs[from.nfs..]
            .iter()
            .map(|n| ("NF", &n.name, &n.tenant)))
        .chain(
            grown.chains[from.chains..]
                .iter()
                .map(|c| ("chain", &c.name, &c.tenant)),
        );
        for (what, name, tenant) in added {
            if tenant.as_deref() != Some(me.as_str()) {
                return Err(refuse(format!(
                    "{what} \"{name}\" is {}",
                    whose(tenant.as_deref())
                )));
            }
        }
        Ok(())
    }

    /// Whether this caller may delete `name`, a `kind` (`port`, `nf`,
    /// `chain`) of `spec`: asked before whether anything still uses it,
    /// so a tenant learns nothing about objects that are not its own.
    /// Unknown names pass (404 for anyone).
    pub fn may_delete(&self, spec: Option<&Spec>, kind: &str, name: &str) -> Result<(), ApiError> {
        let Caller::Tenant(me) = self else {
            return Ok(());
        };
        let Some(spec) = spec else { return Ok(()) };
        let owner = match kind {
            "nf" => spec.nfs.iter().find(|n| n.name == name).map(|n| &n.tenant),
            "chain" => spec
                .chains
                .iter()
                .find(|c| c.name == name)
                .map(|c| &c.tenant),
            _ => {
                return Err(ApiError::forbidden(format!(
                    "tenant \"{me}\" may change only its own NFs and chains: ports are the \
                     operator's"
                )))
            }
        };
        match owner {
            Some(o) if o.as_deref() != Some(me.as_str()) => {
                let what = if kind == "nf" { "NF" } else { "chain" };
                Err(ApiError::forbidden(format!(
                    "tenant \"{me}\" may change only its own NFs and chains: {what} \"{name}\" is {}",
                    whose(o.as_deref())
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether this caller may read the logs of, or capture at, `name` (an
    /// NF or a port of `spec`). Unknown names pass: the handler answers
    /// 404 for them as for anyone.
    pub fn may_look_into(&self, spec: Option<&Spec>, name: &str) -> Result<(), ApiError> {
        let Caller::Tenant(me) = self else {
            return Ok(());
        };
        let Some(spec) = spec else { return Ok(()) };
        if spec.ports.iter().any(|p| p.name == name) {
            return Err(ApiError::forbidden(format!(
                "tenant \"{me}\" may look only into its own NFs: port \"{name}\" carries every \
                 tenant's packets"
            )));
        }
        match spec.nfs.iter().find(|n| n.name == name) {
            Some(nf) if nf.tenant.as_deref() != Some(me.as_str()) => {
                Err(ApiError::forbidden(format!(
                    "tenant \"{me}\" may look only into its own NFs: NF \"{name}\" is {}",
                    whose(nf.tenant.as_deref())
                )))
            }
            _ => Ok(()),
        }
    }
}

/// Checks the daemon's tenant tokens: they need the TCP listener (the
/// UNIX socket has no tokens: its callers are the operator), and every
/// tenant name and token must be valid and distinct, from each other and
/// from the operator's token (a shared token would make its holder
/// whichever caller was checked first).
pub fn check_tokens(
    listening: bool,
    operator: Option<&str>,
    tenants: &[(String, String)],
) -> Result<(), String> {
    if tenants.is_empty() {
        return Ok(());
    }
    if !listening {
        return Err("--tenant needs --listen: tenants reach the daemon over TCP with their                     token (the UNIX socket's callers are the operator)"
            .into());
    }
    for (i, (name, token)) in tenants.iter().enumerate() {
        let valid = !name.is_empty()
            && name.len() <= 32
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !valid {
            return Err(format!(
                "--tenant {name:?}: a tenant name is 1 to 32 characters of a-z, 0-9, _ and -                  (as in the spec's `tenant:`)"
            ));
        }
        if token.is_empty() {
            return Err(format!("--tenant {name}: its token file is empty"));
        }
        if Some(token.as_str()) == operator {
            return Err(format!(
                "--tenant {name}: its token is the operator's (--token-file)"
            ));
        }
        for (other, t) in &tenants[..i] {
            if other == name {
                return Err(format!("--tenant {name} is given twice"));
            }
            if t == token {
                return Err(format!(
                    "--tenant {name}: its token is tenant {other}'s too"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &[&str] = &["forwarder", "monitor"];

    fn spec(extra_nfs: &str, extra_chains: &str) -> Spec {
        let text = format!(
            "ports:
  - {{ name: gen, kind: generator, rate_pps: 10 }}
  - {{ name: out, kind: sink }}
nfs:
  - {{ name: op, type: forwarder }}
  - {{ name: a1, type: forwarder, tenant: a }}
  - {{ name: b1, type: forwarder, tenant: b }}
{extra_nfs}chains:
  - {{ name: main, from: gen, match: {{ dst_port: 80 }}, nfs: [op], to: out }}
  - {{ name: ca, from: gen, match: {{ dst_port: 1 }}, nfs: [a1, op], to: out, tenant: a }}
  - {{ name: cb, from: gen, match: {{ dst_port: 2 }}, nfs: [b1], to: out, tenant: b }}
{extra_chains}"
        );
        sluice_spec::parse_str(&text, "<test>", TYPES).unwrap()
    }

    fn tenant(t: &str) -> Caller {
        Caller::Tenant(t.into())
    }

    fn refused(r: Result<(), ApiError>) -> String {
        let e = r.expect_err("refused");
        assert_eq!(e.status, axum::http::StatusCode::FORBIDDEN);
        e.body.error.message
    }

    #[test]
    fn a_tenant_adds_changes_and_removes_its_own_objects() {
        let old = spec("", "");
        let added = spec(
            "  - { name: a2, type: monitor, tenant: a }\n",
            "  - { name: ca2, from: gen, match: { dst_port: 3 }, nfs: [a2], to: out, tenant: a }\n",
        );
        assert!(tenant("a").may_change(Some(&old), &added).is_ok());
        assert!(tenant("a").may_change(Some(&added), &old).is_ok());
        let changed = sluice_spec::parse_str(
            &serde_json::to_string(&{
                let mut v = old.to_json();
                v["nfs"][1]["isolation"] = "inline".into();
                v
            })
            .unwrap(),
            "<test>",
            TYPES,
        )
        .unwrap();
        assert!(tenant("a").may_change(Some(&old), &changed).is_ok());
        // The same change is another tenant's business.
        let m = refused(tenant("b").may_change(Some(&old), &changed));
        assert!(m.contains("NF \"a1\" is tenant \"a\"'s"), "{m}");
        // No change at all is allowed to anyone.
        assert!(tenant("b").may_change(Some(&old), &old).is_ok());
    }

    #[test]
    fn an_addition_is_judged_as_the_whole_change_would_be() {
        let old = spec("", "");
        for (text, ok) in [
            (
                "nfs:\n  - { name: a2, type: forwarder, tenant: a }\nchains:\n  - { name: ca2, from: gen, match: { dst_port: 3 }, nfs: [a2], to: out, tenant: a }\n",
                true,
            ),
            ("nfs:\n  - { name: a3, type: forwarder, tenant: a }\n", true),
            ("nfs:\n  - { name: x, type: forwarder }\n", false),
            ("nfs:\n  - { name: b2, type: forwarder, tenant: b }\n", false),
            (
                "nfs:\n  - { name: a4, type: forwarder, tenant: a }\nchains:\n  - { name: c4, from: gen, match: { dst_port: 4 }, nfs: [a4], to: out }\n",
                false,
            ),
            ("ports:\n  - { name: g9, kind: generator }\n", false),
        ] {
            let addition = sluice_spec::parse_additions(text, "<api>").unwrap();
            let grown = sluice_spec::add(Some(&old), addition, TYPES).unwrap();
            let whole = tenant("a").may_change(Some(&old), &grown);
            let alone = tenant("a").may_add(&grown);
            assert_eq!(alone.is_ok(), ok, "{text}");
            assert_eq!(whole.is_ok(), ok, "{text}");
            if let (Err(w), Err(a)) = (whole, alone) {
                assert_eq!(w.body.error.message, a.body.error.message, "{text}");
            }
            assert!(Caller::Operator.may_add(&grown).is_ok());
        }
        // Nothing runs: the first spec is the operator's.
        let first = sluice_spec::add(None, sluice_spec::parse_additions("ports:\n  - { name: g, kind: generator }\n  - { name: o, kind: sink }\nnfs:\n  - { name: a1, type: forwarder, tenant: a }\nchains:\n  - { name: c, from: g, nfs: [a1], to: o, tenant: a }\n", "<api>").unwrap(), TYPES).unwrap();
        assert!(refused(tenant("a").may_add(&first)).contains("first spec"));
    }

    #[test]
    fn a_tenant_cannot_touch_the_operators_or_take_or_give_objects() {
        let old = spec("", "");
        let mut v = old.to_json();
        v["nfs"][0]["isolation"] = "inline".into();
        let op_changed =
            sluice_spec::parse_str(&serde_json::to_string(&v).unwrap(), "<t>", TYPES).unwrap();
        let m = refused(tenant("a").may_change(Some(&old), &op_changed));
        assert!(m.contains("NF \"op\" is the operator's"), "{m}");
        // Taking the operator's NF: it is not the tenant's before.
        let mut v = old.to_json();
        v["nfs"][0]["tenant"] = "a".into();
        let taken =
            sluice_spec::parse_str(&serde_json::to_string(&v).unwrap(), "<t>", TYPES).unwrap();
        let m = refused(tenant("a").may_change(Some(&old), &taken));
        assert!(m.contains("NF \"op\" is the operator's"), "{m}");
        // Giving its own NF away: it is not the tenant's after.
        let mut v = old.to_json();
        v["nfs"][1].as_object_mut().unwrap().remove("tenant");
        let given =
            sluice_spec::parse_str(&serde_json::to_string(&v).unwrap(), "<t>", TYPES).unwrap();
        let m = refused(tenant("a").may_change(Some(&old), &given));
        assert!(m.contains("NF \"a1\" is the operator's"), "{m}");
        // Ports and settings.
        let mut v = old.to_json();
        v["ports"][0]["rate_pps"] = 20.into();
        let ports =
            sluice_spec::parse_str(&serde_json::to_string(&v).unwrap(), "<t>", TYPES).unwrap();
        assert!(refused(tenant("a").may_change(Some(&old), &ports)).contains("ports"));
        let mut v = old.to_json();
        v["settings"]["restart"]["backoff_ms"] = 1.into();
        let settings =
            sluice_spec::parse_str(&serde_json::to_string(&v).unwrap(), "<t>", TYPES).unwrap();
        assert!(refused(tenant("a").may_change(Some(&old), &settings)).contains("settings"));
        // The first spec.
        assert!(refused(tenant("a").may_change(None, &old)).contains("first spec"));
        // The operator may do all of it.
        for new in [&op_changed, &given, &ports, &settings] {
            assert!(Caller::Operator.may_change(Some(&old), new).is_ok());
        }
    }

    #[test]
    fn tenant_tokens_are_checked_at_start() {
        let t = |n: &str, k: &str| (n.to_string(), k.to_string());
        assert!(check_tokens(false, None, &[]).is_ok());
        assert!(check_tokens(true, Some("op"), &[t("a", "ka"), t("b", "kb")]).is_ok());
        let err = |listening, tenants: &[(String, String)]| {
            check_tokens(listening, Some("op"), tenants).unwrap_err()
        };
        assert!(err(false, &[t("a", "ka")]).contains("--listen"));
        assert!(err(true, &[t("A", "ka")]).contains("tenant name"));
        assert!(err(true, &[t("a", "")]).contains("empty"));
        assert!(err(true, &[t("a", "op")]).contains("operator's"));
        assert!(err(true, &[t("a", "ka"), t("a", "kb")]).contains("twice"));
        assert!(err(true, &[t("a", "k"), t("b", "k")]).contains("tenant a's too"));
    }

    #[test]
    fn a_tenant_looks_only_into_its_own_nfs() {
        let s = spec("", "");
        assert!(tenant("a").may_look_into(Some(&s), "a1").is_ok());
        assert!(refused(tenant("a").may_look_into(Some(&s), "b1")).contains("tenant \"b\"'s"));
        assert!(refused(tenant("a").may_look_into(Some(&s), "op")).contains("operator's"));
        assert!(refused(tenant("a").may_look_into(Some(&s), "gen")).contains("port"));
        assert!(tenant("a").may_look_into(Some(&s), "nonesuch").is_ok());
        assert!(Caller::Operator.may_look_into(Some(&s), "gen").is_ok());
    }
}
