//! `docs/openapi.json` is the API's OpenAPI document as the code generates
//! it (so a change to the API shows in review), and it is a valid
//! OpenAPI 3 document.
//!
//! Regenerate it after changing the API:
//!
//! ```sh
//! SLUICE_UPDATE_OPENAPI=1 cargo test -p sluice-daemon --test openapi
//! ```

use std::path::PathBuf;
use std::process::Command;

use utoipa::OpenApi;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

fn generated() -> String {
    sluice_daemon::ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serialises")
        + "\n"
}

#[test]
fn the_committed_openapi_document_is_what_the_code_generates() {
    let path = committed_path();
    let now = generated();
    if std::env::var_os("SLUICE_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &now).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != now {
        let first = committed
            .lines()
            .zip(now.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(now.lines().count()));
        panic!(
            "docs/openapi.json differs from the document the code generates \
             (first at line {}: committed `{}`, generated `{}`).\n\
             Regenerate it and commit the result:\n\n    \
             SLUICE_UPDATE_OPENAPI=1 cargo test -p sluice-daemon --test openapi\n",
            first + 1,
            committed.lines().nth(first).unwrap_or("<end>").trim(),
            now.lines().nth(first).unwrap_or("<end>").trim(),
        );
    }
}

/// Runs `openapi-spec-validator` (PyPI) on the document; skips with a
/// message when Python or the module is missing (`.ci/run` installs it).
#[test]
fn the_openapi_document_is_valid_openapi_3() {
    let doc = generated();
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert!(
        v["openapi"].as_str().is_some_and(|s| s.starts_with("3.")),
        "not an OpenAPI 3 document: {}",
        v["openapi"]
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &doc).unwrap();
    let script = "import sys\n\
                  try:\n    from openapi_spec_validator import validate\n    \
                  from openapi_spec_validator.readers import read_from_filename\n\
                  except ImportError:\n    sys.exit(77)\n\
                  spec, _ = read_from_filename(sys.argv[1])\n\
                  validate(spec)\n\
                  print('valid')\n";
    let out = match Command::new("python3")
        .args(["-c", script])
        .arg(&file)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipping: python3 is not available ({e}); `pip install openapi-spec-validator` to run this check");
            return;
        }
    };
    if out.status.code() == Some(77) {
        eprintln!("skipping: the Python module openapi-spec-validator is not installed (`pip install openapi-spec-validator`; .ci/run installs it)");
        return;
    }
    assert!(
        out.status.success(),
        "openapi-spec-validator rejects the document:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
