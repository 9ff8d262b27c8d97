//! Ingress classification: a frame's flow (symmetric 5-tuple lookup) and
//! chain, in two steps: [`key_frame`] reads the headers, [`classify_keyed`]
//! looks the flow up. With many flows the worker keys a whole batch and
//! prefetches its lookups in between (`ingress.rs`).

use sluice_nf::DropReason;
use sluice_packet::{parse, FlowKey, IpProtocol, ParseError};

use super::no_chain::{NoChain, WORTH_FROM_CHAINS};
use crate::flow_table::{FlowError, FlowTable, FLOWLESS};
use crate::plan::Plan;

/// What a frame's headers say about its flow, before the lookup.
#[derive(Debug, Clone, Copy)]
pub(super) enum Keyed {
    /// An IP packet with a 5-tuple.
    Flow {
        /// The key both directions share.
        canonical: FlowKey,
        /// Whether the packet travels in the canonical direction (its
        /// direction picks the chain of a new flow).
        forward: bool,
        /// Symmetric hash of the key.
        hash: u32,
        /// TCP flags of an unfragmented TCP segment.
        tcp_flags: Option<u8>,
    },
    /// No 5-tuple (ARP and other non-IP frames).
    Flowless,
    /// Malformed.
    Bad(DropReason),
}

/// Parses a frame's headers into its flow key.
#[inline]
pub(super) fn key_frame(frame: &[u8]) -> Keyed {
    let h = match parse(frame) {
        Ok(h) => h,
        Err(e) => return Keyed::Bad(DropReason::malformed(e)),
    };
    let key = match FlowKey::from_headers(frame, &h) {
        Ok(k) => k,
        Err(ParseError::UnsupportedEtherType) => return Keyed::Flowless,
        Err(e) => return Keyed::Bad(DropReason::malformed(e)),
    };
    let tcp_flags = (key.proto == IpProtocol::TCP.0 && !h.fragment)
        .then(|| frame.get(h.l4_offset as usize + 13).copied().unwrap_or(0));
    let forward = key.is_canonical();
    Keyed::Flow {
        canonical: if forward { key } else { key.reversed() },
        forward,
        hash: key.symmetric_hash(),
        tcp_flags,
    }
}

/// The first chain from `port` that takes flow `key` (as its packet
/// carries it), remembering a flow none takes so its next packets skip
/// the selectors (`no_chain.rs`; only where the port has enough chains
/// for that to pay).
#[inline]
fn chain_for(
    plan: &Plan,
    no_chain: &mut NoChain,
    port: u16,
    key: &FlowKey,
    hash: u32,
) -> Option<u16> {
    if plan.chains_from(port) < WORTH_FROM_CHAINS {
        return plan.classify(port, key);
    }
    if no_chain.knows(key, hash, port) {
        return None;
    }
    let chain = plan.classify(port, key);
    if chain.is_none() {
        no_chain.remember(key, hash, port);
    }
    chain
}

/// Finds (or creates) the flow and chain of a packet keyed by
/// [`key_frame`]: `(chain, flow id, hash)`.
#[inline]
pub(super) fn classify_keyed(
    plan: &Plan,
    flows: &mut FlowTable,
    no_chain: &mut NoChain,
    ended: &mut Vec<u32>,
    keyed: &Keyed,
    port: u16,
    now: u64,
) -> Result<(u16, u32, u32), DropReason> {
    let (canonical, forward, hash, tcp_flags) = match keyed {
        Keyed::Flow {
            canonical,
            forward,
            hash,
            tcp_flags,
        } => (canonical, *forward, *hash, *tcp_flags),
        Keyed::Flowless => {
            return plan
                .classify_flowless(port)
                .map(|c| (c, FLOWLESS, 0))
                .ok_or(DropReason::NO_CHAIN)
        }
        Keyed::Bad(reason) => return Err(*reason),
    };
    // The key as the packet carries it, for the classifier.
    let key = || {
        if forward {
            *canonical
        } else {
            canonical.reversed()
        }
    };
    let mut lookup =
        |flows: &mut FlowTable| match flows.lookup_or_insert(canonical, hash, now, || {
            chain_for(plan, no_chain, port, &key(), hash)
        }) {
            Ok(id) => Ok(id),
            Err(FlowError::NoChain) => Err(DropReason::NO_CHAIN),
            Err(FlowError::Full) => Err(DropReason::FLOW_TABLE_FULL),
        };
    let mut id = lookup(flows)?;
    if let Some(flags) = tcp_flags {
        let (fin, syn, rst, ack) = (
            flags & 0x01 != 0,
            flags & 0x02 != 0,
            flags & 0x04 != 0,
            flags & 0x10 != 0,
        );
        // A new connection on the 5-tuple of one that is closing (a FIN
        // was seen; the entry lingers like TIME_WAIT): end the old flow so
        // NFs see its end and the new connection gets a flow of its own,
        // as Linux conntrack does for a SYN in TIME_WAIT.
        if syn && !ack && flows.entry(id).is_some_and(|e| e.fins != 0) && flows.close(id) {
            ended.push(id);
            id = lookup(flows)?;
        }
        if (fin || rst) && flows.note_tcp_flags(id, forward, fin, rst, now) && flows.close(id) {
            ended.push(id);
        }
    }
    let mut chain = flows.entry(id).map_or(0, |e| e.chain);
    match plan.chain(chain) {
        Some(c) if c.from == port => {}
        Some(_) => {
            // The other direction of a flow through a bump in the wire:
            // same flow id (so the same per-flow NF state), but the chain
            // that starts at the port this packet came in on.
            chain = chain_for(plan, no_chain, port, &key(), hash).ok_or(DropReason::NO_CHAIN)?;
        }
        None => {
            // The flow's chain was removed by an apply: the flow goes
            // where a new flow would.
            chain = chain_for(plan, no_chain, port, &key(), hash).ok_or(DropReason::NO_CHAIN)?;
            flows.set_chain(id, chain);
        }
    }
    Ok((chain, id, hash))
}
