//! pcap writer/reader round trips, foreign formats, corrupt files, replay,
//! and an interoperability check against `tshark` when it is installed.

use std::io::Cursor;
use std::path::PathBuf;
use std::process::Command;

use proptest::prelude::*;
use sluice_ports::generator::MAX_FRAME_LEN;
use sluice_ports::pcap::{
    Pacer, PcapError, PcapReader, PcapReplay, PcapWriter, TsResolution, MAX_SNAPLEN,
};
use sluice_ports::{Generator, GeneratorConfig, IpVersionChoice, Protocol, SizeSpec};

fn tmp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-ports-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A realistic Ethernet/IPv4/UDP frame of `len` bytes (header bytes only
/// need to look plausible to tshark; checksums are not validated by it).
fn frame(len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![tag; len.max(42)];
    f[..14].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
    let ip_len = (f.len() - 14) as u16;
    f[14..34].copy_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[34..38].copy_from_slice(&[0x04, 0xd2, 0x16, 0x2e]);
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]);
    f
}

fn sample() -> Vec<(u64, Vec<u8>)> {
    vec![
        (1_700_000_000_123_456_789, frame(60, 1)),
        (1_700_000_000_123_456_790, frame(1514, 2)),
        (1_700_000_001_000_000_000, frame(200, 3)),
        (5, frame(42, 4)),
    ]
}

#[test]
fn write_then_read_round_trips_bytes_and_timestamps() {
    let path = tmp_path("round_trip.pcap");
    let mut w = PcapWriter::create(&path, 0).unwrap();
    for (ts, f) in sample() {
        w.write_packet(ts, &f).unwrap();
    }
    assert_eq!(w.packets_written(), 4);
    w.flush().unwrap();
    drop(w);

    let mut r = PcapReader::open(&path).unwrap();
    assert_eq!(r.header().resolution, TsResolution::Nanos);
    assert_eq!(r.header().linktype, 1);
    assert_eq!(r.header().snaplen, MAX_SNAPLEN);
    let got: Vec<_> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, sample());
    assert!(r.next().is_none());
}

#[test]
fn snaplen_truncates_but_keeps_orig_len() {
    let mut w = PcapWriter::new(Vec::new(), 100).unwrap();
    w.write_packet(1, &frame(1514, 9)).unwrap();
    let bytes = w.into_inner().unwrap();
    let mut r = PcapReader::new(Cursor::new(bytes)).unwrap();
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!(p.data.len(), 100);
    assert_eq!(p.orig_len, 1514);
    assert_eq!(p.data, &frame(1514, 9)[..100]);
}

#[test]
fn writer_rejects_timestamps_beyond_32_bit_seconds() {
    let mut w = PcapWriter::new(Vec::new(), 0).unwrap();
    let e = w.write_packet(u64::MAX, &frame(60, 0)).unwrap_err();
    assert!(matches!(e, PcapError::TimestampOutOfRange(_)));
}

/// Builds a classic pcap file by hand in either byte order / resolution.
fn foreign_file(big_endian: bool, nanos: bool, recs: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let u32b = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let u16b = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = Vec::new();
    out.extend_from_slice(&u32b(magic));
    out.extend_from_slice(&u16b(2));
    out.extend_from_slice(&u16b(4));
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&u32b(65535));
    out.extend_from_slice(&u32b(1));
    for (s, frac, data) in recs {
        out.extend_from_slice(&u32b(*s));
        out.extend_from_slice(&u32b(*frac));
        out.extend_from_slice(&u32b(data.len() as u32));
        out.extend_from_slice(&u32b(data.len() as u32));
        out.extend_from_slice(data);
    }
    out
}

#[test]
fn reads_all_four_magic_variants() {
    let a = frame(60, 7);
    let b = frame(100, 8);
    for big_endian in [false, true] {
        for nanos in [false, true] {
            let file = foreign_file(big_endian, nanos, &[(10, 250, &a), (11, 999, &b)]);
            let mut r = PcapReader::new(Cursor::new(file)).unwrap();
            assert_eq!(r.header().big_endian, big_endian);
            assert_eq!(r.header().snaplen, 65535);
            let mul = if nanos { 1 } else { 1000 };
            let p = r.next_packet().unwrap().unwrap();
            assert_eq!(p.timestamp_ns, 10_000_000_000 + 250 * mul);
            assert_eq!(p.data, &a[..]);
            let p = r.next_packet().unwrap().unwrap();
            assert_eq!(p.timestamp_ns, 11_000_000_000 + 999 * mul);
            assert_eq!(p.data, &b[..]);
            assert!(r.next_packet().unwrap().is_none());
        }
    }
}

