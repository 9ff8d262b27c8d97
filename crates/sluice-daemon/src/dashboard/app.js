// The sluice dashboard: each chain as a graph, rates and drops refreshed
// every second from the daemon's API (same origin; over TCP the token
// cookie rides along).
"use strict";

const NODE_W = 130, NODE_H = 54, GAP = 46;
let last = null; // { t, nfs: {name: packets}, ports: {name: {rx, tx}} }

async function getJson(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

function fmtRate(pps) {
  if (pps >= 1e6) return (pps / 1e6).toFixed(2) + " Mpps";
  if (pps >= 1e3) return (pps / 1e3).toFixed(1) + " kpps";
  return pps.toFixed(0) + " pps";
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function node(svg, x, kind, name, line1, line2, down) {
  const g = svgEl("g", { class: "node " + kind + (down ? " down" : ""), "data-name": name,
                          transform: "translate(" + x + ",8)" });
  g.appendChild(svgEl("rect", { width: NODE_W, height: NODE_H, rx: 6 }));
  g.appendChild(svgEl("text", { x: 8, y: 17, "font-weight": "bold" }, name));
  g.appendChild(svgEl("text", { x: 8, y: 33, class: "rate" }, line1));
  g.appendChild(svgEl("text", { x: 8, y: 48, class: line2 && line2 !== "no drops" ? "drops" : "" },
                      line2 || ""));
  svg.appendChild(g);
}

function draw(chains, stats, rates) {
  const root = document.getElementById("chains");
  root.replaceChildren();
  const nfByName = Object.fromEntries(stats.nfs.map(n => [n.name, n]));
  for (const c of chains) {
    const div = document.createElement("div");
    div.className = "chain";
    div.dataset.chain = c.name;
    const h = document.createElement("h2");
    const lat = (stats.chains || []).find(x => x.name === c.name);
    h.textContent = c.name + (lat && lat.packets ? "  ·  p50 " + (lat.p50_ns / 1e3).toFixed(0) + " µs, p99 " + (lat.p99_ns / 1e3).toFixed(0) + " µs" : "");
    div.appendChild(h);
    const hops = [c.from].concat(c.path);
    const width = hops.length * (NODE_W + GAP);
    const svg = svgEl("svg", { width: width, height: NODE_H + 16, role: "img",
                                "aria-label": "chain " + c.name });
    const defs = svgEl("defs", {});
    const m = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
                                markerWidth: 6, markerHeight: 6, orient: "auto" });
    m.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8a939d" }));
    defs.appendChild(m);
    svg.appendChild(defs);
    hops.forEach((name, i) => {
      const x = i * (NODE_W + GAP);
      if (i > 0) svg.appendChild(svgEl("line", { class: "edge", x1: x - GAP, y1: 8 + NODE_H / 2,
                                                 x2: x - 2, y2: 8 + NODE_H / 2 }));
      const isPort = i === 0 || i === hops.length - 1;
      if (isPort) {
        const r = rates.ports[name] || { rx: 0, tx: 0 };
        node(svg, x, "port", name, fmtRate(i === 0 ? r.rx : r.tx), i === 0 ? "in" : "out", false);
      } else {
        const nf = nfByName[name];
        const drops = nf ? Object.values(nf.drops).reduce((a, b) => a + b, 0) : 0;
        node(svg, x, "nf", name, fmtRate(rates.nfs[name] || 0),
             drops ? drops + " dropped" : "no drops", false);
      }
    });
    div.appendChild(svg);
    root.appendChild(div);
  }
}

async function tick() {
  try {
    const [chains, stats] = await Promise.all([getJson("/v1/chains"), getJson("/v1/stats")]);
    const now = performance.now() / 1000;
    const cur = { t: now, nfs: {}, ports: {} };
    for (const n of stats.nfs) cur.nfs[n.name] = n.packets;
    for (const p of stats.ports) cur.ports[p.name] = { rx: p.rx_packets, tx: p.tx_packets };
    const rates = { nfs: {}, ports: {} };
    if (last) {
      const dt = Math.max(now - last.t, 1e-3);
      for (const [k, v] of Object.entries(cur.nfs)) rates.nfs[k] = Math.max(0, v - (last.nfs[k] || 0)) / dt;
      for (const [k, v] of Object.entries(cur.ports)) {
        const o = last.ports[k] || { rx: 0, tx: 0 };
        rates.ports[k] = { rx: Math.max(0, v.rx - o.rx) / dt, tx: Math.max(0, v.tx - o.tx) / dt };
      }
    }
    last = cur;
    document.getElementById("summary").textContent =
      chains.length + " chains · " + stats.nfs.length + " NFs · in " + stats.packets_in +
      " · out " + stats.packets_out + " · drops " + stats.drops_total +
      " · buffers free " + stats.buffers.free + "/" + stats.buffers.capacity;
    document.getElementById("error").textContent = "";
    draw(chains, stats, rates);
    document.body.dataset.ready = "1";
  } catch (e) {
    document.getElementById("error").textContent = String(e);
  }
}

tick();
setInterval(tick, 1000);
