//! A new TCP connection on the 5-tuple of one that just closed (the client
//! reused its port while the old flow lingers after its FINs) gets a flow
//! of its own, and NFs see the old flow end first — as Linux conntrack
//! treats a SYN in TIME_WAIT.

mod common;
use common::*;

use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
use sluice_ports::PcapWriter;

fn segment(forward: bool, seq: u32, ack: u32, flags: TcpFlags) -> Vec<u8> {
    let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let (pa, pb) = (40000, 80);
    let (src_ip, dst_ip, src_port, dst_port) = if forward {
        (a, b, pa, pb)
    } else {
        (b, a, pb, pa)
    };
    let spec = FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
        dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
        vlan: None,
        src_ip,
        dst_ip,
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window: 65535,
        },
    };
    let mut buf = [0u8; 128];
    let n = write_frame(&mut buf, &spec, &[]).unwrap();
    buf[..n].to_vec()
}

#[test]
fn syn_after_fins_on_the_same_tuple_starts_a_new_flow() {
    let (syn, ack, fin) = (TcpFlags::SYN, TcpFlags::ACK, TcpFlags::FIN);
    // Two connections, back to back, on one 5-tuple; plus a SYN
    // retransmission within the second (it must not split the flow).
    let mut frames = Vec::new();
    for base in [1000u32, 90_000] {
        frames.push(segment(true, base, 0, syn));
        frames.push(segment(false, 7, base + 1, syn | ack));
        frames.push(segment(true, base + 1, 8, ack));
        if base == 90_000 {
            frames.push(segment(true, base, 0, syn));
        }
        frames.push(segment(true, base + 1, 8, fin | ack));
        frames.push(segment(false, 8, base + 2, fin | ack));
        frames.push(segment(true, base + 2, 9, ack));
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("reuse.pcap");
    let mut w = PcapWriter::create(&pcap, 65535).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(i as u64 * 1000, f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let spec = format!(
        "ports:\n  - {{ name: in, kind: pcap_in, path: {} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: mon, type: monitor, isolation: inline }}\nchains:\n  - {{ name: c, from: in, nfs: [mon], to: out }}\n",
        pcap.display()
    );
    let (_d, path) = spec_file(&spec);
    let (out, r) = run_json(&path, 10.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["packets_out"], frames.len() as u64);
    assert_eq!(r["flows"]["created"], 2, "{r:#}");
    assert_eq!(r["flows"]["ended"], 2, "{r:#}");
    let mon = &nf(&r, "mon")["counters"];
    assert_eq!(mon["flows_ended"], 2, "{r:#}");
    // The first connection's six packets were one flow, the second's seven
    // another.
    assert_eq!(mon["largest_flow_packets"], 7, "{r:#}");
}
