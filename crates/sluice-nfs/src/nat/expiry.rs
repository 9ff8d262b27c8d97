//! The NAT session table's expiry sweep skips blocks of sessions in which
//! nothing can have timed out ([`crate::expiry_bounds`]); these tests check
//! it against reading every slot, through the NF.
//!
//! Without the bounds the per-batch sweep (64 slots, 2 cold lines per
//! packet of a batch of 32) cost ≈ 17–25 ns of the ≈ 70–100 ns per packet
//! at 100 k mappings (bench nat/outbound_100k with the sweep on and off,
//! on-CPU under load).

#[cfg(test)]
mod tests {
    use super::super::{build_nf, Action, Nat};
    use crate::expiry_bounds::BLOCK;
    use proptest::prelude::*;
    use sluice_nf::BuildContext;
    use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
    use sluice_packet::{MacAddr, TcpFlags};
    use sluice_spec::ConfigNode;
    use std::net::Ipv4Addr;

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_000 * S;
    const EXT: u32 = 0xc000_0201; // 192.0.2.1
    const REM: u32 = 0xc633_6407; // 198.51.100.7

    use sluice_nf::harness::NoNames;

    /// 150 session slots: two whole blocks and a partial one.
    fn nat() -> Nat {
        let config = ConfigNode::from_json(serde_json::json!({
            "inside": ["10.0.0.0/16"],
            "pool": ["192.0.2.1"],
            "capacity": 150,
        }));
        let ctx = BuildContext {
            name: "nat".into(),
            config: &config,
            resolver: &NoNames,
            flow_capacity: 16,
        };
        build_nf(&ctx).unwrap().into_nat()
    }

    /// Host `h`'s outbound packet (or the reply to it).
    fn frame(h: u8, reply: bool, tcp: bool, flags: u8) -> Vec<u8> {
        let inside = (0x0a00_0001 + u32::from(h % 4), 5000 + u16::from(h));
        let (src, dst) = if reply {
            ((REM, 53), (EXT, inside.1))
        } else {
            (inside, (REM, 53))
        };
        let l4 = if tcp {
            L4Spec::Tcp {
                src_port: src.1,
                dst_port: dst.1,
                seq: 1,
                ack: 1,
                flags: TcpFlags::from_bits(flags),
                window: 100,
            }
        } else {
            L4Spec::Udp {
                src_port: src.1,
                dst_port: dst.1,
            }
        };
        let spec = FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan: None,
            src_ip: Ipv4Addr::from(src.0).into(),
            dst_ip: Ipv4Addr::from(dst.0).into(),
            ttl: 64,
            l4,
        };
        let mut buf = vec![0u8; 90];
        let n = write_frame(&mut buf, &spec, &[0xab; 12]).unwrap();
        buf.truncate(n);
        buf
    }

    /// Every live session's expiry is at or after its block's bound.
    fn bounds_hold(n: &Nat) -> bool {
        let t = &n.tables;
        t.sessions
            .iter()
            .enumerate()
            .all(|(i, x)| !x.live || t.bound(i / BLOCK) <= x.expires)
    }

    #[derive(Debug, Clone)]
    enum Step {
        Packet {
            host: u8,
            reply: bool,
            tcp: bool,
            flags: u8,
        },
        Wait(u64),
        Sweep(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => (0u8..160, any::<bool>(), any::<bool>(),
                  prop_oneof![Just(0x10u8), Just(0x02), Just(0x11), Just(0x04), any::<u8>()])
                .prop_map(|(host, reply, tcp, flags)| Step::Packet { host, reply, tcp, flags }),
            2 => prop_oneof![Just(S), Just(60 * S), Just(239 * S), Just(240 * S), Just(300 * S),
                             Just(7440 * S)].prop_map(Step::Wait),
            2 => prop_oneof![1usize..200, Just(64), Just(128), Just(16_384)].prop_map(Step::Sweep),
        ]
    }

    proptest! {
        /// The sweep with bounds removes exactly what a sweep reading every
        /// slot removes, over random runs of new, refreshed, closing (TCP
        /// FIN/RST: earlier expiry) and timed-out sessions, with budgets
        /// that do and do not line up with the blocks.
        #[test]
        fn skipping_blocks_changes_no_removal(steps in prop::collection::vec(step(), 1..300)) {
            let (mut fast, mut plain) = (nat(), nat());
            let mut now = T0;
            for st in steps {
                match st {
                    Step::Packet { host, reply, tcp, flags } => {
                        let f = frame(host, reply, tcp, flags);
                        let (mut a, mut b) = (f.clone(), f);
                        let ra: Action = fast.translate(&mut a, 1, u32::MAX, now);
                        let rb = plain.translate(&mut b, 1, u32::MAX, now);
                        prop_assert_eq!(ra, rb);
                        prop_assert_eq!(a, b);
                    }
                    Step::Wait(d) => now += d,
                    Step::Sweep(n) => prop_assert_eq!(fast.expire(now, n), plain.expire_plain(now, n)),
                }
                prop_assert!(bounds_hold(&fast));
                prop_assert_eq!(fast.stats(), plain.stats());
                prop_assert_eq!(fast.table_stats(), plain.table_stats());
                prop_assert_eq!(fast.session_count(), plain.session_count());
                prop_assert_eq!(fast.mapping_count(), plain.mapping_count());
            }
        }
    }

    #[test]
    fn a_swept_block_is_bounded_by_its_earliest_session() {
        let mut n = nat();
        let go = |n: &mut Nat, reply: bool, flags: u8, t: u64| {
            let mut f = frame(0, reply, true, flags);
            n.translate(&mut f, 1, u32::MAX, T0 + t)
        };
        // A SYN opens a transitory session (240 s).
        assert_eq!(go(&mut n, false, 0x02, 0), Action::Out);
        assert_eq!(n.tables.bound(0), T0 + 240 * S);
        // Established (7440 s), and refreshed later: the bound is not
        // written on the packet path, and a sweep before it passes by.
        assert_eq!(go(&mut n, true, 0x12, 0), Action::In);
        assert_eq!(go(&mut n, false, 0x10, 5 * S), Action::Out);
        assert_eq!(n.tables.bound(0), T0 + 240 * S);
        assert_eq!(n.expire(T0 + S, 150), 0);
        assert_eq!(n.tables.bound(0), T0 + 240 * S);
        // Due: the sweep reads the block and tightens its bound.
        assert_eq!(n.expire(T0 + 240 * S, 150), 0);
        assert_eq!(n.tables.bound(0), T0 + 7445 * S);
        // A reset moves the expiry earlier (transitory again): lowered.
        assert_eq!(go(&mut n, false, 0x04, 250 * S), Action::Out);
        assert_eq!(n.tables.bound(0), T0 + 490 * S);
        // Removed by the sweep exactly at its expiry; the block is empty.
        assert_eq!(n.expire(T0 + 490 * S - 1, 150), 0);
        assert_eq!(n.expire(T0 + 490 * S, 150), 1);
        assert_eq!(n.session_count(), 0);
        assert_eq!(n.tables.bound(0), u64::MAX);
    }
}
