//! Checks on chains: references to ports, NFs and chains, chain-link
//! cycles, NFs visited twice, selector consistency and ambiguity.

use foldhash::{HashMap, HashMapExt};

use crate::check::{port_range, Ctx};
use crate::fields::{suggest, Res};
use crate::index::{Earlier, NameMap, Named, SpecIndex};
use crate::model::{ChainSpec, MatchSpec, Spec};
use crate::net::{self, proto_name};
use crate::ports::PortKind;

/// What a name refers to.
enum Target<'a> {
    Port(&'a PortKind),
    Nf,
    Chain,
    Missing,
}

/// Every name of the spec, indexed once: with thousands of NFs, a linear
/// search per reference made validation quadratic (1.2 s of CPU for
/// 10,000 NFs in 100 chains). The names of the checked objects are
/// indexed here; those before them (an addition's spec) are in its
/// [`crate::index::SpecIndex`], indexed when it was.
pub(crate) struct Names<'a> {
    spec: &'a Spec,
    base: Option<&'a SpecIndex>,
    checked: NameMap<&'a str>,
}

impl<'a> Names<'a> {
    pub(crate) fn of(cx: &Ctx<'a>) -> Names<'a> {
        let mut checked = NameMap::new();
        checked.extend(cx.spec, cx.from, |n| n);
        Names {
            spec: cx.spec,
            base: cx.base,
            checked,
        }
    }

    /// What `name` names (an addition's names are not in its base).
    pub(crate) fn named(&self, name: &str) -> Option<Named> {
        self.base
            .and_then(|b| b.names.get(name))
            .or_else(|| self.checked.get(name))
    }

    fn lookup(&self, name: &str) -> Target<'a> {
        match self.named(name) {
            Some(Named::Port(i)) => Target::Port(&self.spec.ports[i].kind),
            Some(Named::Nf(_)) => Target::Nf,
            Some(Named::Chain(_)) => Target::Chain,
            None => Target::Missing,
        }
    }

    fn chain_index(&self, name: &str) -> Option<usize> {
        match self.named(name) {
            Some(Named::Chain(i)) => Some(i),
            _ => None,
        }
    }
}

/// `"a, b"`, or `"none"` when empty.
fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// `; did you mean "x"?` when `word` looks like a typo of one of `names`.
fn did_you_mean(word: &str, names: &[&str]) -> String {
    suggest(word, names.iter().copied())
        .map(|s| format!("; did you mean \"{s}\"?"))
        .unwrap_or_default()
}

/// Checks every chain checked (`cx.from` on) and its relations to the
/// chains before it. An addition's chains come after every chain of its
/// spec, which cannot name them: so a cycle or a repeated NF starts at an
/// added chain, and only an added chain can be shadowed.
pub(crate) fn chains(cx: &Ctx<'_>, names: &Names<'_>) -> Res<()> {
    for (i, c) in cx.spec.chains.iter().enumerate().skip(cx.from.chains) {
        references(cx, names, i, c)?;
        if let Some(m) = &c.matcher {
            matcher(cx, i, m)?;
        }
    }
    cycles(cx, names)?;
    repeated_nfs(cx, names)?;
    ambiguity(cx)
}

