//! A firewall `reject` answers out of the port the packet came in
//! through; a config where NEW connections from a port that cannot
//! transmit (a generator) reach a reject is refused at build, naming the
//! rule, instead of ending as `invalid_verdict` drops at run time.

mod common;
use common::*;

use serde_json::{json, Value};
use sluice_nf::{BuildContext, IngressPort, NfId, PortId, Resolver};
use sluice_nfs::firewall::Firewall;
use sluice_spec::{ConfigNode, SpecError};

/// The test resolver's names, with the firewall's chains coming from
/// `gen` (a generator) and `out` (a port that transmits).
struct FedByGen;

impl Resolver for FedByGen {
    fn nf(&self, name: &str) -> Option<NfId> {
        TestResolver.nf(name)
    }
    fn port(&self, name: &str) -> Option<PortId> {
        TestResolver.port(name)
    }
    fn input_port(&self, name: &str) -> Option<PortId> {
        TestResolver.input_port(name)
    }
    fn chain_ingress(&self) -> Vec<IngressPort> {
        vec![
            IngressPort {
                id: PortId(GEN_PORT),
                name: "gen".into(),
                kind: "generator",
                can_transmit: false,
            },
            IngressPort {
                id: PortId(0),
                name: "out".into(),
                kind: "tap",
                can_transmit: true,
            },
        ]
    }
}

fn build(config: Value) -> Result<Firewall, SpecError> {
    let node = ConfigNode::from_json(config);
    Firewall::from_build_context(&BuildContext {
        name: "fw".into(),
        config: &node,
        resolver: &FedByGen,
        flow_capacity: FLOW_CAPACITY,
    })
}

#[test]
fn a_reject_reachable_from_a_port_that_cannot_transmit_is_refused() {
    for (config, field) in [
        (
            json!({ "rules": [{ "action": "accept", "proto": "udp" }, { "action": "reject" }] }),
            "rules[1].action",
        ),
        (
            json!({ "rules": [{ "action": "reject", "in_port": "gen", "proto": "tcp" }] }),
            "rules[0].action",
        ),
        (
            json!({ "zones": [{ "port": "gen", "zone": 4 }], "rules": [{ "action": "reject", "zone": 4 }] }),
            "rules[0].action",
        ),
        // A rule that only narrows by protocol lets the rest through.
        (
            json!({ "default": "reject", "rules": [{ "action": "accept", "in_port": "gen", "proto": "udp" }] }),
            "default",
        ),
        (json!({ "default": "reject" }), "default"),
    ] {
        let Err(e) = build(config.clone()) else {
            panic!("{config} accepted");
        };
        assert_eq!(e.field, field, "{config}: {e}");
        assert!(
            e.message.contains("port `gen` (generator) cannot transmit"),
            "{config}: {e}"
        );
    }
}

#[test]
fn a_reject_no_new_connection_from_such_a_port_reaches_is_accepted() {
    for config in [
        json!({ "rules": [{ "action": "reject", "in_port": "out" }] }),
        json!({ "zones": [{ "port": "out", "zone": 1 }], "rules": [{ "action": "reject", "zone": 1 }] }),
        // gen's traffic is all decided before the reject and the default.
        json!({ "default": "reject", "rules": [
            { "action": "drop", "in_port": "gen" },
            { "action": "reject", "proto": "tcp" },
        ] }),
        json!({ "zones": [{ "port": "gen", "zone": 2 }], "default": "reject", "rules": [
            { "action": "accept", "zone": 2 },
        ] }),
        json!({ "default": "drop", "rules": [{ "action": "accept" }] }),
    ] {
        if let Err(e) = build(config.clone()) {
            panic!("{config}: {e}");
        }
    }
}

#[test]
fn without_chain_information_nothing_is_checked() {
    // The test resolver cannot tell which ports feed the NF.
    let node = ConfigNode::from_json(json!({ "default": "reject" }));
    let ctx = BuildContext {
        name: "fw".into(),
        config: &node,
        resolver: &TestResolver,
        flow_capacity: FLOW_CAPACITY,
    };
    assert!(Firewall::from_build_context(&ctx).is_ok());
}
