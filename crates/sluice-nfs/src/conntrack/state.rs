//! The connection-tracking table as a checkpoint: every tracked
//! connection, written by [`Conntrack::write_state`] and read back whole by
//! [`Conntrack::read_state`] into new structures that
//! [`Conntrack::install`] swaps in.
//!
//! **State version 1** (the version of the NF that embeds it, e.g. the
//! firewall's). Little-endian, fixed width; no settings (capacity,
//! timeouts, `tcp_loose`, `liberal`, `checksum` come from the config of the
//! instance restored into). Times are `CLOCK_MONOTONIC` ns, kept as they
//! are (expired entries included: they expire on their next lookup or
//! sweep, as they would have).
//!
//! | field | type | meaning |
//! |---|---|---|
//! | count | u32 | connections, then per connection, in slab order: |
//! | · zone | u16 | conntrack zone |
//! | · ip version | u8 | 4 (both addresses IPv4-mapped) or 6 |
//! | · proto | u8 | IP protocol |
//! | · src, dst | 2 × 16 × u8 | canonical key's addresses, network order |
//! | · src port, dst port | 2 × u16 | canonical key's ports (echo id for ICMP) |
//! | · state | u8 | TCP: a [`TcpState`] 1–9; other protocols: 0 |
//! | · flags | u8 | `SEEN_REPLY`, `ORIG_IS_SRC`, `ASSURED` (`LIVE` is implied) |
//! | · created, expires | 2 × u64 | creation time, idle expiry |
//! | · user | u32 | the NF's value (the firewall's accepting rule) |
//! | TCP only: | | window tracking ([`TcpTrack`]), 55 bytes: |
//! | · seen[0], seen[1] | 2 × (4 × u32, 2 × u8) | `end`, `maxend`, `maxwin`, `maxack`, `scale` ≤ 14, `flags` (`F_*`) |
//! | · last seq, ack, end | 3 × u32 | the last annotated segment |
//! | · last win | u16 | … its raw window |
//! | · last dir, index | 2 × u8 | … its direction (0, 1), packet class (0–5) |
//! | · retrans, last wscale, last flags | 3 × u8 | retransmissions, ignored SYN's shift ≤ 14 and `F_WSCALE`/`F_SACK_PERM`/`L_*` bits |
//!
//! A connection is 62 bytes, 117 with TCP. Read back, the key must be
//! canonical (a key equal to its reverse with `ORIG_IS_SRC`, as commit
//! makes it), no two connections may share a zone and key, there may be
//! no more than this instance's capacity, and every enum and bit field
//! must hold a value the tracker can produce; anything else is
//! [`StateError::Invalid`]. The hash slots, free list, expiry bounds and
//! slab positions are rebuilt from the records (connections land at
//! positions 0.. in the order written), never read.
//!
//! Not kept: the flow-id cache (flow ids are the daemon's; a restored
//! connection's first packet takes the full path, which finds it by its
//! tuple and caches it again), and the sweep's position. Neither changes
//! a verdict.

use sluice_nf::{StateError, StateReader, StateWriter};
use sluice_packet::FlowKey;
use sluice_sys::ZeroedTable;

use super::table::{Entry, Table, ASSURED, LIVE, ORIG_IS_SRC, SEEN_REPLY};
use super::tcp::{PacketClass, TcpState};
use super::tcp_window::{
    Seen, TcpTrack, F_CLOSE_INIT, F_LIBERAL, F_MAXACK, F_SACK_PERM, F_UNACKED, F_WSCALE,
    L_CHALLENGE, L_SIMOPEN,
};
use super::Conntrack;

/// Bytes of a connection without its TCP part (the least a record takes).
const ENTRY_BYTES: usize = 2 + 1 + 1 + 32 + 2 + 2 + 1 + 1 + 8 + 8 + 4;
/// Entry flags a state may carry.
const ENTRY_FLAGS: u8 = SEEN_REPLY | ORIG_IS_SRC | ASSURED;
/// [`Seen::flags`] bits.
const SEEN_FLAGS: u8 = F_WSCALE | F_SACK_PERM | F_CLOSE_INIT | F_LIBERAL | F_UNACKED | F_MAXACK;
/// [`TcpTrack::last_flags`] bits.
const LAST_FLAGS: u8 = F_WSCALE | F_SACK_PERM | L_CHALLENGE | L_SIMOPEN;
/// RFC 7323's largest window shift.
const MAX_WSCALE: u8 = 14;
const TCP: u8 = 6;

