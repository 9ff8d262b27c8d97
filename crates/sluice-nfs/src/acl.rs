//! `acl`: stateless access control by address prefix, protocol and port.
//!
//! Rules are tried in order; the first rule whose every given field
//! matches decides (`accept` or `drop`); if none matches, `default`
//! decides. The decision is cached per flow and direction (both
//! directions share a flow id but may match different rules), so the rule
//! scan runs once per flow direction, not once per packet.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `default` | `accept`/`drop` | `accept` | action when no rule matches |
//! | `non_ip` | `accept`/`drop` | `accept` | action for frames without IP (ARP…) |
//! | `rules[].action` | `accept`/`drop` | required | action of the rule |
//! | `rules[].src`, `rules[].dst` | CIDR | any | source/destination prefix |
//! | `rules[].proto` | `tcp`/`udp`/`icmp`/`icmpv6`/0–255 | any | IP protocol |
//! | `rules[].src_port`, `rules[].dst_port` | `N` or `"A-B"` | any | port range; only TCP, UDP and SCTP packets can match a rule with ports |
//!
//! Drop reasons: `denied` (a rule or the default), `non_ip`. Malformed
//! packets are dropped as `malformed:<why>`.
//!
//! ```yaml
//! - name: acl
//!   type: acl
//!   config:
//!     default: accept
//!     rules:
//!       - { action: drop, proto: udp, dst_port: 53 }
//!       - { action: drop, src: 10.0.66.0/24 }
//! ```

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType};
use sluice_packet::{flow_key, FlowKey, ParseError};
use sluice_spec::{IpNet, PortRange, SpecError};

use crate::rule_fields::{self, Scalar};

const DENIED: DropReason = DropReason::nf_local(0);
const NON_IP: DropReason = DropReason::nf_local(1);
const C_ACCEPTED: usize = 0;
const C_DENIED: usize = 1;
const C_RULE_SCANS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    Accept,
    Drop,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleCfg {
    action: Action,
    src: Option<String>,
    dst: Option<String>,
    proto: Option<Scalar>,
    src_port: Option<Scalar>,
    dst_port: Option<Scalar>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "accept")]
    default: Action,
    #[serde(default = "accept")]
    non_ip: Action,
    #[serde(default)]
    rules: Vec<RuleCfg>,
}

fn accept() -> Action {
    Action::Accept
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    accept: bool,
    src: Option<IpNet>,
    dst: Option<IpNet>,
    proto: Option<u8>,
    src_port: Option<PortRange>,
    dst_port: Option<PortRange>,
}

impl Rule {
    fn matches(&self, k: &FlowKey) -> bool {
        // Port ranges only apply to protocols with ports: a flow key holds
        // the echo id (ICMP) or 0 (other protocols) there, which a rule
        // such as `dst_port: 53` without `proto` must not match.
        let ports = k.protocol().has_ports();
        self.proto.is_none_or(|p| p == k.proto)
            && self.src.as_ref().is_none_or(|n| n.contains(&k.src_ip()))
            && self.dst.as_ref().is_none_or(|n| n.contains(&k.dst_ip()))
            && self
                .src_port
                .is_none_or(|r| ports && r.contains(k.src_port))
            && self
                .dst_port
                .is_none_or(|r| ports && r.contains(k.dst_port))
    }
}

/// The ACL NF.
pub struct Acl {
    rules: Vec<Rule>,
    default_accept: bool,
    non_ip_accept: bool,
    /// Per flow id: bit0 fwd known, bit1 fwd accept, bit2 rev known, bit3 rev accept.
    cache: Vec<u8>,
}

impl Acl {
    /// Decides a 5-tuple by the rules (no cache).
    pub fn decide(&self, k: &FlowKey) -> bool {
        self.rules
            .iter()
            .find(|r| r.matches(k))
            .map_or(self.default_accept, |r| r.accept)
    }
}

impl NetworkFunction for Acl {
    fn live_reconfigure(&self) -> bool {
        true
    }

