//! Why a packet was dropped. Every drop in sluice is counted under one of
//! these reasons (principle 3: every drop is counted with its reason).
//!
//! Codes: `0..64` platform reasons, `64..128` malformed packets (one per
//! [`ParseError`]), and codes with the top bit set are reasons local to the
//! NF type that returned them (declared in its [`NfType`](crate::NfType));
//! the platform reports those as `<nf name>:<reason>`.

use sluice_packet::ParseError;

/// A drop reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DropReason(u16);

const MALFORMED_BASE: u16 = 64;
const NF_LOCAL_BIT: u16 = 0x8000;

macro_rules! platform_reasons {
    ($( $(#[doc = $doc:literal])* $name:ident = $code:literal, $text:literal; )*) => {
        impl DropReason {
            $( $(#[doc = $doc])* pub const $name: DropReason = DropReason($code); )*
            /// Platform reasons with their names, for reporting.
            pub const PLATFORM: &'static [(DropReason, &'static str)] = &[ $( (DropReason($code), $text), )* ];
        }
    };
}

platform_reasons! {
    /// No chain matches the packet at its ingress port.
    NO_CHAIN = 1, "no_chain";
    /// The next NF's receive ring (or its buffer quota) was full.
    RING_FULL = 2, "ring_full";
    /// The next NF is down (crashed, restarting or stopped).
    NF_DOWN = 3, "nf_down";
    /// An NF wrote a verdict that is not valid.
    INVALID_VERDICT = 5, "invalid_verdict";
    /// An NF left packet metadata describing bytes outside the buffer.
    INVALID_METADATA = 6, "invalid_metadata";
    /// The packet visited too many NFs (a forwarding loop).
    LOOP_DETECTED = 7, "loop_detected";
    /// The NF holding the packet crashed; its buffers were reclaimed.
    NF_CRASHED = 8, "nf_crashed";
    /// The flow table is full and the packet's flow could not be added.
    FLOW_TABLE_FULL = 9, "flow_table_full";
    /// An output port failed to transmit the packet.
    PORT_TX_ERROR = 10, "port_tx_error";
    /// No free buffer was available.
    POOL_EXHAUSTED = 11, "pool_exhausted";
    /// Dropped by the platform at shutdown while still queued.
    SHUTDOWN = 12, "shutdown";
    /// An NF gave up a packet it had taken out of a batch.
    DISCARDED = 13, "nf_discarded";
    /// An apply removed or replaced the NF while it still held the packet
    /// (the platform drains an NF before it removes it; this counts what
    /// a drain that timed out left behind).
    NF_REMOVED = 14, "nf_removed";
    /// Dropped at its chain's entry, before any NF worked on it, because
    /// an NF of the chain could not keep up (`settings.backpressure`).
    BACKPRESSURE = 15, "backpressure";
    /// The packet was bound for an NF of another trust domain, which had
    /// no free buffer to copy it into (`settings.domains`); packets wait
    /// upstream for one where the entry policy holds them.
    DOMAIN_POOL_EXHAUSTED = 16, "domain_pool_exhausted";
    /// The packet was bound for an NF of a named trust domain but is a
    /// super-packet, larger than that domain's ordinary buffers.
    TOO_LARGE_FOR_DOMAIN = 17, "too_large_for_domain";
    /// The packet's flow needed an instance of a `per_flow` NF, every
    /// instance served a flow, and its `fallback` is `drop`.
    NF_POOL_EXHAUSTED = 18, "nf_pool_exhausted";
}

impl DropReason {
    /// Reason for a packet that failed to parse.
    pub fn malformed(e: ParseError) -> DropReason {
        DropReason(MALFORMED_BASE + e as u16)
    }

    /// Reason `index` from the NF type's declared `drop_reasons`.
    pub const fn nf_local(index: u16) -> DropReason {
        DropReason(NF_LOCAL_BIT | (index & !NF_LOCAL_BIT))
    }

    /// The index of an NF-local reason, if this is one.
    pub fn as_nf_local(self) -> Option<u16> {
        (self.0 & NF_LOCAL_BIT != 0).then_some(self.0 & !NF_LOCAL_BIT)
    }

    /// The raw code.
    pub fn code(self) -> u16 {
        self.0
    }

    /// Rebuilds a reason from a raw code (no validation: see [`Self::name`]).
    pub fn from_code(code: u16) -> DropReason {
        DropReason(code)
    }

    /// The reporting name of a platform or malformed reason; `None` for
    /// NF-local reasons (they need the NF's table) and unknown codes.
    pub fn name(self) -> Option<String> {
        if let Some((_, n)) = Self::PLATFORM.iter().find(|(r, _)| *r == self) {
            return Some((*n).to_string());
        }
        let idx = self.0.checked_sub(MALFORMED_BASE)?;
        ParseError::ALL
            .iter()
            .find(|e| **e as u16 == idx)
            .map(|e| format!("malformed:{}", e.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_stable() {
        let mut names: Vec<String> = DropReason::PLATFORM
            .iter()
            .map(|(r, _)| r.name().unwrap())
            .collect();
        names.extend(
            ParseError::ALL
                .iter()
                .map(|e| DropReason::malformed(*e).name().unwrap()),
        );
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(
            ParseError::ALL.len() < 64,
            "malformed codes must stay below the NF-local range"
        );
        assert_eq!(DropReason::NO_CHAIN.name().as_deref(), Some("no_chain"));
        assert_eq!(DropReason::nf_local(3).as_nf_local(), Some(3));
        assert_eq!(DropReason::nf_local(3).name(), None);
    }
}
