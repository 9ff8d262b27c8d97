//! The flow table of `flow_monitor`: one slot per platform flow id, each
//! holding the flow's 5-tuple and a counter set per direction, plus a
//! dense list of the active slots so timeout scans visit only live flows.

use std::net::IpAddr;

use sluice_packet::FlowKey;

use super::ipfix::{EndReason, FlowRecord};

/// What one packet contributes to its flow.
#[derive(Debug, Clone, Copy)]
pub struct Observation {
    /// The packet's 5-tuple in its own direction.
    pub key: FlowKey,
    /// IP bytes (header and payload, no link padding).
    pub ip_bytes: u64,
    /// TCP control bits of the packet as tcpControlBits (0 for other
    /// protocols).
    pub tcp_flags: u16,
    /// When it was seen (CLOCK_MONOTONIC ns).
    pub now_ns: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Direction {
    octets: u64,
    packets: u64,
    first_ns: u64,
    last_ns: u64,
    flags: u16,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Canonical key (direction 0 is the canonical direction).
    key: FlowKey,
    dirs: [Direction; 2],
    /// Index in `active`, or `INACTIVE`.
    pos: u32,
}

const INACTIVE: u32 = u32::MAX;

impl Default for Slot {
    fn default() -> Self {
        Slot {
            key: FlowKey::default(),
            dirs: [Direction::default(); 2],
            pos: INACTIVE,
        }
    }
}

/// Timeouts in ns.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// A flow direction older than this is reported and its counters
    /// restart (the flow goes on).
    pub active_ns: u64,
    /// A flow without packets for this long ends.
    pub idle_ns: u64,
}

/// Per-flow records indexed by flow id.
pub struct FlowTable {
    slots: Vec<Slot>,
    active: Vec<u32>,
    /// ns since the Unix epoch minus CLOCK_MONOTONIC ns.
    epoch_offset_ns: u64,
}

impl FlowTable {
    /// A table for flow ids below `capacity`; `epoch_offset_ns` converts
    /// the monotonic clock to wall-clock time for the records.
    pub fn new(capacity: u32, epoch_offset_ns: u64) -> Self {
        FlowTable {
            slots: vec![Slot::default(); capacity as usize],
            active: Vec::with_capacity(capacity as usize),
            epoch_offset_ns,
        }
    }

    /// Flows with at least one packet not yet ended.
    pub fn active(&self) -> usize {
        self.active.len()
    }

    /// Adds a packet of flow `id`. If the slot holds a different flow (the
    /// platform reused the id without a flow end), that flow's records are
    /// handed to `export` first. False if `id` is beyond the table.
    #[inline]
    pub fn observe(
        &mut self,
        id: u32,
        o: &Observation,
        export: &mut impl FnMut(FlowRecord),
    ) -> bool {
        let Some(slot) = self.slots.get(id as usize) else {
            return false;
        };
        let canonical = o.key.canonical();
        if slot.pos != INACTIVE && slot.key != canonical {
            self.end(id, EndReason::ForcedEnd, export);
        }
        let slot = &mut self.slots[id as usize];
        if slot.pos == INACTIVE {
            slot.key = canonical;
            slot.dirs = [Direction::default(); 2];
            slot.pos = self.active.len() as u32;
            self.active.push(id);
        }
        let d = &mut slot.dirs[usize::from(!o.key.is_canonical())];
        if d.packets == 0 {
            d.first_ns = o.now_ns;
        }
        d.packets += 1;
        d.octets += o.ip_bytes;
        d.last_ns = d.last_ns.max(o.now_ns);
        d.flags |= o.tcp_flags;
        true
    }

    fn record(&self, key: &FlowKey, d: &Direction, reason: EndReason) -> FlowRecord {
        let ip = |b: &[u8; 16]| -> IpAddr {
            let a = std::net::Ipv6Addr::from(*b);
            match (key.ip_version, a.to_ipv4_mapped()) {
                (4, Some(v4)) => IpAddr::V4(v4),
                _ => IpAddr::V6(a),
            }
        };
        let ms = |ns: u64| ns.wrapping_add(self.epoch_offset_ns) / 1_000_000;
        FlowRecord {
            src: ip(&key.src),
            dst: ip(&key.dst),
            src_port: key.src_port,
            dst_port: key.dst_port,
            proto: key.proto,
            tcp_flags: d.flags,
            octets: d.octets,
            packets: d.packets,
            start_ms: ms(d.first_ns),
            end_ms: ms(d.last_ns),
            reason,
        }
    }