    /// New rules take effect at once; the per-flow decision cache, which
    /// remembers verdicts of the old rules, starts empty.
    fn reconfigure(
        &mut self,
        fresh: Box<dyn NetworkFunction>,
    ) -> Result<(), Box<dyn NetworkFunction>> {
        let fresh = sluice_nf::downcast::<Acl>(fresh)?;
        let Acl {
            rules,
            default_accept,
            non_ip_accept,
            ..
        } = *fresh;
        self.rules = rules;
        self.default_accept = default_accept;
        self.non_ip_accept = non_ip_accept;
        self.cache.fill(0);
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (mut accepted, mut denied, mut scans) = (0u64, 0u64, 0u64);
        batch.for_each(|p| {
            let key = match flow_key(p.data()) {
                Ok(k) => k,
                Err(ParseError::UnsupportedEtherType) => {
                    if !self.non_ip_accept {
                        p.drop_with(NON_IP);
                    }
                    return;
                }
                Err(e) => {
                    p.drop_malformed(e);
                    return;
                }
            };
            let fwd = key.is_canonical();
            let (known, allow) = if fwd { (1u8, 2u8) } else { (4u8, 8u8) };
            let ok = match self.cache.get_mut(p.flow_id() as usize) {
                Some(c) if *c & known != 0 => *c & allow != 0,
                slot => {
                    scans += 1;
                    let ok = self
                        .rules
                        .iter()
                        .find(|r| r.matches(&key))
                        .map_or(self.default_accept, |r| r.accept);
                    if let Some(c) = slot {
                        *c |= known | if ok { allow } else { 0 };
                    }
                    ok
                }
            };
            if ok {
                accepted += 1;
            } else {
                denied += 1;
                p.drop_with(DENIED);
            }
        });
        ctx.count(C_ACCEPTED, accepted);
        ctx.count(C_DENIED, denied);
        ctx.count(C_RULE_SCANS, scans);
    }

    fn flow_end(&mut self, flow_id: u32, _ctx: &mut Context<'_>) {
        if let Some(c) = self.cache.get_mut(flow_id as usize) {
            *c = 0;
        }
    }

    fn reset(&mut self) {
        self.cache.iter_mut().for_each(|c| *c = 0);
    }

    fn resets(&self) -> bool {
        true
    }
}

fn compile(ctx: &BuildContext<'_>) -> Result<Acl, SpecError> {
    let cfg: Config = if ctx.config.is_null() {
        Config {
            default: Action::Accept,
            non_ip: Action::Accept,
            rules: Vec::new(),
        }
    } else {
        ctx.config.deserialize()?
    };
    let mut rules = Vec::with_capacity(cfg.rules.len());
    for (i, r) in cfg.rules.iter().enumerate() {
        let at = |field: &str, msg: String| {
            ctx.config
                .error_at_path(&format!("rules[{i}].{field}"), msg)
        };
        let net = |field: &str, v: &Option<String>| -> Result<Option<IpNet>, SpecError> {
            v.as_deref()
                .map(|s| rule_fields::prefix(s).map_err(|m| at(field, m)))
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
        if (src_port.is_some() || dst_port.is_some())
            && !matches!(proto, None | Some(6) | Some(17) | Some(132))
        {
            return Err(at(
                "proto",
                "ports can only be matched for tcp, udp or sctp".to_string(),
            ));
        }
        rules.push(Rule {
            accept: r.action == Action::Accept,
            src: net("src", &r.src)?,
            dst: net("dst", &r.dst)?,
            proto,
            src_port,
            dst_port,
        });
    }
    Ok(Acl {
        rules,
        default_accept: cfg.default == Action::Accept,
        non_ip_accept: cfg.non_ip == Action::Accept,
        cache: vec![0; ctx.flow_capacity as usize],
    })
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(compile(ctx)?))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "acl",
    summary: "drops or accepts packets by address prefix, protocol and port rules",
    drop_reasons: &["denied", "non_ip"],
    counters: &["accepted", "denied", "rule_scans"],
    build,
    // Judges headers only: one verdict per super-packet, as netfilter.
    frames: sluice_nf::FrameNeeds::SuperPackets,
};
