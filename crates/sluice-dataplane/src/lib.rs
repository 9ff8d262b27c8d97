//! The sluice data plane: runs a spec's ports, chains and NFs.
//!
//! [`run`] compiles a spec into a [`plan::Plan`], maps the shared
//! [`sluice_mem::Arena`], forks the NF [`template::Template`] while the
//! process is still single-threaded, opens the ports, starts every process
//! NF and waits until all run (or tears everything down and reports why),
//! then drives the [`worker::Worker`] loop on the calling thread until the
//! duration ends, the inputs are exhausted or `stop` is set, drains, stops
//! the NFs, audits the buffers and returns a [`report::RunReport`].
//! With `settings.workers > 1`, [`shard`] runs that loop on several
//! pinned threads, each with its own share of the flows, its own NF
//! instances and, for process NFs, its own template.

pub mod drops;
pub mod flow_table;
pub mod nf_io;
pub mod nf_process;
pub mod nf_rt;
pub mod offload;
pub mod plan;
pub mod ports;
pub mod report;
pub mod report_merge;
pub mod route;
pub mod run;
pub mod shard;
pub mod stall;
pub mod template;
pub mod wakeup;
pub mod worker;

pub use report::RunReport;
pub use run::{run, RunError, RunOptions};
