//! Where rejects answer: out of the port the packet came in through
//! (`ToPort(port_in)`, see [`super::reject`]). A port that cannot transmit
//! (a generator, a `pcap_in`) would turn every such answer into an
//! `invalid_verdict` drop at run time, so a reject rule, or `default:
//! reject`, that NEW connections from such a port can reach is a config
//! error, found at build (`sluice validate`) and pointing at the rule.
//!
//! The ports are those of the chains through the firewall
//! ([`Resolver::chain_ingress`]); packets other NFs steer to it by name
//! are not covered, and a resolver that cannot tell (a test harness) gives
//! none, so nothing is checked.

use sluice_nf::{IngressPort, Resolver};
use sluice_spec::{ConfigNode, SpecError};

use super::config::FirewallConfig;
use super::rules::{Action, Rule};

/// Whether `rule` can match a packet from `port` (in `zone`), judging by
/// the port and zone alone.
fn can_see(rule: &Rule, port: u16, zone: u16) -> bool {
    rule.in_port.is_none_or(|p| p == port) && rule.zone.is_none_or(|z| z == zone)
}

/// Whether `rule` matches every packet from a port it can see: nothing
/// but the port or zone narrows it.
fn takes_everything(rule: &Rule) -> bool {
    rule.src.is_none()
        && rule.dst.is_none()
        && rule.proto.is_none()
        && rule.src_port.is_none()
        && rule.dst_port.is_none()
        && rule.icmp_type.is_none()
}

fn refusal(config: &ConfigNode, field: &str, port: &IngressPort, remedy: &str) -> SpecError {
    config.error_at_path(
        field,
        format!(
            "`reject` answers out of the port a packet came in through, but port `{}` ({}) cannot transmit; {remedy}",
            port.name, port.kind
        ),
    )
}

/// Refuses `cfg` if a reject can be reached by a NEW connection from an
/// ingress port that cannot transmit.
pub(super) fn check(
    config: &ConfigNode,
    resolver: &dyn Resolver,
    cfg: &FirewallConfig,
) -> Result<(), SpecError> {
    for port in resolver.chain_ingress().iter().filter(|p| !p.can_transmit) {
        let id = port.id.0;
        let zone = cfg
            .zones
            .iter()
            .find(|(p, _)| *p == id)
            .map_or(0, |(_, z)| *z);
        let mut reaches_default = true;
        for (i, rule) in cfg.rules.iter().enumerate() {
            if !can_see(rule, id, zone) {
                continue;
            }
            if matches!(rule.action, Action::Reject(_)) {
                return Err(refusal(
                    config,
                    &format!("rules[{i}].action"),
                    port,
                    &format!("use `drop`, or limit the rule to other ports with `in_port` or `zone`, or decide `{}`'s traffic in an earlier rule", port.name),
                ));
            }
            if takes_everything(rule) {
                // Nothing from this port gets further.
                reaches_default = false;
                break;
            }
        }
        if reaches_default && matches!(cfg.default, Action::Reject(_)) {
            return Err(refusal(
                config,
                "default",
                port,
                &format!(
                    "use `default: drop`, or end the rules with one for `in_port: {}`",
                    port.name
                ),
            ));
        }
    }
    Ok(())
}