fn references(cx: &Ctx<'_>, names: &Names<'_>, i: usize, c: &ChainSpec) -> Res<()> {
    let spec = cx.spec;
    // The name lists only go into error messages: built only for one.
    let inputs = || -> Vec<&str> {
        spec.ports
            .iter()
            .filter(|p| p.kind.is_input())
            .map(|p| p.name.as_str())
            .collect()
    };
    let outputs = || -> Vec<&str> {
        spec.ports
            .iter()
            .filter(|p| p.kind.is_output())
            .map(|p| p.name.as_str())
            .collect()
    };
    let nf_names = || -> Vec<&str> { spec.nfs.iter().map(|n| n.name.as_str()).collect() };
    let chain_names = || -> Vec<&str> { spec.chains.iter().map(|c| c.name.as_str()).collect() };

    let from = || format!("chains[{i}].from");
    let input_note = || format!("input ports: {}", list(&inputs()));
    match names.lookup(&c.from) {
        Target::Port(k) if k.is_input() => {}
        Target::Port(k) => {
            return Err(cx.err(
                from(),
                format!(
                    "port \"{}\" is a {k} port, which cannot feed a chain ({})",
                    c.from,
                    input_note()
                ),
            ))
        }
        Target::Nf | Target::Chain => {
            let what = if matches!(names.lookup(&c.from), Target::Nf) {
                "an NF"
            } else {
                "a chain"
            };
            return Err(cx.err(
                from(),
                format!(
                    "\"{}\" is {what}, but from must name an input port ({})",
                    c.from,
                    input_note()
                ),
            ));
        }
        Target::Missing => {
            return Err(cx.err(
                from(),
                format!(
                    "no port named \"{}\" ({}){}",
                    c.from,
                    input_note(),
                    did_you_mean(&c.from, &inputs())
                ),
            ))
        }
    }

    // Chains are short: a scan of the NFs before beats a map's allocation.
    let mut in_chain: Vec<&str> = Vec::with_capacity(c.nfs.len());
    for (j, nf) in c.nfs.iter().enumerate() {
        let at = || format!("chains[{i}].nfs[{j}]");
        let defined = || format!("defined NFs: {}", list(&nf_names()));
        match names.lookup(nf) {
            Target::Nf => {}
            Target::Missing => {
                return Err(cx.err(
                    at(),
                    format!(
                        "no NF named \"{nf}\" ({}){}",
                        defined(),
                        did_you_mean(nf, &nf_names())
                    ),
                ))
            }
            Target::Port(_) => {
                return Err(cx.err(
                    at(),
                    format!("\"{nf}\" is a port, not an NF ({})", defined()),
                ))
            }
            Target::Chain => {
                return Err(cx.err(
                    at(),
                    format!(
                        "\"{nf}\" is a chain, not an NF ({}); to continue into another chain, name it in `to`",
                        defined()
                    ),
                ))
            }
        }
        if let Some(k) = in_chain.iter().position(|&n| n == nf.as_str()) {
            return Err(cx.err(
                at(),
                format!(
                    "NF \"{nf}\" appears twice in chain \"{}\" (also at nfs[{k}]): a packet cannot pass the same NF twice",
                    c.name
                ),
            ));
        }
        in_chain.push(nf);
    }

    let to = || format!("chains[{i}].to");
    let to_note = || {
        format!(
            "output ports: {}; chains: {}",
            list(&outputs()),
            list(&chain_names())
        )
    };
    match names.lookup(&c.to) {
        Target::Port(k) if k.is_output() => Ok(()),
        Target::Chain => Ok(()),
        Target::Port(k) => Err(cx.err(
            to(),
            format!(
                "port \"{}\" is a {k} port, which cannot receive traffic ({})",
                c.to,
                to_note()
            ),
        )),
        Target::Nf => Err(cx.err(
            to(),
            format!(
                "\"{}\" is an NF; to must name an output port or a chain ({}); list NFs under `nfs`",
                c.to,
                to_note()
            ),
        )),
        Target::Missing => {
            let mut names = outputs();
            names.extend(chain_names());
            Err(cx.err(
                to(),
                format!(
                    "no port or chain named \"{}\" ({}){}",
                    c.to,
                    to_note(),
                    did_you_mean(&c.to, &names)
                ),
            ))
        }
    }
}

/// Selector fields must be consistent with each other.
/// Checks chain `i`'s selector `m` (its paths are made only for an error:
/// a spec of thousands of chains passes this once per chain and change).
fn matcher(cx: &Ctx<'_>, i: usize, m: &MatchSpec) -> Res<()> {
    let field = |f: &str| format!("chains[{i}].match.{f}");
    if let Some(v) = m.ip_version {
        if v != 4 && v != 6 {
            return Err(cx.err(
                field("ip_version"),
                format!("expected IP version 4 or 6, found {v}"),
            ));
        }
    }
    for (key, p) in [("src", &m.src), ("dst", &m.dst)] {
        let Some(p) = p else { continue };
        net::check_prefix(p).map_err(|msg| cx.err(field(key), msg))?;
        if let Some(v) = m.ip_version {
            if net::family(p) != v {
                return Err(cx.err(
                    field(key),
                    format!("{key} {p} is IPv{} but ip_version is {v}", net::family(p)),
                ));
            }
        }
    }
    if let (Some(s), Some(d)) = (&m.src, &m.dst) {
        if net::family(s) != net::family(d) {
            return Err(cx.err(
                field("dst"),
                format!(
                    "dst {d} is IPv{} but src {s} is IPv{}",
                    net::family(d),
                    net::family(s)
                ),
            ));
        }
    }
    if let Some(proto) = m.proto {
        let family = m
            .ip_version
            .or_else(|| m.src.as_ref().map(net::family))
            .or_else(|| m.dst.as_ref().map(net::family));
        match (proto, family) {
            (1, Some(6)) => {
                return Err(cx.err(
                    field("proto"),
                    "icmp is IPv4's ICMP; for IPv6 traffic use icmpv6",
                ))
            }
            (58, Some(4)) => {
                return Err(cx.err(
                    field("proto"),
                    "icmpv6 is IPv6's ICMP; for IPv4 traffic use icmp",
                ))
            }
            _ => {}
        }
        for (key, r) in [("src_port", &m.src_port), ("dst_port", &m.dst_port)] {
            if r.is_some() && !matches!(proto, 6 | 17 | 132) {
                let name = proto_name(proto)
                    .map(str::to_string)
                    .unwrap_or_else(|| proto.to_string());
                return Err(cx.err(
                    field(key),
                    format!("{key} only applies to tcp, udp and sctp, but proto is {name}"),
                ));
            }
        }
    }
    for (key, r) in [("src_port", &m.src_port), ("dst_port", &m.dst_port)] {
        if let Some(r) = r {
            port_range(cx, &field(key), r)?;
        }
    }
    Ok(())
}

