//! Arbitrary frames through the bridge, load balancer (NAT) and policer
//! cores: no panic, and a NAT rewrite of a frame that parsed still parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nfs::bridge::core::{Bridge, PortVlans};
use sluice_nfs::load_balancer::balancer::{Backend, Balancer, Mode, Service};
use sluice_nfs::policer::dscp;
use sluice_nfs::policer::meter::{Buckets, Meter, MeterKind};

fuzz_target!(|data: &[u8]| {
    let Some((&port, frame)) = data.split_first() else {
        return;
    };
    let ports = [
        PortVlans {
            access: Some(1),
            trunk: vec![],
            native: None,
        },
        PortVlans {
            access: None,
            trunk: vec![1, 2, 3],
            native: Some(4),
        },
    ];
    let mut br = Bridge::new(&ports, 16, 1_000);
    let _ = br.decide(frame, usize::from(port % 2), 5);
    let _ = br.decide(frame, usize::from(port % 3), 5_000);
    br.sweep_all(10_000);

    let backends = vec![Backend {
        name: "b".into(),
        addr: "10.0.0.2".parse().unwrap(),
        port: Some(8080),
        mac: None,
        weight: 1,
    }];
    let svc = Service {
        vip: "10.0.0.1".parse().unwrap(),
        ports: vec![],
        tcp: true,
        udp: true,
    };
    let mut lb = Balancer::new(svc, Mode::Nat, backends, 101, 4, 4, 1_000);
    let mut f = frame.to_vec();
    let parsed = sluice_packet::parse(&f).is_ok();
    let _ = lb.handle(&mut f, u32::from(port), 1);
    if parsed {
        assert!(sluice_packet::parse(&f).is_ok());
    }
    let _ = lb.handle(&mut f, u32::from(port), 2);

    let m = Meter::new(MeterKind::SrTcm {
        cir: 1000,
        cbs: 100,
        ebs: 100,
    })
    .unwrap();
    let mut b = Buckets::default();
    let mut f = frame.to_vec();
    if let Ok(h) = sluice_packet::parse(&f) {
        let l3 = usize::from(h.l3_offset);
        let _ = dscp::read(&f, l3, h.ip_version);
        dscp::write(&mut f, l3, h.ip_version, port & 63);
    }
    let _ = m.color(&mut b, 1, f.len() as u64, None);
});
