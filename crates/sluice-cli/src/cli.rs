//! Command-line syntax.

use std::path::PathBuf;

use clap::{value_parser, Args, Parser, Subcommand, ValueEnum};

use crate::args::{bench_seconds, jitter_seconds, run_seconds, Seconds, MAX_CHAIN_LENGTH};

/// sluice: a superfluid NFV platform.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// How to reach a daemon.
    #[command(flatten)]
    pub conn: crate::ctl_args::ConnArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a spec in the foreground until its inputs end, --duration
    /// passes, or SIGINT/SIGTERM.
    Run(RunArgs),
    /// Benchmarks.
    Bench(BenchArgs),
    /// Check a spec (syntax, references, NF configs) without running it.
    Validate {
        /// Spec file (YAML).
        spec: PathBuf,
    },
    /// List the NF types specs can use.
    NfTypes,
    /// Run the platform as a service: a REST API on a UNIX socket (and
    /// optionally TCP), Prometheus metrics, a web dashboard; specs arrive
    /// with `sluice apply`.
    Daemon(crate::ctl_args::DaemonArgs),
    /// Make a spec the running daemon's desired state, changing only what
    /// differs (prints what was added, changed, removed).
    Apply(crate::ctl_args::ApplyArgs),
    /// Add a file's ports, NFs and chains to a daemon's desired state,
    /// without sending the rest (a taken name is refused; nothing else
    /// changes).
    Add(crate::ctl_args::ApplyArgs),
    /// List a daemon's ports, NFs or chains.
    Get(crate::ctl_args::GetArgs),
    /// Remove a port, NF or chain from a daemon's desired state.
    Delete(crate::ctl_args::DeleteArgs),
    /// Upgrade an NF to a new config without disturbing its flows: new
    /// flows go to the new version, live ones finish on the old one, which
    /// then retires.
    Rollout(crate::ctl_args::RolloutArgs),
    /// Save an NF's state (connections, mappings, counters) to a file
    /// while it runs.
    Checkpoint(crate::ctl_args::CheckpointArgs),
    /// Replace an NF's state with a checkpoint's (all or nothing: a file
    /// that does not fit is refused and the NF is untouched).
    Restore(crate::ctl_args::RestoreArgs),
    /// Move an NF, with the chains, ports and NFs connected to it, to
    /// another daemon on this host while traffic flows (its ports must be
    /// taps; frames wait in them during the move).
    Migrate(crate::ctl_args::MigrateArgs),
    /// A daemon's NF instances: pid, CPU, state, rate, restarts.
    Ps(crate::ctl_args::ListArgs),
    /// A daemon's counters (the keys of `sluice run --json`).
    Stats(crate::ctl_args::ListArgs),
    /// What an NF wrote (and what the platform said about it).
    Logs(crate::ctl_args::LogsArgs),
    /// A live view of a daemon, refreshed every second (`q` quits).
    Top,
    /// Capture packets passing a port or an NF of a running daemon
    /// (pcapng with -w, or lines on a terminal).
    Tcpdump(crate::ctl_args::TcpdumpArgs),
    /// Run a daemon under load while NFs are killed, chains come and go
    /// and the daemon restarts; then report losses and leaks.
    Soak(SoakArgs),
}

/// `sluice soak`.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Minutes to run (more than 0, at most 1440).
    #[arg(long, default_value = "10", value_parser = soak_minutes)]
    pub minutes: Seconds,
    /// Seconds between two SIGKILLs of a random NF process (more than 0).
    #[arg(long, default_value = "1", value_parser = bench_seconds)]
    pub kill_every: Seconds,
    /// The main generator's rate, packets per second (the side chain's is
    /// a tenth).
    #[arg(long, default_value_t = 100_000, value_parser = value_parser!(u64).range(10..=100_000_000))]
    pub rate_pps: u64,
    /// Seed of the random picks (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Start NFs from shells (`settings.shells`): `on` is the default,
    /// `off` builds every instance in its own process (to compare restart
    /// times).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub shells: OnOff,
    /// Keep a standby per NF, so a restart is a take-over rather than a
    /// fork (`settings.restart.standby`): `on` is the soak's default (the
    /// platform's is off); `off` to compare. Needs `--shells on`.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub standby: OnOff,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `--minutes`, kept as a number in a [`Seconds`] (its value is minutes).
