//! The sluice NF library. Each module is one NF type with its reference
//! documentation (synopsis, config keys, counters, drop reasons, example).
//! [`REGISTRY`] lists every type a spec can name.

pub mod acl;
pub mod bridge;
pub mod chaos;
pub mod delay;
pub mod forwarder;
pub mod load_balancer;
pub mod monitor;
pub mod policer;
pub mod tee;

use sluice_nf::NfType;

/// Every NF type, by spec name.
pub static REGISTRY: &[NfType] = &[
    forwarder::TYPE,
    monitor::TYPE,
    acl::TYPE,
    tee::TYPE,
    delay::TYPE,
    chaos::TYPE,
    policer::TYPE,
    policer::shaper::TYPE,
    load_balancer::TYPE,
    bridge::TYPE,
];
