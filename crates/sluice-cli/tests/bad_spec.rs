//! A bad spec names file, line and field, exits 2 and starts nothing.

mod common;
use common::*;

fn expect_error(spec: &str, line: usize, field: &str, words: &str) {
    let (_d, path) = spec_file(spec);
    let out = sluice()
        .args(["run", path.to_str().unwrap(), "--duration", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "spec:\n{spec}");
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:{line}:", path.display());
    assert!(err.contains(&want), "missing {want} in: {err}");
    assert!(err.contains(field), "missing field {field} in: {err}");
    assert!(err.contains(words), "missing '{words}' in: {err}");
    assert!(
        out.stdout.is_empty(),
        "nothing may run: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

const HEAD: &str =
    "ports:\n  - { name: gen, kind: generator, flows: 4 }\n  - { name: out, kind: sink }\n";

#[test]
fn unknown_nf_type() {
    expect_error(
        &format!("{HEAD}nfs:\n  - {{ name: x, type: nope }}\nchains:\n  - {{ name: c, from: gen, nfs: [x], to: out }}\n"),
        5,
        "nfs[0].type",
        "nope",
    );
}

#[test]
fn unknown_port_kind() {
    expect_error(
        "ports:\n  - { name: gen, kind: warp_drive }\nchains: []\n",
        2,
        "ports[0].kind",
        "warp_drive",
    );
}

#[test]
fn duplicate_names() {
    expect_error(
        &format!("{HEAD}nfs:\n  - {{ name: gen, type: forwarder }}\nchains:\n  - {{ name: c, from: gen, to: out }}\n"),
        5,
        "nfs[0].name",
        "gen",
    );
}

#[test]
fn chain_naming_a_missing_nf() {
    expect_error(
        &format!("{HEAD}chains:\n  - {{ name: c, from: gen, nfs: [ghost], to: out }}\n"),
        5,
        "chains[0].nfs[0]",
        "ghost",
    );
}

#[test]
fn chain_cycle() {
    expect_error(
        &format!("{HEAD}chains:\n  - {{ name: a, from: gen, to: b }}\n  - {{ name: b, from: gen, match: {{ proto: tcp }}, to: a }}\n"),
        5,
        "chains[0].to",
        "cycle",
    );
}

#[test]
fn invalid_acl_rule_names_the_rule() {
    expect_error(
        &format!(
            "{HEAD}nfs:\n  - name: acl\n    type: acl\n    config:\n      rules:\n        - {{ action: drop, src: 10.0.0.0/8 }}\n        - {{ action: drop, src: 10.0.0/33 }}\nchains:\n  - {{ name: c, from: gen, nfs: [acl], to: out }}\n"
        ),
        10,
        "nfs[0].config.rules[1].src",
        "invalid prefix",
    );
}

#[test]
fn wrong_type() {
    expect_error(
        "settings:\n  buffers: lots\nports:\n  - { name: gen, kind: generator }\n  - { name: out, kind: sink }\nchains:\n  - { name: c, from: gen, to: out }\n",
        2,
        "settings.buffers",
        "",
    );
}
