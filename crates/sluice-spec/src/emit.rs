//! A spec written back out: [`Spec::to_json`] gives the JSON document that
//! loads (JSON is YAML) into an equal spec. A daemon keeps its desired
//! state this way, and edits it (removing one NF) without the original
//! text.
//!
//! Every field is written, defaults included, so the document says
//! exactly what runs. Paths are the resolved ones; a bidirectional chain is
//! written as the two chains it stands for.

use serde_json::{json, Map, Value};

use crate::model::{ChainSpec, MatchSpec, NfSpec, Spec, Steer};
use crate::net::proto_name;
use crate::ports::{IpVersionChoice, PortKind, PortSpec, Protocol, SizeSpec};
use crate::settings::Settings;

impl Spec {
    /// The spec as a JSON document that [`crate::parse_str`] reads back
    /// into an equal spec (locations aside).
    pub fn to_json(&self) -> Value {
        json!({
            "version": 1,
            "settings": settings(&self.settings),
            "ports": self.ports.iter().map(port).collect::<Vec<_>>(),
            "nfs": self.nfs.iter().map(nf).collect::<Vec<_>>(),
            "chains": self.chains.iter().map(chain).collect::<Vec<_>>(),
        })
    }

    /// The entry named `name` of the list `list` (`ports`, `nfs` or
    /// `chains`) as [`Spec::to_json`] writes it there, without writing the
    /// rest: a request about one object of a platform running thousands
    /// costs what that object does. `None`: no such list or entry.
    pub fn entry_json(&self, list: &str, name: &str) -> Option<Value> {
        match list {
            "ports" => self.ports.iter().find(|p| p.name == name).map(port),
            "nfs" => self.nfs.iter().find(|n| n.name == name).map(nf),
            "chains" => self.chains.iter().find(|c| c.name == name).map(chain),
            _ => None,
        }
    }
}

fn settings(s: &Settings) -> Value {
    let mut wakeup = s.wakeup.rule.emit();
    let mut scheduler = json!({
        "policy": s.scheduler.policy.name(),
        "slice_us": s.scheduler.slice_us,
        "kernel_class": s.scheduler.kernel_class.name(),
    });
    if let Some(k) = s.scheduler.yield_every {
        scheduler["yield_every"] = json!(k);
    }
    if let Some(b) = s.wakeup.busy_poll_us {
        wakeup["busy_poll_us"] = json!(b);
    }
    let mut v = json!({
        "buffers": s.buffers,
        "ring_size": s.ring_size,
        "batch": s.batch,
        "hugepages": s.hugepages,
        "workers": s.workers,
        "shells": s.shells,
        "restart": {
            "policy": s.restart.policy.name(),
            "max_restarts": s.restart.max_restarts,
            "backoff_ms": s.restart.backoff_ms,
            "hold_ms": s.restart.hold_ms,
            "standby": s.restart.standby,
            "inline_panic": s.restart.inline_panic.name(),
        },
        "flow_table": {
            "capacity": s.flow_table.capacity,
            "idle_timeout_ms": s.flow_table.idle_timeout_ms,
            "close_timeout_ms": s.flow_table.close_timeout_ms,
        },
        "wakeup": wakeup,
        "scheduler": scheduler,
        "backpressure": {
            "mode": s.backpressure.mode.name(),
            "watermark_pct": s.backpressure.watermark_pct,
            "red_min_pct": s.backpressure.red_min_pct,
        },
    });
    if !s.domains.is_empty() {
        v["domains"] = crate::domains::emit(&s.domains);
    }
    v
}

