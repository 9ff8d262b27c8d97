//! `sluice daemon`: reads its flags and runs [`sluice_daemon::run`].

use std::process::ExitCode;

use sluice_dataplane::PlatformSettings;
use sluice_nfs::REGISTRY;

use crate::ctl_args::{ConnArgs, DaemonArgs};

pub fn run(conn: &ConnArgs, a: DaemonArgs) -> ExitCode {
    let token = match (&a.listen, &conn.token_file) {
        (Some(_), Some(f)) => match std::fs::read_to_string(f) {
            Ok(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
            Ok(_) => {
                eprintln!("sluice: the token file {} is empty", f.display());
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("sluice: cannot read {}: {e}", f.display());
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
    let mut platform = PlatformSettings::defaults(a.max_nfs);
    platform.max_ports = a.max_ports;
    platform.max_chains = a.max_chains;
    let cfg = sluice_daemon::DaemonConfig {
        socket: conn.socket.clone(),
        listen: a.listen,
        token,
        state_dir: a
            .state_dir
            .unwrap_or_else(sluice_daemon::control::default_state_dir),
        platform,
    };
    match sluice_daemon::run(cfg, REGISTRY) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}
