/* The C side of the DPDK port: DPDK's fast-path functions
 * (rte_eth_rx_burst, rte_pktmbuf_alloc, ...) are static inline in its
 * headers, so Rust cannot call them directly; this file wraps each one the
 * port needs in a real symbol. Everything here is a thin pass-through. */
#include <string.h>
#include <stdio.h>

#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_dev.h>
#include <rte_bus.h>
#include <rte_bus_vdev.h>

int sl_eal_init(int argc, char **argv) {
    int r = rte_eal_init(argc, argv);
    return r < 0 ? -rte_errno : r;
}

const char *sl_strerror(int err) { return rte_strerror(err); }

/* Creates a device from devargs ("net_null0,size=64") after EAL init.
 * What DPDK logs meanwhile goes to `log` (NUL-terminated, truncated to
 * `loglen`) instead of stderr: a driver that refuses its arguments says
 * why only there, and may even return success without creating a port.
 * The log stream is process-wide; callers hold the port control lock, and
 * the fast path does not log. */
int sl_dev_probe(const char *devargs, char *log, size_t loglen) {
    FILE *f = NULL;
    if (log != NULL && loglen > 0) {
        log[0] = 0;
        f = fmemopen(log, loglen, "w");
        if (f != NULL) {
            setvbuf(f, NULL, _IONBF, 0);
            rte_openlog_stream(f);
        }
    }
    int r = rte_dev_probe(devargs);
    if (f != NULL) {
        rte_openlog_stream(NULL);
        fclose(f);
        log[loglen - 1] = 0;
    }
    return r;
}

/* Removes virtual device `name` from the vdev bus: after a driver refused
 * its arguments but returned success, the name stays taken otherwise. */
int sl_vdev_uninit(const char *name) { return rte_vdev_uninit(name); }

int sl_port_by_name(const char *name, uint16_t *port) {
    return rte_eth_dev_get_port_by_name(name, port);
}

/* Configures `nq` RX and TX queues with `nb_desc` descriptors, a mempool
 * of `mbufs` buffers, starts the port and enables promiscuous mode (a
 * bump in the wire forwards frames for any MAC). On failure writes a
 * message into err and returns a negative errno. */
int sl_port_setup(uint16_t port, uint16_t nq, uint16_t nb_desc, unsigned mbufs,
                  struct rte_mempool **mp_out, char *err, size_t errlen) {
    struct rte_eth_conf conf;
    struct rte_eth_dev_info info;
    char name[RTE_MEMPOOL_NAMESIZE];
    int r;
    memset(&conf, 0, sizeof conf);
    r = rte_eth_dev_info_get(port, &info);
    if (r < 0) { snprintf(err, errlen, "rte_eth_dev_info_get: %s", rte_strerror(-r)); return r; }
    if (nq > info.max_rx_queues || nq > info.max_tx_queues) {
        snprintf(err, errlen, "the device has %u RX / %u TX queues, %u asked",
                 info.max_rx_queues, info.max_tx_queues, nq);
        return -EINVAL;
    }
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    snprintf(name, sizeof name, "sluice_p%u", port);
    struct rte_mempool *mp = rte_mempool_lookup(name);
    if (mp == NULL)
        mp = rte_pktmbuf_pool_create(name, mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                     rte_eth_dev_socket_id(port));
    if (mp == NULL) {
        snprintf(err, errlen, "creating %u mbufs: %s", mbufs, rte_strerror(rte_errno));
        return -rte_errno;
    }
    *mp_out = mp;
    r = rte_eth_dev_configure(port, nq, nq, &conf);
    if (r < 0) { snprintf(err, errlen, "rte_eth_dev_configure: %s", rte_strerror(-r)); return r; }
    uint16_t rxd = nb_desc, txd = nb_desc;
    r = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
    if (r < 0) { snprintf(err, errlen, "adjusting descriptors: %s", rte_strerror(-r)); return r; }
    for (uint16_t q = 0; q < nq; q++) {
        r = rte_eth_rx_queue_setup(port, q, rxd, rte_eth_dev_socket_id(port), NULL, mp);
        if (r < 0) { snprintf(err, errlen, "RX queue %u: %s", q, rte_strerror(-r)); return r; }
        r = rte_eth_tx_queue_setup(port, q, txd, rte_eth_dev_socket_id(port), NULL);
        if (r < 0) { snprintf(err, errlen, "TX queue %u: %s", q, rte_strerror(-r)); return r; }
    }
    r = rte_eth_dev_start(port);
    if (r < 0) { snprintf(err, errlen, "rte_eth_dev_start: %s", rte_strerror(-r)); return r; }
    /* Not every PMD supports promiscuous mode (net_null, net_ring ignore
     * MACs anyway): a failure here is not an error. */
    (void)rte_eth_promiscuous_enable(port);
    return 0;
}

