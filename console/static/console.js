// The console's behaviour in the browser: charts (Plotly, served by the console), the time slider,
// and live pages: on each new cut (server-sent events from /events) a page that is not pinned to a
// past cut fetches itself again and swaps its content, without a reload.
"use strict";

function chartData(id) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : null;
}

function atOffset(offset) {
  const url = new URL(window.location.href);
  url.searchParams.delete("time");
  url.searchParams.delete("start");
  url.searchParams.set("at", String(offset));
  return url.toString();
}

// A count's axis: whole-number ticks only (Plotly's own pick for a count up to 4 is 0, 0.5, 1...,
// which ",d" then prints as 0, 1, 1, 2...), about five of them whatever the largest count.
function countAxis(title, largest, more) {
  return { title: { text: title }, rangemode: "tozero", tickformat: ",d", tick0: 0,
           dtick: Math.max(1, Math.ceil(largest / 5)), ...more };
}

// NoOp records (one every 500 ms from the active controller) make most of a quiet cluster's bars:
// hidden unless the switch says otherwise (still one click away in the legend).
const NOOP = "NO_OP_RECORD";

function drawTimeline() {
  const data = chartData("timeline-data");
  const node = document.getElementById("timeline-chart");
  if (!data || !node || typeof Plotly === "undefined") return;
  const switchNode = document.getElementById("show-noops");
  const showNoops = switchNode ? switchNode.checked : false;
  if (switchNode && !switchNode.dataset.wired) {
    switchNode.dataset.wired = "1";
    switchNode.addEventListener("change", drawTimeline);
  }
  const x = data.starts_ms.map((ms) => new Date(ms));
  const shown = Object.entries(data.by_type).filter(([type]) => showNoops || type !== NOOP);
  const traces = Object.entries(data.by_type).map(([type, counts]) => ({
    type: "bar", name: type, x, y: counts, customdata: data.last_offsets,
    text: (data.who || []).map((who) => (who ? "<br>by " + who : "")), textposition: "none",
    visible: type === NOOP && !showNoops ? "legendonly" : true,
    hovertemplate: "%{y} " + type + "<br>through offset %{customdata}%{text}<extra></extra>",
  }));
  const stacked = x.map((_, i) => shown.reduce((sum, [, counts]) => sum + (counts[i] || 0), 0));
  const largestMark = Math.max(0, ...Object.values(data.marks).flat());
  const marks = { election: "diamond", reassignment: "square", fencing: "x" };
  for (const [mark, symbol] of Object.entries(marks)) {
    const counts = data.marks[mark] || [];
    const at = counts.map((n, i) => (n > 0 ? i : -1)).filter((i) => i >= 0);
    traces.push({
      type: "scatter", mode: "markers", name: mark + "s", yaxis: "y2", x: at.map((i) => x[i]),
      y: at.map((i) => counts[i]), customdata: at.map((i) => data.last_offsets[i]),
      marker: { symbol, size: 10 }, hovertemplate: "%{y} " + mark + "s<br>through offset %{customdata}<extra></extra>",
    });
  }
  Plotly.newPlot(node, traces, {
    barmode: "stack", margin: { t: 20, r: 60, b: 40, l: 50 }, legend: { orientation: "h" },
    yaxis: countAxis("records", Math.max(0, ...stacked), {}),
    yaxis2: countAxis("marked", largestMark, { overlaying: "y", side: "right", showgrid: false }),
  }, { displaylogo: false, responsive: true });
  node.on("plotly_click", (event) => {
    const point = event.points[0];
    if (point && point.customdata !== undefined) window.location.href = atOffset(point.customdata);
  });
}

function drawBrokers() {
  const data = chartData("broker-chart-data");
  const node = document.getElementById("broker-chart");
  if (!data || !node || typeof Plotly === "undefined") return;
  const names = data.brokers.map((b, i) => "broker " + b + (data.racks[i] ? " (" + data.racks[i] + ")" : ""));
  Plotly.newPlot(node, [
    { type: "bar", name: "leaders", x: names, y: data.leaders },
    { type: "bar", name: "replicas", x: names, y: data.replicas },
  ], { barmode: "group", margin: { t: 20, r: 20, b: 60, l: 60 }, legend: { orientation: "h" } },
  { displaylogo: false, responsive: true });
}

function drawCharts() {
  drawTimeline();
  drawBrokers();
}

function wireSlider() {
  const slider = document.getElementById("slider");
  if (!slider) return;
  const at = document.getElementById("at");
  slider.addEventListener("input", () => { at.value = slider.value; });
  slider.addEventListener("change", () => { window.location.href = atOffset(slider.value); });
}

async function refresh() {
  const response = await fetch(window.location.href, { headers: { "Accept": "text/html" } });
  if (!response.ok) return;
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  for (const id of ["content", "travel"]) {
    const fresh = page.getElementById(id);
    const here = document.getElementById(id);
    if (fresh && here) here.replaceWith(document.adoptNode(fresh));
  }
  wireSlider();
  drawCharts();
  document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
}

function followCuts() {
  // pages that never follow new cuts (the SQL box, a diff, the fleet's overview) need no stream
  if (typeof EventSource === "undefined" || document.body.dataset.follow === "0") return;
  const events = new EventSource((document.body.dataset.root || "") + "/events");
  let busy = false, again = false;
  events.addEventListener("cut", async () => {
    // a page at a past cut stays there; a form being filled in (SQL, diff) is not swapped away
    if (document.body.dataset.pinned === "1" || document.body.dataset.follow === "0") return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      do { again = false; await refresh(); } while (again);
    } finally {
      busy = false;
    }
  });
}

window.addEventListener("DOMContentLoaded", () => {
  wireSlider();
  drawCharts();
  followCuts();
});