#[test]
fn clear_errors_on_bad_files() {
    let open = |b: Vec<u8>| PcapReader::new(Cursor::new(b));
    assert!(matches!(
        open(vec![]),
        Err(PcapError::TruncatedFileHeader { got: 0 })
    ));
    assert!(matches!(
        open(b"GIF89a..........................".to_vec()),
        Err(PcapError::BadMagic(_))
    ));
    assert!(matches!(
        open(vec![0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0]),
        Err(PcapError::PcapNg)
    ));
    let good = foreign_file(false, false, &[(1, 2, &frame(60, 1))]);
    assert!(matches!(
        open(good[..20].to_vec()),
        Err(PcapError::TruncatedFileHeader { got: 20 })
    ));
    let mut v3 = good.clone();
    v3[4] = 3;
    assert!(matches!(
        open(v3),
        Err(PcapError::UnsupportedVersion { major: 3, .. })
    ));

    // Truncated inside the record header, then inside the data.
    let mut r = open(good[..30].to_vec()).unwrap();
    let e = r.next_packet().unwrap_err();
    assert!(matches!(
        e,
        PcapError::TruncatedRecordHeader { offset: 24, got: 6 }
    ));
    assert!(e.to_string().contains("offset 24"));
    assert!(r.next_packet().unwrap().is_none(), "reader stays finished");
    let mut r = open(good[..good.len() - 1].to_vec()).unwrap();
    assert!(matches!(
        r.next_packet(),
        Err(PcapError::TruncatedRecord {
            expected: 60,
            got: 59,
            ..
        })
    ));

    // Absurd captured length and sub-second field.
    let mut huge = good.clone();
    huge[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut r = open(huge).unwrap();
    assert!(matches!(
        r.next_packet(),
        Err(PcapError::RecordTooLarge { len: u32::MAX, .. })
    ));
    let mut frac = good;
    frac[28..32].copy_from_slice(&1_000_000u32.to_le_bytes());
    let mut r = open(frac).unwrap();
    assert!(matches!(
        r.next_packet(),
        Err(PcapError::InvalidTimestamp {
            fraction: 1_000_000,
            ..
        })
    ));
}

#[test]
fn rewind_replays_from_the_start() {
    let mut w = PcapWriter::new(Cursor::new(Vec::new()), 0).unwrap();
    for (ts, f) in sample() {
        w.write_packet(ts, &f).unwrap();
    }
    let mut cur = w.into_inner().unwrap();
    cur.set_position(0);
    let mut r = PcapReader::new(cur).unwrap();
    let first: Vec<_> = r.by_ref().map(Result::unwrap).collect();
    r.rewind().unwrap();
    let second: Vec<_> = r.map(Result::unwrap).collect();
    assert_eq!(first.len(), 4);
    assert_eq!(first, second);
}

#[test]
fn replay_loops_with_increasing_timestamps_and_paces() {
    let mut w = PcapWriter::new(Vec::new(), 0).unwrap();
    // Three packets 1 ms apart.
    for i in 0..3u64 {
        w.write_packet(1_000_000_000 + i * 1_000_000, &frame(60, i as u8))
            .unwrap();
    }
    let bytes = w.into_inner().unwrap();
    let reader = PcapReader::new(Cursor::new(bytes.clone())).unwrap();
    let mut rp = PcapReplay::from_reader(reader, Some(2)).unwrap();
    assert_eq!(rp.len(), 3);
    let mut ts = Vec::new();
    while let Some((t, f)) = rp.next_frame() {
        assert_eq!(f.len(), 60);
        ts.push(t);
    }
    // Period = span (2 ms) + mean gap (1 ms).
    assert_eq!(
        ts,
        vec![0, 1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000]
    );
    assert_eq!(rp.loops_done(), 2);

    // Paced at 2x: packets become due every 0.5 ms of synthetic time.
    let reader = PcapReader::new(Cursor::new(bytes.clone())).unwrap();
    let mut rp = PcapReplay::from_reader(reader, None).unwrap();
    let mut pacer = Pacer::new(2.0);
    let mut sent = 0;
    let mut now = 10_000u64;
    while now <= 10_000 + 5_000_000 {
        while let Some((t, _)) = rp.peek() {
            if !pacer.is_due(t, now) {
                break;
            }
            rp.advance();
            sent += 1;
        }
        now += 10_000;
    }
    // Due at 0, 0.5, ..., 5.0 ms: 11 packets, loops running forever.
    assert_eq!(sent, 11);

    let reader = PcapReader::new(Cursor::new(bytes)).unwrap();
    assert!(PcapReplay::from_reader(reader, Some(0))
        .unwrap()
        .next_frame()
        .is_none());
}

#[test]
fn replay_keeps_the_intact_records_of_a_file_cut_in_its_last_record() {
    // As tcpdump and tshark do: the records before the cut are replayed,
    // and the cut one is counted and described instead of refusing the
    // whole file.
    let mut w = PcapWriter::new(Vec::new(), 0).unwrap();
    for (ts, f) in sample() {
        w.write_packet(ts, &f).unwrap();
    }
    let full = w.into_inner().unwrap();
    let frames: Vec<Vec<u8>> = sample().into_iter().map(|(_, f)| f).collect();
    let last_len = frames.last().unwrap().len();
    let last_at = full.len() - 16 - last_len;
    for (cut, words) in [
        (full.len() - 1, "41 of 42 captured bytes"),
        (last_at + 16, "0 of 42 captured bytes"),
        (last_at + 6, "record header at offset"),
    ] {
        let reader = PcapReader::new(Cursor::new(full[..cut].to_vec())).unwrap();
        let mut rp = PcapReplay::from_reader(reader, Some(1))
            .unwrap_or_else(|e| panic!("cut at {cut}: refused: {e}"));
        assert_eq!(rp.len(), frames.len() - 1, "cut at {cut}");
        assert_eq!(rp.truncated_records(), 1, "cut at {cut}");
        let why = rp.truncation().unwrap_or_default().to_string();
        assert!(why.contains(&format!("offset {last_at}")), "{why}");
        assert!(why.contains(words), "{why}");
        let mut got = Vec::new();
        while let Some((_, f)) = rp.next_frame() {
            got.push(f.to_vec());
        }
        assert_eq!(got, frames[..frames.len() - 1]);
    }
    // A whole file, and one cut exactly at a record boundary, lose nothing.
    for cut in [full.len(), last_at] {
        let reader = PcapReader::new(Cursor::new(full[..cut].to_vec())).unwrap();
        let rp = PcapReplay::from_reader(reader, Some(1)).unwrap();
        assert_eq!(rp.truncated_records(), 0, "cut at {cut}");
        assert_eq!(rp.truncation(), None);
    }
    // Corruption other than a short file still refuses the file.
    let mut bad = full.clone();
    bad[24 + 4..24 + 8].copy_from_slice(&2_000_000_000u32.to_ne_bytes());
    let reader = PcapReader::new(Cursor::new(bad)).unwrap();
    assert!(matches!(
        PcapReplay::from_reader(reader, Some(1)),
        Err(PcapError::InvalidTimestamp { .. })
    ));
}

/// True if `tshark` can be run; prints a skip message otherwise.
fn have_tshark(test: &str) -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(out) if out.status.success() => true,
        _ => {
            println!("SKIPPED {test}: tshark is not installed (apt-get install tshark)");
            false
        }
    }
}

