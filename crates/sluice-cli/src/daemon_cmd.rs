//! `sluice daemon`: reads its flags and runs [`sluice_daemon::run`].

use std::process::ExitCode;

use sluice_dataplane::PlatformSettings;
use sluice_nfs::REGISTRY;

use crate::ctl_args::{ConnArgs, DaemonArgs};

/// The token in `file` (trimmed), or a message.
fn read_token(file: &std::path::Path) -> Result<String, String> {
    match std::fs::read_to_string(file) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        Ok(_) => Err(format!("the token file {} is empty", file.display())),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    }
}

pub fn run(conn: &ConnArgs, a: DaemonArgs) -> ExitCode {
    let token = match (&a.listen, &conn.token_file) {
        (Some(_), Some(f)) => match read_token(f) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("sluice: {e}");
                return ExitCode::from(2);
            }
        },
        (Some(_), None) => {
            eprintln!(
                "sluice: --listen needs --token-file (every TCP request must carry the token)"
            );
            return ExitCode::from(2);
        }
        _ => None,
    };
    let mut tenant_tokens = Vec::new();
    for (name, file) in &a.tenants {
        match read_token(file) {
            Ok(t) => tenant_tokens.push((name.clone(), t)),
            Err(e) => {
                eprintln!("sluice: --tenant {name}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let Err(e) =
        sluice_daemon::tenancy::check_tokens(a.listen.is_some(), token.as_deref(), &tenant_tokens)
    {
        eprintln!("sluice: {e}");
        return ExitCode::from(2);
    }
    let mut platform = PlatformSettings::defaults(a.max_nfs);
    platform.max_ports = a.max_ports;
    platform.max_chains = a.max_chains;
    let cfg = sluice_daemon::DaemonConfig {
        socket: conn.socket.clone(),
        listen: a.listen,
        token,
        tenant_tokens,
        state_dir: a
            .state_dir
            .unwrap_or_else(sluice_daemon::control::default_state_dir),
        platform,
    };
    match sluice_daemon::run(cfg, REGISTRY) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(match e {
                sluice_daemon::DaemonError::Setup(_) => crate::EXIT_SETUP,
                sluice_daemon::DaemonError::DataPlaneFailed(_) => crate::EXIT_FAILED,
            })
        }
    }
}
