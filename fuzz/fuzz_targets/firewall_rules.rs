//! The firewall config parser (config → rules) on arbitrary JSON: never
//! panics; an accepted config has one compiled rule per `rules` entry; a
//! rejected one says which field is wrong.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nf::{NfId, PortId, Resolver};
use sluice_nfs::firewall::config::compile;
use sluice_spec::ConfigNode;

struct Ports;
impl Resolver for Ports {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, name: &str) -> Option<PortId> {
        (name == "lan").then_some(PortId(1))
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let n_rules = v.get("rules").and_then(|r| r.as_array()).map(|r| r.len());
    let node = ConfigNode::from_json(v);
    match compile(&node, &Ports, 1024) {
        Ok(cfg) => {
            assert_eq!(cfg.rules.len(), n_rules.unwrap_or(0));
            assert!(cfg.conntrack.capacity >= 1);
        }
        Err(e) => assert!(!e.message.is_empty()),
    }
});
