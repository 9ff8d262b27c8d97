//! `examples/nat.yaml` runs: every generated packet is translated outbound,
//! none is dropped, and the mapping counters are consistent.

mod common;
use common::*;

#[test]
fn nat_example_translates_every_packet() {
    let (out, r) = run_json(&root().join("examples/nat.yaml"), 2.0);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["drops_total"], 0, "{r:#}");
    let n = nf(&r, "nat");
    let c = &n["counters"];
    let packets = n["packets"].as_u64().unwrap();
    assert!(packets > 1000, "{r:#}");
    assert_eq!(c["translated_out"].as_u64().unwrap(), packets, "{r:#}");
    for k in [
        "translated_in",
        "hairpinned",
        "no_mapping",
        "filtered",
        "untranslated",
        "mapping_expired",
    ] {
        assert_eq!(c[k], 0, "{k}: {r:#}");
    }
    // One mapping per generated source endpoint (mixed TCP/UDP flows, each
    // reopened TCP connection a new one), all still live after 2 s.
    let created = c["mapping_created"].as_u64().unwrap();
    assert!(created >= 1024, "{r:#}");
    assert_eq!(c["mappings"].as_u64().unwrap(), created, "{r:#}");
    assert!(c["sessions"].as_u64().unwrap() >= created, "{r:#}");
}
