//! Files NFs write (captures, logs): checked when the NF is built, opened
//! when it first runs.
//!
//! Building an NF must have no side effects: `sluice validate` builds every
//! NF to check its config, and a process NF is built again in its own
//! process and after every restart. So a build only checks that the file
//! could be written, and the NF creates (first instance of a run) or
//! appends to (a restarted instance, `Resolver::restarts` > 0) it later.

use std::path::Path;

/// Checks that an NF could write `path` without creating, opening or
/// changing anything: it is not a directory, and it is a writable file or
/// does not exist yet in a writable directory.
pub(crate) fn check_path(path: &Path) -> Result<(), String> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(format!("`{shown}` is a directory, not a file name")),
        Ok(_) => {
            sluice_sys::check_writable(path).map_err(|e| format!("cannot write `{shown}`: {e}"))
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => sluice_sys::check_writable(dir).map_err(|e| {
                    format!(
                        "cannot create `{shown}`: directory `{}` is not writable: {e}",
                        dir.display()
                    )
                }),
                Ok(_) => Err(format!(
                    "cannot create `{shown}`: `{}` is not a directory",
                    dir.display()
                )),
                Err(e) => Err(format!(
                    "cannot create `{shown}`: directory `{}`: {e}",
                    dir.display()
                )),
            }
        }
        Err(e) => Err(format!("cannot create `{shown}`: {e}")),
    }
}
