//! The bridge's forwarding logic, independent of the SDK's batch types:
//! ingress VLAN classification, MAC learning with ageing, and the
//! forward / flood / drop decision (IEEE 802.1Q, with Linux bridge
//! semantics where the standard leaves a choice).

use super::table::{mix64, FixedTable};

/// Most ports in one bridge (flood sets are 64-bit masks).
pub const MAX_PORTS: usize = 64;
/// VLAN ids 1..=4094 are usable (0 = priority tag, 4095 reserved).
pub const VLANS: usize = 4096;

/// Why the bridge dropped a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrDrop {
    /// The frame's destination was learned on its ingress port.
    SamePort,
    /// Tagged with a VLAN the ingress port is not a member of.
    VlanNotAllowed,
    /// Untagged on a trunk port without a native VLAN.
    Untagged,
    /// Multicast, broadcast or zero source MAC (not a valid station).
    BadSrcMac,
    /// 802.1D reserved group address (01:80:C2:00:00:0X): never forwarded.
    LinkLocal,
    /// Arrived on a port that is not part of the bridge.
    NotMember,
    /// Flood with no other port in the VLAN.
    NoEgress,
    /// Shorter than an Ethernet (and VLAN) header.
    Truncated,
}

/// The forwarding decision for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// To one bridge port (index into the bridge's ports).
    Forward(usize),
    /// To every port in the mask (bit = bridge port index).
    Flood(u64),
    /// Dropped.
    Drop(BrDrop),
}

/// The ingress classification of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ingress {
    /// The frame's VLAN.
    pub vlan: u16,
    /// Whether it arrived with an 802.1Q tag (incl. a priority tag).
    pub tagged: bool,
    /// Its priority code point (0 if untagged).
    pub pcp: u8,
}

/// One bridge port's VLAN membership.
#[derive(Debug, Clone)]
pub struct PortVlans {
    /// Access port: the VLAN of untagged frames, egress untagged.
    pub access: Option<u16>,
    /// Trunk port: VLANs carried tagged.
    pub trunk: Vec<u16>,
    /// Trunk port: VLAN of untagged frames, egress untagged.
    pub native: Option<u16>,
}

/// Counters since the last [`Bridge::take_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames sent to one learned port.
    pub forwarded: u64,
    /// Frames flooded (unknown unicast, broadcast, multicast).
    pub flooded: u64,
    /// New (VLAN, MAC) entries.
    pub learned: u64,
    /// Station moves: a known (VLAN, MAC) seen on another port.
    pub moved: u64,
    /// Entries removed after `ageing_time`.
    pub aged: u64,
    /// Sources not learned because the table was full.
    pub table_full: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    port: u16,
    last_ns: u64,
}

const SWEEP_PER_BATCH: usize = 32;

#[inline]
fn key(vlan: u16, mac: &[u8]) -> u64 {
    let mut m = [0u8; 8];
    if let Some(mac) = mac.get(..6) {
        m[2..].copy_from_slice(mac);
    }
    u64::from(vlan) << 48 | u64::from_be_bytes(m)
}

/// The bridge state.
pub struct Bridge {
    nports: usize,
    /// Per VLAN: mask of member ports.
    members: Vec<u64>,
    /// Per VLAN: mask of ports where it leaves untagged.
    untagged: Vec<u64>,
    /// Per port: VLAN of untagged ingress frames (0 = none).
    pvid: Vec<u16>,
    table: FixedTable<u64, Entry>,
    ageing_ns: u64,
    sweep_pos: usize,
    /// Counters.
    pub stats: Stats,
}

impl Bridge {
    /// A bridge over `ports` (≤ [`MAX_PORTS`], VLANs 1–4094) with a MAC
    /// table of `max_entries` and the given ageing time.
    pub fn new(ports: &[PortVlans], max_entries: usize, ageing_ns: u64) -> Bridge {
        let mut members = vec![0u64; VLANS];
        let mut untagged = vec![0u64; VLANS];
        let mut pvid = vec![0u16; ports.len()];
        for (i, p) in ports.iter().enumerate().take(MAX_PORTS) {
            let bit = 1u64 << i;
            for v in p.access.iter().chain(&p.native) {
                members[usize::from(*v) % VLANS] |= bit;
                untagged[usize::from(*v) % VLANS] |= bit;
                pvid[i] = *v;
            }
            for v in &p.trunk {
                members[usize::from(*v) % VLANS] |= bit;
            }
        }
        Bridge {
            nports: ports.len().min(MAX_PORTS),
            members,
            untagged,
            pvid,
            table: FixedTable::new(max_entries),
            ageing_ns,
            sweep_pos: 0,
            stats: Stats::default(),
        }
    }

    /// Number of bridge ports.
    pub fn ports(&self) -> usize {
        self.nports
    }

    /// Entries in the MAC table.
    pub fn entries(&self) -> usize {
        self.table.len()
    }

    /// The port `mac` was learned on in `vlan`, if the entry is still fresh.
    pub fn lookup(&self, vlan: u16, mac: [u8; 6], now: u64) -> Option<usize> {
        let k = key(vlan, &mac);
        let e = self.table.get(mix64(k), &k)?;
        (now.saturating_sub(e.last_ns) <= self.ageing_ns).then_some(usize::from(e.port))
    }