    fn emit_dirs(&self, id: u32, reason: EndReason, export: &mut impl FnMut(FlowRecord)) {
        let s = &self.slots[id as usize];
        for (i, d) in s.dirs.iter().enumerate() {
            if d.packets > 0 {
                let key = if i == 0 { s.key } else { s.key.reversed() };
                export(self.record(&key, d, reason));
            }
        }
    }

    /// Ends flow `id`: exports its records with `reason` and frees the
    /// slot. Returns whether the flow was active.
    pub fn end(&mut self, id: u32, reason: EndReason, export: &mut impl FnMut(FlowRecord)) -> bool {
        let Some(s) = self.slots.get(id as usize) else {
            return false;
        };
        if s.pos == INACTIVE {
            return false;
        }
        self.emit_dirs(id, reason, export);
        let pos = s.pos as usize;
        self.active.swap_remove(pos);
        if let Some(&moved) = self.active.get(pos) {
            self.slots[moved as usize].pos = pos as u32;
        }
        self.slots[id as usize].pos = INACTIVE;
        true
    }

    /// Applies the timeouts at `now_ns`: idle flows end, flow directions
    /// older than the active timeout are reported and restart. Returns the
    /// number of flows that ended.
    pub fn expire(
        &mut self,
        now_ns: u64,
        t: Timeouts,
        export: &mut impl FnMut(FlowRecord),
    ) -> usize {
        let mut ended = 0;
        let mut i = 0;
        while i < self.active.len() {
            let id = self.active[i];
            let s = self.slots[id as usize];
            let last = s.dirs[0].last_ns.max(s.dirs[1].last_ns);
            if now_ns.saturating_sub(last) >= t.idle_ns {
                // `end` moves the last active flow into position i.
                self.end(id, EndReason::IdleTimeout, export);
                ended += 1;
                continue;
            }
            for (k, d) in s.dirs.iter().enumerate() {
                if d.packets > 0 && now_ns.saturating_sub(d.first_ns) >= t.active_ns {
                    let key = if k == 0 { s.key } else { s.key.reversed() };
                    export(self.record(&key, d, EndReason::ActiveTimeout));
                    self.slots[id as usize].dirs[k] = Direction {
                        last_ns: d.last_ns,
                        ..Direction::default()
                    };
                }
            }
            i += 1;
        }
        ended
    }

    /// Ends every active flow with `reason`.
    pub fn end_all(&mut self, reason: EndReason, export: &mut impl FnMut(FlowRecord)) {
        while let Some(&id) = self.active.last() {
            self.end(id, reason, export);
        }
    }

    /// Forgets every flow without exporting.
    pub fn clear(&mut self) {
        for &id in &self.active {
            self.slots[id as usize].pos = INACTIVE;
        }
        self.active.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::IpProtocol;

    fn obs(sport: u16, now_ns: u64) -> Observation {
        Observation {
            key: FlowKey::new(
                "10.0.0.1".parse().unwrap(),
                "10.0.0.2".parse().unwrap(),
                sport,
                80,
                IpProtocol::TCP,
            ),
            ip_bytes: 40,
            tcp_flags: 0x02,
            now_ns,
        }
    }

    #[test]
    fn a_slot_is_two_cache_lines() {
        // docs/nfs/flow_monitor.md quotes this size.
        assert_eq!(std::mem::size_of::<Slot>(), 128);
    }

    #[test]
    fn a_reused_id_ends_the_old_flow_first() {
        let mut t = FlowTable::new(4, 0);
        let mut out = vec![];
        assert!(t.observe(1, &obs(1000, 5_000_000), &mut |r| out.push(r)));
        assert!(out.is_empty());
        assert!(t.observe(1, &obs(2000, 9_000_000), &mut |r| out.push(r)));
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].src_port, out[0].reason, out[0].start_ms),
            (1000, EndReason::ForcedEnd, 5)
        );
        assert_eq!(t.active(), 1);
        assert!(!t.observe(4, &obs(1, 0), &mut |r| out.push(r)));
    }

    #[test]
    fn ending_keeps_the_active_list_dense() {
        let mut t = FlowTable::new(8, 0);
        let mut sink = |_r: FlowRecord| {};
        for id in 0..5 {
            t.observe(id, &obs(id as u16 + 1, 0), &mut sink);
        }
        assert!(t.end(1, EndReason::EndOfFlow, &mut sink));
        assert!(!t.end(1, EndReason::EndOfFlow, &mut sink));
        assert!(t.end(4, EndReason::EndOfFlow, &mut sink));
        let mut ended = vec![];
        t.end_all(EndReason::ForcedEnd, &mut |r| ended.push(r.src_port));
        ended.sort();
        assert_eq!(ended, [1, 3, 4]);
        assert_eq!(t.active(), 0);
    }
}
