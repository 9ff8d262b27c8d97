//! `graph`: a custom NF declared in the spec as a Click-style graph of
//! elements (any other NF types), run inside one NF — one process, one
//! ring hop — however many elements it has.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `elements[]` | list | required | the elements, 1–64 |
//! | `elements[].name` | name | required | unique within the graph |
//! | `elements[].type` | NF type | required | any type but `graph` |
//! | `elements[].config` | map | none | the element's own config |
//! | `paths` | list of name lists | all elements in order | `Next` edges: each element's `Next` goes to the element after it |
//! | `entry` | name | first element | where packets enter |
//!
//! An element's `Next` goes to its successor on a path; from an element
//! with no successor, `Next` leaves the graph and continues the chain.
//! Elements also send packets to each other by name (`ToNf`, e.g. a
//! `classifier` rule `to: <element>`); names not in the graph resolve to
//! the spec's NFs and ports as usual. Drop reasons and counters are
//! reported per element as `<element>.<name>`. Packets an element emits
//! (held or created) leave the graph directly. Packets of one flow keep
//! their order as long as they take the same path.
//!
//! ```yaml
//! - name: edge
//!   type: graph
//!   config:
//!     elements:
//!       - { name: guard, type: acl, config: { rules: [{ action: drop, proto: udp, dst_port: 53 }] } }
//!       - { name: count, type: monitor }
//!     paths: [[guard, count]]
//! ```

use sluice_nf::graph::{Element, ElementGraph, LOCAL_BASE};
use sluice_nf::{BuildContext, IngressPort, NetworkFunction, NfId, NfType, PortId, Resolver};
use sluice_spec::{ConfigNode, SpecError};

/// Most elements in one graph (each gets 16 of the NF's 1024 extended
/// counters).
const MAX_ELEMENTS: usize = 64;

struct GraphResolver<'a> {
    outer: &'a dyn Resolver,
    names: &'a [String],
}

impl Resolver for GraphResolver<'_> {
    fn nf(&self, name: &str) -> Option<NfId> {
        match self.names.iter().position(|n| n == name) {
            Some(k) => Some(NfId(LOCAL_BASE + k as u16)),
            None => self.outer.nf(name),
        }
    }
    fn port(&self, name: &str) -> Option<PortId> {
        self.outer.port(name)
    }
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.outer.input_port(name)
    }
    /// Elements see the packets of the graph's chains.
    fn chain_ingress(&self) -> Vec<IngressPort> {
        self.outer.chain_ingress()
    }
    /// Elements run wherever the graph runs: as many copies as it.
    fn replicas(&self) -> u32 {
        self.outer.replicas()
    }
    /// Elements are rebuilt with their graph: a restart of it is theirs.
    fn restarts(&self) -> u32 {
        self.outer.restarts()
    }
}

fn text<'n>(node: &'n ConfigNode, key: &str) -> Result<&'n str, SpecError> {
    let v = node
        .get(key)
        .ok_or_else(|| node.error(format!("`{key}` is required")))?;
    v.as_str()
        .ok_or_else(|| v.error(format!("`{key}` must be a string, not {}", v.kind_name())))
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg = ctx.config;
    if let Some(map) = cfg.as_map() {
        for e in map {
            if !["elements", "paths", "entry"].contains(&e.key.as_str()) {
                return Err(e.value.error(format!(
                    "unknown key `{}` (expected elements, paths, entry)",
                    e.key
                )));
            }
        }
    }
    let list = cfg
        .get("elements")
        .ok_or_else(|| cfg.error("`elements` is required"))?;
    let nodes = list
        .as_seq()
        .ok_or_else(|| list.error("`elements` must be a list"))?;
    if nodes.is_empty() || nodes.len() > MAX_ELEMENTS {
        return Err(list.error(format!("a graph has 1 to {MAX_ELEMENTS} elements")));
    }
    let mut names: Vec<String> = Vec::new();
    for node in nodes {
        let name = text(node, "name")?;
        if names.iter().any(|n| n == name) {
            return Err(node.error(format!("duplicate element name `{name}`")));
        }
        let valid = !name.is_empty()
            && name.len() <= 32
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !valid {
            return Err(node.get("name").unwrap_or(node).error(format!(
                "invalid element name {name:?}: 1 to 32 characters of a-z, 0-9, _ and -"
            )));
        }
        names.push(name.to_string());
    }
    let index = |node: &ConfigNode| -> Result<usize, SpecError> {
        let name = node
            .as_str()
            .ok_or_else(|| node.error("expected an element name"))?;
        names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| node.error(format!("no element named `{name}` in this graph")))
    };
    let mut next: Vec<Option<usize>> = vec![None; names.len()];
    match cfg.get("paths") {
        None => {
            for (i, n) in next.iter_mut().enumerate().take(names.len() - 1) {
                *n = Some(i + 1);
            }
        }
        Some(paths) => {
            let paths = paths
                .as_seq()
                .ok_or_else(|| paths.error("`paths` must be a list of element-name lists"))?;
            for path in paths {
                let hops = path
                    .as_seq()
                    .ok_or_else(|| path.error("a path is a list of element names"))?;
                for pair in hops.windows(2) {
                    let (a, b) = (index(&pair[0])?, index(&pair[1])?);
                    match next[a] {
                        Some(prev) if prev != b => {
                            return Err(pair[1].error(format!(
                                "element `{}` already continues to `{}`; an element has one successor (use a classifier to branch)",
                                names[a], names[prev]
                            )))
                        }
                        _ => next[a] = Some(b),
                    }
                }
                if let [only] = hops {
                    index(only)?;
                }
            }
        }
    }
    let entry = match cfg.get("entry") {
        Some(e) => index(e)?,
        None => 0,
    };
    let resolver = GraphResolver {
        outer: ctx.resolver,
        names: &names,
    };
    let mut elements = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let type_name = text(node, "type")?;
        let nf_type = crate::REGISTRY
            .iter()
            .find(|t| t.name == type_name && t.name != "graph")
            .ok_or_else(|| {
                node.get("type").unwrap_or(node).error(format!(
                    "unknown element type `{type_name}` (graphs do not nest)"
                ))
            })?;
        let null = ConfigNode::null();
        let config = node.get("config").unwrap_or(&null);
        let name = format!("{}.{}", ctx.name, names[i]);
        let nf = (nf_type.build)(&BuildContext {
            name: sluice_nf::NfName::new(&name),
            config,
            resolver: &resolver,
            flow_capacity: ctx.flow_capacity,
        })?;
        elements.push(Element {
            name: names[i].clone(),
            drop_reasons: nf
                .drop_reason_names()
                .unwrap_or_else(|| nf_type.drop_reasons.iter().map(|s| s.to_string()).collect()),
            counters: nf_type.counters.iter().map(|s| s.to_string()).collect(),
            nf,
            next: next[i],
        });
    }
    Ok(Box::new(ElementGraph::new(elements, entry)))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "graph",
    summary: "a custom NF built from other NF types as a Click-style element graph",
    drop_reasons: &[],
    counters: &[],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