#[test]
fn tshark_reads_our_files() {
    if !have_tshark("tshark_reads_our_files") {
        return;
    }
    let path = tmp_path("tshark.pcap");
    let mut w = PcapWriter::create(&path, 0).unwrap();
    for (ts, f) in sample() {
        w.write_packet(ts, &f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args(["-T", "fields", "-e", "frame.len", "-e", "frame.time_epoch"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    for (line, (ts, f)) in lines.iter().zip(sample()) {
        let mut cols = line.split('\t');
        assert_eq!(cols.next().unwrap(), f.len().to_string());
        let epoch = cols.next().unwrap();
        let want = format!("{}.{:09}", ts / 1_000_000_000, ts % 1_000_000_000);
        assert_eq!(epoch, want, "{line}");
    }
}

/// Independent check of the generator: Wireshark's dissectors verify the
/// IPv4, TCP and UDP checksums of every generated frame.
#[test]
fn tshark_validates_generated_checksums() {
    if !have_tshark("tshark_validates_generated_checksums") {
        return;
    }
    let path = tmp_path("generated.pcap");
    let mut w = PcapWriter::create(&path, 0).unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    let mut total = 0;
    for size in [SizeSpec::Imix, SizeSpec::Fixed(64), SizeSpec::Datacenter] {
        let mut g = Generator::new(GeneratorConfig {
            flows: 8,
            protocol: Protocol::Mixed,
            ip_version: IpVersionChoice::Mixed,
            size,
            packets_per_flow: 4,
            ..GeneratorConfig::default()
        })
        .unwrap();
        for i in 0..200u64 {
            let n = g.write_next(&mut buf, i * 1000);
            w.write_packet(i * 1000, &buf[..n]).unwrap();
            total += 1;
        }
    }
    w.flush().unwrap();
    drop(w);
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-e",
            "ip.checksum.status",
            "-e",
            "tcp.checksum.status",
            "-e",
            "udp.checksum.status",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), total);
    for line in lines {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 3, "{line:?}");
        // 1 = good; IPv6 frames have no IP checksum; one of TCP/UDP.
        assert!(
            cols[0].is_empty() || cols[0] == "1",
            "ip checksum: {line:?}"
        );
        let l4: Vec<&&str> = cols[1..].iter().filter(|c| !c.is_empty()).collect();
        assert_eq!(l4, vec![&"1"], "l4 checksum: {line:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic the reader, and it terminates.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(r) = PcapReader::new(Cursor::new(bytes.clone())) {
            for item in r.take(1000) {
                let _ = item;
            }
        }
        // Garbage behind a valid header reaches the record parser.
        let mut file = foreign_file(false, true, &[]);
        file.extend_from_slice(&bytes);
        let r = PcapReader::new(Cursor::new(file)).unwrap();
        let n = r.take(1000).count();
        prop_assert!(n <= 1000);
    }

    /// Any truncation of a valid file gives the records before the cut and
    /// then either a clean end (cut at a boundary) or a truncation error.
    #[test]
    fn truncation_gives_prefix_then_error(cut in 0usize..2000) {
        let mut w = PcapWriter::new(Vec::new(), 0).unwrap();
        for (ts, f) in sample() {
            w.write_packet(ts, &f).unwrap();
        }
        let full = w.into_inner().unwrap();
        let cut = cut.min(full.len());
        match PcapReader::new(Cursor::new(full[..cut].to_vec())) {
            Err(e) => {
                prop_assert!(cut < 24);
                prop_assert!(matches!(e, PcapError::TruncatedFileHeader { .. }), "{e}");
            }
            Ok(r) => {
                let items: Vec<_> = r.collect();
                let want = sample();
                let mut boundary = 24;
                let mut complete = 0;
                for (_, f) in &want {
                    if boundary + 16 + f.len() > cut {
                        break;
                    }
                    boundary += 16 + f.len();
                    complete += 1;
                }
                for (item, (ts, f)) in items.iter().zip(&want).take(complete) {
                    let (t, d) = item.as_ref().unwrap();
                    prop_assert_eq!(*t, *ts);
                    prop_assert_eq!(d, f);
                }
                if cut == boundary {
                    prop_assert_eq!(items.len(), complete);
                } else {
                    prop_assert_eq!(items.len(), complete + 1);
                    let last = items.last().unwrap();
                    let ok = matches!(
                        last,
                        Err(PcapError::TruncatedRecordHeader { .. })
                            | Err(PcapError::TruncatedRecord { .. })
                    );
                    prop_assert!(ok, "unexpected last item {:?}", last);
                }
            }
        }
    }
}
