//! The worked example of `docs/writing-an-nf.md`: a DSCP-marking NF
//! written against the SDK, with its tests. Every ```rust block of that
//! document is a verbatim excerpt of this file (checked below), so the
//! code in the document compiles and is tested.

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType};
use sluice_packet::checksum;
use sluice_packet::ipv4::Ipv4Packet;
use sluice_packet::ipv6::Ipv6Packet;
use sluice_spec::SpecError;

/// NF-local drop reasons, by index into `TYPE.drop_reasons`.
const OVER_LIMIT: DropReason = DropReason::nf_local(0);

/// NF-specific counters, by index into `TYPE.counters`.
const C_MARKED: usize = 0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// DSCP written into packets of long flows (0-63).
    dscp: u8,
    /// Packets of a flow left alone before marking starts.
    #[serde(default)]
    mark_after: u32,
    /// Packets of a flow after which the rest is dropped (no limit if absent).
    #[serde(default)]
    drop_after: Option<u32>,
}

/// Re-marks the DSCP of long ("elephant") flows, and optionally caps them.
pub struct DscpMark {
    dscp: u8,
    mark_after: u32,
    drop_after: u32,
    /// Packets seen per flow id, both directions together.
    packets: Vec<u32>,
}

impl NetworkFunction for DscpMark {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut marked = 0;
        batch.for_each(|p| {
            let h = match p.headers() {
                Ok(h) => h,
                Err(e) => return p.drop_malformed(e),
            };
            if h.ip_version == 0 {
                return; // ARP and other non-IP frames pass unchanged
            }
            let Some(n) = self.packets.get_mut(p.flow_id() as usize) else {
                return; // no flow id: nothing to count against
            };
            *n = n.saturating_add(1);
            if *n > self.drop_after {
                p.drop_with(OVER_LIMIT);
            } else if *n > self.mark_after
                && set_dscp(p.data_mut(), h.l3_offset.into(), h.ip_version, self.dscp)
            {
                marked += 1;
            }
        });
        ctx.count(C_MARKED, marked);
    }

    fn flow_end(&mut self, flow_id: u32, _ctx: &mut Context<'_>) {
        if let Some(n) = self.packets.get_mut(flow_id as usize) {
            *n = 0;
        }
    }

    fn reset(&mut self) {
        self.packets.fill(0);
    }
}

/// Writes `dscp` into the IP header at `l3`; returns whether a byte changed.
fn set_dscp(frame: &mut [u8], l3: usize, ip_version: u8, dscp: u8) -> bool {
    let Some(ip) = frame.get_mut(l3..) else {
        return false;
    };
    match ip_version {
        4 => {
            let Ok(mut ip) = Ipv4Packet::new_checked(ip) else {
                return false;
            };
            if ip.dscp() == dscp {
                return false;
            }
            // DSCP lives in the header's first 16-bit word; patch the header
            // checksum for that word alone (RFC 1624) instead of recomputing it.
            let word = |ip: &Ipv4Packet<&mut [u8]>| {
                let h = ip.header();
                u16::from_be_bytes([h[0], h[1]])
            };
            let old = word(&ip);
            ip.set_dscp(dscp);
            let new = word(&ip);
            ip.set_checksum(checksum::update_u16(ip.checksum(), old, new));
            true
        }
        6 => {
            let Ok(mut ip) = Ipv6Packet::new_checked(ip) else {
                return false;
            };
            if ip.dscp() == dscp {
                return false;
            }
            // IPv6 has no header checksum, and the traffic class is not
            // part of the TCP/UDP pseudo-header.
            ip.set_traffic_class(dscp << 2 | ip.ecn());
            true
        }
        _ => false,
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    if cfg.dscp > 63 {
        let msg = format!("DSCP {} is out of range 0-63", cfg.dscp);
        return Err(ctx.config.error_at_path("dscp", msg));
    }
    Ok(Box::new(DscpMark {
        dscp: cfg.dscp,
        mark_after: cfg.mark_after,
        drop_after: cfg.drop_after.unwrap_or(u32::MAX),
        packets: vec![0; ctx.flow_capacity as usize],
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "dscp_mark",
    summary: "re-marks the DSCP of long flows and optionally caps their packets",
    drop_reasons: &["over_limit"],
    counters: &["marked"],
    build,
    // Rewrites headers: needs wire-sized frames with complete checksums
    // (`SuperPackets` is for NFs that only judge headers; see
    // `architecture.md`, "Offloads").
    frames: sluice_nf::FrameNeeds::MtuFrames,
};

// ------------------------------------------------------------------ tests

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{NfId, PortId, Resolver, Verdict};
use sluice_packet::{parse, verify_checksums, write_frame, FrameSpec, L4Spec, MacAddr};
use sluice_spec::ConfigNode;

struct NoNames;

impl Resolver for NoNames {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, _: &str) -> Option<PortId> {
        None
    }
    fn input_port(&self, _: &str) -> Option<PortId> {
        None
    }
}

fn build_nf(config: serde_json::Value) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let config = ConfigNode::from_json(config);
    let ctx = BuildContext {
        name: "mark".into(),
        config: &config,
        resolver: &NoNames,
        flow_capacity: 1024,
    };
    (TYPE.build)(&ctx)
}

fn udp(src: &str, dst: &str, sport: u16, dport: u16) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
        dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
        vlan: None,
        src_ip: src.parse().unwrap(),
        dst_ip: dst.parse().unwrap(),
        ttl: 64,
        l4: L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        },
    };
    let mut buf = [0u8; 128];
    let n = write_frame(&mut buf, &spec, b"hello").unwrap();
    buf[..n].to_vec()
}

