//! The load balancer's core, independent of the SDK's batch types: the
//! service, the backends, the Maglev table and the connection tables.

use std::net::IpAddr;

use sluice_packet::{FlowKey, Headers, IpProtocol, MacAddr, ParseError};

use super::maglev::{Maglev, NONE};
use super::nat::{self, End};
use crate::bridge::table::FixedTable;

/// How packets reach the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Destination VIP:port rewritten to the backend's address:port;
    /// replies from the backend rewritten back to VIP:port.
    Nat,
    /// Direct server return: only the destination MAC is rewritten; the
    /// backend owns the VIP and answers the client directly.
    Dsr,
}

/// One backend.
#[derive(Debug, Clone)]
pub struct Backend {
    /// Name (also hashed for its Maglev permutation).
    pub name: String,
    /// Address (same family as the VIP).
    pub addr: IpAddr,
    /// Port, or `None` to keep the client's destination port.
    pub port: Option<u16>,
    /// MAC address (required in DSR mode).
    pub mac: Option<MacAddr>,
    /// Maglev weight (≥ 1).
    pub weight: u32,
}

/// The virtual service.
#[derive(Debug, Clone)]
pub struct Service {
    /// Virtual IP.
    pub vip: IpAddr,
    /// Ports served (sorted); empty means every port.
    pub ports: Vec<u16>,
    /// Protocols served: TCP, UDP or both.
    pub tcp: bool,
    /// See `tcp`.
    pub udp: bool,
}

/// What the balancer did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A request, sent to this backend (rewritten for the mode).
    ToBackend(u16),
    /// A NAT reply, rewritten to come from the VIP.
    Reply,
    /// Not for the service: left untouched.
    Other,
    /// Every backend is down.
    NoBackend,
    /// An IP fragment for the service (ports unknown; not rebalanced).
    Fragment,
    /// The frame does not parse.
    Malformed(ParseError),
}

/// Counters of the balancer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections created.
    pub new_connections: u64,
    /// Request packets of known connections.
    pub tracked: u64,
    /// NAT replies rewritten.
    pub replies: u64,
    /// Connections moved because their backend went down.
    pub rescheduled: u64,
    /// Requests forwarded without a connection entry (table full).
    pub untracked: u64,
    /// Connections removed after `idle_timeout`.
    pub expired: u64,
    /// Packets not for the service.
    pub other: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Conn {
    pub client: FlowKey,
    pub backend: u16,
    pub live: bool,
    pub gen: u32,
    pub flow_id: u32,
    pub last_ns: u64,
}

pub(super) const EMPTY: u64 = u64::MAX;
const REPLY_BIT: u64 = 1 << 63;
const SWEEP_PER_BATCH: usize = 16;

