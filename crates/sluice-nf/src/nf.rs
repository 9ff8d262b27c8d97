//! The NF trait and NF type descriptors.

use sluice_spec::{ConfigNode, SpecError};

use crate::batch::Batch;
use crate::context::Context;
use crate::name::NfName;
use crate::verdict::{NfId, PortId};

/// A network function. The same code runs inline (in a platform worker
/// thread) and as a process forked from the platform's template.
///
/// Contract: `process` gets a batch, sets each packet's verdict (default
/// `Next`), must not block, and should take time proportional to the batch.
/// It must never panic on packet contents: malformed packets are dropped
/// with [`Packet::drop_malformed`](crate::Packet::drop_malformed).
pub trait NetworkFunction: Send + std::any::Any {
    /// Processes one batch.
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>);

    /// Called when the platform ends flow `flow_id` (TCP close or idle
    /// timeout); per-flow state for it should be released.
    fn flow_end(&mut self, _flow_id: u32, _ctx: &mut Context<'_>) {}

    /// Called when the instance is recycled for new work (per-flow pools):
    /// all state must return to its just-built condition.
    fn reset(&mut self) {}

    /// Whether [`Self::reset`] does return every state to its just-built
    /// condition, so an instance may serve one flow after another
    /// (`steer: per_flow`). Default: no (the type is refused there).
    fn resets(&self) -> bool {
        false
    }

    /// Whether this NF takes a new config live with [`Self::reconfigure`],
    /// keeping its state: Click's live reconfiguration. Default: no, and a
    /// config change replaces the instance (its state starts afresh).
    fn live_reconfigure(&self) -> bool {
        false
    }

    /// Takes over the configuration of `fresh`, an instance of the same type
    /// built from the new config, keeping this instance's state (its
    /// connections, mappings, queues, counters) where it still applies.
    /// The platform calls it between two batches, so every packet is
    /// judged whole by the old config or by the new. Called only when
    /// [`Self::live_reconfigure`] says yes; the new config was validated by
    /// building `fresh`, so this must not fail for an instance of its own
    /// type. Gives `fresh` back if it is of another type ([`downcast`]).
    fn reconfigure(
        &mut self,
        fresh: Box<dyn NetworkFunction>,
    ) -> Result<(), Box<dyn NetworkFunction>> {
        Err(fresh)
    }

    /// The version of the layout [`Self::checkpoint`] writes, when this
    /// type can export its state (connections, mappings, counters) for
    /// `sluice checkpoint` and take it back with [`Self::restore`].
    /// Default `None`: the type keeps no state worth exporting and is
    /// refused there. Bump the version whenever the layout changes: a
    /// checkpoint of another version is refused before `restore` sees it.
    fn state_version(&self) -> Option<u16> {
        None
    }

    /// Writes this instance's state. Runs between two batches, so the
    /// state is whole; it may be read back by an instance of the same type
    /// and config in another process or daemon on the same host (times
    /// are `CLOCK_MONOTONIC` nanoseconds, which the host shares). Flow ids
    /// are the platform's flow table's: state keyed by them carries only
    /// within one daemon; state keyed by packet headers carries anywhere.
    fn checkpoint(&self, _out: &mut crate::state::StateWriter) {}

    /// Replaces this instance's state with `state`, written by
    /// [`Self::checkpoint`] of this type at this [`Self::state_version`].
    /// All or nothing: read the whole state (with
    /// [`crate::state::StateReader`], ending with `finish`) before changing
    /// anything, so on error the instance is untouched. Must never panic on
    /// any bytes. Entries this instance's config cannot hold (more than its
    /// table's capacity) are an error, not a silent cut.
    fn restore(&mut self, _state: &[u8]) -> Result<(), crate::state::StateError> {
        Err(crate::state::StateError::Unsupported)
    }

    /// Names of this instance's local drop reasons, when they depend on its
    /// config (an element graph); `None` means the type's `drop_reasons`.
    fn drop_reason_names(&self) -> Option<Vec<String>> {
        None
    }

    /// Names of this instance's counters as `(index, name)`, when they
    /// depend on its config; indices from [`sluice_mem::NF_COUNTERS`] on
    /// name extended counters. `None` means the type's `counters`.
    fn counter_names(&self) -> Option<Vec<(usize, String)>> {
        None
    }

    /// Buffers this NF needs ready for [`Context::alloc`] per call (a
    /// process NF gets a stash of this size, refilled by the platform).
    /// Default 0: the NF never allocates.
    fn alloc_reserve(&self) -> u32 {
        0
    }

    /// Opens the files and sockets this instance writes to that it did not
    /// open when it was built (a build that only checks a config must open
    /// nothing). The platform calls it once in the NF's own process before
    /// the NF's sandbox closes, after which the process can open nothing:
    /// whatever the NF needs later must be open by then. Errors are the
    /// NF's to count (as it would count a failed lazy open). Inline NFs
    /// are not sandboxed, and may be handed a first batch without it.
    fn open_handles(&mut self) {}

    /// How often [`Self::tick`] must run, if at all.
    fn tick_interval_ns(&self) -> Option<u64> {
        None
    }

    /// Runs about every [`Self::tick_interval_ns`], also when no packets
    /// arrive: timers, expiry, export, releasing held packets. Inline NFs
    /// tick from the worker's millisecond maintenance, so intervals below
    /// 1 ms are rounded up there.
    fn tick(&mut self, _ctx: &mut Context<'_>) {}

    /// Runs before the instance stops: emit every held packet. One call
    /// may emit at most `MAX_BATCH` packets, so `stop` is called again as
    /// long as the previous call emitted that many. Anything still held
    /// afterwards is reclaimed and counted as a `shutdown` drop.
    fn stop(&mut self, _ctx: &mut Context<'_>) {}
}

/// `nf` as a `T`, or `nf` back when it is another type (for
/// [`NetworkFunction::reconfigure`]).
pub fn downcast<T: NetworkFunction>(
    nf: Box<dyn NetworkFunction>,
) -> Result<Box<T>, Box<dyn NetworkFunction>> {
    if (&*nf as &dyn std::any::Any).is::<T>() {
        let any: Box<dyn std::any::Any> = nf;
        Ok(any.downcast::<T>().expect("checked just above"))
    } else {
        Err(nf)
    }
}

/// What the platform tells an NF under construction about where it will
/// run: names it may refer to, resolved to indices, and how many copies
/// of it run.
pub trait Resolver {
    /// The NF instance named `name`.
    fn nf(&self, name: &str) -> Option<NfId>;
    /// The port named `name` as a verdict target (`ToPort`): ports that
    /// can transmit only.
    fn port(&self, name: &str) -> Option<PortId>;
    /// The port named `name` as packets come in through it, for matching
    /// [`Packet::port_in`](crate::Packet::port_in) (a firewall zone, an
    /// `in_port` rule): ports that can receive only, so a generator or a
    /// `pcap_in` resolves but a sink does not. Indices are those of
    /// [`Resolver::port`] for ports that do both.
    fn input_port(&self, name: &str) -> Option<PortId>;
    /// The ports packets reach this NF from as far as the spec's chains
    /// tell (the `from` of every chain whose path passes it), each with
    /// whether it can transmit: an NF that answers a packet out of the
    /// port it came in through (`ToPort(port_in)`) checks here that it
    /// can. Packets another NF steers here by name (`ToNf`) may come from
    /// further ports. Empty when the platform cannot tell (the default, and
    /// test harnesses).
    fn chain_ingress(&self) -> Vec<IngressPort> {
        Vec::new()
    }
    /// How many instances of this NF run side by side, each seeing its own
    /// share of the flows (`settings.workers` × the NF's `replicas`). Only
    /// 1 against more is meant to matter: an instance kept running while
    /// its NF's `replicas` changes keeps the count it was built with. An NF whose state must span
    /// flows that may land on different workers (e.g. NAT's
    /// endpoint-independent mappings and shared port pool) refuses more
    /// than 1 with a config error.
    fn replicas(&self) -> u32 {
        1
    }
    /// How many instances of this NF ran before this one in the current
    /// run: 0 for the first, `n` for the `n`-th restart of a process NF
    /// (a crashed NF is rebuilt from its config in a fresh process). Also
    /// 0 when the platform builds an NF only to check its config (`sluice
    /// validate`, and once before every run), which is why a build must
    /// have no side effects outside the instance: an NF that writes a file
    /// opens it when it first runs, creating it in the first instance and
    /// appending to it in a restarted one (see `mirror`).
    fn restarts(&self) -> u32 {
        0
    }
}

/// A port packets reach an NF from ([`Resolver::chain_ingress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressPort {
    /// Its index (as in [`Packet::port_in`](crate::Packet::port_in)).
    pub id: PortId,
    /// Its name in the spec.
    pub name: String,
    /// Its kind (`generator`, `pcap_in`, `tap`, …).
    pub kind: &'static str,
    /// Whether packets can leave through it (`ToPort` to it is valid).
    pub can_transmit: bool,
}

/// Everything an NF constructor gets.
pub struct BuildContext<'a> {
    /// The instance name from the spec. Reading it is recorded
    /// ([`NfName`]): an NF whose build never reads it is built once for
    /// every NF of the same type and config.
    pub name: NfName<'a>,
    /// The `config` node from the spec (errors should point into it).
    pub config: &'a ConfigNode,
    /// Name resolution for verdicts that target NFs or ports.
    pub resolver: &'a dyn Resolver,
    /// Flow ids are below this (size per-flow tables by it).
    pub flow_capacity: u32,
}

