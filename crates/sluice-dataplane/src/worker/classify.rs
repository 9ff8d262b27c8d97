//! Ingress classification: a frame's flow (symmetric 5-tuple lookup) and
//! chain.

use sluice_nf::DropReason;
use sluice_packet::{parse, FlowKey, IpProtocol, ParseError};

use crate::flow_table::{FlowError, FlowTable, FLOWLESS};
use crate::plan::Plan;

/// Finds (or creates) the packet's flow and chain: `(chain, flow id, hash)`.
#[inline]
pub(super) fn classify(
    plan: &Plan,
    flows: &mut FlowTable,
    ended: &mut Vec<u32>,
    frame: &[u8],
    port: u16,
    now: u64,
) -> Result<(u16, u32, u32), DropReason> {
    let h = match parse(frame) {
        Ok(h) => h,
        Err(e) => return Err(DropReason::malformed(e)),
    };
    let key = match FlowKey::from_headers(frame, &h) {
        Ok(k) => k,
        Err(ParseError::UnsupportedEtherType) => {
            return plan
                .classify_flowless(port)
                .map(|c| (c, FLOWLESS, 0))
                .ok_or(DropReason::NO_CHAIN)
        }
        Err(e) => return Err(DropReason::malformed(e)),
    };
    let hash = key.symmetric_hash();
    let canonical = key.canonical();
    let lookup = |flows: &mut FlowTable| match flows
        .lookup_or_insert(&canonical, hash, now, || plan.classify(port, &key))
    {
        Ok(id) => Ok(id),
        Err(FlowError::NoChain) => Err(DropReason::NO_CHAIN),
        Err(FlowError::Full) => Err(DropReason::FLOW_TABLE_FULL),
    };
    let mut id = lookup(flows)?;
    if key.proto == IpProtocol::TCP.0 && !h.fragment {
        let flags = frame.get(h.l4_offset as usize + 13).copied().unwrap_or(0);
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
        if (fin || rst)
            && flows.note_tcp_flags(id, key == canonical, fin, rst, now)
            && flows.close(id)
        {
            ended.push(id);
        }
    }
    let mut chain = flows.entry(id).map_or(0, |e| e.chain);
    if plan
        .chains
        .get(chain as usize)
        .is_some_and(|c| c.from != port)
    {
        // The other direction of a flow through a bump in the wire: same
        // flow id (so the same per-flow NF state), but the chain that
        // starts at the port this packet came in on.
        chain = plan.classify(port, &key).ok_or(DropReason::NO_CHAIN)?;
    }
    Ok((chain, id, hash))
}
