//! The declarative spec that `sluice run SPEC` executes.
//!
//! A spec is a YAML file declaring **ports** (traffic sources and sinks),
//! **NFs** (network functions) and **chains** (which traffic from which port
//! goes through which NFs to which output). This crate loads such a file,
//! validates it completely and turns it into plain Rust structs ([`Spec`]).
//! Any problem is reported as a [`SpecError`] naming the file, the line and
//! column, and the field path, for example:
//!
//! ```text
//! examples/bad.yaml:14:9: chains[0].nfs[2]: no NF named "mon2" (defined NFs: acl, mon)
//! ```
//!
//! A spec is either accepted entirely or rejected: there is no partial result.
//!
//! NF configurations are type-specific and are kept as a located value tree
//! ([`ConfigNode`]) that the NF implementations deserialize into their own
//! types with [`ConfigNode::deserialize`]; errors found there carry the line
//! and path of the offending value too.
//!
//! The full schema is documented in `docs/spec-reference.md`.
//!
//! ```
//! let yaml = "
//! ports:
//!   - { name: gen, kind: generator, flows: 8 }
//!   - { name: out, kind: sink }
//! nfs:
//!   - { name: mon, type: monitor }
//! chains:
//!   - { name: main, from: gen, nfs: [mon], to: out }
//! ";
//! let spec = sluice_spec::parse_str(yaml, "demo.yaml", &["monitor"]).unwrap();
//! assert_eq!(spec.resolve_chain_path("main"), vec!["mon", "out"]);
//!
//! let err = sluice_spec::parse_str(yaml, "demo.yaml", &["acl"]).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "demo.yaml:6:24: nfs[0].type: unknown NF type \"monitor\" (known types: acl)"
//! );
//! ```

/// The spec names of an enum's variants, written once: generates `ALL`
/// (every variant with its name, in order: what `fields::choice` accepts
/// and lists in its errors) and `name` (a variant's name; a variant left
/// out is a compile error, as the match must be exhaustive).
macro_rules! spec_names {
    ($ty:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant with its spec name.
            pub const ALL: [(&'static str, $ty); [$($name),+].len()] =
                [$(($name, $ty::$variant)),+];

            /// The name used in specs.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }
    };
}

mod additions;
mod check;
mod classes;
mod component;
mod config_de;
mod config_node;
mod decode;
mod decode_chains;
mod decode_ports;
mod domains;
mod emit;
mod error;
mod fields;
mod file;
mod index;
mod limits;
mod load;
mod location;
mod model;
mod net;
mod path;
mod ports;
mod printable;
mod resolve;
mod sandbox;
mod scalar;
mod settings;
mod valid;
mod validate;
mod validate_chains;
mod validate_domains;
mod validate_nfs;
mod validate_tenants;
mod wakeup;
mod wakeup_resolve;
mod yaml;

pub use additions::{add, add_to, parse_additions, AddError, Refused};
pub use classes::{ClassBy, ClassField};
pub use component::Component;
pub use config_node::{ConfigEntry, ConfigNode, ConfigValue};
pub use domains::{DomainSpec, MAX_DOMAINS, PLATFORM_DOMAIN};
pub use error::SpecError;
pub use file::{read_regular_file, read_text_file, MAX_DATA_FILE_BYTES, MAX_SPEC_BYTES};
pub use index::{Grown, IndexedSpec, SpecIndex};
pub use ipnet::IpNet;
pub use load::{load, parse_str, parse_value};
pub use location::{Location, SourceName};
pub use model::{
    ChainSpec, Draining, Fallback, Isolation, MatchSpec, NfSpec, PoolBounds, ResetMode, Spec,
    Steer, MAX_REPLICAS,
};
pub use net::{proto_name, proto_number, PortRange};
pub use ports::{
    GeneratorSpec, IpVersionChoice, NicSpec, PcapInSpec, PcapOutSpec, PortKind, PortSpec, Protocol,
    SinkSpec, SizeSpec,
};
pub use resolve::{ChainIndex, ResolvedChain};
pub use sandbox::{Namespace, Sandbox, SandboxUser};
pub use settings::{
    BackpressureMode, BackpressureSettings, FlowTableSettings, InlinePanic, KernelClass,
    RestartMode, RestartPolicy, SchedulerPolicy, SchedulerSettings, Settings, WakeupSettings,
};
pub use valid::ValidSpec;
pub use wakeup::{WakeRule, WakeupPolicy};
