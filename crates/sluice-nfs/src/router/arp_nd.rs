//! The neighbour element: answers ARP requests (RFC 826) and Neighbor
//! Solicitations (RFC 4861 §7.2.4) for the router's own addresses in
//! place, back out of the ingress port; learns from requests, replies and
//! advertisements. The frames it reads and writes, and the ARP requests /
//! NSs the forwarding path sends for unresolved next hops, are in
//! `nd_wire.rs`.

use sluice_nf::{PortId, Verdict};

use super::drop_reason as dr;
use super::forward::{Outcome, Router, Stats};
use super::nd_wire::{
    be16, nd_checksum, nd_lla, solicited_node, u128_at, NdMessage, ND_LEN, ND_NA, ND_NS,
};
use super::neighbour::{v4_key, Learned};

impl Router {
    /// An ARP frame (already checked by the parser to be Ethernet/IPv4 and
    /// 28 bytes long) received on `port_in`.
    pub(super) fn arp(
        &mut self,
        buf: &mut [u8],
        len: usize,
        l3: usize,
        port_in: u16,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        let Some(i) = self.iface_of_port(port_in) else {
            return (Verdict::Drop(dr::ARP_ND_CONSUMED), len);
        };
        let a = &buf[l3..l3 + 28];
        let op = be16(a, 6);
        let sha: [u8; 6] = a[8..14].try_into().unwrap_or([0; 6]);
        let spa = u32::from_be_bytes([a[14], a[15], a[16], a[17]]);
        let tpa: [u8; 4] = a[24..28].try_into().unwrap_or([0; 4]);
        let for_us = self.local4.contains(&u32::from_be_bytes(tpa));
        let port = self.ifaces[i].port.0;
        // RFC 826: merge the sender into the table; a request addressed
        // to us may create an entry, anything else only updates one
        // (Linux arp_accept=0). Probes (sender 0.0.0.0) teach nothing.
        if spa != 0 && sha[0] & 1 == 0 {
            let create = for_us && op == 1;
            if self.neigh.learn(v4_key(spa), port, sha, now_ns, create) == Learned::New {
                st.neighbours_learned += 1;
            }
        }
        if !(op == 1 && for_us) {
            return (Verdict::Drop(dr::ARP_ND_CONSUMED), len);
        }
        let mac = self.ifaces[i].mac;
        let eth_src: [u8; 6] = buf[6..12].try_into().unwrap_or([0; 6]);
        buf[0..6].copy_from_slice(&eth_src);
        buf[6..12].copy_from_slice(&mac);
        let a = &mut buf[l3..l3 + 28];
        a[6..8].copy_from_slice(&2u16.to_be_bytes());
        a[18..24].copy_from_slice(&sha);
        a[24..28].copy_from_slice(&spa.to_be_bytes());
        a[8..14].copy_from_slice(&mac);
        a[14..18].copy_from_slice(&tpa);
        st.arp_replies += 1;
        (Verdict::ToPort(PortId(port_in)), len)
    }

    /// An ICMPv6 Neighbor Discovery message (types 133–137).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ndp(
        &mut self,
        buf: &mut [u8],
        len: usize,
        (l3, l4): (usize, usize),
        typ: u8,
        port_in: u16,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        let consumed = (Verdict::Drop(dr::ARP_ND_CONSUMED), len);
        let Some(i) = self.iface_of_port(port_in) else {
            return consumed;
        };
        let end = (l3 + 40 + be16(buf, l3 + 4) as usize).min(len);
        let src = u128_at(buf, l3 + 8);
        let dst = u128_at(buf, l3 + 24);
        let Some(icmp) = buf.get(l4..end) else {
            return consumed;
        };
        // RFC 4861 §7.1.1 / §7.1.2: hop limit 255 (the sender is on-link),
        // code 0, valid checksum, at least 24 bytes; otherwise discard.
        if buf[l3 + 7] != 255 || icmp.len() < 24 || icmp[1] != 0 || nd_checksum(src, dst, icmp) != 0
        {
            return consumed;
        }
        let target = u128_at(icmp, 8);
        if (target >> 120) == 0xff {
            return consumed;
        }
        let port = self.ifaces[i].port.0;
        match typ {
            ND_NS => {
                let Ok(slla) = nd_lla(&icmp[24..], 1) else {
                    return consumed;
                };
                let dad = src == 0;
                if dad && (dst != solicited_node(target) || slla.is_some()) {
                    return consumed;
                }
                if !self.ifaces[i].has_v6(target) {
                    return consumed;
                }
                if let (false, Some(mac)) = (dad, slla) {
                    if self.neigh.learn(src, port, mac, now_ns, true) == Learned::New {
                        st.neighbours_learned += 1;
                    }
                }
                let reply_to = if dad { 0xff02u128 << 112 | 1 } else { src };
                let n = self.write_na(buf, l3, i, target, reply_to, !dad);
                match n {
                    Some(n) => {
                        st.nd_advertisements += 1;
                        (Verdict::ToPort(PortId(port_in)), n)
                    }
                    None => consumed,
                }
            }
            ND_NA => {
                if let Ok(Some(mac)) = nd_lla(&icmp[24..], 2) {
                    // Only updates an entry we have (RFC 4861 §7.2.5).
                    self.neigh.learn(target, port, mac, now_ns, false);
                }
                consumed
            }
            _ => consumed,
        }
    }

    /// Rewrites the frame from `l3` into a Neighbor Advertisement for our
    /// `target` to `dst`, MACs swapped. Returns the new length.
    fn write_na(
        &self,
        buf: &mut [u8],
        l3: usize,
        iface: usize,
        target: u128,
        dst: u128,
        solicited: bool,
    ) -> Option<usize> {
        let mac = self.ifaces[iface].mac;
        let end = l3 + ND_LEN;
        if buf.len() < end {
            return None;
        }
        let eth_dst: [u8; 6] = if solicited {
            buf[6..12].try_into().ok()?
        } else {
            [0x33, 0x33, 0, 0, 0, 1]
        };
        buf[0..6].copy_from_slice(&eth_dst);
        buf[6..12].copy_from_slice(&mac);
        let na = NdMessage {
            kind: ND_NA,
            // Router, Solicited (when answering a unicast-sourced NS), Override.
            flags: 0x80 | if solicited { 0x40 } else { 0 } | 0x20,
            src: target,
            dst,
            target,
            option: 2,
            mac,
        };
        na.write(&mut buf[l3..end])?;
        Some(end)
    }
}