fn soak_minutes(text: &str) -> Result<Seconds, String> {
    crate::args::minutes(text)
}

/// `sluice run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Spec file (YAML).
    pub spec: PathBuf,
    /// Stop after this many seconds (more than 0, at most a year).
    #[arg(long, value_parser = run_seconds)]
    pub duration: Option<Seconds>,
    /// Print one JSON object with the summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark.
    #[command(subcommand)]
    pub which: BenchKind,
}

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchKind {
    /// N forwarder NFs in a chain between the generator and the sink.
    Chain(ChainArgs),
    /// The realistic chain firewall → NAT → monitor → router
    /// (`examples/bench-realistic.yaml`), with per-NF cost per packet.
    Nfs(NfsArgs),
    /// What NF replicas cost and give: a forwarder against four replicas
    /// of it (the steering's cost), a costly process NF against two
    /// replicas of it, in alternating rounds.
    Replicas(ReplicasArgs),
    /// Per-flow NFs (`steer: per_flow`) against one shared instance on
    /// short TCP connections: activations per second, the pool's cost per
    /// new flow, the reset hook's time.
    Perflow(PerflowArgs),
    /// A bump in the wire between two network namespaces against plain
    /// Linux forwarding of the same traffic (needs root).
    Wire(WireArgs),
    /// How much of each CPU the host takes away: gaps in a pinned busy
    /// loop per CPU (interrupts, kernel threads, other tasks, hypervisor).
    Jitter(JitterArgs),
    /// How fast a running daemon changes: an API request that adds a chain
    /// of process NFs to its first packet out, and a rule update to the
    /// first packet that sees it.
    Deploy(DeployArgs),
    /// How fast a running daemon creates process NFs while traffic flows,
    /// and whether the n-th costs what the first did (with fork+exec and
    /// an OCI container start as baselines).
    Instantiate(InstantiateArgs),
    /// A stateful firewall moving between two daemons, back and forth,
    /// while a stream over its tracked connections flows through its taps:
    /// checkpoint, restore and move times, and packets lost (needs root).
    Migrate(MigrateBenchArgs),
    /// The scheduler's experiments from the seeds (NFs per core, long
    /// chains, chains of costly NFs), under turns and under NFs that
    /// schedule themselves, in alternating rounds.
    Sched(SchedArgs),
    /// sluice against DPDK testpmd and OVS-DPDK on the same DPDK virtual
    /// devices, CPUs and frames (root; peers that are not installed are
    /// left out with a message).
    Peers(PeersArgs),
}