#[test]
fn marks_after_n_packets_and_keeps_checksums_valid() {
    let mut nf = build_nf(json!({ "dscp": 10, "mark_after": 2 })).unwrap();
    let mut h = Harness::new();
    let f = udp("10.0.0.1", "10.0.0.2", 1000, 80);
    let out = h.run(nf.as_mut(), &vec![f.clone(); 4]);
    // The first two packets are untouched, the next two marked (AF11 = 10).
    assert_eq!(out[0].frame, f);
    assert_eq!(out[1].frame, f);
    for o in &out[2..] {
        assert_eq!(o.verdict, Verdict::Next);
        let hd = parse(&o.frame).unwrap();
        assert_eq!(o.frame[15] >> 2, 10, "DSCP");
        assert_eq!(o.frame[15] & 3, f[15] & 3, "ECN kept");
        verify_checksums(&o.frame, &hd).unwrap();
        // Only the TOS byte and the header checksum changed.
        let diff: Vec<usize> = (0..f.len()).filter(|&i| o.frame[i] != f[i]).collect();
        assert!(diff.iter().all(|i| [15, 24, 25].contains(i)), "{diff:?}");
    }
    assert_eq!(h.counter(C_MARKED), 2);
}

#[test]
fn marks_ipv6_traffic_class() {
    let mut nf = build_nf(json!({ "dscp": 46 })).unwrap();
    let f = udp("fd00::1", "fd00::2", 1000, 80);
    let out = Harness::new().run(nf.as_mut(), std::slice::from_ref(&f));
    let g = &out[0].frame;
    let tc = (u16::from_be_bytes([g[14], g[15]]) >> 4) as u8;
    assert_eq!(tc >> 2, 46, "EF");
    verify_checksums(g, &parse(g).unwrap()).unwrap();
    assert_eq!(g[16..], f[16..]);
}

#[test]
fn caps_flows_and_counts_both_directions_together() {
    let mut nf = build_nf(json!({ "dscp": 8, "mark_after": 1, "drop_after": 3 })).unwrap();
    let mut h = Harness::new();
    let req = udp("10.0.0.1", "10.0.0.2", 1000, 80);
    let rep = udp("10.0.0.2", "10.0.0.1", 80, 1000);
    let other = udp("10.0.0.3", "10.0.0.2", 1000, 80);
    let out = h.run(
        nf.as_mut(),
        &[req.clone(), rep.clone(), req.clone(), rep.clone(), other],
    );
    let v: Vec<Verdict> = out.iter().map(|o| o.verdict).collect();
    assert_eq!(
        v,
        [
            Verdict::Next,
            Verdict::Next,
            Verdict::Next,
            Verdict::Drop(OVER_LIMIT),
            Verdict::Next
        ]
    );
    assert_eq!(out[0].frame, req, "first packet of the flow: unmarked");
    assert_eq!(
        out[1].frame[15] >> 2,
        8,
        "the reply is the flow's 2nd packet"
    );
    assert_eq!(out[4].frame[15] >> 2, 0, "another flow starts from zero");
    assert_eq!(h.counter(C_MARKED), 2);

    // The flow ends: its state is released, and a new connection that gets
    // the same flow id starts from zero.
    let id = h.flow_id_of(&req).unwrap();
    h.end_flow(nf.as_mut(), id);
    let out = h.run(nf.as_mut(), std::slice::from_ref(&req));
    assert_eq!(out[0].verdict, Verdict::Next);
    assert_eq!(out[0].frame, req);
}

