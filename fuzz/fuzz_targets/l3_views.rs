//! Raw bytes as an L3 packet: ARP, IPv4 (checked and embedded), IPv6 and
//! its extension-header walk, each followed by all accessors and setters.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/sluice-packet/tests/common/exercise.rs"]
mod exercise;

fuzz_target!(|data: &[u8]| {
    // A first byte selects the IPv6 next header to walk from, the rest is
    // the packet; all views are tried on the rest anyway.
    if let Some((&nh, rest)) = data.split_first() {
        let _ = sluice_packet::ipv6::walk_extensions(sluice_packet::IpProtocol(nh), rest);
        exercise::exercise_views(rest);
    }
});
