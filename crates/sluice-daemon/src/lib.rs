//! `sluice daemon`: the data plane as a service, changed through a REST
//! API (`/v1`), watched through Prometheus metrics (`/metrics`) and a web
//! dashboard (`/`).
//!
//! The daemon listens on a UNIX socket (mode 0660; the file system is the
//! access control) and, optionally, on TCP, where every request needs the
//! bearer token. HTTP runs on a small tokio runtime; the data plane is
//! owned by one control thread ([`control`]) that the handlers send work
//! to, so nothing async ever runs on, or waits on, the packet path.

pub mod additions;
pub mod api;
mod auth;
mod candidate;
pub mod capture;
pub mod change;
pub mod checkpoint;
pub mod control;
mod dashboard;
mod desired;
pub mod error;
pub mod extract;
mod metrics;
pub mod migrate;
mod nf_view;
mod pcapng;
mod pools;
pub mod rollout;
pub mod socket;
pub mod state;
mod syncer;
pub mod tenancy;
pub mod types;

use std::net::SocketAddr;
use std::path::PathBuf;

use sluice_dataplane::PlatformSettings;
use sluice_nf::NfType;

pub use api::ApiDoc;
pub use socket::{client_default_socket, default_socket, SOCKET_NAME};

/// How to run a daemon.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// UNIX socket to listen on ([`default_socket`] if `None`).
    pub socket: Option<PathBuf>,
    /// TCP address to listen on too (needs `token`).
    pub listen: Option<SocketAddr>,
    /// Bearer token every TCP request must carry (the operator's).
    pub token: Option<String>,
    /// `(tenant, token)`: tokens that may change only the tenant's NFs and
    /// chains (TCP only; see `tenancy`).
    pub tenant_tokens: Vec<(String, String)>,
    /// Where the desired state is kept.
    pub state_dir: PathBuf,
    /// The data plane's settings and capacities.
    pub platform: PlatformSettings,
}

/// Why a daemon ended other than by SIGINT or SIGTERM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DaemonError {
    /// It could not start (socket, state directory, data plane, tokens).
    Setup(String),
    /// Its data plane failed while it ran (a worker's code panicked; the
    /// message says which and why). It stopped; its desired state is kept
    /// and is applied again when it starts again.
    DataPlaneFailed(String),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::Setup(m) => f.write_str(m),
            DaemonError::DataPlaneFailed(why) => write!(
                f,
                "the data plane failed: {why}; the daemon stopped (its desired state is kept \
                 and is applied again at its next start)"
            ),
        }
    }
}

impl std::error::Error for DaemonError {}

impl From<String> for DaemonError {
    fn from(m: String) -> Self {
        DaemonError::Setup(m)
    }
}

/// Runs a daemon until SIGINT or SIGTERM, or until its data plane fails;
/// then drains and stops the data plane.
pub fn run(cfg: DaemonConfig, registry: &'static [NfType]) -> Result<(), DaemonError> {
    if cfg.listen.is_some() && cfg.token.as_deref().is_none_or(str::is_empty) {
        return Err(DaemonError::Setup(
            "--listen needs --token-file: every TCP request must carry the token".into(),
        ));
    }
    tenancy::check_tokens(
        cfg.listen.is_some(),
        cfg.token.as_deref(),
        &cfg.tenant_tokens,
    )?;
    // A daemon of many process NFs keeps a descriptor per NF (its CPU
    // time's /proc file, `sluice_sys::CpuTimesFile`) beside its sockets:
    // the soft limit (often 1,024) would be reached long before the hard.
    sluice_sys::raise_nofile_limit();
    let dir = state::StateDir::open(&cfg.state_dir).map_err(|e| {
        format!(
            "cannot use the state directory {}: {e}",
            cfg.state_dir.display()
        )
    })?;
    let socket_path = cfg
        .socket
        .clone()
        .unwrap_or_else(|| default_socket(&cfg.state_dir));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sluice-api")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the API runtime: {e}"))?;
    // The socket first: a daemon refused because another one listens
    // there must start nothing (no data plane, no NF processes, no
    // re-applied state). Requests that arrive while the data plane
    // starts wait in the listen queue.
    let unix = {
        let _in_runtime = rt.enter();
        socket::bind(&socket_path)
            .map_err(|e| format!("cannot listen on {}: {e}", socket_path.display()))?
    };
    tracing::info!("listening on {}", socket_path.display());
    // Removed however this function ends; only the daemon that bound the
    // socket removes it (one refused because another daemon listens
    // there must not unlink that daemon's socket).
    let socket_file = socket::Bound(socket_path.clone());
    let (control, thread, failed) = control::Control::start(cfg.platform.clone(), registry, dir)?;
    let tokens = cfg.token.map(|operator| auth::Tokens {
        operator,
        tenants: cfg.tenant_tokens,
    });
    let served = rt.block_on(serve(control, unix, cfg.listen, tokens, failed));
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    drop(socket_file);
    // The last handle on the control thread is gone: it stops the data
    // plane and exits.
    let _ = thread.join();
    served
}

async fn serve(
    control: control::Control,
    unix: tokio::net::UnixListener,
    listen: Option<SocketAddr>,
    tokens: Option<auth::Tokens>,
    mut failed: control::Failed,
) -> Result<(), DaemonError> {
    let state = extract::AppState { control };
    let app = |authed: Option<auth::Tokens>| {
        let router = api::routes(state.clone())
            .merge(metrics::routes(state.clone()))
            .merge(capture::routes(state.clone()))
            .merge(dashboard::routes())
            .fallback(|| async { error::ApiError::not_found("no such path") })
            .method_not_allowed_fallback(|| async { error::ApiError::method_not_allowed() });
        let router = match authed {
            Some(t) => auth::require_token(router, t),
            None => auth::as_operator(router),
        };
        router.layer(axum::extract::DefaultBodyLimit::max(api::BODY_LIMIT))
    };
    let shutdown = shutdown_signal();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    {
        let mut rx = stop_rx.clone();
        let app = app(None);
        tasks.push(tokio::spawn(async move {
            axum::serve(unix, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.changed().await;
                })
                .await
        }));
    }
    if let Some(addr) = listen {
        let tcp = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        tracing::info!("listening on {addr} (bearer token required)");
        let mut rx = stop_rx.clone();
        let app = app(tokens);
        tasks.push(tokio::spawn(async move {
            axum::serve(tcp, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.changed().await;
                })
                .await
        }));
    }
    let ended = tokio::select! {
        _ = shutdown => Ok(()),
        why = failed.wait_for(Option::is_some) => {
            let why = match why {
                Ok(why) => why.clone().unwrap_or_default(),
                Err(_) => "the control thread stopped".to_string(),
            };
            tracing::error!("the data plane failed: {why}; stopping");
            Err(DaemonError::DataPlaneFailed(why))
        }
    };
    tracing::info!("stopping: draining the data plane");
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    ended
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