/// Chain-to-chain `to` links must not loop.
fn cycles(cx: &Ctx<'_>, names: &Names<'_>) -> Res<()> {
    let chains = &cx.spec.chains;
    for i in cx.from.chains..chains.len() {
        let mut path = vec![i];
        let mut cur = i;
        while let Some(next) = names.chain_index(&chains[cur].to) {
            if next == i {
                let names: Vec<&str> = path
                    .iter()
                    .chain(std::iter::once(&i))
                    .map(|&k| chains[k].name.as_str())
                    .collect();
                return Err(cx.err(
                    format!("chains[{i}].to"),
                    format!(
                        "chain links form a cycle: {} (packets would never leave)",
                        names.join(" -> ")
                    ),
                ));
            }
            if path.contains(&next) {
                break; // a cycle not through `start`: reported from its own chain
            }
            path.push(next);
            cur = next;
        }
    }
    Ok(())
}

/// Following chain links must not bring a packet to the same NF twice.
fn repeated_nfs(cx: &Ctx<'_>, names: &Names<'_>) -> Res<()> {
    let chains = &cx.spec.chains;
    for (i, start) in chains.iter().enumerate().skip(cx.from.chains) {
        let mut seen: HashMap<&str, &str> = start
            .nfs
            .iter()
            .map(|n| (n.as_str(), start.name.as_str()))
            .collect();
        let mut cur = i;
        let mut hops = 0;
        while let Some(next) = names.chain_index(&chains[cur].to) {
            hops += 1;
            if hops > chains.len() {
                break;
            }
            let c = &chains[next];
            for nf in &c.nfs {
                if let Some(first) = seen.get(nf.as_str()) {
                    return Err(cx.err(
                        format!("chains[{i}].to"),
                        format!(
                            "packets of chain \"{}\" would pass NF \"{nf}\" twice: in chain \"{first}\" and again in chain \"{}\" (a packet cannot pass the same NF twice)",
                            start.name, c.name
                        ),
                    ));
                }
                seen.insert(nf, &c.name);
            }
            cur = next;
        }
    }
    Ok(())
}

/// Chains from the same port are tried in order; a later chain whose
/// traffic an earlier one already takes is an error.
fn ambiguity(cx: &Ctx<'_>) -> Res<()> {
    let chains = &cx.spec.chains;
    let all = MatchSpec::default();
    // The checked chains so far of each port; those before them are in
    // the base's index, and come first.
    let mut earlier_from: HashMap<&str, Earlier> = HashMap::new();
    for (j, later) in chains.iter().enumerate().skip(cx.from.chains) {
        let m_later = later.matcher.as_ref().unwrap_or(&all);
        let in_base = (cx.base)
            .and_then(|b| b.chains_from.get(later.from.as_str()))
            .and_then(|e| e.first_covering(chains, m_later));
        let group = earlier_from.entry(later.from.as_str()).or_default();
        // The first earlier chain that covers it, in spec order.
        let first = in_base.or_else(|| group.first_covering(chains, m_later));
        group.push(j, m_later);
        if let Some(i) = first {
            let earlier = &chains[i];
            let m_earlier = earlier.matcher.as_ref().unwrap_or(&all);
            let at = if later.matcher.is_some() {
                format!("chains[{j}].match")
            } else {
                format!("chains[{j}].from")
            };
            let line = cx.line_note(&format!("chains[{i}]"));
            let msg = if m_earlier == m_later {
                let what = if m_later.is_match_all() {
                    "no match (all traffic)"
                } else {
                    "the same match"
                };
                format!(
                    "ambiguous: chain \"{}\" has {what} as chain \"{}\"{line}, also from port \"{}\"; \
                     chains from one port are tried in order and the first match wins, so \"{}\" would never see traffic",
                    later.name, earlier.name, later.from, later.name
                )
            } else {
                format!(
                    "chain \"{}\" would never see traffic: chain \"{}\"{line}, listed earlier with from: {}, matches everything it matches \
                     (the first match wins; list the more specific chain first)",
                    later.name, earlier.name, later.from
                )
            };
            return Err(cx.err(at, msg));
        }
    }
    Ok(())
}