/// `sluice bench migrate`.
#[derive(Debug, Args)]
pub struct MigrateBenchArgs {
    /// UDP connections the firewall tracks (the stream cycles over them).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u16).range(1..=50_000))]
    pub flows: u16,
    /// Datagrams per second of the stream.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(100..=200_000))]
    pub rate: u64,
    /// Round trips (each moves the firewall there and back).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub rounds: u32,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench peers`.
#[derive(Debug, Args)]
pub struct PeersArgs {
    /// One round of 1 s per system and work (default: three rounds of 3 s).
    #[arg(long)]
    pub quick: bool,
    /// Only these systems (repeatable): testpmd, ovs_dpdk, sluice_inline,
    /// sluice_process.
    #[arg(long, value_parser = ["testpmd", "ovs_dpdk", "sluice_inline", "sluice_process"])]
    pub system: Vec<String>,
    /// Only these works (repeatable): io, macswap, bidir, pcap.
    #[arg(long, value_parser = ["io", "macswap", "bidir", "pcap"])]
    pub work: Vec<String>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench sched`.
#[derive(Debug, Args)]
pub struct SchedArgs {
    /// One round of 1.5 s per configuration and at most 100 NFs per core
    /// (default: three rounds of 3 s, up to 1,000 NFs).
    #[arg(long)]
    pub quick: bool,
    /// Only these sections (repeatable): nfs_per_core, wakeup_policies,
    /// long_chain, chains, allocation, fairness.
    #[arg(long, value_parser = ["nfs_per_core", "wakeup_policies", "long_chain", "chains", "allocation", "fairness"])]
    pub section: Vec<String>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench deploy`.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// Chains deployed, and rule updates made.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=500))]
    pub count: u32,
    /// Rounds of the steady-state comparison (a chain in the daemon and
    /// under `sluice run`, alternating, 3 s each); 0 skips it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub steady_rounds: u32,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench instantiate`.
#[derive(Debug, Args)]
pub struct InstantiateArgs {
    /// Process NFs to create (each in a chain of its own).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub count: u32,
    /// NFs per API request (1: each create is timed alone).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch: u32,
    /// The NFs' sandbox: `on` (`strict`, the default) or `off` (to measure
    /// what confinement adds to a start).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub sandbox: OnOff,
    /// Start NFs from shells (`settings.shells`, the default) or have each
    /// build its own after the fork (`off`).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub shells: OnOff,
    /// How each request creates its NFs: `add` sends only them
    /// (`POST /v1/spec/additions`, the default), `apply` the whole desired
    /// state with them (`PUT /v1/spec`).
    #[arg(long, value_enum, default_value_t = Via::Add)]
    pub via: Via,
    /// Microseconds between one request's answer and the next request
    /// (0: back to back). Creates that arrive spaced, as one tenant's at a
    /// time do, find what the platform prepared in between (its spares).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub gap_us: u64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How `bench instantiate` asks for its NFs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// `POST /v1/spec/additions` with the request's NFs and chains.
    Add,
    /// `PUT /v1/spec` with everything.
    Apply,
}

/// `sluice bench jitter`.
#[derive(Debug, Args)]
pub struct JitterArgs {
    /// Seconds to spin on every CPU (more than 0, at most 3600).
    #[arg(long, default_value = "5", value_parser = jitter_seconds)]
    pub duration: Seconds,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench nfs`.
#[derive(Debug, Args)]
pub struct NfsArgs {
    /// Seconds to run (more than 0, at most 86400).
    #[arg(long, default_value = "5", value_parser = bench_seconds)]
    pub duration: Seconds,
    /// Concurrent UDP flows (each a tracked connection and a NAT mapping;
    /// 1-1000000). The chain runs on one worker: its NAT cannot be split
    /// per worker.
    #[arg(long, default_value_t = 4096, value_parser = value_parser!(u32).range(1..=1_000_000))]
    pub flows: u32,
    /// NF isolation.
    #[arg(long, value_enum, default_value_t = IsolationArg::Inline)]
    pub isolation: IsolationArg,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench perflow`.
#[derive(Debug, Args)]
pub struct PerflowArgs {
    /// Seconds each setup runs per round (more than 0, at most 86400).
    #[arg(long, default_value = "3", value_parser = bench_seconds)]
    pub duration: Seconds,
    /// Rounds (each runs every setup once; the median round is kept).
    #[arg(long, default_value_t = 3, value_parser = value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// One round.
    #[arg(long)]
    pub quick: bool,
    /// TCP connections at once (1-64: the pool holds 64).
    #[arg(long, default_value_t = 16, value_parser = value_parser!(u32).range(1..=64))]
    pub flows: u32,
    /// Packets a connection, SYN and FIN included (3-10000).
    #[arg(long, default_value_t = 20, value_parser = value_parser!(u32).range(3..=10_000))]
    pub packets: u32,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `sluice bench replicas`.
#[derive(Debug, Args)]
pub struct ReplicasArgs {
    /// Seconds each setup runs per round (more than 0, at most 86400).
    #[arg(long, default_value = "3", value_parser = bench_seconds)]
    pub duration: Seconds,
    /// Rounds (each runs every setup once; the median round is kept).
    #[arg(long, default_value_t = 3, value_parser = value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// One round.
    #[arg(long)]
    pub quick: bool,
    /// Concurrent UDP flows (1-1000000).
    #[arg(long, default_value_t = 1024, value_parser = value_parser!(u32).range(1..=1_000_000))]
    pub flows: u32,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The port kind `sluice bench wire` bridges the namespaces with.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum WirePortArg {
    /// AF_PACKET sockets.
    #[value(name = "af_packet")]
    AfPacket,
    /// AF_XDP sockets (sluice attaches its XDP program to both veths).
    #[value(name = "af_xdp")]
    AfXdp,
}

/// `sluice bench wire`.
#[derive(Debug, Args)]
pub struct WireArgs {
    /// Port kind on both sides of the bump.
    #[arg(long, value_enum, default_value_t = WirePortArg::AfPacket)]
    pub port: WirePortArg,
    /// Seconds per measurement (UDP and TCP, sluice and Linux each; more
    /// than 0, at most 86400; at least 0.5 is measured).
    #[arg(long, default_value = "3", value_parser = bench_seconds)]
    pub duration: Seconds,
    /// Isolation of the chain's ACL.
    #[arg(long, value_enum, default_value_t = IsolationArg::Inline)]
    pub isolation: IsolationArg,
    /// AF_PACKET receive ring layout (`v3`: per-block hand-over, `v2`:
    /// per-frame); ignored for other ports.
    #[arg(long, value_enum, default_value_t = RingArg::V3)]
    pub ring: RingArg,
    /// Offloads on the veths and `offload: true` on sluice's ports (`on`:
    /// TCP moves 64 KiB super-packets, as hosts do), or everything at wire
    /// size (`off`: offloads off on the veths, plain ports).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub offloads: OnOff,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Trust domains of `sluice bench chain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DomainsArg {
    /// Every NF in the platform's domain.
    One,
    /// Each process NF in a domain of its own.
    PerNf,
}

impl DomainsArg {
    /// The name the JSON output uses.
    pub fn name(self) -> &'static str {
        match self {
            DomainsArg::One => "one",
            DomainsArg::PerNf => "per_nf",
        }
    }
}

/// A switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// AF_PACKET ring layout for `sluice bench wire`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum RingArg {
    /// TPACKET_V3.
    V3,
    /// TPACKET_V2.
    V2,
}

/// Isolation for benchmark NFs.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum IsolationArg {
    /// In the platform worker thread.
    Inline,
    /// One process per NF.
    Process,
}

/// `sluice bench chain`.
#[derive(Debug, Args)]
pub struct ChainArgs {
    /// NFs in the chain (0-1024).
    #[arg(long, default_value_t = 3, value_parser = value_parser!(u32).range(0..=MAX_CHAIN_LENGTH))]
    pub length: u32,
    /// inline or process.
    #[arg(long, value_enum, default_value_t = IsolationArg::Process)]
    pub isolation: IsolationArg,
    /// The process NFs' sandbox (`nfs[].sandbox`): `on` is the default
    /// `strict`, `off` runs them unconfined (to measure what it costs).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub sandbox: OnOff,
    /// Trust domains: `one` (every NF in the platform's) or `per-nf`
    /// (each process NF in a domain of its own, so every packet is
    /// copied at every hop; at most 15 NFs).
    #[arg(long, value_enum, default_value_t = DomainsArg::One)]
    pub domains: DomainsArg,
    /// Frame size in bytes (without FCS; 60-2048).
    #[arg(long, default_value_t = 64, value_parser = value_parser!(u16).range(60..=2048))]
    pub packet_size: u16,
    /// Seconds to run (more than 0, at most 86400).
    #[arg(long, default_value = "5", value_parser = bench_seconds)]
    pub duration: Seconds,
    /// Offered load in packets/s, at least 1 (default: as fast as the
    /// chain takes).
    #[arg(long, value_parser = value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
    /// Concurrent flows (1-1000000).
    #[arg(long, default_value_t = 64, value_parser = value_parser!(u32).range(1..=1_000_000))]
    pub flows: u32,
    /// Packets per batch (1-256).
    #[arg(long, default_value_t = 32, value_parser = value_parser!(u16).range(1..=256))]
    pub batch: u16,
    /// Platform workers (1-64), each with its own share of the flows and
    /// its own NF instances (process NFs share their worker's core).
    #[arg(long, default_value_t = 1, value_parser = value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// Adaptive wake-up batching of sleeping process NFs: most packets to
    /// hold back before waking one (`settings.wakeup.max_batch`, 1-256; 1:
    /// wake at once).
    #[arg(long, default_value_t = 1, value_parser = value_parser!(u32).range(1..=256))]
    pub wake_batch: u32,
    /// Longest a held packet waits for its NF to be woken, µs
    /// (`settings.wakeup.timeout_us`, 1-100000).
    #[arg(long, default_value_t = 20, value_parser = value_parser!(u64).range(1..=100_000))]
    pub wake_timeout_us: u64,
    /// How long an idle process NF keeps polling after its last packet
    /// before it sleeps, µs (`settings.wakeup.busy_poll_us`, 0-1000000;
    /// default: the platform's, 200 µs for up to four NFs per core).
    #[arg(long, value_parser = value_parser!(u64).range(0..=1_000_000))]
    pub busy_poll_us: Option<u64>,
    /// How process NFs sharing a core are scheduled
    /// (`settings.scheduler.policy`).
    #[arg(long, value_enum, default_value_t = SchedulerArg::Auto)]
    pub scheduler: SchedulerArg,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `settings.scheduler.policy` on the command line.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum SchedulerArg {
    /// Every NF polls, yields and sleeps by itself.
    Hybrid,
    /// NFs sharing a core take turns in chain order.
    Turns,
    /// Turns from four NFs per core.
    Auto,
}

impl SchedulerArg {
    /// The spec's name for it.
    pub fn name(self) -> &'static str {
        match self {
            SchedulerArg::Hybrid => "hybrid",
            SchedulerArg::Turns => "turns",
            SchedulerArg::Auto => "auto",
        }
    }
}

/// The flags that say how to reach a daemon, by their ids.
const DAEMON_FLAGS: [(&str, &str); 3] = [
    ("socket", "--socket"),
    ("server", "--server"),
    ("token_file", "--token-file"),
];

/// Refuses a daemon flag given on the command line to a command that runs
/// in this process (`run`, `validate`, `nf-types`, `bench`): clap accepts
/// it there (the flags are global), and ignoring it silently would leave
/// the user believing a daemon was asked. Set through the environment
/// (`SLUICE_SOCKET`, …) it is meant for every command, and ignored here.
pub fn refuse_daemon_flags(m: &clap::ArgMatches, c: &Command) -> Option<std::process::ExitCode> {
    let local = match c {
        Command::Run(_) => "run",
        Command::Validate { .. } => "validate",
        Command::NfTypes => "nf-types",
        Command::Bench(_) => "bench",
        Command::Soak(_) => "soak",
        _ => return None,
    };
    let given = DAEMON_FLAGS.iter().find(|(id, _)| {
        m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
            || m.subcommand().is_some_and(|(_, sub)| {
                sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
            })
    })?;
    eprintln!(
        "sluice: {} is for commands that talk to a daemon (apply, get, delete, ps, stats, logs, \
         top, tcpdump, daemon); `sluice {local}` runs in this process",
        given.1
    );
    Some(std::process::ExitCode::from(2))
}
