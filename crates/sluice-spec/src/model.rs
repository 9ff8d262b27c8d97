//! The spec as plain Rust values: [`Spec`] and its NFs and chains (ports and
//! settings live in their own modules).

use std::fmt;

use ipnet::IpNet;

use crate::config_node::ConfigNode;
use crate::location::{Location, SourceName};
use crate::net::{self, PortRange};
use crate::ports::PortSpec;
use crate::sandbox::Sandbox;
use crate::settings::Settings;
use crate::wakeup::WakeRule;

/// A loaded, validated spec: what `sluice run SPEC` executes.
///
/// Specs built by code should be checked with [`Spec::validate`] before use;
/// [`crate::load`] and [`crate::parse_str`] always validate.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Spec {
    /// The file the spec came from, or `"<generated>"`.
    pub source: SourceName,
    /// Platform settings (`settings:`).
    pub settings: Settings,
    /// Ports, in file order (`ports:`, at least one).
    pub ports: Vec<PortSpec>,
    /// NFs, in file order (`nfs:`).
    pub nfs: Vec<NfSpec>,
    /// Chains, in file order (`chains:`, at least one). For chains from the
    /// same port, the first whose `match` fits a packet takes it.
    pub chains: Vec<ChainSpec>,
}

/// A network function instance (`nfs[i]`).
#[derive(Clone, Debug, PartialEq)]
pub struct NfSpec {
    /// Unique name (`[a-z0-9_-]{1,32}`, unique across ports, NFs and chains).
    pub name: String,
    /// NF type (`type`), one of the types known to the caller.
    pub nf_type: String,
    /// How the NF is run (`isolation`, default `process`).
    pub isolation: Isolation,
    /// Type-specific configuration (`config`), an empty mapping if absent.
    /// Interpreted by the NF implementation with [`ConfigNode::deserialize`].
    pub config: ConfigNode,
    /// Its share of a core it shares with other process NFs (`cpu_weight`,
    /// 1..=10000, relative to the default 100); `None`: not set. Once any
    /// NF has one, every process NF is weighted (by the kernel's cpu
    /// controller and the length of its turns).
    pub cpu_weight: Option<u32>,
    /// Its own wake-up rule (`wakeup`), replacing its chains' and
    /// `settings.wakeup`; `None`: not set.
    pub wakeup: Option<WakeRule>,
    /// What it may do as a process (`sandbox`); `None`: not set, which
    /// means [`Sandbox::strict`] for process NFs.
    pub sandbox: Option<Sandbox>,
    /// The tenant that owns it (`tenant`, a name); `None`: the operator's.
    /// A daemon lets a tenant's token change only its own NFs and chains.
    pub tenant: Option<String>,
    /// Its trust domain (`domain`, a domain of `settings.domains` or
    /// `platform`); `None`: the platform's own ([`crate::PLATFORM_DOMAIN`]).
    /// A named domain needs `isolation: process` and seccomp on.
    pub domain: Option<String>,
    /// Instances of it side by side in each chain that passes it
    /// (`replicas`, 1..=[`MAX_REPLICAS`], default 1), each flow served by one of them
    /// (NetVM's load-aware steering, Flurries' NF replicas). Replica 0
    /// keeps the NF's name, the others are `NAME.1`, `NAME.2`, … (a name
    /// no spec object can take), so changing `replicas` adds or retires
    /// replicas at the end and leaves the others running.
    pub replicas: u32,
    /// How a new flow picks its replica (`steer`, default `hash`).
    pub steer: Steer,
    /// With `steer: per_class`: what makes a class (`class`).
    pub class: Option<crate::ClassBy>,
    /// With `steer: per_flow` or `per_class`: how a released instance is
    /// made new (`reset`, default `hook`).
    pub reset: ResetMode,
    /// With `steer: per_flow` or `per_class`: what a new flow gets when
    /// every replica serves one (`fallback`, default `drop`).
    pub fallback: Fallback,
    /// With `steer: per_flow`: the bounds a daemon keeps the pool in while
    /// it sizes it to the load (`pool: { min, max }`); `None`: the pool is
    /// `replicas` instances, fixed.
    pub pool: Option<PoolBounds>,
    /// Which version of the NF runs (`generation`, default 0), set by a
    /// rolling upgrade (`sluice rollout`): generation 0's instances are
    /// `NAME`, `NAME.1`, …; generation g's are `NAME@g`, `NAME@g.1`, …, so
    /// a new version runs beside the old one under names of its own.
    pub generation: u32,
    /// The previous version while its flows finish on it (`draining`,
    /// set by `sluice rollout` and cleared when it retires): it takes no
    /// new flow, and the flows it served when the rollout began stay on
    /// it until they end.
    pub draining: Option<Draining>,
    /// Where the NF was declared ([`Location::GENERATED`] if built by code).
    pub location: Location,
}

