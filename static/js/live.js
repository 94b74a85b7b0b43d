/*
 * Live pages: one WebSocket per page, a snapshot with its (gen, seq), then sequence-checked deltas.
 *
 * Protocol (dashboard/live/protocol.py): a delta with seq <= held is already in the snapshot and is
 * dropped; one whose prev > held means a message was lost (channel layers drop under load), so the
 * page asks for a fresh snapshot; another gen means the mirror rebuilt its snapshot: same. A lost
 * *last* delta has no successor to show the gap, so each mirror heartbeat says which seq it last
 * sent to each scope (status.scope_seqs): holding less means a delta was lost, so: same (F19).
 * A resync that gets no snapshot (Redis blip on the server) is asked again after RESYNC_RETRY_MS.
 * Reconnects back off exponentially (0.5 s to 30 s, with jitter). The indicator shows
 * live / reconnecting / stale (the mirror's heartbeat is late, ZooKeeper is not connected, or a
 * resync is pending). DOM work happens once per animation frame, however many deltas arrived.
 */
(function () {
  "use strict";

  var root = document.getElementById("live-root");
  if (!root) { return; }

  var STALE_AFTER_MS = 5000;
  var RESYNC_RETRY_MS = 2000;  // soon enough that a lost answer still meets F19's 3 s
  var listeners = { snapshot: [], delta: [], render: [], status: [] };
  var held = { gen: null, seq: null };
  var counts = {};
  var brokers = {};
  var controller = {};
  var ws = null;
  var attempts = 0;
  var socketOpen = false;
  var snapshotSeen = false;
  var resyncPending = false;
  var lastStatus = null;
  var lastStatusAt = 0;
  var renderQueued = false;
  var closedFor = null;
  var trace = /[?&]trace=1\b/.test(location.search) ? [] : null;
  // What the page applied, in order: [kind, gen, seq] (bounded). Tests read it to prove the page
  // never went back (F19); people read it in the console when a page looks wrong.
  var applied = [];
  var APPLIED_MAX = 2000;

  var KcpLive = {
    root: root,
    cluster: root.dataset.cluster,
    scope: root.dataset.scope,
    counts: counts,
    brokers: brokers,
    controller: controller,
    on: function (kind, fn) { listeners[kind].push(fn); },
    requestRender: queueRender,
    resync: resync,
    fmt: fmt,
    trace: trace,
    held: held,
    applied: applied,
  };
  window.KcpLive = KcpLive;
  if (trace) { window.__kcpTrace = trace; }

  function fmt(n) {
    if (n === undefined || n === null) { return "0"; }
    return Number(n).toLocaleString("en-US");
  }

  function emit(kind, arg) {
    var fns = listeners[kind];
    for (var i = 0; i < fns.length; i++) {
      try { fns[i](arg); } catch (e) { console.error("live " + kind + " handler failed", e); }
    }
  }

  // -- connection ------------------------------------------------------------------------------
  function connect() {
    var proto = location.protocol === "https:" ? "wss://" : "ws://";
    ws = new WebSocket(proto + location.host + root.dataset.ws);
    ws.onopen = function () {
      socketOpen = true;
      attempts = 0;
      send({ action: "subscribe", scope: KcpLive.scope });
      updateIndicator();
    };
    ws.onmessage = function (event) {
      var msg;
      try { msg = JSON.parse(event.data); } catch (e) { return; }
      handle(msg);
    };
    ws.onclose = function (event) {
      socketOpen = false;
      snapshotSeen = false;
      ws = null;
      if (event.code === 4401 || event.code === 4403) {
        closedFor = event.code === 4401 ? "logged out" : "not allowed";
        updateIndicator();
        return; // retrying cannot help; the page's next load asks for a login
      }
      var delay = Math.min(30000, 500 * Math.pow(2, attempts)) * (0.75 + Math.random() * 0.5);
      attempts += 1;
      updateIndicator();
      setTimeout(connect, delay);
    };
  }

  function send(obj) {
    if (ws && ws.readyState === WebSocket.OPEN) { ws.send(JSON.stringify(obj)); }
  }

  var resyncTimer = null;
  function resync() {
    if (resyncPending) { return; }
    resyncPending = true;
    send({ action: "resync" });
    clearTimeout(resyncTimer);
    resyncTimer = setTimeout(function () {
      // No snapshot came (the server could not read one, or the socket went): ask again.
      if (resyncPending) { resyncPending = false; resync(); }
    }, RESYNC_RETRY_MS);
  }

  // -- messages --------------------------------------------------------------------------------
  function handle(msg) {
    switch (msg.kind) {
      case "snapshot": onSnapshot(msg); break;
      case "delta": onDelta(msg); break;
      case "status": onStatus(msg.status || {}); break;
      case "resync": resync(); break;
      case "error": console.warn("live:", msg.error); break;
    }
  }

  function noteApplied(kind, msg) {
    applied.push([kind, msg.gen, msg.seq]);
    if (applied.length > APPLIED_MAX) { applied.splice(0, applied.length - APPLIED_MAX); }
  }

  var reloading = false;
  function firstSync(gen) {
    if (reloading || root.dataset.renderedGen !== "" || !gen) { return reloading; }
    reloading = true;
    location.reload();
    return true;
  }

  function onSnapshot(msg) {
    // A page rendered before the cluster's first sync (just registered, or its ZooKeeper was
    // unreachable) has server-rendered tables with nothing in them: the first real snapshot reloads
    // it once, so tables the live updates do not rebuild (brokers, topics) are filled in too.
    if (firstSync(msg.gen)) { return; }
    resyncPending = false;
    snapshotSeen = true;
    held.gen = msg.gen;
    held.seq = msg.seq;
    noteApplied("snapshot", msg);
    var data = msg.data || {};
    replaceAll(counts, data.counts || {});
    if (data.brokers) { replaceAll(brokers, data.brokers); }
    if (data.controller) { replaceAll(controller, data.controller); }
    if (msg.status) { onStatus(msg.status); }
    emit("snapshot", msg);
    queueRender();
  }

  function onDelta(msg) {
    if (held.gen === null || resyncPending) { return; }
    if (msg.gen !== held.gen) { resync(); return; }
    if (msg.seq <= held.seq) { return; }
    if (msg.prev > held.seq) { resync(); return; }
    held.seq = msg.seq;
    noteApplied("delta", msg);
    var data = msg.data || {};
    var c = data.counts || {};
    for (var k in c) { if (Object.prototype.hasOwnProperty.call(c, k)) { counts[k] = c[k]; } }
    if (data.brokers) { for (var b in data.brokers) { brokers[b] = data.brokers[b]; } }
    if (data.removed_brokers) { data.removed_brokers.forEach(function (id) { delete brokers[String(id)]; }); }
    if (data.controller) { replaceAll(controller, data.controller); }
    emit("delta", msg);
    queueRender();
  }

  // The mirror sent this scope a delta after the one we hold, and it never arrived.
  function missedLastDelta(status) {
    var sent = status.scope_seqs ? status.scope_seqs[KcpLive.scope] : undefined;
    return typeof sent === "number" && held.gen !== null && status.gen === held.gen && held.seq !== null && sent > held.seq;
  }

  function onStatus(status) {
    if (firstSync(status.gen)) { return; }
    lastStatus = status;
    lastStatusAt = Date.now();
    if (status.gen && held.gen && status.gen !== held.gen && !status.resync_pending) { resync(); }
    else if (missedLastDelta(status)) { resync(); }
    emit("status", status);
    updateIndicator();
  }

  function replaceAll(target, source) {
    for (var k in target) { if (Object.prototype.hasOwnProperty.call(target, k)) { delete target[k]; } }
    for (var j in source) { if (Object.prototype.hasOwnProperty.call(source, j)) { target[j] = source[j]; } }
  }

  // -- rendering (batched per frame) -----------------------------------------------------------
  function queueRender() {
    if (renderQueued) { return; }
    renderQueued = true;
    requestAnimationFrame(render);
  }

  function setText(el, text) {
    if (el.textContent !== text) {
      el.textContent = text;
      el.classList.remove("flash");
      void el.offsetWidth; // restart the highlight animation
      el.classList.add("flash");
    }
  }

  function render() {
    renderQueued = false;
    var nodes = root.querySelectorAll("[data-count]");
    for (var i = 0; i < nodes.length; i++) {
      var key = nodes[i].getAttribute("data-count");
      setText(nodes[i], fmt(counts[key] || 0));
    }
    var alerts = root.querySelectorAll("[data-alert]");
    for (var a = 0; a < alerts.length; a++) {
      alerts[a].classList.toggle("on", (counts[alerts[a].getAttribute("data-alert")] || 0) > 0);
    }
    var partitions = counts.partitions || 0;
    var preferred = partitions > 0 ? (Math.round(1000 * (partitions - (counts.nonpref || 0)) / partitions) / 10).toFixed(1) : "–";
    var pref = root.querySelectorAll("[data-preferred]");
    for (var p = 0; p < pref.length; p++) { setText(pref[p], preferred); }
    var ctl = root.querySelectorAll("[data-controller]");
    for (var c = 0; c < ctl.length; c++) {
      var v = controller[ctl[c].getAttribute("data-controller")];
      setText(ctl[c], v === null || v === undefined ? "none" : String(v));
    }
    renderBrokerRows();
    emit("render", null);
    if (trace) {
      var sample = { t: performance.timeOrigin + performance.now(), seq: held.seq };
      for (var key2 in counts) { if (key2.charAt(0) === "p" && key2.charAt(1) === ":") { sample[key2] = counts[key2]; } }
      trace.push(sample);
    }
  }

  // Per-broker rows (overview, brokers page) from the cluster counters "b:<id>:<name>".
  function renderBrokerRows() {
    var rows = root.querySelectorAll("tr[data-broker]");
    if (!rows.length || KcpLive.scope !== "cluster") { return; }
    var live = Object.keys(brokers);
    var totalReplicas = 0, totalLeaders = 0;
    for (var k in counts) {
      if (k.charAt(0) !== "b") { continue; }
      if (/^b:-?\d+:replicas$/.test(k)) { totalReplicas += counts[k]; }
      else if (/^b:-?\d+:leaders$/.test(k)) { totalLeaders += counts[k]; }
    }
    var n = live.length || 1;
    var showSkew = (counts.partitions || 0) >= 50;
    for (var i = 0; i < rows.length; i++) {
      var id = rows[i].getAttribute("data-broker");
      var cells = rows[i].querySelectorAll("[data-bcount]");
      for (var j = 0; j < cells.length; j++) {
        setText(cells[j], fmt(counts["b:" + id + ":" + cells[j].getAttribute("data-bcount")] || 0));
      }
      var isLive = Object.prototype.hasOwnProperty.call(brokers, id);
      rows[i].classList.toggle("dead", !isLive);
      var skews = rows[i].querySelectorAll("[data-bskew]");
      for (var s = 0; s < skews.length; s++) {
        var what = skews[s].getAttribute("data-bskew");
        var mean = (what === "leaders" ? totalLeaders : totalReplicas) / n;
        var value = counts["b:" + id + ":" + what] || 0;
        setText(skews[s], showSkew && isLive && mean > 0 ? (Math.round((value - mean) / mean * 1000) / 10).toFixed(1) + "%" : "–");
      }
    }
  }

  // -- indicator -------------------------------------------------------------------------------
  var indicator = document.getElementById("live-indicator");
  var synced = document.getElementById("live-synced");
  var banner = document.getElementById("stale-banner");

  function staleReason() {
    if (!lastStatus) { return snapshotSeen ? "no heartbeat from the mirror" : null; }
    if (Date.now() - lastStatusAt > STALE_AFTER_MS) { return "no heartbeat from the mirror"; }
    var zk = lastStatus.zk_state ? String(lastStatus.zk_state) : "";
    if (zk === "UNREACHABLE" || zk === "SUSPENDED" || zk === "LOST") { return "ZooKeeper unreachable"; }
    if (lastStatus.present === false) { return "not mirrored yet"; }
    if (zk && zk !== "CONNECTED") { return "ZooKeeper " + zk.toLowerCase(); }
    if (lastStatus.resync_pending) { return "mirror resyncing"; }
    if (lastStatus.heartbeat_at && lastStatus.now && lastStatus.now - lastStatus.heartbeat_at > STALE_AFTER_MS) { return "mirror not running"; }
    return null;
  }

  function updateIndicator() {
    if (!indicator) { return; }
    var label, cls;
    var reason = staleReason();
    if (closedFor) { cls = "stale"; label = "disconnected (" + closedFor + ")"; }
    else if (!socketOpen) { cls = "reconnecting"; label = "reconnecting…"; }
    else if (!snapshotSeen) { cls = "connecting"; label = "connecting…"; }
    else if (reason) { cls = "stale"; label = "stale · " + reason; }
    else { cls = "live"; label = "live"; }
    indicator.className = "live-ind " + cls;
    indicator.setAttribute("data-state", cls);
    indicator.querySelector(".live-label").textContent = label;
    if (banner) {
      if (cls === "stale" && reason) {
        banner.hidden = false;
        banner.textContent = "What you see may be out of date: " + reason + ".";
      } else if (cls === "live") {
        banner.hidden = true;
      }
    }
    if (synced && lastStatus && lastStatus.synced_at) {
      var age = Math.max(0, Math.round((Date.now() - lastStatus.synced_at) / 1000));
      synced.textContent = age <= 1 ? "in sync" : "synced " + age + " s ago";
    }
  }
  setInterval(updateIndicator, 1000);

  // -- page behaviours -------------------------------------------------------------------------
  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, function (ch) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[ch];
    });
  }

  // The same markup as templates/clusters/_partition_row.html.
  function partitionRowHtml(row) {
    var base = "/clusters/" + encodeURIComponent(KcpLive.cluster) + "/topics/" + encodeURIComponent(row.topic) + "/" + row.partition + "/";
    var chips = row.replicas.map(function (r) {
      var cls = "chip" + (r.in_isr ? " isr" : " out") + (r.id === row.leader ? " leader" : "");
      var title = "broker " + r.id + (r.in_isr ? ", in ISR" : ", not in ISR") + (r.state ? ", " + r.state : "");
      return '<span class="' + cls + '" title="' + escapeHtml(title) + '">' + r.id + "</span>";
    }).join("");
    return '<td><a href="' + base + '">' + escapeHtml(row.name) + "</a></td>" +
      '<td class="num">' + (row.leader < 0 ? '<span class="badge bad">none</span>' : row.leader) + "</td>" +
      '<td class="replicas">' + chips + "</td>" +
      "<td>" + (row.preferred_leader ? '<span class="yes">yes</span>' : '<span class="no">no</span>') + "</td>" +
      '<td class="num">' + row.leader_epoch + "</td>" +
      '<td><span class="state-badge" data-state="' + escapeHtml(row.state) + '">' + escapeHtml(row.state) + "</span>" +
      (row.derived ? ' <span class="derived" title="derived from ZooKeeper, not reported by a controller">derived</span>' : "") + "</td>" +
      "<td>" + (row.reassigning ? '<span class="badge warn">reassigning</span>' : "") + "</td>";
  }

  var pendingRows = {};
  function queueRows(rows) {
    for (var i = 0; i < rows.length; i++) { pendingRows[rows[i].name] = rows[i]; }
    queueRender();
  }
  function renderRows() {
    var names = Object.keys(pendingRows);
    for (var i = 0; i < names.length; i++) {
      var tr = root.querySelector('tr[data-partition="' + CSS.escape(names[i]) + '"]');
      if (tr) {
        var row = pendingRows[names[i]];
        tr.innerHTML = partitionRowHtml(row);
        tr.className = "state-" + row.state + " flash-row";
        updatePartitionDetail(row);
        if (trace) {
          trace.push({ t: performance.timeOrigin + performance.now(), row: row.name, leader: row.leader,
            leader_epoch: row.leader_epoch, zk_version: row.zk_version, controller_epoch: row.controller_epoch });
        }
      }
    }
    pendingRows = {};
  }

  function updatePartitionDetail(row) {
    if (root.dataset.partitionName !== row.name) { return; }
    var isr = root.querySelector('[data-field="isr"]');
    if (isr) { setText(isr, row.isr.length ? row.isr.join(", ") : "empty"); }
    var rs = root.querySelector('[data-field="replica_states"]');
    if (rs) { setText(rs, row.replicas.map(function (r) { return r.id + ": " + (r.state || "unknown"); }).join(" · ")); }
    var ce = root.querySelector('[data-field="controller_epoch"]');
    if (ce) { setText(ce, String(row.controller_epoch)); }
    var zv = root.querySelector('[data-field="zk_version"]');
    if (zv) { setText(zv, String(row.zk_version)); }
  }

  var refetching = false;
  function refetchRows() {
    var url = root.dataset.rowsUrl;
    if (!url || refetching) { return; }
    refetching = true;
    fetch(url, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (body) {
      queueRows(body.rows || []);
    }).catch(function () { /* the next delta or snapshot tries again */ }).finally(function () { refetching = false; });
  }

  var page = root.dataset.page;
  if (page === "topic" || page === "partition") {
    var first = true;
    KcpLive.on("snapshot", function () {
      if (!first) { refetchRows(); }
      first = false;
    });
    KcpLive.on("delta", function (msg) {
      var data = msg.data || {};
      if (data.rows_truncated) { refetchRows(); }
      if (data.rows) { queueRows(data.rows); }
    });
    KcpLive.on("render", renderRows);
  }

  // -- topics list: the visible page's rows stay live ------------------------------------------
  // Cluster deltas say how many topic summaries changed (``topics_changed``), not which: the page
  // refetches its one visible page (sorted, filtered and paginated on the server, so a topic that
  // starts or stops matching the filter moves in or out) at most once per TOPICS_GAP_MS, one
  // request at a time. A failover touching 2,000 topics therefore costs each viewer about one small
  // request a second, never the whole topic list. Sort, filter, search and paging links fetch the
  // same JSON and update the address bar instead of reloading the page.
  var TOPICS_GAP_MS = 1000;
  var TOPIC_COLUMNS = ["name", "partitions", "rf", "offline", "urp", "umi", "nonpref", "reassigning", "preferred_percent"];

  function topicCellHtml(col, row) {
    var v = row[col];
    switch (col) {
      case "name":
        return '<a href="' + escapeHtml(row.url) + '">' + escapeHtml(row.name) + "</a>" +
          (row.deleting ? ' <span class="badge bad">deleting</span>' : "");
      case "offline": case "umi":
        return v ? '<span class="badge bad">' + v + "</span>" : "0";
      case "urp":
        return v ? '<span class="badge warn">' + v + "</span>" : "0";
      case "preferred_percent":
        return v === null || v === undefined ? "–" : Number(v).toFixed(1) + "%";
      default:
        return String(v === null || v === undefined ? 0 : v);
    }
  }

  function initTopics() {
    var body = root.querySelector("[data-topics-body]");
    var form = root.querySelector("[data-topics-form]");
    var pagerBox = root.querySelector("[data-topics-pager]");
    var totalEl = root.querySelector("[data-topics-total]");
    var url = root.dataset.topicsUrl;
    var pageUrl = root.dataset.topicsPage || location.pathname;
    var search = location.search;
    var dirty = false, inFlight = false, timer = null, lastFetch = 0, requestId = 0;
    var sortLinks = root.querySelectorAll("a[data-sort]");
    for (var i = 0; i < sortLinks.length; i++) {
      sortLinks[i].setAttribute("data-label", sortLinks[i].textContent.replace(/ [▴▾]$/, ""));
    }

    function params() { return new URLSearchParams(search.replace(/^\?/, "")); }

    function schedule() {
      dirty = true;
      if (inFlight || timer !== null) { return; }
      timer = setTimeout(fetchNow, Math.max(0, lastFetch + TOPICS_GAP_MS - Date.now()));
    }

    function fetchNow() {
      if (timer !== null) { clearTimeout(timer); timer = null; }
      dirty = false;
      inFlight = true;
      lastFetch = Date.now();
      var mine = ++requestId;
      fetch(url + search, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
        .then(function (data) { if (mine === requestId) { applyTopics(data); } })
        .catch(function () { /* logged out or server busy: the next delta or snapshot tries again */ })
        .finally(function () {
          if (mine !== requestId) { return; }
          inFlight = false;
          if (dirty) { schedule(); }
        });
    }

    function setCell(td, html) {
      if (td.__html === html) { return; }
      var before = td.textContent;
      td.innerHTML = html;
      td.__html = html;
      if (before !== td.textContent) {
        td.classList.remove("flash");
        void td.offsetWidth;
        td.classList.add("flash");
      }
    }

    function newRow(name) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-topic", name);
      TOPIC_COLUMNS.forEach(function (col) {
        var td = document.createElement("td");
        td.setAttribute("data-tcol", col);
        if (col !== "name") { td.className = "num"; }
        tr.appendChild(td);
      });
      return tr;
    }

    function applyTopics(data) {
      var existing = {};
      var trs = body.querySelectorAll("tr");
      for (var i = 0; i < trs.length; i++) {
        var name = trs[i].getAttribute("data-topic");
        if (name !== null) { existing[name] = trs[i]; } else { body.removeChild(trs[i]); }
      }
      var rows = data.rows || [];
      var wanted = [];
      rows.forEach(function (row) {
        var tr = existing[row.name] || newRow(row.name);
        delete existing[row.name];
        TOPIC_COLUMNS.forEach(function (col) { setCell(tr.querySelector('[data-tcol="' + col + '"]'), topicCellHtml(col, row)); });
        wanted.push(tr);
      });
      for (var gone in existing) { if (Object.prototype.hasOwnProperty.call(existing, gone)) { body.removeChild(existing[gone]); } }
      for (var j = 0; j < wanted.length; j++) {
        if (body.children[j] !== wanted[j]) { body.insertBefore(wanted[j], body.children[j] || null); }
      }
      if (!rows.length) {
        body.innerHTML = '<tr class="empty"><td colspan="9" class="muted">No topics match.</td></tr>';
      }
      if (totalEl) { setText(totalEl, String(data.total)); }
      renderPager(data);
      if (!rows.length && data.page > data.pages) {
        // The filter shrank below this page (topics recovered): show the last page that exists.
        var p = params();
        p.set("page", String(data.pages));
        go("?" + p.toString(), true);
      }
    }

    function link(p, page) {
      var q = new URLSearchParams(p.toString());
      q.set("page", String(page));
      return "?" + q.toString();
    }

    function renderPager(data) {
      if (!pagerBox) { return; }
      if (data.pages <= 1) { pagerBox.innerHTML = ""; return; }
      var p = params();
      pagerBox.innerHTML = '<nav class="pager">' +
        (data.page > 1 ? '<a href="' + escapeHtml(link(p, data.page - 1)) + '">← previous</a>' : "") +
        "<span>page " + data.page + " of " + data.pages + "</span>" +
        (data.page < data.pages ? '<a href="' + escapeHtml(link(p, data.page + 1)) + '">next →</a>' : "") +
        "</nav>";
    }

    function syncControls() {
      var p = params();
      var sort = p.get("sort") || "name";
      var desc = p.get("dir") === "desc";
      var only = p.get("only") || "";
      for (var i = 0; i < sortLinks.length; i++) {
        var a = sortLinks[i];
        var key = a.getAttribute("data-sort");
        var q = new URLSearchParams(p.toString());
        q.delete("page");
        q.set("sort", key);
        q.set("dir", key === sort && !desc ? "desc" : "asc");
        a.setAttribute("href", "?" + q.toString());
        a.classList.toggle("active", key === sort);
        a.textContent = a.getAttribute("data-label") + (key === sort ? (desc ? " ▾" : " ▴") : "");
      }
      if (!form) { return; }
      if (form.elements.q && document.activeElement !== form.elements.q) { form.elements.q.value = p.get("q") || ""; }
      if (form.elements.sort) { form.elements.sort.value = sort; }
      if (form.elements.dir) { form.elements.dir.value = desc ? "desc" : "asc"; }
      var radios = form.querySelectorAll('input[name="only"]');
      for (var r = 0; r < radios.length; r++) {
        radios[r].checked = radios[r].value === only;
        radios[r].parentNode.classList.toggle("on", radios[r].value === only);
      }
    }

    function go(newSearch, replace) {
      search = newSearch === "?" ? "" : newSearch;
      var target = pageUrl + search;
      if (replace) { history.replaceState({ topics: search }, "", target); }
      else { history.pushState({ topics: search }, "", target); }
      syncControls();
      requestId++; // an answer to the old query must not land after this one
      inFlight = false;
      fetchNow();
    }

    root.addEventListener("click", function (event) {
      if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) { return; }
      var a = event.target.closest ? event.target.closest("a[data-sort], [data-topics-pager] a") : null;
      if (!a) { return; }
      event.preventDefault();
      go(a.getAttribute("href"), false);
    });
    if (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var q = new URLSearchParams();
        new FormData(form).forEach(function (value, key) { if (value !== "") { q.append(key, String(value)); } });
        go("?" + q.toString(), false);
      });
    }
    window.addEventListener("popstate", function () {
      search = location.search;
      syncControls();
      requestId++;
      inFlight = false;
      fetchNow();
    });

    KcpLive.on("delta", function (msg) { if ((msg.data || {}).topics_changed) { schedule(); } });
    // Every snapshot (the first one too: changes may have landed between the page's render and
    // the socket's subscription; later ones follow a reconnect, a gap or a mirror resync).
    KcpLive.on("snapshot", schedule);
    KcpLive.topics = { refresh: schedule, go: go };
  }
  if (page === "topics" && root.dataset.topicsUrl) { initTopics(); }

  if (root.querySelector("[data-agent-url]")) {
    var pollAgents = function () {
      var cells = root.querySelectorAll("[data-agent-url]");
      Array.prototype.forEach.call(cells, function (cell) {
        fetch(cell.getAttribute("data-agent-url"), { credentials: "same-origin" }).then(function (r) { return r.json(); })
          .then(function (body) {
            if (!body.available) {
              cell.innerHTML = '<span class="muted" title="' + escapeHtml(body.reason || "") + '">no agent</span>';
            } else {
              cell.innerHTML = "own lag <strong>" + fmt(body.max_lag) + "</strong> (" + fmt(body.lagging) + " behind) · " +
                "followers behind " + fmt(body.followers_behind) + ", max " + fmt(body.max_follower_lag);
            }
          }).catch(function () { cell.innerHTML = '<span class="muted">unavailable</span>'; });
      });
    };
    pollAgents();
    setInterval(pollAgents, 5000);
  }

  connect();
})();
