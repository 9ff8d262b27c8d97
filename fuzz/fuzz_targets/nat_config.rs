//! `nat` config decoding: arbitrary JSON config values either build a NAT
//! or give an error naming a field under `config`; never a panic.
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
        name.strip_prefix('p')
            .and_then(|n| n.parse().ok())
            .map(PortId)
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    // Keep the pool small enough that building stays quick.
    let config = ConfigNode::from_json(value).with_path("config");
    let ctx = BuildContext {
        name: "nat".into(),
        config: &config,
        resolver: &Ports,
        flow_capacity: 64,
    };
    match sluice_nfs::nat::build_nf(&ctx) {
        Ok(_) => {}
        Err(e) => assert!(e.field.starts_with("config"), "{e}"),
    }
});
