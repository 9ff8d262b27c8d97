//! Small Click-style element NFs, one file each, and the filter language
//! the classifier uses.

pub mod checksum_fix;
pub mod classifier;
pub mod cycle_burner;
pub mod filter;
pub mod latency_probe;
pub mod mac_swap;
pub mod mirror;
pub mod rewrite;
pub mod sampler;
pub mod ttl;
