//! Where the daemon listens: a UNIX socket (mode 0660, never
//! world-writable) by default under `/run/sluice/` when root, else under
//! `$XDG_RUNTIME_DIR/sluice/` or the state directory; the CLI finds it the
//! same way (or from `--socket` / `SLUICE_SOCKET`).

use std::path::{Path, PathBuf};

/// The socket file name.
pub const SOCKET_NAME: &str = "sluice.sock";

/// The default socket path for a daemon with state directory `state_dir`.
pub fn default_socket(state_dir: &Path) -> PathBuf {
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/run/sluice").join(SOCKET_NAME);
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("sluice").join(SOCKET_NAME),
        _ => state_dir.join(SOCKET_NAME),
    }
}

/// The socket the CLI talks to when none is named: where a daemon with
/// the default state directory listens.
pub fn client_default_socket() -> PathBuf {
    default_socket(&crate::control::default_state_dir())
}

/// Binds the UNIX listener at `path`: creates its directory, replaces a
/// stale socket file (one nobody answers on), refuses to take over a live
/// one, and sets mode 0660.
pub fn bind(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("a daemon already listens on {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let l = tokio::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    Ok(l)
}

/// The socket file of a bound listener: removed on drop.
pub struct Bound(pub PathBuf);

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
