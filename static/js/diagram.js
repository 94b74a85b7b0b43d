/*
 * Live state diagrams in plain SVG: states and edges come from the server's spec (built from
 * controller_core.states), counts from live.js, transitions from each delta's per-edge counts.
 *
 * Why it stays smooth in a storm: a delta carries *counts per edge*, not one event per partition,
 * so 20,000 transitions are a handful of numbers; all DOM writes happen in one requestAnimationFrame
 * callback; the animation loop runs only while something moves, and touches only edges that changed.
 */
(function () {
  "use strict";

  var live = window.KcpLive;
  var specsNode = document.getElementById("diagram-specs");
  if (!live || !specsNode) { return; }
  var specs = JSON.parse(specsNode.textContent);
  var root = live.root;
  var SVG = "http://www.w3.org/2000/svg";
  var CELL_X = 210, CELL_Y = 135, PAD_X = 95, PAD_Y = 82, NODE_W = 160, NODE_H = 62;
  var RATE_WINDOW_MS = 5000;
  var PULSE_MS = 700;

  var machines = {};

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    for (var k in attrs) { node.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function center(state) { return { x: PAD_X + state.x * CELL_X, y: PAD_Y + state.y * CELL_Y }; }

  // Where the segment from a's centre towards b leaves a's rectangle.
  function border(a, b) {
    var dx = b.x - a.x, dy = b.y - a.y;
    var sx = dx === 0 ? Infinity : (NODE_W / 2) / Math.abs(dx);
    var sy = dy === 0 ? Infinity : (NODE_H / 2) / Math.abs(dy);
    var s = Math.min(sx, sy);
    return { x: a.x + dx * s, y: a.y + dy * s };
  }

  function build(spec) {
    var svg = document.querySelector('svg.sm[data-machine="' + spec.machine + '"]');
    var maxX = 0, maxY = 0;
    spec.states.forEach(function (s) { maxX = Math.max(maxX, s.x); maxY = Math.max(maxY, s.y); });
    var width = PAD_X * 2 + maxX * CELL_X, height = PAD_Y * 2 + maxY * CELL_Y;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    var defs = el("defs", {}, svg);
    var marker = el("marker", { id: "arrow-" + spec.machine, viewBox: "0 0 10 10", refX: "9", refY: "5",
      markerWidth: "11", markerHeight: "11", markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }, marker);
    var edgeLayer = el("g", { class: "edges" }, svg);
    var nodeLayer = el("g", { class: "nodes" }, svg);
    var byName = {};
    spec.states.forEach(function (s) { byName[s.name] = s; });
    var pairs = {};
    spec.edges.forEach(function (e) { pairs[e[0] + ">" + e[1]] = true; });

    var m = { spec: spec, svg: svg, nodes: {}, edges: {}, prefix: spec.machine === "partition" ? "p:" : "r:" };
    spec.edges.forEach(function (e) {
      var a = center(byName[e[0]]), b = center(byName[e[1]]);
      var path;
      var labelAt;
      if (e[0] === e[1]) {
        var top = byName[e[0]].y === 0;
        var sy = top ? a.y - NODE_H / 2 : a.y + NODE_H / 2;
        var dir = top ? -1 : 1;
        path = "M" + (a.x - 22) + "," + sy + " C" + (a.x - 40) + "," + (sy + dir * 48) + " " + (a.x + 40) + "," +
          (sy + dir * 48) + " " + (a.x + 22) + "," + sy;
        labelAt = { x: a.x, y: sy + dir * 44 };
      } else {
        // Two opposite edges between the same states are drawn side by side, not on top of each other.
        var offset = pairs[e[1] + ">" + e[0]] ? 9 : 0;
        var len = Math.hypot(b.x - a.x, b.y - a.y) || 1;
        var nx = -(b.y - a.y) / len * offset, ny = (b.x - a.x) / len * offset;
        var p1 = border({ x: a.x + nx, y: a.y + ny }, { x: b.x + nx, y: b.y + ny });
        var p2 = border({ x: b.x + nx, y: b.y + ny }, { x: a.x + nx, y: a.y + ny });
        path = "M" + p1.x + "," + p1.y + " L" + p2.x + "," + p2.y;
        labelAt = { x: (p1.x + p2.x) / 2 + nx * 1.6, y: (p1.y + p2.y) / 2 + ny * 1.6 - 4 };
      }
      var g = el("g", { class: "edge", "data-edge": e[0] + ">" + e[1] }, edgeLayer);
      var line = el("path", { d: path, class: "edge-line", "marker-end": "url(#arrow-" + spec.machine + ")" }, g);
      var label = el("text", { x: labelAt.x, y: labelAt.y, class: "edge-rate", "text-anchor": "middle" }, g);
      var pulse = el("circle", { r: "6", class: "pulse", visibility: "hidden" }, g);
      pulse.setAttribute("fill", byName[e[1]].color);
      m.edges[e[0] + ">" + e[1]] = { g: g, line: line, label: label, pulse: pulse, hits: [], pulseStart: 0,
        pulseLen: 0, shown: "", total: 0 };
    });
    spec.states.forEach(function (s) {
      var c = center(s);
      var g = el("g", { class: "state", tabindex: "0", role: "button", "data-state": s.name,
        "aria-label": s.name + ": list members" }, nodeLayer);
      el("rect", { x: c.x - NODE_W / 2, y: c.y - NODE_H / 2, width: NODE_W, height: NODE_H, rx: "12",
        fill: s.color, class: "state-box" }, g);
      var name = el("text", { x: c.x, y: c.y - 8, class: "state-name", "text-anchor": "middle" }, g);
      name.textContent = s.label;
      var count = el("text", { x: c.x, y: c.y + 18, class: "state-count", "text-anchor": "middle",
        "data-state-count": s.name }, g);
      count.textContent = "…";
      g.addEventListener("click", function () { openMembers(spec.machine, s.name); });
      g.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { openMembers(spec.machine, s.name); } });
      m.nodes[s.name] = { g: g, count: count, shown: null };
    });
    machines[spec.machine] = m;
  }

  specs.forEach(build);

  // -- counts ----------------------------------------------------------------------------------
  function renderCounts() {
    Object.keys(machines).forEach(function (key) {
      var m = machines[key];
      var total = 0;
      Object.keys(m.nodes).forEach(function (state) {
        var n = live.counts[m.prefix + state] || 0;
        total += n;
        var node = m.nodes[state];
        if (node.shown !== n) {
          node.count.textContent = live.fmt(n);
          if (node.shown !== null) {
            node.g.classList.remove("bump");
            void node.g.getBBox();
            node.g.classList.add("bump");
          }
          node.shown = n;
          node.g.classList.toggle("empty", n === 0);
        }
      });
      var totalNode = document.querySelector('[data-total="' + key + '"]');
      if (totalNode) { totalNode.textContent = live.fmt(total) + (key === "partition" ? " partitions" : " replicas"); }
    });
  }
  live.on("render", renderCounts);

  // -- transitions -----------------------------------------------------------------------------
  var animating = false;

  function onDelta(msg) {
    var edges = (msg.data && msg.data.edges) || {};
    var now = performance.now();
    Object.keys(edges).forEach(function (machine) {
      var m = machines[machine];
      if (!m) { return; }
      var byEdge = edges[machine];
      Object.keys(byEdge).forEach(function (key) {
        var edge = m.edges[key];
        var n = byEdge[key];
        if (!edge || !n) { return; }
        edge.hits.push([now, n]);
        edge.total += n;
        edge.pulseStart = now;
        edge.pulseLen = edge.line.getTotalLength();
        edge.pulse.setAttribute("r", String(Math.min(12, 4 + Math.log10(n + 1) * 3)));
      });
    });
    if (!animating) { animating = true; requestAnimationFrame(animate); }
  }
  live.on("delta", onDelta);

  function animate(now) {
    var moving = false;
    Object.keys(machines).forEach(function (key) {
      var m = machines[key];
      Object.keys(m.edges).forEach(function (name) {
        var edge = m.edges[name];
        if (!edge.hits.length && !edge.shown && edge.pulse.getAttribute("visibility") === "hidden") { return; }
        while (edge.hits.length && now - edge.hits[0][0] > RATE_WINDOW_MS) { edge.hits.shift(); }
        var sum = 0;
        for (var i = 0; i < edge.hits.length; i++) { sum += edge.hits[i][1]; }
        var rate = sum / (RATE_WINDOW_MS / 1000);
        var text = sum ? (rate >= 10 ? Math.round(rate).toLocaleString("en-US") : rate.toFixed(1)) + "/s" : "";
        if (text !== edge.shown) {
          edge.label.textContent = text;
          edge.shown = text;
          edge.g.classList.toggle("active", sum > 0);
          edge.line.style.strokeWidth = sum ? String(Math.min(7, 2 + Math.log10(sum + 1) * 1.4)) : "";
        }
        var t = (now - edge.pulseStart) / PULSE_MS;
        if (edge.pulseStart && t <= 1) {
          var p = edge.line.getPointAtLength(edge.pulseLen * t);
          edge.pulse.setAttribute("cx", p.x);
          edge.pulse.setAttribute("cy", p.y);
          edge.pulse.setAttribute("visibility", "visible");
          moving = true;
        } else if (edge.pulse.getAttribute("visibility") !== "hidden") {
          edge.pulse.setAttribute("visibility", "hidden");
        }
        if (edge.hits.length) { moving = true; }
      });
    });
    if (moving) { requestAnimationFrame(animate); } else { animating = false; }
  }

  // -- members panel ---------------------------------------------------------------------------
  var panel = document.getElementById("members");
  var list = document.getElementById("members-list");
  var title = document.getElementById("members-title");
  var pageLabel = document.getElementById("members-page");
  var prev = document.getElementById("members-prev");
  var next = document.getElementById("members-next");
  var current = null;

  function openMembers(machine, state, page) {
    if (!current || current.machine !== machine || current.state !== state) { lastCount = null; }
    current = { machine: machine, state: state, page: page || 1 };
    var params = new URLSearchParams({ machine: machine, state: state, scope: live.scope, page: String(current.page) });
    panel.hidden = false;
    title.textContent = state;
    list.innerHTML = '<li class="muted">loading…</li>';
    fetch(root.dataset.membersUrl + "?" + params.toString(), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (body) {
        if (body.error) { list.innerHTML = '<li class="error"></li>'; list.firstChild.textContent = body.error; return; }
        var pages = Math.max(1, Math.ceil(body.total / body.per_page));
        title.textContent = state + " · " + live.fmt(body.total) + (machine === "partition" ? " partitions" : " replicas");
        list.setAttribute("start", String((body.page - 1) * body.per_page + 1));
        list.innerHTML = "";
        body.items.forEach(function (item) {
          var li = document.createElement("li");
          var a = document.createElement("a");
          a.href = item.url;
          a.textContent = item.label;
          li.appendChild(a);
          list.appendChild(li);
        });
        if (!body.items.length) { list.innerHTML = '<li class="muted">none right now</li>'; }
        pageLabel.textContent = "page " + body.page + " of " + pages;
        prev.disabled = body.page <= 1;
        next.disabled = body.page >= pages;
      })
      .catch(function () { list.innerHTML = '<li class="error">could not load the members</li>'; });
  }
  // Keep an open member list current: refetch (at most once a second) when its state's count moves.
  var lastCount = null;
  var refreshTimer = null;
  live.on("render", function () {
    if (!current || panel.hidden) { return; }
    var prefix = current.machine === "partition" ? "p:" : "r:";
    var n = live.counts[prefix + current.state] || 0;
    if (lastCount !== null && n !== lastCount && !refreshTimer) {
      refreshTimer = setTimeout(function () {
        refreshTimer = null;
        if (current && !panel.hidden) { openMembers(current.machine, current.state, current.page); }
      }, 1000);
    }
    lastCount = n;
  });
  prev.addEventListener("click", function () { if (current) { openMembers(current.machine, current.state, current.page - 1); } });
  next.addEventListener("click", function () { if (current) { openMembers(current.machine, current.state, current.page + 1); } });
  document.getElementById("members-close").addEventListener("click", function () { panel.hidden = true; });
})();
