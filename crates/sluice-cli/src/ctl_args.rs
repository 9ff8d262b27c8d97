//! Command-line syntax of `sluice daemon` and of the commands that talk to
//! a running daemon (`apply`, `get`, `delete`, `ps`, `stats`, `logs`,
//! `top`, `tcpdump`), in the habits of `kubectl` and `docker`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// How to reach the daemon (global: every command takes these).
#[derive(Debug, Args, Clone, Default)]
pub struct ConnArgs {
    /// The daemon's UNIX socket (default: /run/sluice/sluice.sock as root,
    /// else $XDG_RUNTIME_DIR/sluice/sluice.sock or the state directory's).
    #[arg(long, global = true, env = "SLUICE_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Talk to a daemon over TCP instead (`host:port`; needs --token-file).
    #[arg(long, global = true, env = "SLUICE_SERVER")]
    pub server: Option<String>,
    /// A file holding the bearer token of the daemon's TCP listener.
    #[arg(long, global = true, env = "SLUICE_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
}

/// Output formats of listing commands.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
    /// The table, with more columns.
    Wide,
}

/// `sluice daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Also listen on TCP (`addr:port`); every request then needs the
    /// token of --token-file.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Where the desired state is kept and re-applied from at start
    /// (default: /var/lib/sluice as root, else ~/.local/state/sluice).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Most NFs at once (each takes an arena slot per worker; a replaced NF
    /// holds two until its old instance has stopped).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub max_nfs: u32,
    /// Most ports.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_535))]
    pub max_ports: u32,
    /// Most chains.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=65_535))]
    pub max_chains: u32,
    /// A tenant and the file with its token (`NAME=FILE`, repeatable; needs
    /// --listen): a request with that token may change only the NFs and
    /// chains whose `tenant` is NAME, and look only into those NFs.
    #[arg(long = "tenant", value_name = "NAME=FILE", value_parser = tenant_arg)]
    pub tenants: Vec<(String, PathBuf)>,
}

/// `NAME=FILE` of `--tenant`.
fn tenant_arg(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), PathBuf::from(file)))
        }
        _ => Err(format!(
            "{text:?} is not NAME=FILE (a tenant and its token file)"
        )),
    }
}

/// `sluice apply` and `sluice add`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The spec file to make the desired state (`apply`), or whose ports,
    /// NFs and chains to add (`add`).
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    /// Print what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format of the result.
    #[arg(short, long, value_enum)]
    pub output: Option<Format>,
}

/// What `get` lists.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Resource {
    /// Ports.
    #[value(alias = "port")]
    Ports,
    /// Network functions.
    #[value(alias = "nf")]
    Nfs,
    /// Chains.
    #[value(alias = "chain")]
    Chains,
}

impl Resource {
    /// The API collection.
    pub fn path(self) -> &'static str {
        match self {
            Resource::Ports => "/v1/ports",
            Resource::Nfs => "/v1/nfs",
            Resource::Chains => "/v1/chains",
        }
    }
}

/// `sluice get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// What to list.
    #[arg(value_enum)]
    pub what: Resource,
    /// Only this one.
    pub name: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum)]
    pub output: Option<Format>,
}

/// What `delete` removes.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Kind {
    /// A port.
    #[value(alias = "ports")]
    Port,
    /// A network function.
    #[value(alias = "nfs")]
    Nf,
    /// A chain.
    #[value(alias = "chains")]
    Chain,
    /// Everything the desired state holds (no name): the daemon keeps
    /// running, with nothing to run.
    Spec,
}

/// `sluice delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// What kind of object.
    #[arg(value_enum)]
    pub kind: Kind,
    /// Its name (none for `spec`).
    pub name: Option<String>,
}

/// `sluice rollout`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The NF to upgrade.
    pub nf: String,
    /// A YAML or JSON file holding its new config (the `config` mapping).
    #[arg(long)]
    pub config: PathBuf,
    /// Seconds the old version may drain before it is removed and its
    /// remaining flows move to the new one.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Wait until the old version has retired.
    #[arg(long)]
    pub wait: bool,
    /// Output format of the result.
    #[arg(short, long, value_enum)]
    pub output: Option<Format>,
}

/// `sluice checkpoint`.
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The NF whose state to save.
    pub nf: String,
    /// The file to write (replaced whole, never half-written).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// `sluice migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The NF to move (the chains, ports and NFs connected to it move too).
    pub nf: String,
    /// The destination daemon's UNIX socket.
    #[arg(long, value_name = "SOCKET", required_unless_present_any = ["commit", "abort"])]
    pub to: Option<PathBuf>,
    /// Finish a move that was cut short after the destination took it:
    /// remove the moved objects from this daemon.
    #[arg(long, conflicts_with_all = ["to", "abort"])]
    pub commit: bool,
    /// Give up a move that was cut short before the destination took it:
    /// read this daemon's paused ports again.
    #[arg(long, conflicts_with_all = ["to", "commit"])]
    pub abort: bool,
    /// Output format (`json`: timings and what moved).
    #[arg(short, long, value_enum)]
    pub output: Option<Format>,
}

/// `sluice restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The NF to restore.
    pub nf: String,
    /// A checkpoint file (`sluice checkpoint`).
    pub file: PathBuf,
}

/// `sluice ps` and `sluice stats`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Output format.
    #[arg(short, long, value_enum)]
    pub output: Option<Format>,
}

/// `sluice logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The NF.
    pub nf: String,
    /// Keep printing new lines.
    #[arg(short, long)]
    pub follow: bool,
}

/// `sluice tcpdump`.
#[derive(Debug, Args)]
pub struct TcpdumpArgs {
    /// What to capture: a port, or an NF's input or output
    /// (`NAME`, `NAME:in`, `NAME:out`; an NF without a side is its input).
    pub target: String,
    /// Write pcapng to this file (`-` for standard output, the default when
    /// it is not a terminal).
    #[arg(short = 'w')]
    pub write: Option<PathBuf>,
    /// Stop after this many packets.
    #[arg(short = 'c', value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Bytes kept of each packet.
    #[arg(short = 's', long, default_value_t = 65_535, value_parser = clap::value_parser!(u32).range(1..=262_144))]
    pub snaplen: u32,
    /// Capture filter, in the classifier NF's tcpdump-like language
    /// (e.g. `tcp and dst port 80`).
    #[arg(trailing_var_arg = true)]
    pub filter: Vec<String>,
}
