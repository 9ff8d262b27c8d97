//! Arbitrary JSON configs for `bridge`, `load_balancer`, `policer` and
//! `shaper`: building must return Ok or a located SpecError, never panic.
//! The first byte picks the type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nf::{BuildContext, NfId, PortId, Resolver};
use sluice_spec::ConfigNode;

struct Ports;

impl Resolver for Ports {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, name: &str) -> Option<PortId> {
        ["p0", "p1", "p2", "p3"]
            .iter()
            .position(|n| *n == name)
            .map(|i| PortId(i as u16))
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

const TYPES: [&str; 4] = ["bridge", "load_balancer", "policer", "shaper"];

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let ty = TYPES[usize::from(which) % TYPES.len()];
    let Some(t) = sluice_nfs::REGISTRY.iter().find(|t| t.name == ty) else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    let node = ConfigNode::from_json(value);
    let ctx = BuildContext {
        name: "fuzz".into(),
        config: &node,
        resolver: &Ports,
        flow_capacity: 64,
    };
    if let Err(e) = (t.build)(&ctx) {
        assert!(!e.to_string().is_empty());
    }
});
