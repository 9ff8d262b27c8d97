//! With the `dpdk` feature: compiles the C shim against Debian's
//! `libdpdk-dev` (found with pkg-config) and links the DPDK libraries.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    dpdk::build();
}

#[cfg(feature = "dpdk")]
mod dpdk {
    use std::process::Command;

    fn pkg_config(arg: &str) -> String {
        let out = Command::new("pkg-config").args([arg, "libdpdk"]).output();
        match out {
            Ok(o) if o.status.success() => String::from_utf8(o.stdout).expect("utf-8"),
            _ => panic!(
                "the `dpdk` feature needs DPDK's development files: `apt-get install libdpdk-dev \
                 pkg-config` (Debian/Ubuntu), or build without `--features dpdk`"
            ),
        }
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=src/dpdk/shim.c");
        let cflags = pkg_config("--cflags");
        let mut b = cc::Build::new();
        b.file("src/dpdk/shim.c").opt_level(2).warnings(false);
        let mut it = cflags.split_whitespace();
        while let Some(f) = it.next() {
            if let Some(dir) = f.strip_prefix("-I") {
                b.include(dir);
            } else if f == "-include" {
                if let Some(h) = it.next() {
                    b.flag("-include").flag(h);
                }
            } else {
                b.flag(f);
            }
        }
        b.compile("sluice_dpdk_shim");
        // Only the libraries the shim uses; PMDs (net_ring, net_null,
        // net_af_packet, NIC drivers) are plugins EAL loads at init.
        for lib in [
            "rte_ethdev",
            "rte_mbuf",
            "rte_mempool",
            "rte_ring",
            "rte_eal",
            "rte_kvargs",
            // `rte_vdev_uninit`: freeing a virtual device a driver refused.
            "rte_bus_vdev",
        ] {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
        for f in pkg_config("--libs-only-L").split_whitespace() {
            if let Some(dir) = f.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            }
        }
    }
}
