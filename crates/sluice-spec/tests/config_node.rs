//! NF configs: deserializing located value trees into NF types, with errors
//! that point at the offending node.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::json;
use sluice_spec::{parse_str, ConfigNode, ConfigValue, Location, Spec};

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct AclConfig {
    #[serde(default = "default_action")]
    default: Action,
    rules: Vec<Rule>,
}

fn default_action() -> Action {
    Action::Allow
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Rule {
    src: Option<String>,
    dst_port: Option<u16>,
    action: Action,
    #[serde(default)]
    weight: f64,
}

#[derive(Debug, Deserialize, PartialEq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Action {
    Allow,
    Drop,
}

fn spec_with_config(config: &str) -> Spec {
    let yaml = format!(
        "ports:
  - {{ name: gen, kind: generator }}
  - {{ name: out, kind: sink }}
nfs:
  - name: mon
    type: mon
  - name: acl
    type: acl
    config:
{config}chains:
  - {{ name: main, from: gen, nfs: [acl], to: out }}
"
    );
    parse_str(&yaml, "cfg.yaml", &["acl", "mon"]).unwrap()
}

#[test]
fn deserializes_into_nf_types() {
    let spec = spec_with_config(
        "      default: drop
      rules:
        - { src: 10.0.0.0/8, action: allow, weight: 2 }
        - dst_port: 22
          action: drop
          weight: 0.5
",
    );
    let cfg: AclConfig = spec.nfs[1].config.deserialize().unwrap();
    assert_eq!(
        cfg,
        AclConfig {
            default: Action::Drop,
            rules: vec![
                Rule {
                    src: Some("10.0.0.0/8".into()),
                    dst_port: None,
                    action: Action::Allow,
                    weight: 2.0
                },
                Rule {
                    src: None,
                    dst_port: Some(22),
                    action: Action::Drop,
                    weight: 0.5
                },
            ],
        }
    );
}

#[test]
fn wrong_type_is_located_at_the_node() {
    let spec = spec_with_config(
        "      rules:
        - { action: allow }
        - { action: drop, dst_port: ssh }
",
    );
    let e = spec.nfs[1].config.deserialize::<AclConfig>().unwrap_err();
    assert_eq!(e.file, "cfg.yaml");
    assert_eq!((e.line, e.column), (12, 37));
    assert_eq!(e.field, "nfs[1].config.rules[1].dst_port");
    assert!(
        e.message
            .contains("invalid type: string \"ssh\", expected u16"),
        "{e}"
    );
}

#[test]
fn out_of_range_integer_is_located() {
    let spec = spec_with_config("      rules: [{ action: allow, dst_port: 70000 }]\n");
    let e = spec.nfs[1].config.deserialize::<AclConfig>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "cfg.yaml:10:42: nfs[1].config.rules[0].dst_port: invalid value: integer `70000`, expected u16"
    );
}

#[test]
fn unknown_field_is_located_at_the_key() {
    let spec = spec_with_config(
        "      rules:
        - action: allow
          sorce: 10.0.0.0/8
",
    );
    let e = spec.nfs[1].config.deserialize::<AclConfig>().unwrap_err();
    assert_eq!((e.line, e.column), (12, 11));
    assert_eq!(e.field, "nfs[1].config.rules[0].sorce");
    assert!(
        e.message
            .starts_with("unknown field `sorce`, expected one of"),
        "{e}"
    );
}

#[test]
fn missing_field_and_bad_variant_are_located() {
    let spec = spec_with_config("      default: allow\n");
    let e = spec.nfs[1].config.deserialize::<AclConfig>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "cfg.yaml:10:7: nfs[1].config: missing field `rules`"
    );

    let spec = spec_with_config("      default: reject\n      rules: []\n");
    let e = spec.nfs[1].config.deserialize::<AclConfig>().unwrap_err();
    assert_eq!(e.field, "nfs[1].config.default");
    assert_eq!((e.line, e.column), (10, 16));
    assert!(
        e.message.starts_with("unknown variant `reject`, expected"),
        "{e}"
    );
}

#[test]
fn absent_config_is_an_empty_mapping() {
    #[derive(Deserialize, Debug, PartialEq, Default)]
    #[serde(default, deny_unknown_fields)]
    struct MonConfig {
        interval_ms: u64,
    }
    let spec = spec_with_config("      rules: []\n");
    let mon = &spec.nfs[0].config;
    assert_eq!(
        mon.deserialize::<MonConfig>().unwrap(),
        MonConfig::default()
    );
    assert_eq!(mon.path(), "nfs[0].config");
    assert_eq!(mon.location(), Location::new(5, 5));
    let e = mon.deserialize::<AclConfig>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "cfg.yaml:5:5: nfs[0].config: missing field `rules`"
    );
}

