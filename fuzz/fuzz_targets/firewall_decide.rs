//! The firewall's per-packet path on arbitrary frames: parse, conntrack,
//! rules and, for rejects, whether an answer may be sent, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nf::harness::NoNames;
use sluice_nf::BuildContext;
use sluice_nfs::firewall::{reject, Decision, Firewall};
use sluice_packet::parse;
use sluice_spec::ConfigNode;


fn firewall() -> Firewall {
    let config = ConfigNode::from_json(serde_json::json!({
        "default": "reject",
        "capacity": 64,
        "zones": [{ "port": 1, "zone": 3 }],
        "rules": [
            { "action": "accept", "proto": "tcp", "dst_port": "1-1024" },
            { "action": "accept", "proto": "udp" },
            { "action": "accept", "proto": "icmp", "icmp_type": 8 },
            { "action": "accept", "proto": "icmpv6", "icmp_type": 128 },
        ]
    }));
    let ctx = BuildContext {
        name: "fw".into(),
        config: &config,
        resolver: &NoNames,
        flow_capacity: 64,
    };
    Firewall::from_build_context(&ctx).expect("valid config")
}

fuzz_target!(|data: &[u8]| {
    thread_local! {
        static FW: std::cell::RefCell<Firewall> = std::cell::RefCell::new(firewall());
    }
    let Some((&meta, frame)) = data.split_first() else {
        return;
    };
    let Ok(h) = parse(frame) else {
        return;
    };
    FW.with(|fw| {
        let d = fw.borrow_mut().decide(
            frame,
            &h,
            u16::from(meta & 1),
            u32::from(meta >> 2),
            u64::from(meta) << 30,
        );
        if let Decision::Reject { reply, .. } = d {
            let _ = reject::may_answer(frame, &h, reply);
        }
    });
});
