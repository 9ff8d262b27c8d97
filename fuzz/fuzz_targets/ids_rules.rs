//! `ids` rule parser: any text either loads or gives an error (never a
//! panic), and whatever loads compiles and runs on a few packets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nfs::ids::alert_log::AlertLog;
use sluice_nfs::ids::engine::{Engine, EngineConfig};
use sluice_nfs::ids::matcher::Matcher;
use sluice_nfs::ids::rule_parser::{parse_rules_text, Vars};
use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};

fn tcp(payload: &[u8], seq: u32) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: [192, 0, 2, 1].into(),
        dst_ip: [10, 1, 0, 1].into(),
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port: 1234,
            dst_port: 80,
            seq,
            ack: 1,
            flags: TcpFlags::ACK,
            window: 512,
        },
    };
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, &spec, payload).unwrap();
    buf.truncate(n);
    buf
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut vars = Vars::new();
    vars.set("HOME_NET", "[10.0.0.0/8,!10.9.0.0/16]");
    vars.set("EXTERNAL_NET", "!$HOME_NET");
    vars.set("LOOP", "$LOOP");
    let Ok(rules) = parse_rules_text(&text, "fuzz.rules", &mut vars) else {
        return;
    };
    if rules.is_empty() || rules.len() > 64 {
        return;
    }
    let matcher = Matcher::new(rules, 255);
    let mut e = Engine::new(
        matcher,
        EngineConfig {
            ips: true,
            stream: true,
            flow_capacity: 16,
            log: AlertLog::new(None, 0, 0),
        },
    );
    // The rule text itself is a payload full of its own contents.
    let half = data.len() / 2;
    e.inspect(&tcp(&data[..half.min(1400)], 1), 3, 0);
    e.inspect(
        &tcp(
            &data[half..][..(data.len() - half).min(1400)],
            1 + half.min(1400) as u32,
        ),
        3,
        0,
    );
    let _ = e.take_stats();
});
