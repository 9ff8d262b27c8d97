//! Where a packet goes next, decided from its metadata and its last NF's
//! verdict. Everything read here may have been written by an untrusted NF,
//! so every index is checked and anything inconsistent becomes a counted
//! drop.

use sluice_mem::Pkt;
use sluice_nf::{DropReason, Verdict};

use crate::plan::{Hop, Plan};

/// The encoded `Verdict::Next`: routing leaves it in every packet it
/// forwards, so each NF starts from `Next` without a separate reset pass.
const NEXT: u32 = 0;

/// Most NF visits a packet may make (a guard against forwarding loops).
pub const MAX_VISITS: u16 = 64;

/// A destination for a group of packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// NF slot.
    Nf(u16),
    /// Output port.
    Port(u16),
    /// Drop under a platform or malformed reason.
    Drop(DropReason),
    /// Drop under reason `.1` local to NF `.0`.
    DropLocal(u16, u16),
}

/// Destination of a packet entering chain `chain` (hop 0).
#[inline]
pub fn first_hop(plan: &Plan, pkt: &mut Pkt<'_>, chain: u16) -> Dest {
    pkt.set_chain(chain);
    pkt.set_hop(0);
    pkt.set_visits(0);
    pkt.set_verdict_raw(NEXT);
    enter(plan, pkt, chain as usize, 0)
}

#[inline]
fn enter(plan: &Plan, pkt: &mut Pkt<'_>, chain: usize, hop: usize) -> Dest {
    match plan.chains.get(chain).and_then(|c| c.path.get(hop)) {
        Some(Hop::Nf(i)) => visit(pkt, *i),
        Some(Hop::Port(p)) => Dest::Port(*p),
        None => Dest::Drop(DropReason::INVALID_METADATA),
    }
}

#[inline]
fn visit(pkt: &mut Pkt<'_>, nf: u16) -> Dest {
    let v = pkt.visits().saturating_add(1);
    if v > MAX_VISITS {
        return Dest::Drop(DropReason::LOOP_DETECTED);
    }
    pkt.set_visits(v);
    Dest::Nf(nf)
}

/// Destination of a packet that NF `from` has just processed.
#[inline]
pub fn after_nf(plan: &Plan, pkt: &mut Pkt<'_>, from: u16) -> Dest {
    let chain = pkt.chain() as usize;
    let hop = pkt.hop() as usize;
    // Packets an NF created have no chain (NO_CHAIN): they may still be
    // sent to a port, an NF or dropped, but `Next` means nothing for them.
    let c = plan.chains.get(chain);
    let verdict = Verdict::decode(pkt.verdict_raw());
    pkt.set_verdict_raw(NEXT);
    match verdict {
        Some(Verdict::Next) => {
            if c.is_none() {
                return Dest::Drop(DropReason::INVALID_METADATA);
            }
            let next = hop + 1;
            pkt.set_hop(next as u16);
            enter(plan, pkt, chain, next)
        }
        Some(Verdict::ToNf(id)) => {
            if id.0 as usize >= plan.nfs.len() {
                return Dest::Drop(DropReason::INVALID_VERDICT);
            }
            // If the NF is further along this chain, the packet skips ahead
            // to it; otherwise it is a detour and the chain resumes after.
            if let Some(pos) = c.and_then(|c| {
                c.path
                    .iter()
                    .skip(hop + 1)
                    .position(|h| *h == Hop::Nf(id.0))
            }) {
                pkt.set_hop((hop + 1 + pos) as u16);
            }
            visit(pkt, id.0)
        }
        Some(Verdict::ToPort(p)) => match plan.ports.get(p.0 as usize) {
            Some(port) if port.kind.is_output() => Dest::Port(p.0),
            _ => Dest::Drop(DropReason::INVALID_VERDICT),
        },
        Some(Verdict::Drop(r)) => match r.as_nf_local() {
            Some(idx) => {
                let declared = plan
                    .nfs
                    .get(from as usize)
                    .map_or(0, |n| n.drop_reasons.len());
                if (idx as usize) < declared {
                    Dest::DropLocal(from, idx)
                } else {
                    Dest::Drop(DropReason::INVALID_VERDICT)
                }
            }
            None if r.name().is_some() => Dest::Drop(r),
            None => Dest::Drop(DropReason::INVALID_VERDICT),
        },
        None => Dest::Drop(DropReason::INVALID_VERDICT),
    }
}

/// Fast path for a whole batch that NF `from` returned with every verdict
/// `Next` and every packet at the same chain and hop (the common case): the
/// batch moves on as one group. Returns `None` when the batch is mixed or
/// any field is suspicious, and the caller routes packet by packet.
#[inline]
pub fn uniform_next(
    plan: &Plan,
    batch: &mut sluice_mem::HandleBatch,
    arena: &sluice_mem::Arena,
) -> Option<Dest> {
    let mut first: Option<(u16, u16)> = None;
    for i in 0..batch.len() {
        let h = batch.get_mut(i)?;
        let p = arena.pkt(h);
        if p.verdict_raw() != NEXT || !p.meta_is_sane() || p.visits() >= MAX_VISITS {
            return None;
        }
        let ch = (p.chain(), p.hop());
        match first {
            None => first = Some(ch),
            Some(f) if f == ch => {}
            Some(_) => return None,
        }
    }
    let (chain, hop) = first?;
    let next = hop as usize + 1;
    let dest = match plan.chains.get(chain as usize)?.path.get(next)? {
        Hop::Nf(i) => Dest::Nf(*i),
        Hop::Port(p) => Dest::Port(*p),
    };
    let nf_next = matches!(dest, Dest::Nf(_));
    for i in 0..batch.len() {
        let h = batch.get_mut(i)?;
        let mut p = arena.pkt(h);
        p.set_hop(next as u16);
        if nf_next {
            p.set_visits(p.visits() + 1);
        }
    }
    Some(dest)
}
