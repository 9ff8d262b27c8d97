//! Helpers shared by the NF tests: building NFs from JSON configs through
//! the registry, and building frames.
#![allow(dead_code)]

use std::net::IpAddr;

use sluice_nf::{BuildContext, NetworkFunction, NfId, NfType, PortId, Resolver};
use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
use sluice_spec::{ConfigNode, SpecError};

/// Flow ids handed out by the harness stay below this.
pub const FLOW_CAPACITY: u32 = 1024;

/// A resolver knowing NFs `a`, `b`, ports `out` and `dump` (which both
/// receive and transmit) and the input-only port `gen` (a generator).
pub struct TestResolver;

/// [`TestResolver`]'s port index of `gen`, which cannot transmit.
pub const GEN_PORT: u16 = 2;

impl Resolver for TestResolver {
    fn nf(&self, name: &str) -> Option<NfId> {
        ["a", "b"]
            .iter()
            .position(|n| *n == name)
            .map(|i| NfId(i as u16))
    }
    fn port(&self, name: &str) -> Option<PortId> {
        ["out", "dump"]
            .iter()
            .position(|n| *n == name)
            .map(|i| PortId(i as u16))
    }
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
            .or((name == "gen").then_some(PortId(GEN_PORT)))
    }
}

/// [`TestResolver`]'s names, for an NF run as `.0` per-worker copies
/// (`settings.workers`).
pub struct Replicated(pub u32);

impl Resolver for Replicated {
    fn nf(&self, name: &str) -> Option<NfId> {
        TestResolver.nf(name)
    }
    fn port(&self, name: &str) -> Option<PortId> {
        TestResolver.port(name)
    }
    fn input_port(&self, name: &str) -> Option<PortId> {
        TestResolver.input_port(name)
    }
    fn replicas(&self) -> u32 {
        self.0
    }
}

/// Builds NF type `ty` from a JSON config as `replicas` per-worker copies
/// would be built.
pub fn try_build_replicated(
    ty: &str,
    config: serde_json::Value,
    replicas: u32,
) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let config = ConfigNode::from_json(config);
    let ctx = BuildContext {
        name: "under_test".into(),
        config: &config,
        resolver: &Replicated(replicas),
        flow_capacity: FLOW_CAPACITY,
    };
    (nf_type(ty).build)(&ctx)
}

/// The registry entry for `name`.
pub fn nf_type(name: &str) -> &'static NfType {
    sluice_nfs::REGISTRY
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no NF type {name} in the registry"))
}

/// Builds NF type `ty` from a config node, as the platform does.
pub fn build_node(ty: &str, config: &ConfigNode) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let ctx = BuildContext {
        name: "under_test".into(),
        config,
        resolver: &TestResolver,
        flow_capacity: FLOW_CAPACITY,
    };
    (nf_type(ty).build)(&ctx)
}

/// Builds NF type `ty` from a JSON config.
pub fn try_build(
    ty: &str,
    config: serde_json::Value,
) -> Result<Box<dyn NetworkFunction>, SpecError> {
    build_node(ty, &ConfigNode::from_json(config))
}

/// Builds NF type `ty` from a JSON config that must be valid.
pub fn build(ty: &str, config: serde_json::Value) -> Box<dyn NetworkFunction> {
    try_build(ty, config).unwrap_or_else(|e| panic!("{ty} config rejected: {e}"))
}

/// Builds NF type `ty` from a JSON config that must be rejected.
pub fn build_err(ty: &str, config: serde_json::Value) -> SpecError {
    match try_build(ty, config) {
        Ok(_) => panic!("{ty} config accepted but should be rejected"),
        Err(e) => e,
    }
}

/// Index of counter `name` of NF type `ty`.
pub fn counter_index(ty: &str, name: &str) -> usize {
    nf_type(ty)
        .counters
        .iter()
        .position(|c| *c == name)
        .unwrap_or_else(|| panic!("{ty} has no counter {name}"))
}

/// Index of the NF-local drop reason `name` of NF type `ty`.
pub fn reason_index(ty: &str, name: &str) -> u16 {
    nf_type(ty)
        .drop_reasons
        .iter()
        .position(|c| *c == name)
        .unwrap_or_else(|| panic!("{ty} has no drop reason {name}")) as u16
}

pub const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
pub const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);

