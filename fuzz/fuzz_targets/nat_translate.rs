//! `nat` translation of arbitrary frame sequences: never panics; a frame
//! whose checksums were valid keeps them valid when translated.
//!
//! Input: byte 0 picks the mapping/filtering behaviours, then records of
//! `[len: u8][dt: u8][frame: len bytes]` (dt advances the clock in
//! seconds, so timeouts and expiry run too).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nf::harness::NoNames;
use sluice_nf::BuildContext;
use sluice_nfs::nat::{build_nf, Action};
use sluice_packet::{parse, verify_checksums};
use sluice_spec::ConfigNode;


const B: [&str; 3] = [
    "endpoint_independent",
    "address_dependent",
    "address_and_port_dependent",
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let config = ConfigNode::from_json(serde_json::json!({
        "inside": ["10.0.0.0/8"],
        "pool": ["192.0.2.0/30"],
        "ports": "1024-1100",
        "capacity": 32,
        "mapping": B[usize::from(sel % 3)],
        "filtering": B[usize::from(sel / 3 % 3)],
        "forward": [{ "external": "192.0.2.1:80", "internal": "10.0.0.80:8080" }],
    }));
    let ctx = BuildContext {
        name: "nat".into(),
        config: &config,
        resolver: &NoNames,
        flow_capacity: 16,
    };
    let mut nat = build_nf(&ctx).expect("valid config").into_nat();
    let mut now = 1_000_000_000u64;
    let mut buf = [0u8; 256];
    while let [len, dt, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (frame, next) = tail.split_at(n);
        rest = next;
        now += u64::from(*dt) * 1_000_000_000;
        let f = &mut buf[..n];
        f.copy_from_slice(frame);
        let valid = parse(f).is_ok_and(|h| verify_checksums(f, &h).is_ok());
        let flow_id = u32::from(*dt % 17); // includes ids that lie
        let a = nat.translate(f, 0, flow_id, now);
        if valid
            && matches!(
                a,
                Action::Out | Action::In | Action::Hairpin | Action::IcmpError { .. }
            )
        {
            let h = parse(f).expect("a translated frame still parses");
            verify_checksums(f, &h).expect("checksums stay valid");
        }
        nat.expire(now, 8);
    }
});
