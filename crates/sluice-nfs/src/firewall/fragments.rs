//! The firewall's side of reassembly (`defrag.rs`): taking a batch's
//! fragments out of it, judging each completed datagram with the same
//! `decide` as any packet, and emitting the held fragments with the
//! verdict. Off the hot path: `process` comes here only for a batch that
//! had a fragment, and `tick`/`stop` for expiry and shutdown.

use sluice_nf::{Batch, Context, OwnedPacket, PortId, Verdict};
use sluice_packet::parse;

use super::defrag::{Added, Reasons};
use super::frag;
use super::reject;
use super::{counters, Counts, Decision, Firewall, CHECKSUM, DENIED, FRAGMENT, HOLD};
use super::{FRAG_DUPLICATE, FRAG_MEMORY, FRAG_OVERLAP, FRAG_TIMEOUT};

/// The drop reasons of reassembly.
pub(super) const REASONS: Reasons = Reasons {
    bad: FRAGMENT,
    overlap: FRAG_OVERLAP,
    duplicate: FRAG_DUPLICATE,
    timeout: FRAG_TIMEOUT,
    memory: FRAG_MEMORY,
};

impl Firewall {
    /// Takes the fragments `process` marked out of `batch` and queues
    /// them; judges every datagram they complete; emits what is due.
    pub(super) fn take_fragments(
        &mut self,
        batch: &mut Batch<'_>,
        c: &mut Counts,
        ctx: &mut Context<'_>,
    ) {
        let intake = &mut self.intake;
        batch.take_if(|p| p.verdict() == Verdict::Drop(HOLD), |o| intake.push(o));
        let now = ctx.now_ns();
        let mut intake = std::mem::take(&mut self.intake);
        for p in intake.drain(..) {
            self.add_fragment(p, now, c, ctx);
        }
        self.intake = intake;
        self.drain(ctx);
    }

    /// Queues fragment `p`, and judges its datagram if it completes it.
    fn add_fragment(
        &mut self,
        mut p: OwnedPacket,
        now: u64,
        c: &mut Counts,
        ctx: &mut Context<'_>,
    ) {
        let (info, port_in) = {
            let view = ctx.view(&mut p);
            let f = view.data();
            let port_in = view.port_in();
            let info = parse(f).ok().map(|h| {
                // Linux's ip_rcv checks every fragment's header checksum.
                if self.ct.verifies_checksums()
                    && h.ip_version == 4
                    && sluice_packet::verify_checksums(f, &h).is_err()
                {
                    return Err(CHECKSUM);
                }
                frag::read(f, &h, self.zone_of(port_in)).map_err(|_| FRAGMENT)
            });
            (info, port_in)
        };
        let fr = match info {
            Some(Ok(fr)) => fr,
            other => {
                let reason = match other {
                    Some(Err(r)) => r,
                    _ => FRAGMENT,
                };
                if reason == CHECKSUM {
                    c.0[counters::BAD_CHECKSUM] += 1;
                }
                self.defrag.give_up(p, Verdict::Drop(reason));
                return;
            }
        };
        match self.defrag.add(p, &fr, now, &REASONS) {
            Added::Held => {}
            Added::Dropped(p, reason) => self.defrag.give_up(p, Verdict::Drop(reason)),
            Added::Complete(qi) => self.judge(qi, port_in, now, c, ctx),
        }
    }

    /// Decides complete datagram `qi` (arrived on `port_in`) and releases
    /// its fragments with the verdict.
    fn judge(&mut self, qi: usize, port_in: u16, now: u64, c: &mut Counts, ctx: &mut Context<'_>) {
        let mut frame = std::mem::take(&mut self.reasm);
        let len = self.defrag.build(qi, ctx, &mut frame);
        let d = match len {
            None => Ok(Decision::Drop {
                reason: FRAGMENT,
                rule: None,
            }),
            // A datagram has no platform flow id of its own.
            Some(n) => frame
                .get(..n)
                .map_or(Err(sluice_packet::ParseError::EthernetTruncated), |f| {
                    parse(f).map(|h| self.decide(f, &h, port_in, u32::MAX, now))
                }),
        };
        c.0[counters::FRAG_REASSEMBLED] += 1;
        match d {
            Ok(Decision::Drop { reason, .. }) => {
                self.count_drop(reason, c);
                self.defrag.release(qi, Verdict::Drop(reason));
            }
            Err(e) => {
                let reason = sluice_nf::DropReason::malformed(e);
                self.defrag.release(qi, Verdict::Drop(reason));
            }
            Ok(Decision::Reject { reply, rule }) => {
                if let Some(r) = rule {
                    ctx.count_ext(r, 1);
                }
                let answered = len.and_then(|n| frame.get(..n)).and_then(|f| {
                    let mut first = self.defrag.take_first(qi)?;
                    let ok = {
                        let mut v = ctx.view(&mut first);
                        let room = v.raw().set_len(f.len());
                        room == f.len() && {
                            v.data_mut().copy_from_slice(f);
                            parse(f).is_ok_and(|h| reject::rewrite(&mut v, &h, reply))
                        }
                    };
                    Some((first, ok))
                });
                match answered {
                    Some((first, true)) => {
                        c.0[counters::REJECTED] += 1;
                        self.defrag.give_up(first, Verdict::ToPort(PortId(port_in)));
                        self.defrag.release(qi, Verdict::Drop(DENIED));
                    }
                    Some((first, false)) => {
                        c.0[counters::DROPPED] += 1;
                        self.defrag.give_up(first, Verdict::Drop(DENIED));
                        self.defrag.release(qi, Verdict::Drop(DENIED));
                    }
                    None => {
                        c.0[counters::DROPPED] += 1;
                        self.defrag.release(qi, Verdict::Drop(DENIED));
                    }
                }
            }
            Ok(d) => {
                if let Decision::New { rule: Some(r) } | Decision::Untracked { rule: Some(r) } = d {
                    ctx.count_ext(r, 1);
                }
                let slot = match d {
                    Decision::Established => counters::ESTABLISHED,
                    Decision::Related => counters::RELATED,
                    Decision::New { .. } => counters::NEW,
                    Decision::Untracked { .. } => counters::UNTRACKED,
                    _ => counters::ACCEPTED,
                };
                if slot != counters::ACCEPTED {
                    c.0[slot] += 1;
                }
                c.0[counters::ACCEPTED] += 1;
                self.defrag.release(qi, Verdict::Next);
            }
        }
        self.reasm = frame;
    }

    /// Emits held buffers that are due, as far as this call may.
    pub(super) fn drain(&mut self, ctx: &mut Context<'_>) {
        while let Some((p, v)) = self.defrag.next_out() {
            if let Err(p) = ctx.emit(p, v) {
                self.defrag.put_back(p, v);
                break;
            }
        }
        ctx.set_gauge(counters::FRAG_HELD, self.defrag.held() as u64);
    }

    /// Expiry of incomplete datagrams (from `tick`).
    pub(super) fn expire_fragments(&mut self, ctx: &mut Context<'_>) {
        self.defrag.expire(ctx.now_ns(), &REASONS);
        self.drain(ctx);
    }

    /// Shutdown: every held fragment is dropped as an unfinished datagram.
    pub(super) fn flush_fragments(&mut self, ctx: &mut Context<'_>) {
        self.defrag.flush(FRAGMENT);
        self.drain(ctx);
    }
}
