//! The sluice data plane: runs ports, chains and NFs, and changes them
//! while they run.
//!
//! [`runtime::Runtime`] is the long-lived data plane: it maps the shared
//! [`sluice_mem::Arena`], starts one [`worker::Worker`] thread per core
//! share (each with its own NF host, see [`host`]), and applies specs:
//! [`compile`] turns a spec into a [`plan::Plan`] (nothing below it sees
//! the spec), [`diff`] says what changed, and the workers start the new
//! NF instances and swap in the new plan between two passes. [`run()`] is
//! its foreground use: one spec, applied once, until its inputs end.

pub mod backpressure;
pub mod classes;
pub mod compile;
pub mod cpu_clock;
pub mod diff;
pub mod drops;
pub mod exclusive;
pub mod flow_table;
pub mod held;
pub mod host;
pub mod inline_nf;
pub mod latency;
mod least;
pub mod logbook;
pub mod naming;
pub mod nf_io;
pub mod nf_loop;
pub mod nf_msg;
pub mod nf_rt;
mod nf_turn;
pub mod offload;
pub mod plan;
pub mod polling;
pub mod ports;
pub mod recipe;
pub mod replicas;
pub mod report;
pub mod report_merge;
pub mod route;
pub mod run;
pub mod runtime;
pub mod sched;
pub mod selector_index;
pub mod stall;
pub mod wakeup;
pub mod worker;

pub use report::RunReport;
pub use report_merge::CpuRead;
pub use run::{run, RunOptions};
pub use runtime::{
    offer_port, port_can_move, withdraw_port, Applied, Capture, PlatformSettings, PortsPaused,
    RunError, Runtime, StateFailure,
};
