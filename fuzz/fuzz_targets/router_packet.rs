//! The router's packet path never panics on any frames, never reports a
//! length beyond the buffer, and whatever it sends out still parses.
//! The input is a sequence of frames (2-byte length prefix, 1 byte of
//! ingress port) run through one router, so ARP/ND learning state carries
//! from frame to frame.
#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use sluice_nf::{BuildContext, NfId, PortId, Resolver, Verdict};
use sluice_nfs::router::compile;
use sluice_nfs::router::forward::{Router, Stats};
use sluice_spec::ConfigNode;

struct Ports;
impl Resolver for Ports {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, name: &str) -> Option<PortId> {
        ["a", "b", "c"]
            .iter()
            .position(|n| *n == name)
            .map(|i| PortId(i as u16))
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

fn router() -> Router {
    let node = ConfigNode::from_json(serde_json::json!({
        "interfaces": [
            { "port": "a", "mac": "02:00:00:00:01:00", "addresses": ["10.0.0.1/24", "2001:db8::1/64"] },
            { "port": "b", "mac": "02:00:00:00:02:00", "addresses": ["10.0.1.1/24", "2001:db8:1::1/64"] },
        ],
        "routes": [
            "0.0.0.0/1 via 10.0.1.2 dev b",
            "128.0.0.0/2 dev a",
            "192.0.0.0/3 nexthop via 10.0.0.2 dev a nexthop via 10.0.1.2 dev b",
            "2000::/3 via 2001:db8:1::2 dev b",
            "fc00::/7 dev a",
        ],
        "neighbours": [{ "ip": "10.0.1.2", "mac": "02:00:00:00:00:22", "dev": "b" }],
        "neighbour_capacity": 8,
        "icmp_rate_pps": 0,
    }));
    let ctx = BuildContext {
        name: "fuzz".into(),
        config: &node,
        resolver: &Ports,
        flow_capacity: 16,
    };
    compile(&ctx).expect("fuzz config is valid")
}

static ROUTER: Mutex<Option<Router>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = ROUTER.lock().unwrap();
    let r = guard.get_or_insert_with(router);
    let mut rest = data;
    let mut now = 0u64;
    let mut buf = vec![0u8; 2048];
    while rest.len() >= 3 {
        let len = (u16::from_be_bytes([rest[0], rest[1]]) as usize) % 1600;
        let port = u16::from(rest[2] % 4);
        rest = &rest[3..];
        let take = len.min(rest.len());
        buf.fill(0);
        buf[..take].copy_from_slice(&rest[..take]);
        rest = &rest[take..];
        now += 300_000_000;
        let mut st = Stats::default();
        let (v, n) = r.process_frame(&mut buf, take, port, take as u32, now, &mut st);
        assert!(n <= buf.len());
        if let Verdict::ToPort(_) = v {
            sluice_packet::parse(&buf[..n]).expect("what the router sends parses");
        }
        while let Some((iface, key)) = r.take_solicit() {
            let mut req = [0u8; 128];
            if let Some((_, n, _)) = r.write_solicit(iface, key, &mut req) {
                sluice_packet::parse(&req[..n]).expect("requests parse");
            }
        }
    }
});
