//! The issue-3 examples (bridge, load balancer, policer) run through the
//! binary with exact accounting and the counters their comments promise.

mod common;
use common::*;

fn run_example(name: &str) -> serde_json::Value {
    let (out, r) = run_json(&root().join("examples").join(name), 2.0);
    assert!(
        out.status.success(),
        "{name}: stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert!(r["packets_in"].as_u64().unwrap() > 1000, "{r:#}");
    r
}

fn counter(r: &serde_json::Value, nf_name: &str, c: &str) -> u64 {
    nf(r, nf_name)["counters"][c]
        .as_u64()
        .unwrap_or_else(|| panic!("{nf_name}.{c} missing: {r:#}"))
}

#[test]
fn bridge_example_floods_to_the_trunk() {
    let r = run_example("bridge.yaml");
    let n = nf(&r, "br0")["packets"].as_u64().unwrap();
    assert_eq!(counter(&r, "br0", "learned"), 1, "{r:#}");
    assert_eq!(counter(&r, "br0", "flooded"), n, "{r:#}");
    assert_eq!(counter(&r, "br0", "forwarded"), 0, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(r["packets_out"], r["packets_in"], "{r:#}");
}

#[test]
fn load_balancer_example_tracks_every_connection() {
    let r = run_example("load_balancer.yaml");
    let n = nf(&r, "lb")["packets"].as_u64().unwrap();
    let new = counter(&r, "lb", "new_connections");
    assert!(new >= 256, "{r:#}");
    assert_eq!(new + counter(&r, "lb", "tracked"), n, "{r:#}");
    assert_eq!(counter(&r, "lb", "other"), 0, "{r:#}");
    assert_eq!(counter(&r, "lb", "untracked"), 0, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    // Requests per backend (extended counters, by backend index): every
    // request is counted once, and web3 (weight 2) gets about twice the
    // share of web1 and web2.
    let ext: Vec<u64> = nf(&r, "lb")["ext_counters"]
        .as_array()
        .unwrap_or_else(|| panic!("no ext_counters: {r:#}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ext.iter().sum::<u64>(), n, "{r:#}");
    assert_eq!(ext.len(), 3, "{r:#}");
    let w3 = ext[2] as f64 / n as f64;
    assert!((0.35..0.65).contains(&w3), "web3 share {w3}: {r:#}");
}

#[test]
fn policer_example_colours_and_drops_red() {
    let r = run_example("policer.yaml");
    for c in ["green", "yellow", "red"] {
        assert!(counter(&r, "police", c) > 0, "{c}: {r:#}");
    }
    assert_eq!(
        r["drops"]["police:red"].as_u64().unwrap(),
        counter(&r, "police", "red"),
        "{r:#}"
    );
    assert_eq!(
        counter(&r, "police", "marked"),
        counter(&r, "police", "yellow")
    );
}

/// The bridge's golden capture (`crates/sluice-nfs/tests/fixtures/bridge/`)
/// through the real binary with three bridge ports, inline and as a
/// process: flooded frames leave on `p1` (the original, untagged) and as
/// copies made with `alloc_copy` on the trunk `p2` (tagged), which must be
/// exactly the fixture's expected capture.
#[test]
fn bridge_floods_copies_through_the_platform() {
    use sluice_ports::PcapReader;
    let fixtures = root().join("crates/sluice-nfs/tests/fixtures/bridge");
    let read = |p: &std::path::Path| {
        let mut r = PcapReader::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let mut v = Vec::new();
        while let Some(pk) = r.next_packet().unwrap() {
            v.push(pk.data.to_vec());
        }
        v
    };
    let expected_trunk = read(&fixtures.join("expected.pcap"));
    // On the access port the same frames leave untagged.
    let expected_access: Vec<Vec<u8>> = expected_trunk
        .iter()
        .map(|f| [&f[..12], &f[16..]].concat())
        .collect();
    for iso in ["inline", "process"] {
        let dir = tempfile::tempdir().unwrap();
        let spec = format!(
            r#"ports:
  - {{ name: trace, kind: pcap_in, path: "{input}" }}
  - {{ name: lan, kind: pcap_out, path: "{d}/lan.pcap" }}
  - {{ name: p1, kind: pcap_out, path: "{d}/p1.pcap" }}
  - {{ name: p2, kind: pcap_out, path: "{d}/p2.pcap" }}
nfs:
  - name: br0
    type: bridge
    isolation: {iso}
    config:
      default_ingress: lan
      ports:
        - {{ name: lan, vlan: 10 }}
        - {{ name: p1, vlan: 10 }}
        - {{ name: p2, trunk: [10, 20] }}
chains:
  - {{ name: main, from: trace, nfs: [br0], to: lan }}
"#,
            input = fixtures.join("in.pcap").display(),
            d = dir.path().display(),
        );
        let path = dir.path().join("spec.yaml");
        std::fs::write(&path, spec).unwrap();
        let (out, r) = run_json(&path, 30.0);
        assert!(
            out.status.success(),
            "{iso}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_accounted(&r);
        assert_eq!(r["packets_in"], 9, "{iso}: {r:#}");
        assert_eq!(r["packets_originated"], 5, "{iso}: {r:#}");
        assert_eq!(r["packets_out"], 10, "{iso}: {r:#}");
        for reason in ["vlan_not_allowed", "same_port", "link_local", "bad_src_mac"] {
            assert_eq!(r["drops"][format!("br0:{reason}")], 1, "{iso}: {r:#}");
        }
        assert_eq!(counter(&r, "br0", "flood_copies"), 5, "{iso}: {r:#}");
        assert_eq!(read(&dir.path().join("p2.pcap")), expected_trunk, "{iso}");
        assert_eq!(read(&dir.path().join("p1.pcap")), expected_access, "{iso}");
        assert!(read(&dir.path().join("lan.pcap")).is_empty(), "{iso}");
    }
}

/// The load balancer's golden capture (`crates/sluice-nfs/tests/fixtures/
/// load_balancer/`, backends computed by an independent Python Maglev)
/// through the real binary, inline and as a process: the output capture
/// must equal the expected one frame for frame.
#[test]
fn load_balancer_golden_capture_through_the_binary() {
    use sluice_ports::PcapReader;
    let fixtures = root().join("crates/sluice-nfs/tests/fixtures/load_balancer");
    let read = |p: &std::path::Path| {
        let mut r = PcapReader::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let mut v = Vec::new();
        while let Some(pk) = r.next_packet().unwrap() {
            v.push(pk.data.to_vec());
        }
        v
    };
    let expected = read(&fixtures.join("expected.pcap"));
    for iso in ["inline", "process"] {
        let dir = tempfile::tempdir().unwrap();
        let spec = format!(
            r#"ports:
  - {{ name: trace, kind: pcap_in, path: "{input}" }}
  - {{ name: out, kind: pcap_out, path: "{d}/out.pcap" }}
nfs:
  - name: lb
    type: load_balancer
    isolation: {iso}
    config:
      vip: 10.0.0.100
      ports: [80]
      table_size: 65537
      backends:
        - {{ name: b0, addr: 10.0.1.1, port: 8080 }}
        - {{ name: b1, addr: 10.0.1.2, port: 8080 }}
        - {{ name: b2, addr: 10.0.1.3, port: 8080 }}
chains:
  - {{ name: main, from: trace, nfs: [lb], to: out }}
"#,
            input = fixtures.join("in.pcap").display(),
            d = dir.path().display(),
        );
        let path = dir.path().join("spec.yaml");
        std::fs::write(&path, spec).unwrap();
        let (out, r) = run_json(&path, 30.0);
        assert!(
            out.status.success(),
            "{iso}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_accounted(&r);
        assert_eq!(r["packets_in"], 58, "{iso}: {r:#}");
        assert_eq!(r["packets_out"], 58, "{iso}: {r:#}");
        assert_eq!(counter(&r, "lb", "new_connections"), 12, "{iso}: {r:#}");
        assert_eq!(counter(&r, "lb", "replies"), 24, "{iso}: {r:#}");
        let got = read(&dir.path().join("out.pcap"));
        assert_eq!(got.len(), expected.len(), "{iso}");
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g, e, "{iso}: frame {i}");
        }
    }
}