#[test]
fn semantic_errors_at_nodes() {
    let spec = spec_with_config(
        "      rules:
        - { action: allow }
        - { action: allow }
        - { action: allow }
        - { action: drop, src: 10.0.0/33 }
",
    );
    let cfg = &spec.nfs[1].config;
    let e = cfg.error_at_path("rules[3].src", "invalid prefix 10.0.0/33");
    assert_eq!(
        e.to_string(),
        "cfg.yaml:14:32: nfs[1].config.rules[3].src: invalid prefix 10.0.0/33"
    );
    let src = cfg.find("rules[3].src").unwrap();
    assert_eq!(
        src.error("bad").to_string(),
        "cfg.yaml:14:32: nfs[1].config.rules[3].src: bad"
    );
    // A missing key is reported where it should have been (its parent).
    let e = cfg.error_at_path("rules[3].dst", "dst is required here");
    assert_eq!(
        e.to_string(),
        "cfg.yaml:14:11: nfs[1].config.rules[3].dst: dst is required here"
    );
    let e = cfg.error("no rules allow anything");
    assert_eq!(
        e.to_string(),
        "cfg.yaml:10:7: nfs[1].config: no rules allow anything"
    );
}

#[test]
fn from_json_builds_configs_for_code() {
    let node = ConfigNode::from_json(json!({
        "default": "drop",
        "rules": [{ "action": "allow", "dst_port": 53 }]
    }));
    let cfg: AclConfig = node.deserialize().unwrap();
    assert_eq!(cfg.rules[0].dst_port, Some(53));
    assert_eq!(
        node.find("rules[0].dst_port").unwrap().path(),
        "rules[0].dst_port"
    );

    let node = ConfigNode::from_json(json!({ "rules": [{ "action": "maybe" }] }))
        .with_path("nfs[2].config");
    let e = node.deserialize::<AclConfig>().unwrap_err();
    assert_eq!(e.file, "<generated>");
    assert_eq!(e.line, 0);
    assert_eq!(e.field, "nfs[2].config.rules[0].action");
    assert!(
        e.to_string()
            .starts_with("<generated>: nfs[2].config.rules[0].action: unknown variant `maybe`"),
        "{e}"
    );
    assert_eq!(node.to_json(), json!({ "rules": [{ "action": "maybe" }] }));
}

#[test]
fn scalars_follow_the_yaml_core_schema() {
    let spec = spec_with_config(
        "      a: ~
      b: True
      c: 0x1F
      d: -0o17
      e: 1e3
      f: '.inf'
      g: yes
      h: '12'
      i: !!str 12
      j: !!float 3
      k: 1.5.0
      l: 18446744073709551615
",
    );
    let cfg = &spec.nfs[1].config;
    let v = |k: &str| cfg.get(k).unwrap().value().clone();
    assert_eq!(v("a"), ConfigValue::Null);
    assert_eq!(v("b"), ConfigValue::Bool(true));
    assert_eq!(v("c"), ConfigValue::Int(31));
    assert_eq!(v("d"), ConfigValue::String("-0o17".into()));
    assert_eq!(v("e"), ConfigValue::Float(1000.0));
    assert_eq!(v("f"), ConfigValue::String(".inf".into()));
    assert_eq!(v("g"), ConfigValue::String("yes".into()));
    assert_eq!(v("h"), ConfigValue::String("12".into()));
    assert_eq!(v("i"), ConfigValue::String("12".into()));
    assert_eq!(v("j"), ConfigValue::Float(3.0));
    assert_eq!(v("k"), ConfigValue::String("1.5.0".into()));
    assert_eq!(v("l"), ConfigValue::Int(u64::MAX.into()));
    assert_eq!(cfg.get("l").unwrap().as_u64(), Some(u64::MAX));
}

/// NaN and the infinities are refused where they stand: the spec travels
/// as JSON (the API, the daemon's saved state), which cannot carry them.
#[test]
fn non_finite_numbers_are_refused_with_their_place() {
    for (text, col) in [
        ("x: .inf", 10),
        ("x: -.Inf", 10),
        ("x: .nan", 10),
        ("x: !!float 1e999", 10),
    ] {
        let yaml = format!(
            "ports:\n  - {{ name: gen, kind: generator }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - name: acl\n    type: acl\n    config:\n      {text}\nchains:\n  - {{ name: main, from: gen, nfs: [acl], to: out }}\n"
        );
        let e = parse_str(&yaml, "cfg.yaml", &["acl"]).unwrap_err();
        assert_eq!((e.line, e.column), (8, col), "{text}: {e}");
        assert_eq!(e.field, "nfs[0].config.x", "{text}: {e}");
        assert!(e.message.contains("not a finite number"), "{text}: {e}");
    }
}

