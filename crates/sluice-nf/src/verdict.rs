//! What an NF decides for each packet, and how that is encoded in the
//! packet's metadata so the same decision travels from an NF process back to
//! the platform.
//!
//! Encoding (32 bits): `kind << 28 | argument`. The platform decodes and
//! validates every verdict it reads back; an NF can write any bits, so an
//! unknown kind or an out-of-range argument becomes a counted drop
//! (`invalid_verdict`), never an action.

use crate::drop_reason::DropReason;

/// Index of an NF instance as resolved by the platform at build time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NfId(pub u16);

/// Index of a port as resolved by the platform at build time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortId(pub u16);

/// The fate of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Continue to the next hop of the packet's chain (the default).
    Next,
    /// Go to a specific NF next (a detour; afterwards the chain resumes).
    ToNf(NfId),
    /// Leave through a port now, skipping the rest of the chain.
    ToPort(PortId),
    /// Drop, counted under a reason.
    Drop(DropReason),
}

const KIND_NEXT: u32 = 0;
const KIND_NF: u32 = 1;
const KIND_PORT: u32 = 2;
const KIND_DROP: u32 = 3;
const ARG_MASK: u32 = 0x0fff_ffff;

impl Verdict {
    /// Encodes the verdict for the packet metadata.
    #[inline]
    pub fn encode(self) -> u32 {
        match self {
            Verdict::Next => KIND_NEXT << 28,
            Verdict::ToNf(NfId(i)) => KIND_NF << 28 | i as u32,
            Verdict::ToPort(PortId(p)) => KIND_PORT << 28 | p as u32,
            Verdict::Drop(r) => KIND_DROP << 28 | r.code() as u32,
        }
    }

    /// Decodes metadata bits; `None` for bits no valid verdict produces.
    #[inline]
    pub fn decode(raw: u32) -> Option<Verdict> {
        let arg = raw & ARG_MASK;
        let small = u16::try_from(arg).ok();
        match raw >> 28 {
            KIND_NEXT if arg == 0 => Some(Verdict::Next),
            KIND_NF => small.map(|i| Verdict::ToNf(NfId(i))),
            KIND_PORT => small.map(|p| Verdict::ToPort(PortId(p))),
            KIND_DROP => small.map(|c| Verdict::Drop(DropReason::from_code(c))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verdict_round_trips() {
        for v in [
            Verdict::Next,
            Verdict::ToNf(NfId(0)),
            Verdict::ToNf(NfId(u16::MAX)),
            Verdict::ToPort(PortId(7)),
            Verdict::Drop(DropReason::NO_CHAIN),
            Verdict::Drop(DropReason::nf_local(5)),
        ] {
            assert_eq!(Verdict::decode(v.encode()), Some(v));
        }
    }

    #[test]
    fn garbage_bits_do_not_decode() {
        assert_eq!(Verdict::decode(0xf000_0000), None);
        assert_eq!(Verdict::decode(KIND_NF << 28 | 0x1_0000), None);
        assert_eq!(Verdict::decode(7), None);
    }
}
