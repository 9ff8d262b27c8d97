//! The `load_balancer` NF's checkpoint: its tracked connections.
//!
//! **State version 1.** Little-endian, fixed width, no config: a state is
//! restored into an instance built from the same config (service, mode,
//! backends, table sizes). The Maglev table and the backends' up/down marks
//! derive from the config and are not kept. Times are `CLOCK_MONOTONIC` ns,
//! kept as they are.
//!
//! | field | type | meaning |
//! |---|---|---|
//! | connections | u32 | count, then per connection (53 bytes): |
//! | · client src, dst | 2 × 16 bytes | addresses (IPv4-mapped for IPv4); dst is the VIP |
//! | · client src port, dst port | 2 × u16 | |
//! | · proto, ip version | 2 × u8 | 6 or 17; 4 or 6 |
//! | · backend | u16 | index into the config's backends |
//! | · flow id | u32 | the platform flow id that opened it (ends it at its flow end; meaningful within one daemon only) |
//! | · last | u64 | time of its last packet (idle expiry) |
//! | · flags | u8 | bit 0: the NAT reply table maps the backend's reply tuple to it (another connection may have taken that tuple) |
//!
//! Restore decodes every connection into new tables (connection slab, free
//! list, client and reply indexes), swapping them in only when the whole
//! state holds: otherwise the instance is untouched. A backend index the
//! config does not have, a tuple this service does not serve, two
//! connections with one client tuple or claiming one reply tuple, a reply
//! flag in DSR mode, unknown flag bits, more connections than
//! `max_connections`: each is [`StateError::Invalid`]. Not kept: the
//! per-flow-id cache (found again by tuple), the counters and the sweep's
//! position (restored connections fill the first slots, the sweep starts
//! at slot 0).

use sluice_nf::{StateError, StateReader, StateWriter};
use sluice_packet::FlowKey;

use super::balancer::{Balancer, Conn, Mode, EMPTY};
use super::maglev::NONE;
use crate::bridge::table::FixedTable;

/// Layout version (see the module doc).
pub(super) const VERSION: u16 = 1;

const CONN_BYTES: usize = 16 + 16 + 2 + 2 + 1 + 1 + 2 + 4 + 8 + 1;
/// Flag: the reply table names this connection.
const OWNS_REPLY: u8 = 1;
/// The IPv4-mapped prefix of an IPv4 address in a `FlowKey`.
const V4_MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

impl Balancer {
    /// Writes the tracked connections (layout in the module doc).
    pub(super) fn write_state(&self, w: &mut StateWriter) {
        let live: Vec<(usize, &Conn)> = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.live)
            .collect();
        w.len(live.len());
        for (i, c) in live {
            let k = &c.client;
            w.raw(&k.src);
            w.raw(&k.dst);
            w.u16(k.src_port);
            w.u16(k.dst_port);
            w.u8(k.proto);
            w.u8(k.ip_version);
            w.u16(c.backend);
            w.u32(c.flow_id);
            w.u64(c.last_ns);
            let owns = self.mode == Mode::Nat && {
                let r = self.reply_key(k, c.backend);
                self.by_reply.get(self.hkey(&r), &r) == Some(&(i as u32))
            };
            w.u8(if owns { OWNS_REPLY } else { 0 });
        }
    }

    /// Replaces the tracked connections with `state`'s, all or nothing.
    pub(super) fn read_state(&mut self, state: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(state);
        let cap = self.conns.len();
        let at = r.position();
        let n = r.len(CONN_BYTES)?;
        if n > cap {
            return Err(r.invalid_at(at, format!("{n} connections, max_connections {cap}")));
        }
        let blank = Conn {
            client: FlowKey::default(),
            backend: NONE,
            live: false,
            gen: 0,
            flow_id: u32::MAX,
            last_ns: 0,
        };
        let mut conns = vec![blank; cap];
        let mut by_client = FixedTable::new(self.by_client.max_entries());
        let mut by_reply = FixedTable::new(self.by_reply.max_entries());
        for (i, slot) in conns.iter_mut().enumerate().take(n) {
            let at = r.position();
            let client = FlowKey {
                src: r.array::<16>()?,
                dst: r.array::<16>()?,
                src_port: r.u16()?,
                dst_port: r.u16()?,
                proto: r.u8()?,
                ip_version: r.u8()?,
            };
            let (backend, flow_id, last_ns, flags) = (r.u16()?, r.u32()?, r.u64()?, r.u8()?);
            let invalid = |what: String| StateError::Invalid {
                at,
                what: format!("connection {}: {what}", i),
            };
            if !self.serves(&client) || (client.ip_version == 4 && client.src[..12] != V4_MAPPED) {
                return Err(invalid("not a connection to this service".into()));
            }
            if usize::from(backend) >= self.backends.len() {
                let n = self.backends.len();
                return Err(invalid(format!("backend {backend}, the config has {n}")));
            }
            if flags & !OWNS_REPLY != 0 || (flags != 0 && self.mode != Mode::Nat) {
                return Err(invalid(format!("flags {flags:#x}")));
            }
            let h = self.hkey(&client);
            if by_client.get(h, &client).is_some() || by_client.insert(h, client, i as u32).is_err()
            {
                return Err(invalid("its client tuple is another connection's".into()));
            }
            if flags & OWNS_REPLY != 0 {
                let rk = self.reply_key(&client, backend);
                let h = self.hkey(&rk);
                if by_reply.get(h, &rk).is_some() || by_reply.insert(h, rk, i as u32).is_err() {
                    return Err(invalid("its reply tuple is another connection's".into()));
                }
            }
            *slot = Conn {
                client,
                backend,
                live: true,
                gen: 0,
                flow_id,
                last_ns,
            };
        }
        r.finish()?;

        self.conns = conns;
        self.free = (n as u32..cap as u32).rev().collect();
        self.by_client = by_client;
        self.by_reply = by_reply;
        // Cache entries name slots of the old table.
        self.cache.fill(EMPTY);
        self.sweep_pos = 0;
        Ok(())
    }
}