fn key_bytes(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

fn addr_slice(ip: &IpAddr) -> ([u8; 16], usize) {
    match ip {
        IpAddr::V4(a) => {
            let mut b = [0; 16];
            b[..4].copy_from_slice(&a.octets());
            (b, 4)
        }
        IpAddr::V6(a) => (a.octets(), 16),
    }
}

/// The balancer.
pub struct Balancer {
    svc: Service,
    vip_key: [u8; 16],
    pub(super) mode: Mode,
    pub(super) backends: Vec<Backend>,
    up: Vec<bool>,
    maglev: Maglev,
    seed: u64,
    pub(super) conns: Vec<Conn>,
    pub(super) free: Vec<u32>,
    pub(super) by_client: FixedTable<FlowKey, u32>,
    pub(super) by_reply: FixedTable<FlowKey, u32>,
    /// Per flow id: `gen << 32 | conn index`, `REPLY_BIT` for the reply
    /// direction's flow (NAT), `EMPTY` if unknown.
    pub(super) cache: Vec<u64>,
    idle_ns: u64,
    pub(super) sweep_pos: usize,
    /// Counters since the last [`Balancer::take_stats`].
    pub stats: Stats,
}

impl Balancer {
    /// A balancer with every backend up. `m` is the prime Maglev table
    /// size; `max_connections` the connection table size; `flow_capacity`
    /// sizes the per-flow cache.
    pub fn new(
        svc: Service,
        mode: Mode,
        backends: Vec<Backend>,
        m: u64,
        max_connections: u32,
        flow_capacity: u32,
        idle_ns: u64,
    ) -> Balancer {
        let names: Vec<(&str, u32)> = backends
            .iter()
            .map(|b| (b.name.as_str(), b.weight))
            .collect();
        let maglev = Maglev::new(&names, m);
        let n = max_connections.max(1) as usize;
        let blank = Conn {
            client: FlowKey::default(),
            backend: NONE,
            live: false,
            gen: 0,
            flow_id: u32::MAX,
            last_ns: 0,
        };
        Balancer {
            vip_key: key_bytes(svc.vip),
            svc,
            mode,
            up: vec![true; backends.len()],
            backends,
            maglev,
            seed: 0x6c62_5f73_6565_6431,
            conns: vec![blank; n],
            free: (0..n as u32).rev().collect(),
            by_client: FixedTable::new(n),
            by_reply: FixedTable::new(if mode == Mode::Nat { n } else { 1 }),
            cache: vec![EMPTY; flow_capacity as usize],
            idle_ns,
            sweep_pos: 0,
            stats: Stats::default(),
        }
    }

    /// The backends.
    pub fn backends(&self) -> &[Backend] {
        &self.backends
    }

    /// The Maglev table.
    pub fn maglev(&self) -> &Maglev {
        &self.maglev
    }

    /// Live connections.
    pub fn connections(&self) -> usize {
        self.by_client.len()
    }

    /// The backend of the tracked connection with client tuple `k`.
    pub fn backend_of(&self, k: &FlowKey) -> Option<u16> {
        let i = *self.by_client.get(self.hkey(k), k)?;
        Some(self.conns[i as usize].backend)
    }

    /// Marks backend `i` up or down and refills the Maglev table (control
    /// path: ≈ M steps, no allocation). Connections to a backend that is
    /// still up keep it; those of a down backend move on their next packet.
    pub fn set_up(&mut self, i: usize, up: bool) {
        if let Some(u) = self.up.get_mut(i) {
            *u = up;
            self.maglev.populate(&self.up);
        }
    }

    /// Whether backend `i` is up.
    pub fn is_up(&self, i: usize) -> bool {
        self.up.get(i).copied().unwrap_or(false)
    }

    #[inline]
    pub(super) fn hkey(&self, k: &FlowKey) -> u64 {
        u64::from(k.symmetric_hash_with_seed(self.seed))
    }

    /// The Maglev hash of a client tuple (its own seed, so it is independent
    /// of where the tuple sits in the connection table).
    #[inline]
    pub fn maglev_hash(&self, k: &FlowKey) -> u64 {
        u64::from(k.symmetric_hash_with_seed(self.seed ^ 0x9e37_79b9_7f4a_7c15))
    }

    pub(super) fn serves(&self, k: &FlowKey) -> bool {
        k.dst == self.vip_key
            && k.ip_version == if self.svc.vip.is_ipv4() { 4 } else { 6 }
            && match IpProtocol(k.proto) {
                IpProtocol::TCP => self.svc.tcp,
                IpProtocol::UDP => self.svc.udp,
                _ => false,
            }
            && (self.svc.ports.is_empty() || self.svc.ports.binary_search(&k.dst_port).is_ok())
    }

    pub(super) fn reply_key(&self, c: &FlowKey, b: u16) -> FlowKey {
        let be = &self.backends[usize::from(b)];
        FlowKey {
            src: key_bytes(be.addr),
            dst: c.src,
            src_port: be.port.unwrap_or(c.dst_port),
            dst_port: c.src_port,
            proto: c.proto,
            ip_version: c.ip_version,
        }
    }

    fn cached(&self, flow_id: u32, reply: bool) -> Option<usize> {
        let v = *self.cache.get(flow_id as usize)?;
        if v == EMPTY || (v & REPLY_BIT != 0) != reply {
            return None;
        }
        let i = (v & 0xffff_ffff) as usize;
        let c = self.conns.get(i)?;
        (c.live && u64::from(c.gen) == (v >> 32) & 0x7fff_ffff).then_some(i)
    }

    fn remember(&mut self, flow_id: u32, i: usize, reply: bool) {
        let gen = u64::from(self.conns[i].gen) & 0x7fff_ffff;
        if let Some(slot) = self.cache.get_mut(flow_id as usize) {
            *slot = gen << 32 | i as u64 | if reply { REPLY_BIT } else { 0 };
        }
    }

    fn free_conn(&mut self, i: usize) {
        let c = self.conns[i];
        if !c.live {
            return;
        }
        self.by_client.remove(self.hkey(&c.client), &c.client);
        if self.mode == Mode::Nat {
            let r = self.reply_key(&c.client, c.backend);
            self.by_reply.remove(self.hkey(&r), &r);
        }
        let slot = &mut self.conns[i];
        slot.live = false;
        slot.gen = slot.gen.wrapping_add(1);
        self.free.push(i as u32);
    }

    /// Sets the backend of connection `i`, keeping the reply table in step.
    fn assign(&mut self, i: usize, b: u16) {
        let c = self.conns[i];
        if self.mode == Mode::Nat {
            if c.backend != NONE {
                let old = self.reply_key(&c.client, c.backend);
                self.by_reply.remove(self.hkey(&old), &old);
            }
            let r = self.reply_key(&c.client, b);
            // Cannot be full: it has as many slots as the connection slab.
            let _ = self.by_reply.insert(self.hkey(&r), r, i as u32);
        }
        self.conns[i].backend = b;
    }

    /// The connection for a request, created if new; `None` when the
    /// connection table is full. Returns (index, backend) or `NONE` as the
    /// backend when every backend is down.
    fn request_conn(&mut self, k: &FlowKey, flow_id: u32, now: u64) -> (Option<usize>, u16) {
        let found = self
            .cached(flow_id, false)
            .or_else(|| self.by_client.get(self.hkey(k), k).map(|i| *i as usize));
        if let Some(i) = found {
            let b = self.conns[i].backend;
            self.conns[i].last_ns = now;
            self.remember(flow_id, i, false);
            if self.is_up(usize::from(b)) {
                self.stats.tracked += 1;
                return (Some(i), b);
            }
            let nb = self.maglev.lookup(self.maglev_hash(k));
            if nb != NONE {
                self.stats.rescheduled += 1;
                self.assign(i, nb);
            }
            return (Some(i), nb);
        }
        let b = self.maglev.lookup(self.maglev_hash(k));
        if b == NONE {
            return (None, NONE);
        }
        let Some(i) = self.free.pop() else {
            self.stats.untracked += 1;
            return (None, b);
        };
        let i = i as usize;
        let gen = self.conns[i].gen;
        self.conns[i] = Conn {
            client: *k,
            backend: NONE,
            live: true,
            gen,
            flow_id,
            last_ns: now,
        };
        if self.by_client.insert(self.hkey(k), *k, i as u32).is_err() {
            // Unreachable (same size as the slab), but never panic.
            self.conns[i].live = false;
            self.free.push(i as u32);
            self.stats.untracked += 1;
            return (None, b);
        }
        self.assign(i, b);
        self.remember(flow_id, i, false);
        self.stats.new_connections += 1;
        (Some(i), b)
    }

    /// Handles one frame in place.
    ///
    /// ≈ 790 ns/packet with 100 k connections measured at load 18 (≈ 4.5×
    /// the quiet figure by the flow-table calibration): ≈ 175 ns quiet,
    /// dominated by cache misses on the per-flow cache and connection
    /// slab (bench: l2lb/lb_nat_100k).
    pub fn handle(&mut self, frame: &mut [u8], flow_id: u32, now: u64) -> Action {
        let h = match sluice_packet::parse(frame) {
            Ok(h) => h,
            Err(e) => return Action::Malformed(e),
        };
        if h.ip_version == 0 {
            self.stats.other += 1;
            return Action::Other;
        }
        let k = match FlowKey::from_headers(frame, &h) {
            Ok(k) => k,
            Err(e) => return Action::Malformed(e),
        };
        if self.serves(&k) || (h.fragment && k.dst == self.vip_key) {
            if h.fragment {
                return Action::Fragment;
            }
            let (_, b) = self.request_conn(&k, flow_id, now);
            if b == NONE {
                return Action::NoBackend;
            }
            let be = &self.backends[usize::from(b)];
            match self.mode {
                Mode::Nat => {
                    let (a, n) = addr_slice(&be.addr);
                    nat::rewrite(frame, &h, End::Dst, &a[..n], be.port.unwrap_or(k.dst_port));
                }
                Mode::Dsr => {
                    if let (Some(mac), Some(d)) = (be.mac, frame.get_mut(0..6)) {
                        d.copy_from_slice(&mac.0);
                    }
                }
            }
            return Action::ToBackend(b);
        }
        if self.mode == Mode::Nat && !self.by_reply.is_empty() && !h.fragment {
            if let Some(i) = self
                .cached(flow_id, true)
                .or_else(|| self.by_reply.get(self.hkey(&k), &k).map(|i| *i as usize))
            {
                self.remember(flow_id, i, true);
                let c = &mut self.conns[i];
                c.last_ns = now;
                let vport = c.client.dst_port;
                let (a, n) = addr_slice(&self.svc.vip);
                self.reply(frame, &h, &a[..n], vport);
                return Action::Reply;
            }
        }
        self.stats.other += 1;
        Action::Other
    }

    fn reply(&mut self, frame: &mut [u8], h: &Headers, vip: &[u8], vport: u16) {
        if nat::rewrite(frame, h, End::Src, vip, vport) {
            self.stats.replies += 1;
        }
    }

    /// Expires up to a few idle connections (called once per batch, so the
    /// cost is bounded and amortised).
    pub fn sweep(&mut self, now: u64) {
        for _ in 0..SWEEP_PER_BATCH.min(self.conns.len()) {
            let i = self.sweep_pos;
            self.sweep_pos = (i + 1) % self.conns.len();
            let c = &self.conns[i];
            if c.live && now.saturating_sub(c.last_ns) > self.idle_ns {
                self.free_conn(i);
                self.stats.expired += 1;
            }
        }
    }

    /// The platform ended flow `flow_id`: a client flow's connection goes
    /// away; a reply flow only forgets its cache entry.
    pub fn flow_end(&mut self, flow_id: u32) {
        if let Some(i) = self.cached(flow_id, false) {
            if self.conns[i].flow_id == flow_id {
                self.free_conn(i);
            }
        }
        if let Some(slot) = self.cache.get_mut(flow_id as usize) {
            *slot = EMPTY;
        }
    }

    /// Forgets every connection.
    pub fn reset(&mut self) {
        for i in 0..self.conns.len() {
            self.free_conn(i);
        }
        self.cache.fill(EMPTY);
        self.stats = Stats::default();
    }

    /// Returns and clears the counters.
    pub fn take_stats(&mut self) -> Stats {
        std::mem::take(&mut self.stats)
    }
}
