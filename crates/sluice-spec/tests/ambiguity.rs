//! The chains' "would never see traffic" check against its definition:
//! for random chains from two ports, the spec is refused exactly when some
//! chain is covered by an earlier chain of its port, and the error names
//! the first such chain and the first earlier chain that covers it (the
//! check indexes chains by port and destination port; this compares it
//! with every pair).

use proptest::prelude::*;
use sluice_spec::{parse_additions, parse_str};

/// One chain: its port (0 or 1), protocol, destination ports.
type Chain = (u8, Option<u8>, Option<(u16, u16)>);

fn chain() -> impl Strategy<Value = Chain> {
    (
        0u8..2,
        prop_oneof![Just(None), Just(Some(6u8)), Just(Some(17u8))],
        prop_oneof![
            Just(None),
            (1u16..4).prop_map(|p| Some((p, p))),
            (1u16..4, 0u16..3).prop_map(|(lo, w)| Some((lo, lo + w))),
        ],
    )
}

fn spec(chains: &[Chain]) -> String {
    let mut s = String::from(
        "ports:\n  - { name: g0, kind: generator, rate_pps: 1 }\n  - { name: g1, kind: generator, rate_pps: 1 }\n  - { name: out, kind: sink }\nchains:\n",
    );
    for (k, (port, proto, dst)) in chains.iter().enumerate() {
        let mut m = Vec::new();
        if let Some(p) = proto {
            m.push(format!("proto: {p}"));
        }
        if let Some((lo, hi)) = dst {
            // A port match needs TCP or UDP.
            if proto.is_none() {
                m.push("proto: tcp".into());
            }
            m.push(if lo == hi {
                format!("dst_port: {lo}")
            } else {
                format!("dst_port: \"{lo}-{hi}\"")
            });
        }
        let matcher = if m.is_empty() {
            String::new()
        } else {
            format!(", match: {{ {} }}", m.join(", "))
        };
        s += &format!("  - {{ name: c{k}, from: g{port}{matcher}, to: out }}\n");
    }
    s
}

proptest! {
    #[test]
    fn refused_exactly_when_an_earlier_chain_covers_a_later_one(
        chains in proptest::collection::vec(chain(), 1..12),
    ) {
        let text = spec(&chains);
        // Decoded only: the chains as the check sees them.
        let decoded = parse_additions(&text, "<test>").unwrap();
        let m = |k: usize| decoded.chains[k].matcher.clone().unwrap_or_default();
        let expected = (0..decoded.chains.len()).find_map(|j| {
            (0..j)
                .find(|&i| decoded.chains[i].from == decoded.chains[j].from && m(i).covers(&m(j)))
                .map(|i| (j, i))
        });
        match (parse_str(&text, "<test>", &[]), expected) {
            (Ok(_), None) => {}
            (Err(e), Some((j, i))) => {
                prop_assert!(e.field.starts_with(&format!("chains[{j}].")), "{e} / {text}");
                prop_assert!(e.message.contains(&format!("chain \"c{i}\"")), "{e} / {text}");
            }
            (got, want) => prop_assert!(false, "{got:?} but expected {want:?}: {text}"),
        }
    }
}
