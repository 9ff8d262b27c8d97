//! The loader never panics, whatever the input: arbitrary text, mutated
//! valid specs, pathological YAML.

use proptest::prelude::*;
use sluice_spec::parse_str;

const TYPES: &[&str] = &["acl", "mon", "nat"];

const VALID: &str = "\
version: 1
settings:
  ring_size: 2048
  batch: 64
  restart: { policy: on-failure, max_restarts: 5 }
ports:
  - name: gen
    kind: generator
    flows: 128
    protocol: tcp
    size: imix
    src_prefix: 10.0.0.0/16
    dst_ports: 1-1024
  - { name: gen6, kind: generator, ip_version: 6 }
  - name: out
    kind: sink
  - { name: nic, kind: tap, interface: tap0, extra: [1, 2] }
nfs:
  - name: acl
    type: acl
    isolation: inline
    config:
      rules: &r
        - { src: 10.0.0.0/8, action: allow }
  - { name: mon, type: mon, config: { copy: *r }, sandbox: { namespaces: [ipc, net], memory_max_mib: 64, user: platform } }
chains:
  - name: web
    from: gen
    match: { proto: tcp, dst: 10.1.0.0/16, dst_port: 80 }
    nfs: [acl, mon]
    to: out
  - { name: rest, from: gen, nfs: [mon], to: tail }
  - { name: tail, from: gen6, to: nic }
";

/// Parses and checks the invariants of any outcome: accepted specs
/// re-validate, errors name the source and a line inside the text.
fn check(text: &str) {
    match parse_str(text, "fuzz.yaml", TYPES) {
        Ok(spec) => {
            spec.validate(TYPES).unwrap();
            for chain in &spec.chains {
                assert!(!spec.resolve_chain_path(&chain.name).is_empty());
            }
        }
        Err(e) => {
            assert_eq!(e.file, "fuzz.yaml");
            let lines = text.lines().count() + 1;
            assert!(e.line <= lines, "line {} beyond {lines}: {e}", e.line);
            assert!(!e.message.is_empty());
            let _ = e.to_string();
        }
    }
}

#[test]
fn the_valid_base_is_valid() {
    parse_str(VALID, "fuzz.yaml", TYPES).unwrap();
}

/// An edit applied to the valid spec.
#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    DuplicateLine(usize),
    DeleteLine(usize),
    SwapLines(usize, usize),
    ReplaceToken { at: usize, token: &'static str },
}

const TOKENS: &[&str] = &[
    ":",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "#",
    "&a ",
    "*a",
    "!!str ",
    "!x ",
    "|",
    ">",
    "'",
    "\"",
    "\n",
    "\t",
    "  ",
    "? ",
    "---\n",
    "...\n",
    "~",
    "0x",
    "-1",
    "99999999999999999999999",
    "1e9",
    ".nan",
    "true",
    "null",
    "gen",
    "out",
    "acl",
    "mon",
    "web",
    "tail",
    "sink",
    "generator",
    "pcap_in",
    "ports",
    "chains",
    "nfs",
    "match",
    "to",
    "from",
    "name",
    "kind",
    "type",
    "%",
    "\u{feff}",
    "é",
    "\0",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    let n = VALID.len();
    let lines = VALID.lines().count();
    prop_oneof![
        (0..n, 1..20usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (0..n, "[ -~\n\t]{1,12}").prop_map(|(at, text)| Mutation::Insert { at, text }),
        (0..lines).prop_map(Mutation::DuplicateLine),
        (0..lines).prop_map(Mutation::DeleteLine),
        (0..lines, 0..lines).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (0..n, proptest::sample::select(TOKENS))
            .prop_map(|(at, token)| Mutation::ReplaceToken { at, token }),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let chars: Vec<char> = text.chars().collect();
    let clamp = |i: usize| i.min(chars.len());
    let mut lines: Vec<&str> = text.lines().collect();
    let joined = |lines: Vec<&str>| lines.join("\n") + "\n";
    match m {
        Mutation::Delete { at, len } => {
            let (a, b) = (clamp(*at), clamp(at + len));
            chars[..a].iter().chain(&chars[b..]).collect()
        }
        Mutation::Insert { at, text } => {
            let a = clamp(*at);
            let mut s: String = chars[..a].iter().collect();
            s.push_str(text);
            s.extend(&chars[a..]);
            s
        }
        Mutation::ReplaceToken { at, token } => {
            let a = clamp(*at);
            let b = clamp(a + token.chars().count());
            let mut s: String = chars[..a].iter().collect();
            s.push_str(token);
            s.extend(&chars[b..]);
            s
        }
        Mutation::DuplicateLine(i) => {
            let line = lines[*i % lines.len()];
            lines.insert(*i % lines.len(), line);
            joined(lines)
        }
        Mutation::DeleteLine(i) => {
            lines.remove(*i % lines.len());
            joined(lines)
        }
        Mutation::SwapLines(a, b) => {
            let len = lines.len();
            lines.swap(*a % len, *b % len);
            joined(lines)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        check(&text);
    }

    #[test]
    fn yaml_like_text_never_panics(text in "[a-z0-9_:\\-\\[\\]{},#&*!|>'\" \n\t?.~%@`]{0,300}") {
        check(&text);
    }

    #[test]
    fn mutated_specs_never_panic(mutations in proptest::collection::vec(mutation(), 1..6)) {
        let mut text = VALID.to_string();
        for m in &mutations {
            text = apply(&text, m);
        }
        check(&text);
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!("ports: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let e = parse_str(&deep, "deep.yaml", TYPES).unwrap_err();
    assert!(
        e.message.contains("nesting deeper than 64 levels")
            || e.message.contains("recursion limit exceeded"),
        "{e}"
    );
    let deep_map = "a:\n".to_string()
        + &(1..200)
            .map(|i| format!("{}a:\n", "  ".repeat(i)))
            .collect::<String>();
    let e = parse_str(&deep_map, "deep.yaml", TYPES).unwrap_err();
    assert!(e.message.contains("nesting deeper than 64 levels"), "{e}");
}

#[test]
fn alias_bombs_are_bounded() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let e = parse_str(&text, "bomb.yaml", TYPES).unwrap_err();
    assert!(e.message.contains("document too large"), "{e}");
}

#[test]
fn recursive_alias_is_an_error() {
    let e = parse_str("ports: &p [*p]\n", "rec.yaml", TYPES).unwrap_err();
    assert!(
        e.message.contains("recursive alias") || e.message.starts_with("YAML syntax error"),
        "{e}"
    );
}
