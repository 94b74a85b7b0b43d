// Operator actions: live progress on the action page, impact summary on the broker page.
// Plain DOM, no framework: the pages render complete without it; this only keeps them current.
(function () {
  "use strict";

  function text(el, value) {
    if (el) el.textContent = value === null || value === undefined ? "–" : String(value);
  }

  // -- live progress of a running action: poll its JSON about once a second until a final status --
  function row(cells) {
    var tr = document.createElement("tr");
    cells.forEach(function (c, i) {
      var td = document.createElement("td");
      if (i === 1 || i === 2) td.className = "num";
      td.textContent = c === null || c === undefined ? "–" : String(c);
      tr.appendChild(td);
    });
    return tr;
  }

  function render(data) {
    text(document.querySelector('[data-field="status"]'), data.status);
    text(document.querySelector('[data-field="attempts"]'), data.attempts);
    text(document.querySelector('[data-field="controller_epoch"]'), data.controller_epoch);
    var planned = data.batches_planned ? " of " + data.batches_planned : "";
    text(document.querySelector('[data-field="progress"]'),
      data.batches.length + planned + " batch(es) done, " + data.partitions.length + " partition outcome(s)" +
      (data.final ? "" : " (updating live)"));
    var hhmmss = function (iso) { return iso ? iso.substring(11, 19) : "–"; };
    text(document.querySelector('[data-field="timing"]'), hhmmss(data.started) + " / " + hhmmss(data.finished) +
      (data.duration_ms !== null && data.duration_ms !== undefined ? " (" + data.duration_ms + " ms)" : ""));
    var errorCell = document.querySelector('[data-field="error"]');
    if (errorCell && data.error) text(errorCell, data.error);
    var batches = document.getElementById("batches");
    if (batches) {
      batches.replaceChildren.apply(batches, data.batches.map(function (b) {
        var li = document.createElement("li");
        li.textContent = b.size + " partition(s): " + b.result;
        return li;
      }));
      document.getElementById("batches-panel").hidden = data.batches.length === 0 && data.final;
    }
    var body = document.querySelector("#outcome tbody");
    if (body) {
      body.replaceChildren.apply(body, data.partitions.map(function (p) {
        return row([p.topic + "-" + p.partition, p.preferred, p.leader, p.outcome]);
      }));
      document.getElementById("outcome-panel").hidden = data.partitions.length === 0 && data.final;
    }
    document.documentElement.dataset.actionStatus = data.status;
  }

  function follow(summary) {
    var url = summary.dataset.actionUrl;
    function poll() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
        .then(function (data) {
          render(data);
          if (data.final) {
            // the state changes it caused arrive through the ingest; the page shows them when reloaded
            summary.dataset.live = "0";
            return;
          }
          setTimeout(poll, 1000);
        })
        .catch(function () { setTimeout(poll, 3000); });
    }
    poll();
  }

  // -- broker page: what happens if it fails or is shut down --------------------------------------
  function impact(panel) {
    var note = panel.querySelector("[data-impact-note]");
    ["failure", "shutdown"].forEach(function (mode) {
      var url = panel.dataset.impactUrl + "?broker=" + encodeURIComponent(panel.dataset.broker) + "&mode=" + mode;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.json().then(function (d) { return { ok: r.ok, data: d }; }); })
        .then(function (res) {
          var tr = panel.querySelector('tr[data-mode="' + mode + '"]');
          if (!res.ok) { text(note, res.data.error || "impact unavailable"); return; }
          ["offline", "leader_moves", "under_min_isr"].forEach(function (k) {
            text(tr.querySelector('[data-k="' + k + '"]'), res.data.summary[k]);
          });
        })
        .catch(function (e) { text(note, "impact unavailable: " + e); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var summary = document.getElementById("action-summary");
    // The status as rendered, for an action that was already final when the page was served (a fast
    // task): nothing is polled then, and the page's status must not stay unset.
    if (summary) document.documentElement.dataset.actionStatus = summary.dataset.actionStatus;
    if (summary && summary.dataset.live === "1") follow(summary);
    var panel = document.getElementById("broker-impact");
    if (panel) {
      // Each preview reads the whole cluster from ZooKeeper: only when the panel is actually seen.
      if ("IntersectionObserver" in window) {
        var seen = new IntersectionObserver(function (entries) {
          if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); impact(panel); }
        });
        seen.observe(panel);
      } else {
        impact(panel);
      }
    }
  });
})();