/// A decoded, validated connection table, ready for
/// [`Conntrack::install`].
pub struct Restored {
    table: Table,
    tcp: ZeroedTable<TcpTrack>,
    flow_cache: ZeroedTable<u32>,
}

fn put_seen(w: &mut StateWriter, s: &Seen) {
    w.u32(s.end);
    w.u32(s.maxend);
    w.u32(s.maxwin);
    w.u32(s.maxack);
    w.u8(s.scale);
    w.u8(s.flags);
}

fn put_tcp(w: &mut StateWriter, t: &TcpTrack) {
    put_seen(w, &t.seen[0]);
    put_seen(w, &t.seen[1]);
    w.u32(t.last_seq);
    w.u32(t.last_ack);
    w.u32(t.last_end);
    w.u16(t.last_win);
    w.u8(t.last_dir);
    w.u8(t.last_index);
    w.u8(t.retrans);
    w.u8(t.last_wscale);
    w.u8(t.last_flags);
}

/// A byte at most `max`, or a `what` error at its offset.
fn bounded(r: &mut StateReader<'_>, max: u8, what: &str) -> Result<u8, StateError> {
    let at = r.position();
    match r.u8()? {
        v if v <= max => Ok(v),
        v => Err(r.invalid_at(at, format!("{what} {v} is above {max}"))),
    }
}

/// A byte with no bit outside `allowed`.
fn bits(r: &mut StateReader<'_>, allowed: u8, what: &str) -> Result<u8, StateError> {
    let at = r.position();
    match r.u8()? {
        v if v & !allowed == 0 => Ok(v),
        v => Err(r.invalid_at(at, format!("{what} {v:#04x} has unknown bits"))),
    }
}

fn get_seen(r: &mut StateReader<'_>) -> Result<Seen, StateError> {
    Ok(Seen {
        end: r.u32()?,
        maxend: r.u32()?,
        maxwin: r.u32()?,
        maxack: r.u32()?,
        scale: bounded(r, MAX_WSCALE, "window scale")?,
        flags: bits(r, SEEN_FLAGS, "window flags")?,
    })
}

fn get_tcp(r: &mut StateReader<'_>) -> Result<TcpTrack, StateError> {
    Ok(TcpTrack {
        seen: [get_seen(r)?, get_seen(r)?],
        last_seq: r.u32()?,
        last_ack: r.u32()?,
        last_end: r.u32()?,
        last_win: r.u16()?,
        last_dir: bounded(r, 1, "last direction")?,
        last_index: bounded(r, PacketClass::None as u8, "last packet class")?,
        retrans: r.u8()?,
        last_wscale: bounded(r, MAX_WSCALE, "last window scale")?,
        last_flags: bits(r, LAST_FLAGS, "last flags")?,
    })
}

/// Whether `a` is an IPv4-mapped address (`::ffff:a.b.c.d`).
fn v4_mapped(a: &[u8; 16]) -> bool {
    a[..10] == [0; 10] && a[10..12] == [0xff, 0xff]
}

/// Reads one connection: its entry (without `LIVE`) and, for TCP, its
/// window state.
fn get_conn(r: &mut StateReader<'_>) -> Result<(Entry, Option<TcpTrack>), StateError> {
    let at = r.position();
    let zone = r.u16()?;
    let ip_version = r.u8()?;
    let proto = r.u8()?;
    let key = FlowKey {
        src: r.array::<16>()?,
        dst: r.array::<16>()?,
        src_port: r.u16()?,
        dst_port: r.u16()?,
        proto,
        ip_version,
    };
    let key_ok = match ip_version {
        4 => v4_mapped(&key.src) && v4_mapped(&key.dst),
        6 => true,
        _ => false,
    };
    if !key_ok {
        return Err(r.invalid_at(at + 2, format!("IP version {ip_version} of its addresses")));
    }
    if key != key.canonical() {
        return Err(r.invalid_at(at + 4, "key not in canonical order"));
    }
    let state_at = r.position();
    let proto_state = r.u8()?;
    let state_ok = if proto == TCP {
        proto_state != TcpState::None as u8 && TcpState::from_u8(proto_state) as u8 == proto_state
    } else {
        proto_state == 0
    };
    if !state_ok {
        return Err(r.invalid_at(
            state_at,
            format!("state {proto_state} for protocol {proto}"),
        ));
    }
    let flags_at = r.position();
    let flags = bits(r, ENTRY_FLAGS, "entry flags")?;
    if key == key.reversed() && flags & ORIG_IS_SRC == 0 {
        return Err(r.invalid_at(flags_at, "a key equal to its reverse must be ORIG_IS_SRC"));
    }
    let entry = Entry {
        key,
        zone,
        proto_state,
        flags,
        created_ns: r.u64()?,
        expires_ns: r.u64()?,
        user: r.u32()?,
    };
    let tcp = if proto == TCP {
        Some(get_tcp(r)?)
    } else {
        None
    };
    Ok((entry, tcp))
}