fn port(p: &PortSpec) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(p.name));
    m.insert("kind".into(), json!(p.kind.kind_name()));
    match &p.kind {
        PortKind::Generator(g) => {
            m.insert("flows".into(), json!(g.flows));
            m.insert(
                "protocol".into(),
                json!(match g.protocol {
                    Protocol::Udp => "udp",
                    Protocol::Tcp => "tcp",
                    Protocol::Mixed => "mixed",
                }),
            );
            m.insert(
                "ip_version".into(),
                match g.ip_version {
                    IpVersionChoice::V4 => json!(4),
                    IpVersionChoice::V6 => json!(6),
                    IpVersionChoice::Mixed => json!("mixed"),
                },
            );
            m.insert(
                "size".into(),
                match g.size {
                    SizeSpec::Fixed(n) => json!(n),
                    SizeSpec::Imix => json!("imix"),
                    SizeSpec::Datacenter => json!("datacenter"),
                },
            );
            if let Some(r) = g.rate_pps {
                m.insert("rate_pps".into(), json!(r));
            }
            if let Some(c) = g.count {
                m.insert("count".into(), json!(c));
            }
            m.insert("packets_per_flow".into(), json!(g.packets_per_flow));
            m.insert("src_prefix".into(), json!(g.src_prefix.to_string()));
            m.insert("dst_prefix".into(), json!(g.dst_prefix.to_string()));
            m.insert("src_ports".into(), json!(g.src_ports.to_string()));
            m.insert("dst_ports".into(), json!(g.dst_ports.to_string()));
        }
        PortKind::Sink(s) => {
            m.insert("check_order".into(), json!(s.check_order));
        }
        PortKind::PcapIn(p) => {
            m.insert("path".into(), json!(p.path.to_string_lossy()));
            m.insert(
                "pace".into(),
                match p.pace {
                    Some(v) => json!(v),
                    None => json!(false),
                },
            );
            m.insert("loops".into(), json!(p.loops));
        }
        PortKind::PcapOut(p) => {
            m.insert("path".into(), json!(p.path.to_string_lossy()));
            m.insert("snaplen".into(), json!(p.snaplen));
        }
        PortKind::AfXdp(n) | PortKind::AfPacket(n) | PortKind::Tap(n) | PortKind::Dpdk(n) => {
            m.insert("interface".into(), json!(n.interface));
            if let Value::Object(opts) = n.options.to_json() {
                m.extend(opts);
            }
        }
    }
    Value::Object(m)
}

fn nf(n: &NfSpec) -> Value {
    let mut v = json!({
        "name": n.name,
        "type": n.nf_type,
        "isolation": n.isolation.name(),
        "config": n.config.to_json(),
    });
    if let Some(w) = n.cpu_weight {
        v["cpu_weight"] = json!(w);
    }
    if let Some(r) = &n.wakeup {
        v["wakeup"] = r.emit();
    }
    if let Some(s) = &n.sandbox {
        v["sandbox"] = s.emit();
    }
    if let Some(t) = &n.tenant {
        v["tenant"] = json!(t);
    }
    if let Some(d) = &n.domain {
        v["domain"] = json!(d);
    }
    if n.replicas != 1 {
        v["replicas"] = json!(n.replicas);
    }
    if n.steer != Steer::default() {
        v["steer"] = json!(n.steer.name());
    }
    if let Some(c) = &n.class {
        v["class"] = c.emit();
    }
    if n.reset != crate::model::ResetMode::default() {
        v["reset"] = json!(n.reset.name());
    }
    if n.fallback != crate::model::Fallback::default() {
        v["fallback"] = json!(n.fallback.name());
    }
    if let Some(p) = &n.pool {
        v["pool"] = json!({ "min": p.min, "max": p.max });
    }
    if n.generation != 0 {
        v["generation"] = json!(n.generation);
    }
    if let Some(d) = &n.draining {
        v["draining"] = json!({
            "generation": d.generation,
            "config": d.config.to_json(),
            "replicas": d.replicas,
        });
    }
    v
}

fn chain(c: &ChainSpec) -> Value {
    let mut v = json!({
        "name": c.name,
        "from": c.from,
        "nfs": c.nfs,
        "to": c.to,
    });
    if let Some(m) = &c.matcher {
        v["match"] = matcher(m);
    }
    if let Some(r) = &c.wakeup {
        v["wakeup"] = r.emit();
    }
    if let Some(t) = &c.tenant {
        v["tenant"] = json!(t);
    }
    v
}

fn matcher(m: &MatchSpec) -> Value {
    let mut v = Map::new();
    if let Some(p) = m.proto {
        v.insert(
            "proto".into(),
            proto_name(p).map_or_else(|| json!(p), |n| json!(n)),
        );
    }
    for (k, net) in [("src", &m.src), ("dst", &m.dst)] {
        if let Some(n) = net {
            v.insert(k.into(), json!(n.to_string()));
        }
    }
    for (k, r) in [("src_port", &m.src_port), ("dst_port", &m.dst_port)] {
        if let Some(r) = r {
            v.insert(k.into(), json!(r.to_string()));
        }
    }
    if let Some(ipv) = m.ip_version {
        v.insert("ip_version".into(), json!(ipv));
    }
    Value::Object(v)
}