/// Constructor of an NF type.
pub type BuildFn = fn(&BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError>;

/// What an NF type needs of the frames it is given.
///
/// Ports that take offloads (`offload: true`) hand sluice GSO/GRO
/// super-packets (one header, up to 64 KiB of TCP payload) and frames whose
/// TCP/UDP checksum is partial (the sender's stack left it to the NIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrameNeeds {
    /// Wire-sized frames with complete checksums (the default, right for
    /// any NF that rewrites headers, counts wire packets or reads
    /// payloads): on a chain with such an NF, the platform segments
    /// super-packets and completes partial checksums as they enter.
    #[default]
    MtuFrames,
    /// Super-packets as they are: the NF judges headers only, so one
    /// verdict per super-packet is the verdict for each of its segments
    /// (an ACL, a stateful firewall, a monitor), as netfilter does for a
    /// GSO skb. The NF must not rewrite headers nor rely on checksums.
    SuperPackets,
}

/// An NF type: its name in specs, documentation and constructor.
pub struct NfType {
    /// Name used as `type:` in specs.
    pub name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// Names of the NF-local drop reasons (index = `DropReason::nf_local(i)`).
    pub drop_reasons: &'static [&'static str],
    /// Names of the NF-specific counters (index = `Context::count(i, ..)`).
    pub counters: &'static [&'static str],
    /// Builds an instance from its config.
    pub build: BuildFn,
    /// Whether it takes super-packets (see [`FrameNeeds`]).
    pub frames: FrameNeeds,
}

impl std::fmt::Debug for NfType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NfType").field("name", &self.name).finish()
    }
}
