//! A flow's class for `per_class` NFs (`sluice_spec::ClassBy`), read from
//! the frame of its first packet at the NF.
//!
//! Source and destination prefixes, the outer VLAN id and the DSCP are read
//! at the offsets one header walk (`sluice_packet::parse`) gives; a frame
//! that has none of what the class needs (an ARP frame for `src`, a frame
//! that does not parse) is in [`ClassKey::NONE`], one class of its own.
//! Called once per flow, never per packet.

use sluice_packet::parse::parse;
use sluice_spec::{ClassBy, ClassField};

/// A class: a family (which field, which IP version) and a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassKey {
    family: u8,
    value: u128,
}

impl ClassKey {
    /// Frames without the field the class is made of.
    pub const NONE: ClassKey = ClassKey {
        family: 0,
        value: 0,
    };

    /// A class made up for tests.
    #[cfg(test)]
    pub(crate) const fn test(value: u128) -> ClassKey {
        ClassKey { family: 9, value }
    }
}

const VLAN: u8 = 1;
const DSCP: u8 = 2;
const V4: u8 = 4;
const V6: u8 = 6;

/// The class of `frame` under `by`.
pub fn class_of(frame: &[u8], by: &ClassBy) -> ClassKey {
    let Ok(h) = parse(frame) else {
        return ClassKey::NONE;
    };
    let l3 = usize::from(h.l3_offset);
    let key = |family, value| ClassKey { family, value };
    match by.by {
        ClassField::Vlan => key(VLAN, u128::from(h.vlan_id().unwrap_or(0))),
        ClassField::Dscp => match h.ip_version {
            4 => frame
                .get(l3 + 1)
                .map_or(ClassKey::NONE, |tos| key(DSCP, u128::from(tos >> 2))),
            6 => match frame.get(l3..l3 + 2) {
                Some(b) => key(DSCP, u128::from(((b[0] & 0x0f) << 2) | (b[1] >> 6))),
                None => ClassKey::NONE,
            },
            _ => ClassKey::NONE,
        },
        ClassField::Src | ClassField::Dst => {
            let dst = by.by == ClassField::Dst;
            match h.ip_version {
                4 => {
                    let at = l3 + if dst { 16 } else { 12 };
                    let Some(b) = frame.get(at..at + 4) else {
                        return ClassKey::NONE;
                    };
                    let addr = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                    let bits = by.prefix_of(32);
                    let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
                    key(V4, u128::from(addr & mask))
                }
                6 => {
                    let at = l3 + if dst { 24 } else { 8 };
                    let Some(b) = frame.get(at..at + 16) else {
                        return ClassKey::NONE;
                    };
                    let addr = u128::from_be_bytes(b.try_into().expect("16 bytes"));
                    let bits = by.prefix_of(128);
                    let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
                    key(V6, addr & mask)
                }
                _ => ClassKey::NONE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};

    fn by(by: ClassField, prefix: Option<u8>) -> ClassBy {
        ClassBy { by, prefix }
    }

    fn udp4(src: [u8; 4], dst: [u8; 4], tos: u8, vlan: Option<u16>) -> Vec<u8> {
        let spec = FrameSpec {
            src_mac: Default::default(),
            dst_mac: Default::default(),
            vlan,
            src_ip: std::net::Ipv4Addr::from(src).into(),
            dst_ip: std::net::Ipv4Addr::from(dst).into(),
            ttl: 64,
            l4: L4Spec::Udp {
                src_port: 1000,
                dst_port: 53,
            },
        };
        let mut buf = vec![0u8; 128];
        let n = write_frame(&mut buf, &spec, &[0u8; 8]).unwrap();
        buf.truncate(n);
        // The TOS byte, after the Ethernet (and VLAN) header.
        buf[14 + if vlan.is_some() { 4 } else { 0 } + 1] = tos;
        buf
    }

    #[test]
    fn prefixes_group_addresses_and_families_never_mix() {
        let a = udp4([10, 1, 2, 3], [192, 0, 2, 1], 0, None);
        let b = udp4([10, 1, 2, 200], [192, 0, 2, 9], 0, None);
        let c = udp4([10, 1, 3, 3], [192, 0, 2, 1], 0, None);
        let src24 = by(ClassField::Src, Some(24));
        assert_eq!(class_of(&a, &src24), class_of(&b, &src24));
        assert_ne!(class_of(&a, &src24), class_of(&c, &src24));
        let src = by(ClassField::Src, None);
        assert_ne!(class_of(&a, &src), class_of(&b, &src));
        let dst = by(ClassField::Dst, Some(32));
        assert_eq!(class_of(&a, &dst), class_of(&c, &dst));
        assert_ne!(class_of(&a, &dst), class_of(&b, &dst));
        let all = by(ClassField::Src, Some(0));
        assert_eq!(class_of(&a, &all), class_of(&c, &all));
        assert_ne!(class_of(&a, &all), ClassKey::NONE);
    }

    #[test]
    fn vlan_and_dscp_are_read_and_garbage_is_no_class() {
        let ef = udp4([10, 0, 0, 1], [10, 0, 0, 2], 46 << 2, Some(100));
        let be = udp4([10, 0, 0, 1], [10, 0, 0, 2], 0, Some(200));
        let dscp = by(ClassField::Dscp, None);
        let vlan = by(ClassField::Vlan, None);
        assert_eq!(
            class_of(&ef, &dscp),
            ClassKey {
                family: DSCP,
                value: 46
            }
        );
        assert_eq!(
            class_of(&be, &dscp),
            ClassKey {
                family: DSCP,
                value: 0
            }
        );
        assert_eq!(
            class_of(&ef, &vlan),
            ClassKey {
                family: VLAN,
                value: 100
            }
        );
        assert_eq!(
            class_of(&be, &vlan),
            ClassKey {
                family: VLAN,
                value: 200
            }
        );
        for cut in 0..ef.len().min(30) {
            let _ = class_of(&ef[..cut], &dscp);
        }
        assert_eq!(class_of(&[0u8; 10], &dscp), ClassKey::NONE);
    }
}