#[test]
fn non_ip_passes_and_malformed_is_dropped() {
    let mut nf = build_nf(json!({ "dscp": 8 })).unwrap();
    let mut arp = vec![0xff; 12];
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    arp.resize(42, 0);
    let mut short = udp("10.0.0.1", "10.0.0.2", 1, 2);
    short.truncate(30);
    let out = Harness::new().run(nf.as_mut(), &[arp.clone(), short]);
    assert_eq!(out[0].verdict, Verdict::Next);
    assert_eq!(out[0].frame, arp);
    assert_eq!(
        out[1].verdict,
        Verdict::Drop(DropReason::malformed(
            sluice_packet::ParseError::Ipv4Truncated
        ))
    );
}

#[test]
fn config_errors_are_located() {
    let e = build_nf(json!({ "dscp": 64 })).err().unwrap();
    assert_eq!(e.field, "dscp");
    assert_eq!(e.message, "DSCP 64 is out of range 0-63");
    let e = build_nf(json!({})).err().unwrap();
    assert!(e.message.contains("dscp"), "{e}");
    let e = build_nf(json!({ "dscp": 8, "mark": 1 })).err().unwrap();
    assert!(e.message.contains("mark"), "{e}");
}

/// The registry of this test: the starter NFs plus the example, as
/// `sluice_nfs::REGISTRY` would look after registering it.
static REGISTRY: &[NfType] = &[
    sluice_nfs::forwarder::TYPE,
    sluice_nfs::monitor::TYPE,
    sluice_nfs::acl::TYPE,
    sluice_nfs::chaos::TYPE,
    TYPE,
];

const SPEC: &str = r#"
ports:
  - { name: gen, kind: generator, flows: 8, protocol: udp, count: 800 }
  - { name: out, kind: sink }
nfs:
  - name: mark
    type: dscp_mark
    isolation: inline        # or: process (the default)
    config: { dscp: 10, mark_after: 50, drop_after: 90 }
chains:
  - { name: main, from: gen, nfs: [mark], to: out }
"#;

#[test]
fn runs_inline_in_a_spec() {
    assert!(
        sluice_nfs::REGISTRY.iter().all(|t| t.name != TYPE.name),
        "the example's name is free"
    );
    let names: Vec<&str> = REGISTRY.iter().map(|t| t.name).collect();
    let spec = sluice_spec::parse_str(SPEC, "example.yaml", &names).unwrap();
    let r = sluice_dataplane::run(
        &spec,
        REGISTRY,
        sluice_dataplane::RunOptions {
            duration: Some(std::time::Duration::from_secs(20)),
            ..Default::default()
        },
    )
    .unwrap();
    // 8 flows of 100 packets: 50 untouched, 40 marked, 10 dropped each.
    assert_eq!(r.packets_in, 800, "{r:#?}");
    assert_eq!(r.packets_out, 720, "{r:#?}");
    assert_eq!(r.drops.get("mark:over_limit"), Some(&80), "{r:#?}");
    assert_eq!(r.nfs[0].counters["marked"], 320, "{r:#?}");
    assert_eq!(r.unaccounted, 0);
}

#[test]
fn the_document_quotes_this_file() {
    let doc = include_str!("../../../docs/writing-an-nf.md");
    let me = include_str!("doc_example.rs");
    let mut blocks = 0;
    let mut rest = doc;
    while let Some(start) = rest.find("```rust\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").expect("closed code block");
        let block = &body[..end];
        assert!(me.contains(block), "not in doc_example.rs:\n{block}");
        blocks += 1;
        rest = &body[end + 3..];
    }
    assert!(blocks >= 6, "{blocks} rust blocks");
    // The spec in the document is the one run above.
    assert!(doc.contains(SPEC.trim_start()), "spec differs");
}
