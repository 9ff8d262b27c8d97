//! Where a packet goes next, decided from its metadata and its last NF's
//! verdict. Everything read here may have been written by an untrusted NF,
//! so every index is checked and anything inconsistent becomes a counted
//! drop.

use sluice_mem::Pkt;
use sluice_nf::{DropReason, Verdict};

use crate::plan::{Hop, Plan, DETOUR_VISITS};

/// The encoded `Verdict::Next`: routing leaves it in every packet it
/// forwards, so each NF starts from `Next` without a separate reset pass.
const NEXT: u32 = 0;

/// A destination for a group of packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// NF slot.
    Nf(u16),
    /// One replica of the set named by NF `.0`, which the worker picks by
    /// the packet's flow before it groups the packet.
    Set(u16),
    /// Output port.
    Port(u16),
    /// Drop under a platform or malformed reason.
    Drop(DropReason),
    /// Drop under reason `.1` local to NF `.0`.
    DropLocal(u16, u16),
}

/// Destination of a packet entering chain `chain` (hop 0 of its current
/// route; the packet carries the route's id from now on).
#[inline]
pub fn first_hop(plan: &Plan, pkt: &mut Pkt<'_>, chain: u16) -> Dest {
    let Some(route) = plan.chain(chain).map(|c| c.route) else {
        return Dest::Drop(DropReason::NO_CHAIN);
    };
    first_hop_on(plan, pkt, route)
}

/// Sends a classified packet to hop 0 of route `route` (a held route, for
/// a flow kept on it; see [`crate::held`]).
#[inline]
pub fn first_hop_on(plan: &Plan, pkt: &mut Pkt<'_>, route: u16) -> Dest {
    pkt.set_chain(route);
    pkt.set_hop(0);
    pkt.set_visits(0);
    pkt.set_verdict_raw(NEXT);
    enter(plan, pkt, route, 0)
}

#[inline]
fn enter(plan: &Plan, pkt: &mut Pkt<'_>, route: u16, hop: usize) -> Dest {
    let Some(r) = plan.route(route) else {
        return Dest::Drop(DropReason::INVALID_METADATA);
    };
    match r.path.get(hop) {
        Some(Hop::Nf(i)) => visit(pkt, *i, r.max_visits),
        Some(Hop::Set(b)) => visit(pkt, *b, r.max_visits).into_set(),
        Some(Hop::Port(p)) => Dest::Port(*p),
        None => Dest::Drop(DropReason::INVALID_METADATA),
    }
}

/// Counts a visit to NF `nf`; a packet past its route's allowance (its
/// own NFs plus [`DETOUR_VISITS`]) is in a forwarding loop.
#[inline]
fn visit(pkt: &mut Pkt<'_>, nf: u16, max_visits: u16) -> Dest {
    let v = pkt.visits().saturating_add(1);
    if v > max_visits {
        return Dest::Drop(DropReason::LOOP_DETECTED);
    }
    pkt.set_visits(v);
    Dest::Nf(nf)
}

impl Dest {
    /// `Nf(b)` as the set `b` names (a drop stays a drop).
    #[inline]
    fn into_set(self) -> Dest {
        match self {
            Dest::Nf(b) => Dest::Set(b),
            d => d,
        }
    }
}

/// Destination of a packet that NF `from` has just processed.
#[inline]
pub fn after_nf(plan: &Plan, pkt: &mut Pkt<'_>, from: u16) -> Dest {
    let route_id = pkt.chain();
    let hop = pkt.hop() as usize;
    // Packets an NF created have no route (NO_CHAIN): they may still be
    // sent to a port, an NF or dropped, but `Next` means nothing for them.
    let route = plan.route(route_id);
    let verdict = Verdict::decode(pkt.verdict_raw());
    pkt.set_verdict_raw(NEXT);
    match verdict {
        Some(Verdict::Next) => {
            if route.is_none() {
                return Dest::Drop(DropReason::INVALID_METADATA);
            }
            let next = hop + 1;
            pkt.set_hop(next as u16);
            enter(plan, pkt, route_id, next)
        }
        Some(Verdict::ToNf(id)) => {
            if plan.nf(id.0).is_none() {
                return Dest::Drop(DropReason::INVALID_VERDICT);
            }
            // If the NF is further along this route, the packet skips ahead
            // to it; otherwise it is a detour and the route resumes after.
            // An NF with replicas is named by its replica 0 and means its
            // whole set: the flow's replica serves the packet.
            let target = plan.hop_of(id.0);
            if let Some(pos) =
                route.and_then(|r| r.path.iter().skip(hop + 1).position(|h| *h == target))
            {
                pkt.set_hop((hop + 1 + pos) as u16);
            }
            let max = route.map_or(DETOUR_VISITS, |r| r.max_visits);
            match target {
                Hop::Set(b) => visit(pkt, b, max).into_set(),
                _ => visit(pkt, id.0, max),
            }
        }
        Some(Verdict::ToPort(p)) => match plan.port(p.0) {
            Some(port) if port.kind.is_output() => Dest::Port(p.0),
            _ => Dest::Drop(DropReason::INVALID_VERDICT),
        },
        Some(Verdict::Drop(r)) => match r.as_nf_local() {
            Some(idx) => {
                let declared = plan.nf(from).map_or(0, |n| n.drop_reasons.len());
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
    let mut most_visits = 0;
    for i in 0..batch.len() {
        let h = batch.get_mut(i)?;
        let p = arena.pkt(h);
        if p.verdict_raw() != NEXT || !p.meta_is_sane() {
            return None;
        }
        most_visits = most_visits.max(p.visits());
        let ch = (p.chain(), p.hop());
        match first {
            None => first = Some(ch),
            Some(f) if f == ch => {}
            Some(_) => return None,
        }
    }
    let (route_id, hop) = first?;
    let next = hop as usize + 1;
    let route = plan.route(route_id)?;
    if most_visits >= route.max_visits {
        return None;
    }
    let dest = match route.path.get(next)? {
        Hop::Nf(i) => Dest::Nf(*i),
        // The caller splits the batch over the set's members.
        Hop::Set(b) => Dest::Set(*b),
        Hop::Port(p) => Dest::Port(*p),
    };
    let nf_next = matches!(dest, Dest::Nf(_) | Dest::Set(_));
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
