// Analytics pages: draw the server-built Chart.js configs and follow a running pipeline.
// No framework; Chart.js is served from static/vendor (no CDN).
(function () {
  "use strict";

  var PALETTE = ["#3d63b8", "#d64545", "#2e9e5b", "#e0a030", "#7a4fc0", "#1fa2b0", "#c04f8a",
                 "#6b7d2b", "#9c5a2e", "#4d4d4d", "#2b6f9c", "#b03c3c"];

  function colour(i, alpha) {
    var hex = PALETTE[i % PALETTE.length];
    if (alpha === undefined) { return hex; }
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  function drawCharts() {
    if (typeof window.Chart === "undefined") { return; }
    document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var source = document.getElementById(canvas.dataset.chart);
      if (!source) { return; }
      var config = JSON.parse(source.textContent);
      config.data.datasets.forEach(function (ds, i) {
        var line = (ds.type || config.type) === "line";
        ds.borderColor = ds.borderColor || colour(i);
        ds.backgroundColor = ds.backgroundColor || colour(i, line ? 0.15 : 0.75);
        if (line && ds.spanGaps === undefined) { ds.spanGaps = true; }
      });
      config.options = Object.assign({
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "index", intersect: false },
        plugins: { legend: { position: "bottom" } }
      }, config.options || {});
      new window.Chart(canvas, config);
    });
  }

  // While a run is queued or running, poll its status every two seconds; reload when it ends so
  // the page shows the new results and the last run's status and duration.
  function followRun() {
    var panel = document.getElementById("run-panel");
    if (!panel || !panel.dataset.statusUrl) { return; }
    var field = function (name) { return panel.querySelector('[data-run-field="' + name + '"]'); };
    var poll = function () {
      fetch(panel.dataset.statusUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          return response.json();
        })
        .then(function (run) {
          var pct = Math.round(run.progress * 100);
          if (field("bar")) { field("bar").style.width = pct + "%"; }
          if (field("status")) { field("status").textContent = run.status + " (" + pct + "%)"; }
          if (field("message")) { field("message").textContent = run.message || ""; }
          var stages = field("stages");
          if (stages) {
            stages.querySelectorAll("[data-stage-name]").forEach(function (item) {
              var current = item.dataset.stageName === run.stage;
              item.classList.toggle("current", current);
              if (current) { item.setAttribute("aria-current", "step"); } else { item.removeAttribute("aria-current"); }
            });
          }
          if (run.active) { window.setTimeout(poll, 2000); } else { window.location.reload(); }
        })
        .catch(function () { window.setTimeout(poll, 5000); });
    };
    poll();
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawCharts();
    followRun();
  });
})();
