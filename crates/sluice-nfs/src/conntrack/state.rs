//! The connection table as a checkpoint (`NetworkFunction::checkpoint` of
//! the NFs that track connections, e.g. the firewall): every live
//! connection with its TCP window tracking, so a restored tracker judges
//! the connection's next packets exactly as the original would.
//!
//! Layout (little-endian; see `sluice_nf::state`): a count, then per
//! connection
//!
//! | field | bytes | |
//! |---|---|---|
//! | key | 38 | src (16), dst (16), src port, dst port, proto, IP version (canonical order) |
//! | zone | 2 | |
//! | proto_state | 1 | a `TcpState` for TCP, 0 otherwise |
//! | flags | 1 | `SEEN_REPLY`, `ORIG_IS_SRC`, `ASSURED` (`LIVE` implied) |
//! | expires_ns, created_ns | 8 + 8 | `CLOCK_MONOTONIC`, as the host keeps it |
//! | user | 4 | the NF's own (the firewall: the rule that accepted it) |
//! | TCP only: two directions × (end, maxend, maxwin, maxack u32; scale, flags u8), last seq, ack, end u32, last win u16, last dir, class, retrans, wscale, flags u8 | 59 | |
//!
//! Restoring builds a new table and TCP table of this tracker's capacity
//! from the bytes (hashes and probe sequences are recomputed, never read)
//! and swaps them in only when every connection has been read and checked;
//! the flow-id cache starts empty (flow ids are a daemon's), so each
//! connection is found by its tuple on its first packet.

use sluice_nf::{StateError, StateReader, StateWriter};
use sluice_packet::FlowKey;

use super::table::{Entry, Table, ASSURED, LIVE, ORIG_IS_SRC, SEEN_REPLY};
use super::tcp_window::{Seen, TcpTrack};
use super::{Conntrack, TcpState, TABLE_SEED};

/// The layout above.
pub const STATE_VERSION: u16 = 1;

const TCP: u8 = 6;
const KNOWN_FLAGS: u8 = LIVE | SEEN_REPLY | ORIG_IS_SRC | ASSURED;
/// Bytes of a connection without TCP tracking.
const MIN_ITEM: usize = 38 + 2 + 1 + 1 + 8 + 8 + 4;

/// A table read from a state, ready to replace the live one.
pub struct Restored {
    table: Table,
    tcp: sluice_sys::ZeroedTable<TcpTrack>,
}

fn write_seen(out: &mut StateWriter, s: &Seen) {
    out.u32(s.end);
    out.u32(s.maxend);
    out.u32(s.maxwin);
    out.u32(s.maxack);
    out.u8(s.scale);
    out.u8(s.flags);
}

fn read_seen(r: &mut StateReader<'_>) -> Result<Seen, StateError> {
    Ok(Seen {
        end: r.u32()?,
        maxend: r.u32()?,
        maxwin: r.u32()?,
        maxack: r.u32()?,
        scale: r.u8()?,
        flags: r.u8()?,
    })
}

fn read_key(r: &mut StateReader<'_>) -> Result<FlowKey, StateError> {
    let at = r.position();
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    for b in src.iter_mut().chain(dst.iter_mut()) {
        *b = r.u8()?;
    }
    let key = FlowKey {
        src,
        dst,
        src_port: r.u16()?,
        dst_port: r.u16()?,
        proto: r.u8()?,
        ip_version: r.u8()?,
    };
    if !matches!(key.ip_version, 4 | 6) {
        return Err(r.invalid_at(at, format!("IP version {}", key.ip_version)));
    }
    if key != key.canonical() {
        return Err(r.invalid_at(at, "a connection key not in canonical order"));
    }
    Ok(key)
}

impl Conntrack {
    /// Writes every live connection.
    pub fn write_state(&self, out: &mut StateWriter) {
        out.len(self.table.len());
        for (i, e) in self.table.iter() {
            let k = &e.key;
            for &b in k.src.iter().chain(k.dst.iter()) {
                out.u8(b);
            }
            out.u16(k.src_port);
            out.u16(k.dst_port);
            out.u8(k.proto);
            out.u8(k.ip_version);
            out.u16(e.zone);
            out.u8(e.proto_state);
            out.u8(e.flags);
            out.u64(e.expires_ns);
            out.u64(e.created_ns);
            out.u32(e.user);
            if k.proto == TCP {
                let t = &self.tcp[i as usize];
                write_seen(out, &t.seen[0]);
                write_seen(out, &t.seen[1]);
                out.u32(t.last_seq);
                out.u32(t.last_ack);
                out.u32(t.last_end);
                out.u16(t.last_win);
                out.u8(t.last_dir);
                out.u8(t.last_index);
                out.u8(t.retrans);
                out.u8(t.last_wscale);
                out.u8(t.last_flags);
            }
        }
    }

    /// Reads a state written by [`Self::write_state`] into tables of this
    /// tracker's capacity, checking every connection; `r` is left after it.
    pub fn read_state(&self, r: &mut StateReader<'_>) -> Result<Restored, StateError> {
        let capacity = self.table.capacity();
        let at = r.position();
        let n = r.len(MIN_ITEM)?;
        if n > capacity {
            return Err(r.invalid_at(
                at,
                format!("{n} connections, more than this tracker's capacity of {capacity}"),
            ));
        }
        let mut table = Table::new(capacity, TABLE_SEED);
        let mut tcp = sluice_sys::ZeroedTable::<TcpTrack>::new(capacity);
        for _ in 0..n {
            let at = r.position();
            let key = read_key(r)?;
            let zone = r.u16()?;
            let proto_state = r.u8()?;
            let flags = r.u8()?;
            let e = Entry {
                key,
                zone,
                proto_state,
                flags,
                expires_ns: r.u64()?,
                created_ns: r.u64()?,
                user: r.u32()?,
            };
            if flags & !KNOWN_FLAGS != 0 || flags & LIVE == 0 {
                return Err(r.invalid_at(at, format!("connection flags {flags:#04x}")));
            }
            let track = if key.proto == TCP {
                if TcpState::ALL.get(usize::from(proto_state)).is_none() {
                    return Err(r.invalid_at(at, format!("TCP state {proto_state}")));
                }
                let t = TcpTrack {
                    seen: [read_seen(r)?, read_seen(r)?],
                    last_seq: r.u32()?,
                    last_ack: r.u32()?,
                    last_end: r.u32()?,
                    last_win: r.u16()?,
                    last_dir: r.u8()?,
                    last_index: r.u8()?,
                    retrans: r.u8()?,
                    last_wscale: r.u8()?,
                    last_flags: r.u8()?,
                };
                if t.last_dir > 1 {
                    return Err(r.invalid_at(at, format!("TCP direction {}", t.last_dir)));
                }
                Some(t)
            } else {
                if proto_state != 0 {
                    return Err(
                        r.invalid_at(at, "a protocol state on a connection that is not TCP")
                    );
                }
                None
            };
            let hash = table.hash(zone, &key);
            if table.find(zone, &key, hash).is_some() {
                return Err(r.invalid_at(at, "the same connection twice"));
            }
            let idx = table
                .insert(e, hash)
                .ok_or_else(|| r.invalid_at(at, "more connections than the capacity"))?;
            if let Some(t) = track {
                tcp[idx as usize] = t;
            }
        }
        Ok(Restored { table, tcp })
    }

    /// Replaces every tracked connection with `restored`'s.
    pub fn install_state(&mut self, restored: Restored) {
        self.table = restored.table;
        self.tcp = restored.tcp;
        self.flow_cache = sluice_sys::ZeroedTable::new(self.flow_cache.len());
    }
}
