//! The sluice NF library. Each module is one NF type with its reference
//! documentation (synopsis, config keys, counters, drop reasons, example).
//! [`REGISTRY`] lists every type a spec can name.

pub mod acl;
pub mod chaos;
pub mod forwarder;
pub mod ids;
pub mod monitor;

use sluice_nf::NfType;

/// Every NF type, by spec name.
pub static REGISTRY: &[NfType] = &[
    forwarder::TYPE,
    monitor::TYPE,
    acl::TYPE,
    chaos::TYPE,
    ids::TYPE,
];