impl NfSpec {
    /// The sandbox it runs in as a process NF.
    pub fn sandbox_or_default(&self) -> Sandbox {
        self.sandbox.clone().unwrap_or_default()
    }

    /// Plan NFs it runs as: its replicas, and its draining version's
    /// during a rollout.
    pub fn instances(&self) -> u32 {
        self.replicas + self.draining.as_ref().map_or(0, |d| d.replicas)
    }

    /// An NF built by code: default isolation, empty config, generated location.
    pub fn new(name: impl Into<String>, nf_type: impl Into<String>) -> NfSpec {
        NfSpec {
            name: name.into(),
            nf_type: nf_type.into(),
            isolation: Isolation::default(),
            config: ConfigNode::empty_map(),
            cpu_weight: None,
            wakeup: None,
            sandbox: None,
            tenant: None,
            domain: None,
            replicas: 1,
            steer: Steer::default(),
            class: None,
            reset: ResetMode::default(),
            fallback: Fallback::default(),
            pool: None,
            generation: 0,
            draining: None,
            location: Location::GENERATED,
        }
    }
}

/// An NF's previous version during a rolling upgrade (`nfs[].draining`).
#[derive(Clone, Debug, PartialEq)]
pub struct Draining {
    /// Its generation (not the NF's current one).
    pub generation: u32,
    /// The config it runs.
    pub config: ConfigNode,
    /// Its replicas (1..=[`MAX_REPLICAS`]).
    pub replicas: u32,
}

/// How packets are spread over an NF's replicas. Either way every packet
/// of a flow, both directions, reaches the same replica for the flow's
/// whole life, so per-flow state stays in one place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Steer {
    /// By the flow's symmetric hash, with jump consistent hashing
    /// (`hash`): no per-flow state, and going from N to N+1 replicas moves
    /// only 1/(N+1) of the flows (to the new one).
    #[default]
    Hash,
    /// A new flow goes to the replica with the fewest packets waiting in
    /// its ring, and stays there (`shortest_queue`; NetVM's load-aware
    /// steering).
    ShortestQueue,
    /// One flow per replica (`per_flow`; Flurries' per-flow NFs): a new
    /// flow takes an idle replica of the pool (`replicas` is the pool's
    /// size), which is reset (the NF's `reset` hook) and idle again when
    /// the flow ends. With none idle, `fallback` decides.
    PerFlow,
    /// One class of flows per replica (`per_class`; Flurries' per-class
    /// NFs): as `per_flow`, with every flow of a class (`nfs[].class`:
    /// a source or destination prefix, a VLAN, a DSCP) on the class's
    /// instance, which is reset when the class's last flow ends.
    PerClass,
}

/// Most instances of one NF (`replicas`, a pool's `max`). Each is an NF
/// of its own (a slot, a process); the steering state that names them is
/// two bytes per flow and set (Flurries ran thousands of per-flow NFs).
pub const MAX_REPLICAS: u32 = 1024;

/// The bounds of a `per_flow` NF's pool (`nfs[].pool`), 1..=[`MAX_REPLICAS`] each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolBounds {
    /// Fewest instances (`min`).
    pub min: u32,
    /// Most instances (`max`).
    pub max: u32,
}

/// How a pool's instance is made new when its flow (or class) is done
/// (`nfs[].reset`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ResetMode {
    /// The type's `reset` hook, in place (`hook`): cheap, as complete as
    /// the type makes it.
    #[default]
    Hook,
    /// The process is discarded and a fresh one forked from the NF's
    /// template (`refork`): nothing of the flow survives, whatever the
    /// type; process NFs only, for any type.
    Refork,
}

spec_names!(ResetMode {
    Hook = "hook",
    Refork = "refork",
});

/// What a `per_flow` NF does with a new flow when every replica serves
/// one (`nfs[].fallback`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fallback {
    /// Drop its packets, counted as `nf_pool_exhausted` (`drop`).
    #[default]
    Drop,
    /// Share the replica serving the fewest flows (`shared`): the flow is
    /// served, without the isolation of its own instance.
    Shared,
    /// Wait, in arrival order, until an instance is free (`wait`): the
    /// worker holds the packets (a bounded queue, a bounded wait) and never
    /// blocks for them.
    Wait,
}

spec_names!(Fallback {
    Drop = "drop",
    Shared = "shared",
    Wait = "wait",
});

