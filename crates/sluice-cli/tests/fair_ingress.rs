//! Fair ingress: two input ports at full rate whose chains share one
//! process NF that cannot keep up. Each port gets its share of the NF
//! (at least 45 % of what comes out), whichever order the worker polls
//! its ports in, when the ports are held back (`backpressure: hold`) and
//! when the excess is dropped at the chains' entry (`drop`). Polled in a
//! fixed order, the first port took the NF's free ring space on every
//! pass and the second got next to nothing (issue: 0.013 against 20.95
//! Mpps).

mod common;
use common::*;

fn spec(mode: &str) -> String {
    format!(
        "settings:
  backpressure: {{ mode: {mode} }}
ports:
  - {{ name: a, kind: generator, flows: 16, protocol: udp, size: 64 }}
  - {{ name: b, kind: generator, flows: 16, protocol: udp, size: 64 }}
  - {{ name: out_a, kind: sink }}
  - {{ name: out_b, kind: sink }}
nfs:
  - {{ name: slow, type: cycle_burner, config: {{ iterations_per_packet: 400 }}, isolation: process }}
chains:
  - {{ name: from_a, from: a, nfs: [slow], to: out_a }}
  - {{ name: from_b, from: b, nfs: [slow], to: out_b }}
"
    )
}

#[test]
fn two_ports_sharing_a_saturated_nf_each_get_their_share() {
    for mode in ["hold", "drop"] {
        let (_d, path) = spec_file(&spec(mode));
        let (out, r) = run_json(&path, 2.0);
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_accounted(&r);
        let a = port(&r, "out_a")["tx_packets"].as_u64().unwrap() as f64;
        let b = port(&r, "out_b")["tx_packets"].as_u64().unwrap() as f64;
        assert!(a + b > 10_000.0, "{mode}: the NF carried traffic: {r:#}");
        let share = a / (a + b);
        assert!(
            (0.45..=0.55).contains(&share),
            "{mode}: port a got {:.1} % of the NF: {r:#}",
            share * 100.0
        );
    }
}
