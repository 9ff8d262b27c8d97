//! The sluice NF library. Each module is one NF type with its reference
//! documentation (synopsis, config keys, counters, drop reasons, example).
//! [`REGISTRY`] lists every type a spec can name.

pub mod acl;
pub mod bridge;
pub mod chaos;
pub mod conntrack;
pub mod delay;
pub mod elements;
mod expiry_bounds;
pub mod firewall;
pub mod flow_monitor;
pub mod forwarder;
pub mod graph;
pub mod ids;
pub mod load_balancer;
pub mod monitor;
pub mod nat;
mod output_file;
pub mod policer;
pub mod router;
pub mod rule_fields;
pub mod tee;
pub mod tunnel;

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
    flow_monitor::TYPE,
    tunnel::vxlan_encap::TYPE,
    tunnel::vxlan_decap::TYPE,
    tunnel::gre_encap::TYPE,
    tunnel::gre_decap::TYPE,
    elements::classifier::TYPE,
    elements::mirror::TYPE,
    elements::sampler::TYPE,
    elements::mac_swap::TYPE,
    elements::rewrite::TYPE,
    elements::ttl::TYPE,
    elements::checksum_fix::TYPE,
    elements::latency_probe::TYPE,
    elements::cycle_burner::TYPE,
    router::TYPE,
    firewall::TYPE,
    nat::TYPE,
    policer::TYPE,
    policer::shaper::TYPE,
    load_balancer::TYPE,
    bridge::TYPE,
    ids::TYPE,
];