/// A frame from `src` to `dst` (same family) with transport `l4`.
pub fn frame(src: &str, dst: &str, l4: L4Spec, payload: &[u8]) -> Vec<u8> {
    frame_ip(src.parse().unwrap(), dst.parse().unwrap(), l4, payload)
}

/// [`frame`] with parsed addresses.
pub fn frame_ip(src: IpAddr, dst: IpAddr, l4: L4Spec, payload: &[u8]) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MAC_A,
        dst_mac: MAC_B,
        vlan: None,
        src_ip: src,
        dst_ip: dst,
        ttl: 64,
        l4,
    };
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, &spec, payload).expect("valid frame spec");
    buf.truncate(n);
    buf
}

pub fn udp(src: &str, sport: u16, dst: &str, dport: u16) -> Vec<u8> {
    frame(
        src,
        dst,
        L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        },
        b"payload!",
    )
}

pub fn tcp(src: &str, sport: u16, dst: &str, dport: u16) -> Vec<u8> {
    frame(src, dst, tcp_l4(sport, dport), b"")
}

pub fn tcp_l4(sport: u16, dport: u16) -> L4Spec {
    L4Spec::Tcp {
        src_port: sport,
        dst_port: dport,
        seq: 1,
        ack: 0,
        flags: TcpFlags::ACK,
        window: 512,
    }
}

/// ICMP (v4) or ICMPv6 (v6) echo request (`reply` false) or reply.
pub fn ping(src: &str, dst: &str, id: u16, reply: bool) -> Vec<u8> {
    frame(src, dst, L4Spec::IcmpEcho { id, seq: 1, reply }, b"ping")
}

/// An Ethernet/IPv4 ARP request (not padded).
pub fn arp() -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&MacAddr::BROADCAST.0);
    f.extend_from_slice(&MAC_A.0);
    f.extend_from_slice(&[0x08, 0x06]); // EtherType ARP
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]); // Ethernet/IPv4, request
    f.extend_from_slice(&MAC_A.0);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 0, 0, 2]);
    f
}

/// The two interfaces the router tests use: `out` (192.168.1.1/24,
/// 2001:db8:1::1/64) and `dump` (192.168.2.1/24, 2001:db8:2::1/64).
pub fn router_interfaces() -> serde_json::Value {
    serde_json::json!([
        { "port": "out", "mac": "02:00:00:00:01:00",
          "addresses": ["192.168.1.1/24", "2001:db8:1::1/64"] },
        { "port": "dump", "mac": "02:00:00:00:02:00",
          "addresses": ["192.168.2.1/24", "2001:db8:2::1/64"] },
    ])
}

/// [`build_err`] on another thread, failing the test if the build takes
/// more than a few seconds (e.g. blocked opening a FIFO).
pub fn build_err_promptly(ty: &'static str, config: serde_json::Value) -> SpecError {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(try_build(ty, config).err());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(10)) {
        Ok(Some(e)) => e,
        Ok(None) => panic!("{ty} config accepted but should be rejected"),
        Err(_) => panic!("building {ty} hung"),
    }
}

/// Creates a FIFO at `path` (with mkfifo(1): the tests deny unsafe code).
pub fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {} failed", path.display());
}

/// Input files a spec names must be regular files of at most
/// `sluice_spec::MAX_DATA_FILE_BYTES`: checks that NF type `ty` refuses a
/// FIFO, a device and a too large file given as `key`, promptly and
/// naming the problem.
pub fn check_refuses_odd_input_files(ty: &'static str, base: serde_json::Value, key: &str) {
    let dir = std::env::temp_dir().join(format!("sluice-{ty}-{key}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let big = dir.join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(sluice_spec::MAX_DATA_FILE_BYTES + 1)
        .unwrap();
    for (path, words) in [
        (fifo.as_path(), "it is a FIFO, not a regular file"),
        (
            std::path::Path::new("/dev/zero"),
            "it is a character device",
        ),
        (dir.as_path(), "it is a directory"),
        (big.as_path(), "it is larger than 256 MiB"),
    ] {
        let mut cfg = base.clone();
        cfg[key] = serde_json::json!(path.to_str().unwrap());
        let e = build_err_promptly(ty, cfg);
        assert!(e.field.ends_with(key), "{}: {e}", path.display());
        assert!(e.message.contains(words), "{}: {e}", path.display());
        assert!(
            e.message.contains(path.to_str().unwrap()),
            "{}: {e}",
            path.display()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
