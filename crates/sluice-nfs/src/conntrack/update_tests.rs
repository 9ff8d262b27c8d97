//! The ACK step against the general path.

use super::*;
use crate::conntrack::table::{LIVE, ORIG_IS_SRC};
use crate::conntrack::tcp_window::Seen;

/// xorshift64: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    /// A sequence number near `base`: equal, a few bytes off, or up to
    /// about a window off either way, so that every window check both
    /// passes and fails often.
    fn near(&mut self, base: u32) -> u32 {
        let off = match self.below(4) {
            0 => 0,
            1 => self.below(3) as i64 - 1,
            2 => self.below(200) as i64 - 100,
            _ => self.below(140_000) as i64 - 70_000,
        };
        base.wrapping_add(off as u32)
    }
    fn window(&mut self) -> u32 {
        let r = self.next() as u32;
        self.pick(&[0, 1, 100, 1000, 65_535, 70_000, 1 << 20, r])
    }
}

fn seen(r: &mut Rng, base: u32) -> Seen {
    Seen {
        end: r.near(base),
        maxend: r.near(base),
        maxwin: r.window(),
        maxack: r.near(base),
        scale: r.below(16) as u8,
        flags: r.next() as u8 & 0x3f,
    }
}

/// The ACK step updates an entry and its window state exactly as
/// `tcp_packet::packet` does (result, entry, window state), for random
/// states, segments (ACK-class mostly, retransmissions included),
/// directions, entry flags, timeouts (ESTABLISHED longer and shorter than
/// the retransmission and unacknowledged ones) and times near the
/// clock's end (saturation); and it takes a good share of them both in
/// the window and liberal.
#[test]
fn ack_step_is_tcp_packet_s() {
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let short = Timeouts {
        tcp_retrans: 400_000_000_000,
        tcp_unack: 100_000_000_000,
        ..Timeouts::default()
    };
    let shortest = Timeouts {
        tcp: [50_000_000_000; 10],
        ..Timeouts::default()
    };
    let (mut in_window, mut liberal_pass, mut general) = (0, 0, 0);
    for case in 0..300_000u32 {
        let base = r.next() as u32;
        let mut t = TcpTrack {
            seen: [seen(&mut r, base), seen(&mut r, base)],
            last_seq: r.near(base),
            last_ack: r.near(base),
            last_end: r.near(base),
            last_win: r.pick(&[0, 100, 65_535]),
            last_dir: r.below(2) as u8,
            last_index: r.below(6) as u8,
            retrans: r.below(5) as u8,
            last_wscale: r.below(15) as u8,
            last_flags: r.next() as u8,
        };
        let flags = match r.below(8) {
            0 => r.next() as u8,
            _ => ACK | (r.next() as u8 & 0xe8),
        };
        let seq = r.near(base);
        let ack = r.near(base);
        let mut s = Seg {
            seq,
            ack,
            sack: if r.below(2) == 0 { ack } else { r.near(ack) },
            end: seq.wrapping_add(r.pick(&[0, 1, 10, 1460, 70_000])),
            win: 0,
            flags,
            opts: 0,
            wscale: 0,
        };
        let reply = r.below(2) == 1;
        let any_win = r.next() as u16;
        s.win = r.pick(&[0, 1, 100, 65_535, any_win]);
        if r.below(6) == 0 {
            // The same segment again: a retransmission.
            (s.seq, s.ack, s.end, s.win) = (t.last_seq, t.last_ack, t.last_end, t.last_win);
            t.last_dir = u8::from(reply);
        }
        let now = match r.below(4) {
            0 => u64::MAX - r.below(1 << 40),
            _ => r.below(1 << 50),
        };
        let e = Entry {
            proto_state: match r.below(8) {
                0 => r.below(12) as u8,
                _ => TcpState::Established as u8,
            },
            flags: LIVE | (r.next() as u8 & (SEEN_REPLY | ORIG_IS_SRC | ASSURED)),
            expires_ns: now.saturating_add(r.below(1 << 45)),
            created_ns: 3,
            ..Entry::default()
        };
        let timeouts = r.pick(&[Timeouts::default(), short, shortest]);
        let liberal = r.below(4) == 0;
        let clock = Clock::new(now, &timeouts);
        let l4 = L4::Tcp { flags, seg: s };
        let (mut ea, mut ta, mut eb, mut tb) = (e, t, e, t);
        let ra = advance(&mut ea, &mut ta, &timeouts, liberal, 9, reply, l4, &clock);
        let rb = advance_general(&mut eb, &mut tb, &timeouts, liberal, 9, reply, l4, now);
        let what = format!("case {case}: {e:?} {t:?} {s:?} reply {reply} liberal {liberal}");
        assert_eq!(ra, rb, "{what}");
        assert_eq!(ea, eb, "{what}");
        assert_eq!(ta, tb, "{what}");
        let (mut ec, mut tc) = (e, t);
        let stepped = flags & FSRA == ACK
            && e.proto_state == TcpState::Established as u8
            && ack_step(&mut ec, &mut tc, reply, &s, liberal, &clock);
        match (
            stepped,
            liberal || t.seen[usize::from(reply)].flags & F_LIBERAL != 0,
        ) {
            (true, false) => in_window += 1,
            (true, true) => liberal_pass += 1,
            (false, _) => general += 1,
        }
    }
    // Each way taken often enough for the comparison to mean something.
    let counts = format!("{in_window} / {liberal_pass} / {general}");
    assert!(in_window > 10_000, "{counts}");
    assert!(liberal_pass > 10_000, "{counts}");
    assert!(general > 10_000, "{counts}");
    eprintln!("in window / liberal / general: {counts}");
}