impl Conntrack {
    /// Writes every tracked connection (layout in the module doc).
    pub fn write_state(&self, w: &mut StateWriter) {
        w.len(self.table.len());
        for (i, e) in self.table.iter() {
            w.u16(e.zone);
            w.u8(e.key.ip_version);
            w.u8(e.key.proto);
            w.raw(&e.key.src);
            w.raw(&e.key.dst);
            w.u16(e.key.src_port);
            w.u16(e.key.dst_port);
            w.u8(e.proto_state);
            w.u8(e.flags & !LIVE);
            w.u64(e.created_ns);
            w.u64(e.expires_ns);
            w.u32(e.user);
            if e.key.proto == TCP {
                put_tcp(w, &self.tcp.get(i as usize).copied().unwrap_or_default());
            }
        }
    }

    /// Reads a table written by [`Conntrack::write_state`] from `r` into
    /// new structures sized as this tracker's, validating everything (see
    /// the module doc) and each entry's `user` with `user_ok`. Changes
    /// nothing here: [`Conntrack::install`] the result.
    pub fn read_state(
        &self,
        r: &mut StateReader<'_>,
        user_ok: impl Fn(u32) -> bool,
    ) -> Result<Restored, StateError> {
        let cap = self.table.capacity();
        let at = r.position();
        let n = r.len(ENTRY_BYTES)?;
        if n > cap {
            return Err(r.invalid_at(at, format!("{n} connections, capacity {cap}")));
        }
        let mut table = Table::new(cap, self.table.seed());
        let mut tcp = ZeroedTable::<TcpTrack>::new(self.tcp.len());
        for _ in 0..n {
            let at = r.position();
            let (entry, track) = get_conn(r)?;
            if !user_ok(entry.user) {
                return Err(r.invalid_at(
                    at + ENTRY_BYTES - 4,
                    format!("user value {} unknown to this config", entry.user),
                ));
            }
            let hash = table.hash(entry.zone, &entry.key);
            if table.find(entry.zone, &entry.key, hash).is_some() {
                return Err(r.invalid_at(at, "a second connection with the same zone and key"));
            }
            let i = table
                .insert(entry, hash)
                .ok_or_else(|| r.invalid_at(at, "table full"))?;
            if let (Some(t), Some(slot)) = (track, tcp.get_mut(i as usize)) {
                *slot = t;
            }
        }
        Ok(Restored {
            table,
            tcp,
            flow_cache: ZeroedTable::new(self.flow_cache.len()),
        })
    }

    /// Replaces every tracked connection with `restored`'s (from
    /// [`Conntrack::read_state`] on this tracker); the flow-id cache
    /// starts empty.
    pub fn install(&mut self, restored: Restored) {
        self.table = restored.table;
        self.tcp = restored.tcp;
        self.flow_cache = restored.flow_cache;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_sizes_match_the_layout() {
        assert_eq!(ENTRY_BYTES, 62);
        let mut w = StateWriter::new();
        put_tcp(&mut w, &TcpTrack::default());
        assert_eq!(w.written(), 55);
        let bytes = w.into_bytes();
        let mut r = StateReader::new(&bytes);
        assert_eq!(get_tcp(&mut r), Ok(TcpTrack::default()));
        assert_eq!(r.finish(), Ok(()));
    }
}
