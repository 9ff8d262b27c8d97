use super::*;

const MOUNTINFO_V1: &str = "\
25 30 0:23 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
32 25 0:30 / /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset
garbage line without a separator
";

#[test]
fn weights_keep_their_ratios_on_both_interfaces() {
    assert_eq!(Flavor::V2.weight_file(100), ("cpu.weight", "100".into()));
    assert_eq!(Flavor::V1.weight_file(100), ("cpu.shares", "1024".into()));
    assert_eq!(Flavor::V1.weight_file(30), ("cpu.shares", "307".into()));
    // Out of range is clamped, never written raw (the kernel would refuse).
    assert_eq!(Flavor::V2.weight_file(0), ("cpu.weight", "1".into()));
    assert_eq!(
        Flavor::V2.weight_file(u32::MAX),
        ("cpu.weight", "10000".into())
    );
    assert_eq!(Flavor::V1.weight_file(1), ("cpu.shares", "10".into()));
    assert_eq!(
        Flavor::V1.weight_file(10_000),
        ("cpu.shares", "102400".into())
    );
}

#[test]
fn finds_the_v1_cpu_hierarchy_and_the_process_group_in_it() {
    // The unified hierarchy has no cpu controller here (no such directory),
    // so the v1 one that lists `cpu` among its options is used.
    let own = "12:cpuset:/\n4:cpu,cpuacct:/system.slice/x.service\n0::/system.slice/x.service\n";
    assert_eq!(
        locate(MOUNTINFO_V1, own, "cpu"),
        Some((
            Flavor::V1,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/system.slice/x.service")
        ))
    );
    assert_eq!(locate("", own, "cpu"), None, "nothing mounted");
    assert_eq!(
        locate(MOUNTINFO_V1, "0::/\n", "cpu"),
        None,
        "no v1 cpu line"
    );
}

#[test]
fn prefers_the_unified_hierarchy_when_it_has_the_cpu_controller() {
    let dir = std::env::temp_dir().join(format!("sluice-cg-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(
        dir.join("a/cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    )
    .unwrap();
    let info = format!("26 25 0:24 / {} rw - cgroup2 cgroup2 rw\n", dir.display());
    assert_eq!(
        locate(&info, "0::/a\n", "cpu"),
        Some((Flavor::V2, dir.join("a")))
    );
    std::fs::write(dir.join("a/cgroup.controllers"), "memory pids\n").unwrap();
    assert_eq!(
        locate(&info, "0::/a\n", "cpu"),
        None,
        "v2 without cpu, no v1"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_sweep_removes_only_groups_of_platforms_that_are_gone() {
    let dir = std::env::temp_dir().join(format!("sluice-cg-sweep-{}", std::process::id()));
    let dead = dir.join("sluice-2147483600-0");
    let alive = dir.join(format!("sluice-{}-3", std::process::id()));
    let other = dir.join("sluice-notapid");
    for d in [dead.join("nf-1"), alive.join("nf-1"), other.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    sweep(&dir);
    assert!(!dead.exists());
    assert!(alive.join("nf-1").exists() && other.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn spinner(cpu: usize) -> std::process::Child {
    let child = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    crate::pin_process_to_cpu(pid, cpu).unwrap();
    child
}

#[test]
fn groups_hold_their_process_with_its_weight_and_vanish_when_dropped() {
    if !is_root() {
        eprintln!("skipped: creating control groups needs root");
        return;
    }
    let mut g = CpuGroups::open().expect("root has a cpu controller on this machine");
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    g.place(7, pid, 30).unwrap();
    let expected = match g.flavor() {
        Flavor::V2 => "30",
        Flavor::V1 => "307",
    };
    assert_eq!(g.weight_raw(7).unwrap(), expected);
    let procs = std::fs::read_to_string(g.path(7).join("cgroup.procs")).unwrap();
    assert_eq!(procs.trim(), child.id().to_string());
    g.set_weight(7, 200).unwrap();
    assert_ne!(g.weight_raw(7).unwrap(), expected);
    assert!(!g.remove(7), "a group that holds a process stays");
    child.kill().unwrap();
    child.wait().unwrap();
    let root = g.root.clone();
    drop(g);
    assert!(!root.exists(), "{} left behind", root.display());
}

/// The kernel shares one CPU between two spinning processes by the weights
/// of their groups (by CPU time, not by who yields).
#[test]
fn two_spinners_share_a_cpu_by_their_weights() {
    if !is_root() {
        eprintln!("skipped: creating control groups needs root");
        return;
    }
    let cpu = *crate::allowed_cpus().last().unwrap();
    let mut g = CpuGroups::open().unwrap();
    let mut kids = [spinner(cpu), spinner(cpu)];
    for (k, (kid, w)) in kids.iter().zip([100, 300]).enumerate() {
        let pid = Pid::from_raw(kid.id() as i32).unwrap();
        g.place(k as u32, pid, w).unwrap();
    }
    let cpu_ns = |kid: &std::process::Child| {
        crate::sched_times(Pid::from_raw(kid.id() as i32).unwrap())
            .unwrap()
            .on_cpu_ns
    };
    let before: Vec<u64> = kids.iter().map(cpu_ns).collect();
    std::thread::sleep(std::time::Duration::from_millis(600));
    let after: Vec<u64> = kids.iter().map(cpu_ns).collect();
    for k in &mut kids {
        k.kill().unwrap();
        k.wait().unwrap();
    }
    let (light, heavy) = (after[0] - before[0], after[1] - before[1]);
    let share = light as f64 / (light + heavy) as f64;
    // Expected 0.25. Without the groups the two would share equally (0.5);
    // the margin is for other tasks on a busy CPU, which take time from
    // both groups alike.
    assert!((0.15..0.35).contains(&share), "light share {share:.3}");
}
