//! The `nat` NF's checkpoint: its dynamic mappings and live sessions.
//!
//! **State version 1.** Little-endian, fixed width, no config: a state is
//! restored into an instance built from the same config (pool, ports,
//! behaviours, timeouts, port-forwarding rules), whose rules' static
//! mappings it already has. Times are `CLOCK_MONOTONIC` ns, kept as they
//! are.
//!
//! | field | type | meaning |
//! |---|---|---|
//! | mappings | u32 | count of dynamic mappings, then per mapping (27 bytes): |
//! | · proto | u8 | 1 (ICMP query), 6 (TCP) or 17 (UDP) |
//! | · internal | u32 addr, u16 port | inside endpoint (ICMP: query id) |
//! | · key remote | u32 addr, u16 port | remote part of its key (0 under EIM, port 0 under ADM) |
//! | · external | u32 addr, u16 port | allocated pool address and port |
//! | · expires | u64 | bound of its sessions' expiries (admits inbound until then) |
//! | sessions | u32 | count of live sessions, then per session (48 bytes): |
//! | · proto | u8 | as its mapping's |
//! | · internal, remote, external | 3 × (u32 addr, u16 port) | its tuple |
//! | · mapping | u32 | its mapping's position above, `0xffff_ffff` for a port-forwarding rule's |
//! | · tcp | u8 | TCP phase bits (seen out/in, FIN out/in, RST); 0 for UDP and ICMP |
//! | · expires | u64 | when it times out |
//! | · marked | u64 | the expiry last propagated to its mapping (≥ expires) |
//! | · filter expires | u64 | its address-dependent filtering entry's expiry (0 without ADF) |
//!
//! Restore decodes everything into new tables and a new port pool —
//! indexes, slab free lists, expiry bounds and every allocated port derived
//! from the records, never read — and swaps them in only when the whole
//! state holds: otherwise the instance is untouched. A mapping outside this
//! instance's pool (or not paired with its internal address, or on a port
//! allocation cannot give), two mappings or sessions with one key, a
//! session that does not match its mapping, a mapping with no session,
//! more entries than the capacity, an unknown protocol or TCP bit: each is
//! [`StateError::Invalid`]. Not kept: the counters (the instance keeps its
//! own), the per-flow-id hints (flow ids are the daemon's; the full path
//! finds each session by its tuple and hints it again) and the sweep's
//! position.

use sluice_nf::{StateError, StateReader, StateWriter};

use super::pool::class_of;
use super::table::{MappingRec, SessionRec, NONE};
use super::translate::Nat;
use super::Endpoint;

/// Layout version (see the module doc).
pub(super) const VERSION: u16 = 1;

const MAPPING_BYTES: usize = 1 + 6 * 3 + 8;
const SESSION_BYTES: usize = 1 + 6 * 3 + 4 + 1 + 8 * 3;
/// Every TCP phase bit (`table::tcp`).
const TCP_BITS: u8 = 0x1f;

fn put_ep(w: &mut StateWriter, e: Endpoint) {
    w.u32(e.addr);
    w.u16(e.port);
}

fn get_ep(r: &mut StateReader<'_>) -> Result<Endpoint, StateError> {
    Ok(Endpoint::new(r.u32()?, r.u16()?))
}

fn get_proto(r: &mut StateReader<'_>) -> Result<u8, StateError> {
    let at = r.position();
    match r.u8()? {
        p @ (1 | 6 | 17) => Ok(p),
        p => Err(r.invalid_at(at, format!("protocol {p} is not ICMP, TCP or UDP"))),
    }
}

impl Nat {
    /// Writes the mappings and sessions (layout in the module doc).
    pub(crate) fn write_state(&self, w: &mut StateWriter) {
        let (maps, sessions) = self.tables.records();
        w.len(maps.len());
        for m in &maps {
            w.u8(m.proto);
            put_ep(w, m.internal);
            put_ep(w, m.key_remote);
            put_ep(w, m.external);
            w.u64(m.expires);
        }
        w.len(sessions.len());
        for s in &sessions {
            w.u8(s.proto);
            put_ep(w, s.internal);
            put_ep(w, s.remote);
            put_ep(w, s.external);
            w.u32(s.mapping);
            w.u8(s.tcp);
            w.u64(s.expires);
            w.u64(s.marked);
            w.u64(s.filter_expires);
        }
    }