spec_names!(Steer {
    Hash = "hash",
    ShortestQueue = "shortest_queue",
    PerFlow = "per_flow",
    PerClass = "per_class",
});

impl Steer {
    /// Whether a replica is taken whole by a flow or a class and reset when
    /// released (`per_flow`, `per_class`): the NF is a pool.
    pub fn exclusive(self) -> bool {
        matches!(self, Steer::PerFlow | Steer::PerClass)
    }
}

impl fmt::Display for Steer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an NF is run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// In a platform worker thread (`inline`).
    Inline,
    /// In its own process, restarted per the restart policy (`process`).
    #[default]
    Process,
}

spec_names!(Isolation {
    Inline = "inline",
    Process = "process",
});

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A chain (`chains[i]`): traffic from a port, optionally selected by a
/// match, through NFs in order, to a port or into another chain.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainSpec {
    /// Unique name (`[a-z0-9_-]{1,32}`, unique across ports, NFs and chains).
    pub name: String,
    /// Input port (`from`).
    pub from: String,
    /// Traffic selector (`match`); `None` = all traffic from the port.
    pub matcher: Option<MatchSpec>,
    /// NF names, in processing order (`nfs`, may be empty).
    pub nfs: Vec<String>,
    /// Output port, or another chain whose NFs the packets continue into (`to`).
    pub to: String,
    /// The wake-up rule of its process NFs (`wakeup`), replacing
    /// `settings.wakeup`; `None`: not set.
    pub wakeup: Option<WakeRule>,
    /// The tenant that owns it (`tenant`); `None`: the operator's. Its NFs,
    /// and the chain it continues into, must be its tenant's or the
    /// operator's.
    pub tenant: Option<String>,
    /// Where the chain was declared ([`Location::GENERATED`] if built by code).
    pub location: Location,
}

impl ChainSpec {
    /// A chain built by code: no match, generated location.
    pub fn new(
        name: impl Into<String>,
        from: impl Into<String>,
        nfs: &[&str],
        to: impl Into<String>,
    ) -> ChainSpec {
        ChainSpec {
            name: name.into(),
            from: from.into(),
            matcher: None,
            nfs: nfs.iter().map(|s| s.to_string()).collect(),
            to: to.into(),
            wakeup: None,
            tenant: None,
            location: Location::GENERATED,
        }
    }
}

/// A traffic selector (`match`). Every field that is set must fit; an
/// unset field matches anything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MatchSpec {
    /// IP protocol number (`proto`: `tcp`, `udp`, `icmp`, `icmpv6` or 0..=255).
    pub proto: Option<u8>,
    /// Source prefix (`src`).
    pub src: Option<IpNet>,
    /// Destination prefix (`dst`).
    pub dst: Option<IpNet>,
    /// Source ports (`src_port`; TCP and UDP only).
    pub src_port: Option<PortRange>,
    /// Destination ports (`dst_port`; TCP and UDP only).
    pub dst_port: Option<PortRange>,
    /// IP version (`ip_version`: 4 or 6).
    pub ip_version: Option<u8>,
}

impl MatchSpec {
    /// Whether no field is set, i.e. the selector matches all traffic.
    pub fn is_match_all(&self) -> bool {
        *self == MatchSpec::default()
    }

    /// The IP version this selector implies: `ip_version`, else the family
    /// of `src`/`dst`, else 4 for `icmp` and 6 for `icmpv6`.
    pub fn implied_ip_version(&self) -> Option<u8> {
        self.ip_version
            .or_else(|| self.src.as_ref().map(net::family))
            .or_else(|| self.dst.as_ref().map(net::family))
            .or(match self.proto {
                Some(1) => Some(4),
                Some(58) => Some(6),
                _ => None,
            })
    }

    /// Whether every packet matched by `other` is also matched by `self`
    /// (so a chain with `other` after a chain with `self` on the same port
    /// would never see traffic).
    pub fn covers(&self, other: &MatchSpec) -> bool {
        fn field<T>(mine: &Option<T>, theirs: &Option<T>, covers: impl Fn(&T, &T) -> bool) -> bool {
            match (mine, theirs) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(a), Some(b)) => covers(a, b),
            }
        }
        let version_ok = match self.ip_version {
            None => true,
            Some(v) => other.implied_ip_version() == Some(v),
        };
        version_ok
            && field(&self.proto, &other.proto, |a, b| a == b)
            && field(&self.src, &other.src, |a, b| a.contains(b))
            && field(&self.dst, &other.dst, |a, b| a.contains(b))
            && field(&self.src_port, &other.src_port, PortRange::covers)
            && field(&self.dst_port, &other.dst_port, PortRange::covers)
    }
}