/* Stops and closes the port; removes the device too when it was created
 * by sl_dev_probe (a vdev), so its name can be probed again. */
void sl_port_close(uint16_t port, int remove, struct rte_mempool *mp) {
    struct rte_eth_dev_info info;
    struct rte_device *dev = NULL;
    if (rte_eth_dev_info_get(port, &info) == 0) dev = info.device;
    (void)rte_eth_dev_stop(port);
    (void)rte_eth_dev_close(port);
    if (remove && dev != NULL) (void)rte_dev_remove(dev);
    if (mp != NULL) rte_mempool_free(mp);
}

/* Gives the calling thread an lcore id if it has none. Returns 1 if it
 * registered it now, 0 if the thread had one (an EAL thread), a negative
 * errno if DPDK has no id left. */
int sl_thread_register(void) {
    if (rte_lcore_id() != LCORE_ID_ANY) return 0;
    return rte_thread_register() == 0 ? 1 : -rte_errno;
}

void sl_thread_unregister(void) { rte_thread_unregister(); }

uint16_t sl_rx_burst(uint16_t port, uint16_t q, struct rte_mbuf **pkts, uint16_t n) {
    return rte_eth_rx_burst(port, q, pkts, n);
}

uint16_t sl_tx_burst(uint16_t port, uint16_t q, struct rte_mbuf **pkts, uint16_t n) {
    return rte_eth_tx_burst(port, q, pkts, n);
}

/* Copies the whole frame (all segments) into dst; returns its length, or
 * -1 if it is longer than cap (nothing copied). */
int sl_mbuf_copy_out(const struct rte_mbuf *m, void *dst, uint32_t cap) {
    uint32_t len = rte_pktmbuf_pkt_len(m);
    if (len > cap) return -1;
    if (m->nb_segs == 1) {
        rte_memcpy(dst, rte_pktmbuf_mtod(m, const void *), len);
        return (int)len;
    }
    const void *p = rte_pktmbuf_read(m, 0, len, dst);
    if (p == NULL) return -1;
    if (p != dst) rte_memcpy(dst, p, len);
    return (int)len;
}

void sl_mbuf_free_bulk(struct rte_mbuf **pkts, unsigned n) { rte_pktmbuf_free_bulk(pkts, n); }

int sl_mbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **pkts, unsigned n) {
    return rte_pktmbuf_alloc_bulk(mp, pkts, n);
}

/* Sets a fresh mbuf's data to src; -1 if it does not fit one segment. */
int sl_mbuf_copy_in(struct rte_mbuf *m, const void *src, uint16_t len) {
    char *d = rte_pktmbuf_append(m, len);
    if (d == NULL) return -1;
    rte_memcpy(d, src, len);
    return 0;
}

/* ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf */
int sl_stats(uint16_t port, uint64_t out[8]) {
    struct rte_eth_stats s;
    int r = rte_eth_stats_get(port, &s);
    if (r < 0) return r;
    out[0] = s.ipackets; out[1] = s.opackets; out[2] = s.ibytes; out[3] = s.obytes;
    out[4] = s.imissed; out[5] = s.ierrors; out[6] = s.oerrors; out[7] = s.rx_nombuf;
    return 0;
}
