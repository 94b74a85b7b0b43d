// Reassignment pages (templates/actions/reassign*.html).
// Form page: the editable proposal table and the JSON textarea stay in step (edit either), and the
// JSON's syntax is checked as you type; the server validates on "Validate" and again on "Execute".
// Progress page: progress pushed over a WebSocket as the worker measures it; polled only as the fallback.
"use strict";

(function () {
  function parseReplicas(text) {
    const parts = text.split(/[\s,]+/).filter((s) => s.length > 0);
    const out = [];
    for (const p of parts) {
      if (!/^\d+$/.test(p)) return null;
      out.push(parseInt(p, 10));
    }
    return out;
  }

  function setupForm() {
    const area = document.getElementById("reassignment");
    const status = document.getElementById("live-validation");
    if (!area) return;
    const table = document.getElementById("proposal-table");

    function readDoc() {
      try {
        return JSON.parse(area.value);
      } catch (e) {
        return null;
      }
    }

    function checkSyntax() {
      if (!status) return;
      if (area.value.trim() === "") {
        status.textContent = "";
        return;
      }
      const doc = readDoc();
      status.className = "small " + (doc ? "ok" : "bad");
      status.textContent = doc ? "JSON syntax OK (press Validate to check it against the cluster)" : "not valid JSON yet";
    }

    function rowChanged(row) {
      const input = row.querySelector("input.replicas");
      const replicas = parseReplicas(input.value);
      input.classList.toggle("invalid", replicas === null || replicas.length === 0);
      if (replicas === null) return;
      const current = (row.dataset.current || "").split(",").filter((s) => s).map(Number);
      row.querySelector(".adding").textContent = replicas.filter((r) => !current.includes(r)).join(", ");
      row.querySelector(".removing").textContent = current.filter((r) => !replicas.includes(r)).join(", ");
      const doc = readDoc() || { version: 1, partitions: [] };
      if (!Array.isArray(doc.partitions)) doc.partitions = [];
      const topic = row.dataset.topic;
      const partition = parseInt(row.dataset.partition, 10);
      const same = replicas.length === current.length && replicas.every((r, i) => r === current[i]);
      const idx = doc.partitions.findIndex((p) => p && p.topic === topic && p.partition === partition);
      if (same && idx >= 0) doc.partitions.splice(idx, 1);
      else if (!same && idx >= 0) doc.partitions[idx].replicas = replicas;
      else if (!same) doc.partitions.push({ topic: topic, partition: partition, replicas: replicas });
      row.classList.toggle("moving", !same);
      area.value = JSON.stringify(doc, null, 1);
      checkSyntax();
    }

    if (table) {
      table.querySelectorAll("tbody tr").forEach((row) => {
        row.querySelector("input.replicas").addEventListener("input", () => rowChanged(row));
      });
    }
    area.addEventListener("input", checkSyntax);
    checkSyntax();
  }

  function fmtEta(s) {
    if (s === null || s === undefined) return "unknown";
    if (s < 1) return "now";
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }

  function fmtTime(iso) {
    // "2026-11-27T07:15:38.853449+00:00" -> "2026-11-27 07:15:38 UTC"
    return typeof iso === "string" && iso.length >= 19 ? iso.slice(0, 10) + " " + iso.slice(11, 19) + " UTC" : String(iso);
  }

  function fmtBytes(n) {
    if (n < 1000) return n + " B";
    if (n < 1e6) return (n / 1e3).toFixed(1) + " kB";
    if (n < 1e9) return (n / 1e6).toFixed(2) + " MB";
    return (n / 1e9).toFixed(2) + " GB";
  }

  function renderThrottle(doc) {
    const now = document.getElementById("throttle-now");
    const measured = document.getElementById("throttle-measured");
    const events = document.getElementById("throttle-events");
    if (!now) return;
    const t = doc.throttle;
    if (!t) now.textContent = "none";
    else if (t.state === "removed") now.textContent = "removed";
    else if (t.plan && Array.isArray(t.plan.brokers) && t.plan.brokers.length === 0)
      now.textContent = fmtBytes(t.bytes_per_s) + "/s per broker (nothing to copy: no broker throttled)";
    else now.textContent = fmtBytes(t.bytes_per_s) + "/s per broker (" + t.state + ")";
    const byBroker = (doc.progress || {}).copy_rate_by_broker || {};
    const parts = Object.keys(byBroker).map((b) => "broker " + b + ": " + fmtBytes(byBroker[b]) + "/s");
    measured.textContent = parts.length ? "· measured copy rate " + parts.join(", ") : "";
    if (t && events) {
      events.replaceChildren();
      for (const e of t.events || []) {
        const li = document.createElement("li");
        li.textContent = fmtTime(e.time) + ": " + e.op + (e.bytes_per_s ? " to " + e.bytes_per_s + " bytes/s" : "") +
          " by " + e.user + (e.reason ? ": " + e.reason : "");
        events.append(li);
      }
    }
    if (doc.status !== "queued" && doc.status !== "running") {
      const form = document.getElementById("throttle-form");
      if (form) form.hidden = true;
    }
  }

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function render(doc) {
    const status = document.getElementById("status");
    status.textContent = doc.status;
    status.className = "status-" + doc.status;
    document.getElementById("error").textContent = doc.error || "";
    document.getElementById("stale").textContent = doc.stale || "";
    renderThrottle(doc);
    const progress = doc.progress || {};
    const rows = progress.partitions || [];
    if (rows.length === 0) return;
    const counts = progress.counts || {};
    document.getElementById("summary").textContent =
      "· " + Object.keys(counts).sort().map((k) => counts[k] + " " + k).join(", ") + " of " + progress.total;
    const running = doc.status === "running";
    let eta = "· ETA " + fmtEta(progress.eta_s);
    if (progress.eta_s === null || progress.eta_s === undefined) {
      const stuck = rows.flatMap((r) => r.new_replicas || []).filter((n) => typeof n.rate === "number" && n.rate <= 0);
      if (stuck.length) eta += " (" + stuck.length + " new replica(s) not catching up at this rate: raise the throttle?)";
    }
    document.getElementById("eta").textContent = running && !progress.done ? eta : "";
    const body = document.querySelector("#progress-table tbody");
    body.replaceChildren();
    for (const r of rows) {
      const tr = document.createElement("tr");
      tr.className = "state-" + r.state;
      tr.dataset.partition = r.topic + "-" + r.partition;
      tr.append(
        cell(r.topic + "-" + r.partition),
        cell(r.state, "state"),
        cell(r.origin.join(", ")),
        cell(r.target.join(", ")),
        cell(r.replicas.join(", ")),
        cell(r.adding.join(", ")),
        cell(r.removing.join(", ")),
        cell(r.leader < 0 ? "none" : String(r.leader)),
        cell(r.isr.join(", "))
      );
      const parts = (r.new_replicas || []).map((n) => {
        if (n.in_isr && r.state !== "copying") return n.broker + ": in sync";
        if (n.lag === undefined) return n.broker + ": " + (n.in_isr ? "in sync" : "–");
        if (n.lag === null) return n.broker + ": lag unknown (no agent)";
        const of = n.leader_log_end_offset ? " (" + n.log_end_offset + "/" + n.leader_log_end_offset + ")" : "";
        const copied = n.copied_bytes === null || n.copied_bytes === undefined ? "" : ", copied " + fmtBytes(n.copied_bytes);
        const rate = n.copy_rate_bytes_s === null || n.copy_rate_bytes_s === undefined ? "" : " at " + fmtBytes(n.copy_rate_bytes_s) + "/s";
        const eta = n.eta_s === null && typeof n.rate === "number" && n.rate <= 0
          ? "not catching up (lag growing)" : "ETA " + fmtEta(n.eta_s);
        return n.broker + ": " + (n.in_isr ? "in ISR, " : "") + "lag " + n.lag + of + copied + rate + ", " + eta;
      });
      tr.append(cell(parts.join(" · ")));
      body.append(tr);
    }
  }

  // Progress page transport. The worker pushes the whole document over the page's WebSocket as it
  // measures it (about once a second); the page polls the JSON endpoint only while the socket is down
  // (it retries the socket after RECONNECT_MS, backing off to a minute), when a pushed message says the document is too big to
  // push ("changed"), or once after SILENT_MS without a push while the reassignment runs (a worker
  // that is not monitoring: the poll refreshes progress itself). panel.dataset.transport says which
  // is in use ("socket" or "poll"); panel.dataset.polls counts the polls.
  const RECONNECT_MS = 5000;
  const SILENT_MS = 5000;

  function setupProgress() {
    const panel = document.getElementById("reassign-progress");
    if (!panel) return;
    const url = panel.dataset.url;
    let finished = false;
    let pollTimer = null;
    let socket = null;
    let lastPush = Date.now();
    let retryMs = RECONNECT_MS;
    panel.dataset.polls = "0";

    function show(doc) {
      render(doc);
      if (doc.status !== "queued" && doc.status !== "running") {
        finished = true;
        const form = document.getElementById("cancel-form");
        const note = document.getElementById("cancel-finished");
        if (form) form.hidden = true;
        if (note) note.hidden = false;
        stopPolling();
        if (socket) socket.close();
      }
    }

    async function fetchOnce(why) {
      panel.dataset.polls = String(Number(panel.dataset.polls) + 1);
      console.debug("reassignment progress: fetching over HTTP (" + why + ")");
      try {
        const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (response.ok) show(await response.json());
      } catch (e) {
        document.getElementById("stale").textContent = "(connection lost, retrying)";
      }
    }

    function stopPolling() {
      if (pollTimer) clearTimeout(pollTimer);
      pollTimer = null;
    }

    function startPolling() {
      panel.dataset.transport = "poll";
      if (pollTimer || finished) return;
      const tick = async () => {
        await fetchOnce("the live connection is down");
        pollTimer = finished ? null : setTimeout(tick, 1000);
      };
      pollTimer = setTimeout(tick, 0);
    }

    function connect() {
      if (finished || !window.WebSocket || !panel.dataset.ws) {
        if (!finished) startPolling();
        return;
      }
      const proto = location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(proto + location.host + panel.dataset.ws);
      socket.onopen = () => {
        retryMs = RECONNECT_MS;
        stopPolling();
        lastPush = Date.now();
        panel.dataset.transport = "socket";
      };
      socket.onmessage = (e) => {
        lastPush = Date.now();
        let msg = null;
        try {
          msg = JSON.parse(e.data);
        } catch (err) {
          return;
        }
        if (msg.kind === "progress") show(msg.document);
        else if (msg.kind === "changed") fetchOnce("too big to push");
      };
      socket.onclose = (e) => {
        socket = null;
        if (finished) return;
        if (e.code === 4401 || e.code === 4403) {
          // refused (logged out, or access revoked): retrying would only be refused again
          finished = true;
          stopPolling();
          document.getElementById("stale").textContent = "(live updates refused: " + (e.reason || "log in again") + ")";
          return;
        }
        startPolling();
        setTimeout(connect, retryMs);
        retryMs = Math.min(retryMs * 2, 60000); // back off while it cannot connect
      };
    }

    setInterval(() => {
      if (!finished && socket && Date.now() - lastPush > SILENT_MS) {
        fetchOnce("no push for " + (Date.now() - lastPush) + " ms");
        lastPush = Date.now();
      }
    }, 1000);
    connect();
    window.addEventListener("beforeunload", () => {
      finished = true; // leaving the page: its socket's close must not start a poll
      stopPolling();
      if (socket) socket.close();
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    setupForm();
    setupProgress();
  });
})();