    /// Replaces the mappings and sessions with `state`'s, all or nothing.
    pub(crate) fn read_state(&mut self, state: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(state);
        let cap = self.tables.capacity();

        let at = r.position();
        let n = r.len(MAPPING_BYTES)?;
        if n > cap {
            return Err(r.invalid_at(at, format!("{n} mappings, capacity {cap}")));
        }
        let mut maps = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.position();
            let m = MappingRec {
                proto: get_proto(&mut r)?,
                internal: get_ep(&mut r)?,
                key_remote: get_ep(&mut r)?,
                external: get_ep(&mut r)?,
                expires: r.u64()?,
            };
            maps.push((at, m));
        }

        let at = r.position();
        let n = r.len(SESSION_BYTES)?;
        if n > cap {
            return Err(r.invalid_at(at, format!("{n} sessions, capacity {cap}")));
        }
        let mut sessions = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.position();
            let s = SessionRec {
                proto: get_proto(&mut r)?,
                internal: get_ep(&mut r)?,
                remote: get_ep(&mut r)?,
                external: get_ep(&mut r)?,
                mapping: r.u32()?,
                tcp: r.u8()?,
                expires: r.u64()?,
                marked: r.u64()?,
                filter_expires: r.u64()?,
            };
            let bad = if s.mapping != NONE && s.mapping as usize >= maps.len() {
                Some(format!("mapping {} of {}", s.mapping, maps.len()))
            } else if s.tcp & !TCP_BITS != 0 || (s.proto != 6 && s.tcp != 0) {
                Some(format!("TCP phase {:#x} for protocol {}", s.tcp, s.proto))
            } else if s.marked < s.expires {
                Some("propagated expiry below its expiry".into())
            } else {
                None
            };
            if let Some(what) = bad {
                return Err(r.invalid_at(at, format!("session: {what}")));
            }
            sessions.push((at, s));
        }
        r.finish()?;

        // New tables and pool: the live ones are not touched until here.
        let mut pool = self.pool.empty_like();
        let mut tables = self.tables.empty_like(&mut pool);
        let mut slots = Vec::with_capacity(maps.len());
        for &(at, m) in &maps {
            let invalid = |what: String| StateError::Invalid {
                at,
                what: format!("mapping {}: {what}", m.external),
            };
            let pa = pool
                .index_of(m.external.addr)
                .ok_or_else(|| invalid("external address outside this instance's pool".into()))?;
            if pool.paired(m.internal.addr) != (pa, m.external.addr) {
                return Err(invalid(format!(
                    "the pool pairs internal address {} with another address",
                    std::net::Ipv4Addr::from(m.internal.addr)
                )));
            }
            if !pool.port_ok(class_of(m.proto), m.external.port) {
                return Err(invalid("port outside the configured range".into()));
            }
            let slot = tables
                .put_mapping(&m, pa, &mut pool)
                .map_err(|e| invalid(e.into()))?;
            slots.push(slot);
        }
        for &(at, s) in &sessions {
            let invalid = |what: &str| StateError::Invalid {
                at,
                what: format!("session {} → {}: {what}", s.internal, s.remote),
            };
            let m = match slots.get(s.mapping as usize) {
                Some(&m) => m,
                None => tables
                    .static_of(s.proto, s.internal)
                    .ok_or_else(|| invalid("no port-forwarding rule of this config maps it"))?,
            };
            tables.put_session(&s, m).map_err(invalid)?;
        }
        for (&slot, &(at, m)) in slots.iter().zip(&maps) {
            if tables.sessions_of(slot) == 0 {
                return Err(StateError::Invalid {
                    at,
                    what: format!("mapping {}: no session uses it", m.external),
                });
            }
        }

        tables.stats = self.tables.stats;
        self.tables = tables;
        self.pool = pool;
        // Hints name slots of the old tables.
        self.cache.fill(0);
        Ok(())
    }
}
