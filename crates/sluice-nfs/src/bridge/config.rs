//! Decoding the `bridge` config: ports (names resolved to port ids) with
//! their VLAN membership, table size and ageing time.

use serde::de::IgnoredAny;
use serde::Deserialize;
use sluice_nf::{BuildContext, PortId};
use sluice_spec::{ConfigNode, SpecError};

use super::core::{PortVlans, MAX_PORTS};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    // Present and a list; decoded entry by entry in `compile` so that each
    // entry may be a bare name or a mapping, with located errors.
    #[allow(dead_code)]
    ports: Vec<IgnoredAny>,
    #[serde(default = "ageing")]
    ageing_time_s: u64,
    #[serde(default = "entries")]
    max_entries: u32,
    default_ingress: Option<String>,
}

fn ageing() -> u64 {
    300
}
fn entries() -> u32 {
    4096
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PortCfg {
    name: String,
    vlan: Option<u16>,
    trunk: Option<Vec<u16>>,
    native: Option<u16>,
}

/// A decoded bridge config.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// Platform port of each bridge port.
    pub ids: Vec<PortId>,
    /// VLAN membership of each bridge port.
    pub vlans: Vec<PortVlans>,
    /// MAC table size.
    pub max_entries: usize,
    /// Ageing time.
    pub ageing_ns: u64,
    /// Bridge port taken as the ingress of frames from ports outside the
    /// bridge (input-only port kinds such as `generator` and `pcap_in`).
    pub default_ingress: Option<usize>,
}

fn vid(node: &ConfigNode, path: &str, v: u16) -> Result<u16, SpecError> {
    if (1..=4094).contains(&v) {
        Ok(v)
    } else {
        Err(node.error_at_path(path, format!("VLAN {v} is not in 1-4094")))
    }
}

fn port(
    ctx: &BuildContext<'_>,
    i: usize,
    node: &ConfigNode,
) -> Result<(String, PortVlans), SpecError> {
    let c = ctx.config;
    if let Some(name) = node.as_str() {
        return Ok((
            name.to_string(),
            PortVlans {
                access: Some(1),
                trunk: Vec::new(),
                native: None,
            },
        ));
    }
    let p: PortCfg = node.deserialize()?;
    let at = |f: &str| format!("ports[{i}].{f}");
    let v = match (p.vlan, &p.trunk) {
        (Some(_), Some(_)) => {
            return Err(c.error_at_path(
                &at("trunk"),
                "a port is either access (`vlan`) or trunk (`trunk`), not both",
            ))
        }
        (Some(a), None) => {
            if p.native.is_some() {
                return Err(c.error_at_path(&at("native"), "`native` is for trunk ports"));
            }
            PortVlans {
                access: Some(vid(c, &at("vlan"), a)?),
                trunk: Vec::new(),
                native: None,
            }
        }
        (None, Some(t)) => {
            let mut trunk = Vec::with_capacity(t.len());
            for (j, v) in t.iter().enumerate() {
                trunk.push(vid(c, &at(&format!("trunk[{j}]")), *v)?);
            }
            let native = p.native.map(|n| vid(c, &at("native"), n)).transpose()?;
            if native.is_some_and(|n| trunk.contains(&n)) {
                return Err(c.error_at_path(
                    &at("native"),
                    "the native VLAN is carried untagged; do not list it in `trunk` too",
                ));
            }
            PortVlans {
                access: None,
                trunk,
                native,
            }
        }
        (None, None) => PortVlans {
            access: Some(1),
            trunk: Vec::new(),
            native: None,
        },
    };
    Ok((p.name, v))
}

/// Decodes and validates the config of a `bridge`.
pub fn compile(ctx: &BuildContext<'_>) -> Result<Compiled, SpecError> {
    if ctx.config.is_null() {
        return Err(ctx.config.error("bridge needs a config with `ports`"));
    }
    let cfg: Config = ctx.config.deserialize()?;
    let nodes = ctx
        .config
        .get("ports")
        .and_then(|n| n.as_seq())
        .unwrap_or(&[]);
    if nodes.len() < 2 || nodes.len() > MAX_PORTS {
        return Err(ctx.config.error_at_path(
            "ports",
            format!(
                "a bridge needs 2 to {MAX_PORTS} ports, found {}",
                nodes.len()
            ),
        ));
    }
    let mut ids = Vec::with_capacity(nodes.len());
    let mut vlans = Vec::with_capacity(nodes.len());
    let mut names: Vec<String> = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let (name, v) = port(ctx, i, n)?;
        if names.contains(&name) {
            return Err(ctx.config.error_at_path(
                &format!("ports[{i}]"),
                format!("port `{name}` is listed twice"),
            ));
        }
        let id = ctx.resolver.port(&name).ok_or_else(|| {
            ctx.config.error_at_path(
                &format!("ports[{i}]"),
                format!("no output-capable port named `{name}`"),
            )
        })?;
        names.push(name);
        ids.push(id);
        vlans.push(v);
    }
    if cfg.max_entries == 0 || cfg.max_entries > 1 << 24 {
        return Err(ctx
            .config
            .error_at_path("max_entries", "must be between 1 and 16777216"));
    }
    if cfg.ageing_time_s == 0 {
        return Err(ctx
            .config
            .error_at_path("ageing_time_s", "must be at least 1 second"));
    }
    let default_ingress = match &cfg.default_ingress {
        None => None,
        Some(n) => Some(names.iter().position(|x| x == n).ok_or_else(|| {
            ctx.config.error_at_path(
                "default_ingress",
                format!("`{n}` is not one of the bridge's ports"),
            )
        })?),
    };
    Ok(Compiled {
        default_ingress,
        ids,
        vlans,
        max_entries: cfg.max_entries as usize,
        ageing_ns: cfg.ageing_time_s.saturating_mul(1_000_000_000),
    })
}
