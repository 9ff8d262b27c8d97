//! Decoding and validating the firewall's config into rules and settings.
//! Every error names the field (`rules[3].dst_port`) and what is wrong.

use serde::Deserialize;
use sluice_nf::Resolver;
use sluice_spec::{ConfigNode, PortRange, SpecError};

use super::rules::{Action, IcmpReject, Prefix, RejectWith, Rule};
use crate::conntrack::{Settings, Timeouts};
use crate::rule_fields::{self, Scalar};

/// Largest `capacity` accepted (about 1.2 GiB of table).
pub const MAX_CAPACITY: u64 = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ActionCfg {
    Accept,
    Drop,
    Reject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RejectWithCfg {
    TcpReset,
    PortUnreachable,
    AdminProhibited,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AcceptDrop {
    Accept,
    Drop,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleCfg {
    action: ActionCfg,
    reject_with: Option<RejectWithCfg>,
    src: Option<String>,
    dst: Option<String>,
    proto: Option<Scalar>,
    src_port: Option<Scalar>,
    dst_port: Option<Scalar>,
    icmp_type: Option<i64>,
    in_port: Option<Scalar>,
    zone: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ZoneCfg {
    port: Scalar,
    zone: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutsCfg {
    tcp_syn_sent: Option<f64>,
    tcp_syn_recv: Option<f64>,
    tcp_established: Option<f64>,
    tcp_fin_wait: Option<f64>,
    tcp_close_wait: Option<f64>,
    tcp_last_ack: Option<f64>,
    tcp_time_wait: Option<f64>,
    tcp_close: Option<f64>,
    tcp_syn_sent2: Option<f64>,
    udp: Option<f64>,
    udp_stream: Option<f64>,
    icmp: Option<f64>,
    generic: Option<f64>,
    tcp_retrans: Option<f64>,
    tcp_unack: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    default: Option<ActionCfg>,
    #[serde(default)]
    default_reject_with: Option<RejectWithCfg>,
    #[serde(default)]
    reject_with: Option<RejectWithCfg>,
    #[serde(default)]
    non_ip: Option<AcceptDrop>,
    #[serde(default)]
    capacity: Option<i64>,
    #[serde(default)]
    tcp_loose: Option<bool>,
    #[serde(default)]
    liberal: Option<bool>,
    #[serde(default)]
    checksum: Option<bool>,
    #[serde(default)]
    frag_memory: Option<i64>,
    #[serde(default)]
    frag_timeout: Option<f64>,
    #[serde(default)]
    frag6_timeout: Option<f64>,
    #[serde(default)]
    zones: Vec<ZoneCfg>,
    #[serde(default)]
    timeouts: TimeoutsCfg,
    #[serde(default)]
    rules: Vec<RuleCfg>,
}

/// A validated firewall configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct FirewallConfig {
    /// Ordered rules.
    pub rules: Vec<Rule>,
    /// Action for NEW connections no rule matches.
    pub default: Action,
    /// ICMP code of non-TCP rejects without their own `reject_with`.
    pub icmp_reject: IcmpReject,
    /// Pass frames without IP (ARP…).
    pub non_ip_accept: bool,
    /// Zone per ingress port index (`(port, zone)`; others are zone 0).
    pub zones: Vec<(u16, u16)>,
    /// Connection tracking.
    pub conntrack: Settings,
    /// Reassembly.
    pub frag: FragSettings,
}

/// Reassembly bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragSettings {
    /// Fragment buffers held at most (`frag_memory` / 2240).
    pub max_held: usize,
    /// IPv4 reassembly timeout (`ipfrag_time`).
    pub timeout_v4_ns: u64,
    /// IPv6 reassembly timeout (`nf_conntrack_frag6_timeout`).
    pub timeout_v6_ns: u64,
}

/// Bytes a held fragment is counted for: one packet buffer with its
/// metadata and headroom (`sluice_mem::BUF_STRIDE`).
pub const FRAG_BUFFER_BYTES: u64 = 2240;

/// Linux's `ipfrag_high_thresh` / `nf_conntrack_frag6_high_thresh`.
pub const DEFAULT_FRAG_MEMORY: u64 = 4 << 20;

/// The index of an ingress port (`zones[].port`, `rules[].in_port`): these
/// match the port a packet came in on, so any port that receives resolves,
/// input-only ones (`generator`, `pcap_in`) included.
fn port_index(
    config: &ConfigNode,
    resolver: &dyn Resolver,
    field: &str,
    v: &Scalar,
) -> Result<u16, SpecError> {
    match v {
        Scalar::Num(n) => u16::try_from(*n).map_err(|_| {
            config.error_at_path(field, format!("port index {n} is out of range 0-65535"))
        }),
        Scalar::Text(s) => resolver.input_port(s).map(|p| p.0).ok_or_else(|| {
            config.error_at_path(
                field,
                format!("unknown port `{s}` (the name or index of a port packets come in through)"),
            )
        }),
    }
}

fn zone_value(config: &ConfigNode, field: &str, z: i64) -> Result<u16, SpecError> {
    u16::try_from(z)
        .map_err(|_| config.error_at_path(field, format!("zone {z} is out of range 0-65535")))
}

fn icmp_of(r: RejectWithCfg) -> Option<IcmpReject> {
    match r {
        RejectWithCfg::TcpReset => None,
        RejectWithCfg::PortUnreachable => Some(IcmpReject::PortUnreachable),
        RejectWithCfg::AdminProhibited => Some(IcmpReject::AdminProhibited),
    }
}

fn compile_rule(
    config: &ConfigNode,
    resolver: &dyn Resolver,
    i: usize,
    r: &RuleCfg,
) -> Result<Rule, SpecError> {
    let at = |field: &str, msg: String| config.error_at_path(&format!("rules[{i}].{field}"), msg);
    let net = |field: &str, v: &Option<String>| -> Result<Option<Prefix>, SpecError> {
        v.as_deref()
            .map(|s| {
                rule_fields::prefix(s)
                    .map(Prefix::new)
                    .map_err(|m| at(field, m))
            })
            .transpose()
    };
    let ports = |field: &str, v: &Option<Scalar>| -> Result<Option<PortRange>, SpecError> {
        v.as_ref()
            .map(|v| rule_fields::port_range(v).map_err(|m| at(field, m)))
            .transpose()
    };
    let proto = r
        .proto
        .as_ref()
        .map(|v| rule_fields::protocol(v).map_err(|m| at("proto", m)))
        .transpose()?;
    let (src_port, dst_port) = (
        ports("src_port", &r.src_port)?,
        ports("dst_port", &r.dst_port)?,
    );
    if (src_port.is_some() || dst_port.is_some()) && !matches!(proto, Some(6 | 17 | 132)) {
        let field = if src_port.is_some() {
            "src_port"
        } else {
            "dst_port"
        };
        return Err(at(
            field,
            "ports need `proto: tcp`, `udp` or `sctp` in the same rule".to_string(),
        ));
    }
    let icmp_type = match r.icmp_type {
        None => None,
        Some(t) => {
            if !matches!(proto, Some(1 | 58)) {
                return Err(at(
                    "icmp_type",
                    "icmp_type needs `proto: icmp` or `icmpv6` in the same rule".to_string(),
                ));
            }
            Some(
                u8::try_from(t)
                    .map_err(|_| at("icmp_type", format!("ICMP type {t} is out of range 0-255")))?,
            )
        }
    };
    let action = match (r.action, r.reject_with) {
        (ActionCfg::Accept, None) => Action::Accept,
        (ActionCfg::Drop, None) => Action::Drop,
        (ActionCfg::Reject, None) => Action::Reject(RejectWith::Auto),
        (ActionCfg::Reject, Some(RejectWithCfg::TcpReset)) => {
            if proto != Some(6) {
                return Err(at(
                    "reject_with",
                    "tcp_reset needs `proto: tcp` in the same rule".to_string(),
                ));
            }
            Action::Reject(RejectWith::TcpReset)
        }
        (ActionCfg::Reject, Some(w)) => Action::Reject(RejectWith::Icmp(
            icmp_of(w).unwrap_or(IcmpReject::PortUnreachable),
        )),
        (_, Some(_)) => {
            return Err(at(
                "reject_with",
                "reject_with only applies to `action: reject`".to_string(),
            ))
        }
    };
    let in_port = r
        .in_port
        .as_ref()
        .map(|p| port_index(config, resolver, &format!("rules[{i}].in_port"), p))
        .transpose()?;
    let zone = r
        .zone
        .map(|z| zone_value(config, &format!("rules[{i}].zone"), z))
        .transpose()?;
    Ok(Rule {
        action,
        src: net("src", &r.src)?,
        dst: net("dst", &r.dst)?,
        proto,
        src_port,
        dst_port,
        icmp_type,
        in_port,
        zone,
    })
}

fn timeouts(config: &ConfigNode, t: &TimeoutsCfg) -> Result<Timeouts, SpecError> {
    let mut out = Timeouts::default();
    let tcp = [
        t.tcp_syn_sent,
        t.tcp_syn_recv,
        t.tcp_established,
        t.tcp_fin_wait,
        t.tcp_close_wait,
        t.tcp_last_ack,
        t.tcp_time_wait,
        t.tcp_close,
        t.tcp_syn_sent2,
    ];
    let ns = |name: &str, s: f64| -> Result<u64, SpecError> {
        if s.is_finite() && s > 0.0 && s <= 1e9 {
            Ok((s * 1e9) as u64)
        } else {
            Err(config.error_at_path(
                &format!("timeouts.{name}"),
                format!("timeout {s} s is not a positive number of seconds (at most 1e9)"),
            ))
        }
    };
    for ((name, state), v) in Timeouts::TCP_KEYS.iter().zip(tcp) {
        if let Some(s) = v {
            out.tcp[*state as usize] = ns(name, s)?;
        }
    }
    for (name, v, slot) in [
        ("udp", t.udp, &mut out.udp),
        ("udp_stream", t.udp_stream, &mut out.udp_stream),
        ("icmp", t.icmp, &mut out.icmp),
        ("generic", t.generic, &mut out.generic),
        ("tcp_retrans", t.tcp_retrans, &mut out.tcp_retrans),
        ("tcp_unack", t.tcp_unack, &mut out.tcp_unack),
    ] {
        if let Some(s) = v {
            *slot = ns(name, s)?;
        }
    }
    Ok(out)
}

/// Decodes and validates `config` (the NF's `config` node).
pub fn compile(
    config: &ConfigNode,
    resolver: &dyn Resolver,
    flow_capacity: u32,
) -> Result<FirewallConfig, SpecError> {
    let cfg: Config = if config.is_null() {
        Config {
            default: None,
            default_reject_with: None,
            reject_with: None,
            non_ip: None,
            capacity: None,
            tcp_loose: None,
            liberal: None,
            checksum: None,
            frag_memory: None,
            frag_timeout: None,
            frag6_timeout: None,
            zones: Vec::new(),
            timeouts: TimeoutsCfg::default(),
            rules: Vec::new(),
        }
    } else {
        config.deserialize()?
    };
    let icmp_reject = match cfg.reject_with {
        None => IcmpReject::PortUnreachable,
        Some(w) => icmp_of(w).ok_or_else(|| {
            config.error_at_path(
                "reject_with",
                "the NF-wide reject_with is the ICMP code for non-TCP rejects: port_unreachable or admin_prohibited",
            )
        })?,
    };
    let default = match (
        cfg.default.unwrap_or(ActionCfg::Drop),
        cfg.default_reject_with,
    ) {
        (ActionCfg::Accept, None) => Action::Accept,
        (ActionCfg::Drop, None) => Action::Drop,
        (ActionCfg::Reject, None) => Action::Reject(RejectWith::Auto),
        (ActionCfg::Reject, Some(RejectWithCfg::TcpReset)) => {
            return Err(config.error_at_path(
                "default_reject_with",
                "tcp_reset cannot apply to every protocol; leave it out (TCP gets a RST anyway)",
            ))
        }
        (ActionCfg::Reject, Some(w)) => Action::Reject(RejectWith::Icmp(
            icmp_of(w).unwrap_or(IcmpReject::PortUnreachable),
        )),
        (_, Some(_)) => {
            return Err(config.error_at_path(
                "default_reject_with",
                "default_reject_with only applies to `default: reject`",
            ))
        }
    };
    let capacity = match cfg.capacity {
        None => u64::from(flow_capacity).max(1),
        Some(c) if c >= 1 && (c as u64) <= MAX_CAPACITY => c as u64,
        Some(c) => {
            return Err(config.error_at_path(
                "capacity",
                format!("capacity {c} is out of range 1-{MAX_CAPACITY}"),
            ))
        }
    };
    let mut zones = Vec::with_capacity(cfg.zones.len());
    for (i, z) in cfg.zones.iter().enumerate() {
        let port = port_index(config, resolver, &format!("zones[{i}].port"), &z.port)?;
        let zone = zone_value(config, &format!("zones[{i}].zone"), z.zone)?;
        if zones.iter().any(|(p, _)| *p == port) {
            return Err(config.error_at_path(
                &format!("zones[{i}].port"),
                format!("port {port} is given a zone twice"),
            ));
        }
        zones.push((port, zone));
    }
    let rules = cfg
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| compile_rule(config, resolver, i, r))
        .collect::<Result<Vec<_>, _>>()?;
    let frag_memory = match cfg.frag_memory {
        None => DEFAULT_FRAG_MEMORY,
        Some(m) if m >= 0 && (m as u64) <= 1 << 30 => m as u64,
        Some(m) => {
            return Err(config.error_at_path(
                "frag_memory",
                format!("frag_memory {m} is out of range 0-1073741824 bytes"),
            ))
        }
    };
    let secs = |name: &str, v: Option<f64>, default: u64| -> Result<u64, SpecError> {
        match v {
            None => Ok(default * 1_000_000_000),
            Some(s) if s.is_finite() && s > 0.0 && s <= 1e6 => Ok((s * 1e9) as u64),
            Some(s) => Err(config.error_at_path(
                name,
                format!("{name} {s} s is not a positive number of seconds (at most 1e6)"),
            )),
        }
    };
    let frag = FragSettings {
        max_held: (frag_memory / FRAG_BUFFER_BYTES) as usize,
        timeout_v4_ns: secs("frag_timeout", cfg.frag_timeout, 30)?,
        timeout_v6_ns: secs("frag6_timeout", cfg.frag6_timeout, 60)?,
    };
    Ok(FirewallConfig {
        frag,
        rules,
        default,
        icmp_reject,
        non_ip_accept: cfg.non_ip.unwrap_or(AcceptDrop::Accept) == AcceptDrop::Accept,
        zones,
        conntrack: Settings {
            capacity: capacity as usize,
            timeouts: timeouts(config, &cfg.timeouts)?,
            tcp_loose: cfg.tcp_loose.unwrap_or(true),
            liberal: cfg.liberal.unwrap_or(false),
            checksum: cfg.checksum.unwrap_or(true),
        },
    })
}
