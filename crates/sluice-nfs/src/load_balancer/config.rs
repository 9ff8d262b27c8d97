//! Decoding the `load_balancer` config.

use std::net::IpAddr;

use serde::Deserialize;
use sluice_nf::BuildContext;
use sluice_packet::MacAddr;
use sluice_spec::SpecError;

use super::balancer::{Backend, Balancer, Mode, Service};
use super::maglev;

/// Most backends (one extended counter each).
pub const MAX_BACKENDS: usize = 1024;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ModeCfg {
    #[default]
    Nat,
    Dsr,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ProtoCfg {
    Tcp,
    Udp,
    #[default]
    Any,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendCfg {
    name: String,
    addr: String,
    port: Option<u16>,
    mac: Option<String>,
    #[serde(default = "one")]
    weight: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthCfg {
    #[serde(default)]
    down: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    vip: String,
    #[serde(default)]
    ports: Vec<u16>,
    #[serde(default)]
    proto: ProtoCfg,
    #[serde(default)]
    mode: ModeCfg,
    backends: Vec<BackendCfg>,
    table_size: Option<u64>,
    max_connections: Option<u32>,
    #[serde(default = "idle")]
    idle_timeout_s: u64,
    #[serde(default)]
    health: HealthCfg,
}

fn idle() -> u64 {
    300
}

/// Decodes and validates the config and builds the balancer.
pub fn compile(ctx: &BuildContext<'_>) -> Result<Balancer, SpecError> {
    if ctx.config.is_null() {
        return Err(ctx
            .config
            .error("load_balancer needs a config with `vip` and `backends`"));
    }
    let cfg: Config = ctx.config.deserialize()?;
    let vip: IpAddr = cfg.vip.parse().map_err(|_| {
        ctx.config
            .error_at_path("vip", format!("invalid address `{}`", cfg.vip))
    })?;
    if cfg.backends.is_empty() {
        return Err(ctx
            .config
            .error_at_path("backends", "at least one backend is required"));
    }
    if cfg.backends.len() > MAX_BACKENDS {
        return Err(ctx.config.error_at_path(
            "backends",
            format!("at most {MAX_BACKENDS} backends (one extended counter each)"),
        ));
    }
    let mode = match cfg.mode {
        ModeCfg::Nat => Mode::Nat,
        ModeCfg::Dsr => Mode::Dsr,
    };
    let mut backends = Vec::with_capacity(cfg.backends.len());
    for (i, b) in cfg.backends.iter().enumerate() {
        let at = |f: &str, m: String| ctx.config.error_at_path(&format!("backends[{i}].{f}"), m);
        if cfg.backends[..i].iter().any(|o| o.name == b.name) {
            return Err(at("name", format!("duplicate backend name `{}`", b.name)));
        }
        let addr: IpAddr = b
            .addr
            .parse()
            .map_err(|_| at("addr", format!("invalid address `{}`", b.addr)))?;
        if addr.is_ipv4() != vip.is_ipv4() {
            return Err(at(
                "addr",
                format!("`{addr}` is not of the VIP's address family ({vip})"),
            ));
        }
        let mac = match &b.mac {
            None if mode == Mode::Dsr => {
                return Err(at("mac", "mode: dsr needs every backend's `mac`".into()))
            }
            None => None,
            Some(s) => Some(
                s.parse::<MacAddr>()
                    .map_err(|_| at("mac", format!("invalid MAC address `{s}`")))?,
            ),
        };
        if mode == Mode::Dsr && b.port.is_some() {
            return Err(at(
                "port",
                "mode: dsr cannot change ports (the packet is not rewritten above L2)".into(),
            ));
        }
        if !(1..=100).contains(&b.weight) {
            return Err(at("weight", format!("weight {} is not in 1-100", b.weight)));
        }
        backends.push(Backend {
            name: b.name.clone(),
            addr,
            port: b.port,
            mac,
            weight: b.weight,
        });
    }
    let min = 100 * backends.len() as u64;
    let m = match cfg.table_size {
        None => maglev::default_size(backends.len()),
        Some(m) if !maglev::is_prime(m) => {
            return Err(ctx.config.error_at_path(
                "table_size",
                format!(
                    "{m} is not prime (Maglev needs a prime size; e.g. {})",
                    maglev::next_prime(m)
                ),
            ))
        }
        Some(m) if m < min || m > 16_777_259 => {
            return Err(ctx.config.error_at_path(
                "table_size",
                format!("{m} is not between 100 × backends ({min}) and 16777259"),
            ))
        }
        Some(m) => m,
    };
    let mut ports = cfg.ports.clone();
    ports.sort_unstable();
    ports.dedup();
    let svc = Service {
        vip,
        ports,
        tcp: cfg.proto != ProtoCfg::Udp,
        udp: cfg.proto != ProtoCfg::Tcp,
    };
    let max_conns = cfg.max_connections.unwrap_or(ctx.flow_capacity.max(1));
    if max_conns == 0 || max_conns > 16 << 20 {
        return Err(ctx
            .config
            .error_at_path("max_connections", "must be between 1 and 16777216"));
    }
    let idle_ns = cfg.idle_timeout_s.saturating_mul(1_000_000_000);
    let mut lb = Balancer::new(
        svc,
        mode,
        backends,
        m,
        max_conns,
        ctx.flow_capacity,
        idle_ns,
    );
    for (j, name) in cfg.health.down.iter().enumerate() {
        let Some(i) = lb.backends().iter().position(|b| &b.name == name) else {
            return Err(ctx.config.error_at_path(
                &format!("health.down[{j}]"),
                format!("no backend named `{name}`"),
            ));
        };
        lb.set_up(i, false);
    }
    Ok(lb)
}