/// So are integers JSON cannot carry exactly (beyond 64 bits): they would
/// be written as floats and load back as other numbers.
#[test]
fn integers_beyond_64_bits_are_refused_with_their_place() {
    for text in [
        "x: 18446744073709551616",
        "x: -9223372036854775809",
        "x: 0x10000000000000000",
        "x: !!int 123456789012345678901234",
    ] {
        let yaml = format!(
            "ports:\n  - {{ name: gen, kind: generator }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - name: acl\n    type: acl\n    config:\n      {text}\nchains:\n  - {{ name: main, from: gen, nfs: [acl], to: out }}\n"
        );
        let e = parse_str(&yaml, "cfg.yaml", &["acl"]).unwrap_err();
        assert_eq!((e.line, e.column), (8, 10), "{text}: {e}");
        assert_eq!(e.field, "nfs[0].config.x", "{text}: {e}");
        assert!(e.message.contains("too large"), "{text}: {e}");
    }
}

#[test]
fn maps_options_enums_and_aliases() {
    #[derive(Deserialize, Debug, PartialEq)]
    enum Shape {
        Point,
        Circle { r: f32 },
        Pair(u8, u8),
        Named(String),
    }
    #[derive(Deserialize, Debug, PartialEq)]
    struct Cfg {
        by_port: HashMap<u16, String>,
        ordered: BTreeMap<String, bool>,
        shapes: Vec<Shape>,
        maybe: Option<u32>,
        tuple: (u8, String),
        shared: Vec<u8>,
        again: Vec<u8>,
    }
    let spec = spec_with_config(
        "      by_port: { 80: http, 443: https }
      ordered: { b: true, a: false }
      shapes: [Point, { Circle: { r: 1.5 } }, { Pair: [1, 2] }, { Named: x }]
      maybe: null
      tuple: [7, seven]
      shared: &nums [1, 2, 3]
      again: *nums
",
    );
    let cfg: Cfg = spec.nfs[1].config.deserialize().unwrap();
    assert_eq!(cfg.by_port[&443], "https");
    assert_eq!(cfg.ordered.keys().collect::<Vec<_>>(), vec!["a", "b"]);
    assert_eq!(
        cfg.shapes,
        vec![
            Shape::Point,
            Shape::Circle { r: 1.5 },
            Shape::Pair(1, 2),
            Shape::Named("x".into())
        ]
    );
    assert_eq!(cfg.maybe, None);
    assert_eq!(cfg.tuple, (7, "seven".into()));
    assert_eq!(cfg.again, vec![1, 2, 3]);
    assert_eq!(
        spec.nfs[1].config.find("again[2]").unwrap().path(),
        "nfs[1].config.again[2]"
    );

    let e = spec_with_config("      t: [1, 2, 3]\n").nfs[1]
        .config
        .deserialize::<HashMap<String, (u8, u8)>>()
        .unwrap_err();
    assert_eq!(e.field, "nfs[1].config.t");
    assert!(e.message.contains("invalid length 3"), "{e}");
}

/// An NF's file path resolves exactly like a `pcap_out` port's: against
/// the spec file's directory, absolute paths unchanged; configs built by
/// code (no spec file) resolve against the current directory.
#[test]
fn resolve_path_matches_port_paths() {
    let dir = std::env::temp_dir();
    let source = dir.join("spec.yaml");
    let yaml = "ports:
  - { name: gen, kind: generator }
  - { name: dump, kind: pcap_out, path: cap.pcap }
nfs:
  - { name: tap, type: mirror, config: { path: cap.pcap } }
chains:
  - { name: main, from: gen, nfs: [tap], to: dump }
";
    let spec = parse_str(yaml, source.to_str().unwrap(), &["mirror"]).unwrap();
    let sluice_spec::PortKind::PcapOut(port) = &spec.ports[1].kind else {
        panic!("not a pcap_out port")
    };
    let cfg = &spec.nfs[0].config;
    let nf_path = cfg.get("path").unwrap().as_str().unwrap();
    assert_eq!(cfg.resolve_path(nf_path), port.path);
    assert_eq!(cfg.resolve_path(nf_path), dir.join("cap.pcap"));
    assert_eq!(
        cfg.resolve_path("/abs/x.pcap"),
        std::path::Path::new("/abs/x.pcap")
    );
    // A spec named by a relative path: still relative, below its directory.
    let rel = parse_str(
        &yaml.replace(", path: cap.pcap }\nnfs", ", path: /dev/null }\nnfs"),
        "specs/a.yaml",
        &["mirror"],
    );
    let rel = rel.unwrap();
    assert_eq!(
        rel.nfs[0].config.resolve_path("cap.pcap"),
        std::path::Path::new("specs/cap.pcap")
    );
    let generated = ConfigNode::from_json(json!({ "path": "cap.pcap" }));
    assert_eq!(
        generated.resolve_path("cap.pcap"),
        std::path::Path::new("cap.pcap")
    );
}
