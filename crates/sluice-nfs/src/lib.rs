//! The sluice NF library. Each module is one NF type with its reference
//! documentation (synopsis, config keys, counters, drop reasons, example).
//! [`REGISTRY`] lists every type a spec can name.

pub mod acl;
pub mod chaos;
pub mod delay;
pub mod forwarder;
pub mod graph;
pub mod ids;
pub mod monitor;
pub mod tee;

use sluice_nf::NfType;

/// Every NF type, by spec name.
pub static REGISTRY: &[NfType] = &[
    forwarder::TYPE,
    monitor::TYPE,
    acl::TYPE,
    tee::TYPE,
    delay::TYPE,
    graph::TYPE,
    chaos::TYPE,
    ids::TYPE,
];