    /// Whether frames of `vlan` leave port `port` tagged.
    #[inline]
    pub fn egress_tagged(&self, port: usize, vlan: u16) -> bool {
        self.untagged[usize::from(vlan) % VLANS] & (1 << port) == 0
    }

    /// Classifies a frame arriving on bridge port `port`.
    #[inline]
    pub fn classify(&self, frame: &[u8], port: usize) -> Result<Ingress, BrDrop> {
        if frame.len() < 14 {
            return Err(BrDrop::Truncated);
        }
        let et = u16::from_be_bytes([frame[12], frame[13]]);
        let (tagged, vid, pcp) = if et == 0x8100 {
            if frame.len() < 18 {
                return Err(BrDrop::Truncated);
            }
            let tci = u16::from_be_bytes([frame[14], frame[15]]);
            (true, tci & 0x0fff, (tci >> 13) as u8)
        } else {
            (false, 0, 0)
        };
        // Untagged and priority-tagged frames belong to the port's PVID
        // (802.1Q §6.9; Linux bridge "pvid").
        let vlan = if vid == 0 {
            match self.pvid.get(port) {
                Some(&v) if v != 0 => v,
                _ => return Err(BrDrop::Untagged),
            }
        } else {
            vid
        };
        if vid == 4095 || self.members[usize::from(vlan)] & (1 << port) == 0 {
            return Err(BrDrop::VlanNotAllowed);
        }
        Ok(Ingress { vlan, tagged, pcp })
    }

    /// Learns the source and decides where the frame goes.
    ///
    /// ≈ 205 ns/frame with 4 k stations measured on a 2-core machine at
    /// load 18, where flow_table/hit_100k took 335 ns against 75 ns quiet:
    /// ≈ 45 ns quiet (bench: l2lb/bridge_lookup).
    pub fn decide(&mut self, frame: &[u8], port: usize, now: u64) -> (Decision, Ingress) {
        let ing = match self.classify(frame, port) {
            Ok(i) => i,
            Err(d) => return (Decision::Drop(d), Ingress::default()),
        };
        let (dst, src) = (&frame[0..6], &frame[6..12]);
        if src[0] & 1 != 0 || src.iter().all(|b| *b == 0) {
            return (Decision::Drop(BrDrop::BadSrcMac), ing);
        }
        self.learn(ing.vlan, src, port, now);
        if dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst[5] & 0xf0 == 0 {
            return (Decision::Drop(BrDrop::LinkLocal), ing);
        }
        if dst[0] & 1 == 0 {
            let k = key(ing.vlan, dst);
            let h = mix64(k);
            if let Some(e) = self.table.get(h, &k).copied() {
                if now.saturating_sub(e.last_ns) <= self.ageing_ns {
                    let out = usize::from(e.port);
                    if out == port {
                        return (Decision::Drop(BrDrop::SamePort), ing);
                    }
                    self.stats.forwarded += 1;
                    return (Decision::Forward(out), ing);
                }
                self.table.remove(h, &k);
                self.stats.aged += 1;
            }
        }
        let mask = self.members[usize::from(ing.vlan)] & !(1 << port);
        if mask == 0 {
            return (Decision::Drop(BrDrop::NoEgress), ing);
        }
        self.stats.flooded += 1;
        (Decision::Flood(mask), ing)
    }

    fn learn(&mut self, vlan: u16, src: &[u8], port: usize, now: u64) {
        let k = key(vlan, src);
        let h = mix64(k);
        let e = Entry {
            port: port as u16,
            last_ns: now,
        };
        match self.table.get_mut(h, &k) {
            Some(old) => {
                if old.port != e.port {
                    self.stats.moved += 1;
                }
                *old = e;
            }
            None => match self.table.insert(h, k, e) {
                Ok(_) => self.stats.learned += 1,
                Err(_) => self.stats.table_full += 1,
            },
        }
    }

    /// Removes entries older than the ageing time, a few slots per call
    /// (once per batch: bounded, amortised work).
    pub fn sweep(&mut self, now: u64) {
        self.sweep_n(now, SWEEP_PER_BATCH);
    }

    /// [`Self::sweep`] over `n` slots.
    pub fn sweep_n(&mut self, now: u64, n: usize) {
        let ageing = self.ageing_ns;
        let (next, removed) = self.table.sweep(self.sweep_pos, n, |_, e| {
            now.saturating_sub(e.last_ns) > ageing
        });
        self.sweep_pos = next;
        self.stats.aged += removed as u64;
    }

    /// Sweeps the whole table.
    pub fn sweep_all(&mut self, now: u64) {
        self.sweep_n(now, self.table.slot_count());
    }

    /// Forgets every station.
    pub fn flush(&mut self) {
        self.table.clear();
    }

    /// Returns and clears the counters.
    pub fn take_stats(&mut self) -> Stats {
        std::mem::take(&mut self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_packs_vlan_and_mac() {
        assert_eq!(key(5, &[1, 2, 3, 4, 5, 6]), 0x0005_0102_0304_0506);
    }
}
