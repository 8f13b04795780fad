/* Neuron Explorer report: builds the page from the JSON in #report-data.
 * Trace strings are untrusted: they are written with textContent only (never innerHTML), and
 * text handed to Plotly, which understands a little HTML, goes through plotlyText(). */
(function () {
  "use strict";
  var started = performance.now();
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var STRINGS = DATA.strings || [];
  var KIND_LABELS = { cpu_op: "host op", kernel: "kernel", collective: "collective", memcpy: "memcpy", memset: "memset",
    python: "Python", annotation: "annotation", runtime: "runtime call", sync: "sync" };
  var rendered = [];

  function plotlyText(s) {
    return String(s == null ? "" : s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text != null) node.textContent = String(text);
    return node;
  }
  function fmtNs(ns) {
    if (ns == null) return "–";
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(2) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 1 : 2) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 0 : 1) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtBytes(b) {
    if (b == null) return "–";
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, v = Math.abs(b);
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (b < 0 ? "-" : "") + v.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function fmtNum(v) { return v == null ? "–" : Number(v).toLocaleString("en-US"); }
  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

  // ------------------------------------------------------------------ header and notes
  function renderHeader() {
    var h = DATA.header;
    document.getElementById("workload").textContent = h.workload;
    document.title = h.workload + " · Neuron Explorer report";
    var verdict = document.getElementById("verdict");
    verdict.textContent = h.verdict || "No verdict: the analysis found nothing to rank.";
    var facts = document.getElementById("facts");
    var devices = h.device_names.length ? h.device_names.join(", ") : "";
    var devList = h.devices.length ? h.devices.join(", ") : (h.device_types.join(", ") || "none (host only)");
    [
      ["Device", devices ? devices + " (" + devList + ")" : devList],
      ["PyTorch", h.torch_version || "unknown"],
      ["Ranks", h.ranks.length ? h.ranks.join(", ") + (h.world_size ? " of " + h.world_size : "") : "–"],
      ["Steps", h.num_steps ? String(h.num_steps) : h.device_profile_only ? "none (a device profile alone: the whole profile)" : "no ProfilerStep (whole trace)"],
      ["Wall time", fmtNs(h.wall_ns)],
      ["Events", fmtNum(h.events)],
      ["Source lines", h.line_coverage || "none recorded"],
      ["Trace", h.source || "–"],
    ].concat(h.original ? [["Converted from", h.original]] : []).forEach(function (kv) {
      var d = el("div"); d.appendChild(el("dt", null, kv[0])); d.appendChild(el("dd", null, kv[1])); facts.appendChild(d);
    });
    if (DATA.notes.length) {
      document.getElementById("notes-section").hidden = false;
      var ul = document.getElementById("notes");
      DATA.notes.forEach(function (n) { ul.appendChild(el("li", null, n)); });
    }
  }

  // ------------------------------------------------------------------ findings
  function renderFindings() {
    var box = document.getElementById("findings-list");
    var wall = DATA.header.profiled_ns;
    if (!DATA.findings.length) box.appendChild(el("p", { class: "empty" }, "No rule fired on this trace."));
    if (DATA.fixes_text) box.appendChild(el("p", { class: "fixes" }, DATA.fixes_text));
    DATA.findings.forEach(function (f, i) {
      var art = el("article", { class: "finding sev-" + (["info", "warning", "error"].indexOf(f.severity) >= 0 ? f.severity : "info") });
      var h3 = el("h3");
      h3.appendChild(el("span", { class: "sev" }, f.severity));
      h3.appendChild(el("span", null, (i + 1) + ". " + f.title));
      if (f.cost_ns > 0) {
        var pct = wall > 0 ? " (" + (100 * f.cost_ns / wall).toFixed(1) + "% of the profiled time)" : "";
        var how = f.cost_method === "replay" ? "fix saves ~" : "costs ~";
        h3.appendChild(el("span", { class: "cost", title: f.cost_method === "replay"
          ? "replayed on the run's dependency graph with the fix as an edit" : "a part of its step-time category" },
          how + f.cost_text + pct));
      }
      h3.appendChild(el("span", { class: "rule" }, f.rule_id + (f.rank != null ? " · rank " + f.rank : "")));
      art.appendChild(h3);
      art.appendChild(el("p", null, f.message));
      if (f.cost_method === "replay") {
        art.appendChild(el("p", { class: "fix-edit" }, "Priced by replay: " + (f.fix_edit || "the fix as an edit") +
          (f.refers_to ? " (shared kernels priced under " + f.refers_to + ")" : "")));
      }
      var names = Object.keys(f.metrics);
      if (names.length) {
        var m = el("div", { class: "metrics" });
        names.forEach(function (n) {
          var s = el("span"); s.appendChild(el("b", null, n.replace(/_/g, " ") + ": "));
          s.appendChild(document.createTextNode(f.metrics_text[n]));
          if (f.threshold[n]) s.appendChild(document.createTextNode(" (threshold " + f.threshold_text[n] + ")"));
          m.appendChild(s);
        });
        art.appendChild(m);
      }
      var limits = Object.keys(f.threshold);
      if (limits.length) {
        var t = el("div", { class: "metrics thresholds" });
        t.appendChild(el("b", null, "thresholds: "));
        t.appendChild(document.createTextNode(limits.map(function (n) {
          return n.replace(/_/g, " ") + " " + f.threshold_text[n];
        }).join(", ")));
        art.appendChild(t);
      }
      if (f.source_lines.length) {
        art.appendChild(el("p", null, "Source lines:"));
        var ul = el("ul");
        f.source_lines.forEach(function (sl) {
          var li = el("li");
          li.appendChild(el("code", { title: (sl.file || "?") + ":" + (sl.line == null ? "?" : sl.line) }, sl.location || sl.file || "?"));
          if (sl.func) li.appendChild(document.createTextNode(" in " + sl.func));
          if (sl.value_text && sl.value_text !== "-") li.appendChild(document.createTextNode(" · " + sl.value_text));
          if (sl.code) { li.appendChild(document.createTextNode(" ")); li.appendChild(el("span", { class: "code" }, sl.code.trim())); }
          ul.appendChild(li);
        });
        art.appendChild(ul);
      }
      if (f.recommendation) {
        var fix = el("p", { class: "fix" }); fix.appendChild(el("b", null, "Fix: "));
        fix.appendChild(document.createTextNode(f.recommendation)); art.appendChild(fix);
      }
      box.appendChild(art);
    });
    if (DATA.skipped.length) {
      document.getElementById("skipped-box").hidden = false;
      var ul = document.getElementById("skipped");
      DATA.skipped.forEach(function (s) {
        var li = el("li"); li.appendChild(el("code", null, s.rule_id)); li.appendChild(document.createTextNode(": " + s.reason));
        ul.appendChild(li);
      });
    }
  }

  // ------------------------------------------------------------------ figures
  function themed(layout) {
    var fg = cssVar("--fg"), grid = cssVar("--grid"), muted = cssVar("--muted");
    var out = Object.assign({}, layout, {
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
      font: { color: fg, family: "system-ui, -apple-system, Segoe UI, Roboto, Arial, sans-serif", size: 12 },
      colorway: ["--c0", "--c1", "--c2", "--c3", "--c4", "--c5", "--c6", "--c7"].map(cssVar),
      hoverlabel: { namelength: -1, font: { family: "ui-monospace, Menlo, Consolas, monospace", size: 12 } },
      margin: Object.assign({ l: 60, r: 20, t: 20, b: 50 }, layout.margin || {}),
    });
    Object.keys(out).forEach(function (k) {
      if (/^[xy]axis\d*$/.test(k)) out[k] = Object.assign({ gridcolor: grid, zerolinecolor: grid, linecolor: muted }, out[k]);
    });
    if (!out.xaxis) out.xaxis = { gridcolor: grid, zerolinecolor: grid };
    if (!out.yaxis) out.yaxis = { gridcolor: grid, zerolinecolor: grid };
    return out;
  }
  var CONFIG = { displaylogo: false, responsive: true, scrollZoom: false, modeBarButtonsToRemove: ["select2d", "lasso2d"] };

  function plot(name, fig, emptyText) {
    var div = document.querySelector('[data-figure="' + name + '"]');
    if (!fig || !fig.data || !fig.data.length) {
      div.replaceWith(el("p", { class: "empty", "data-empty-figure": name }, emptyText));
      return;
    }
    var layout = fig.layout || {};
    if (!layout.height) layout.height = name === "kernels" || name === "ops" || name === "lines" ? 120 + 26 * Math.min(15, fig.data[0].y.length) * (fig.data.length > 1 ? 1.6 : 1) : 380;
    Plotly.newPlot(div, fig.data, themed(layout), CONFIG);
    rendered.push({ div: div, layout: layout });
  }

  // ------------------------------------------------------------------ timeline
  // Every event of the step is in the data. What is drawn depends on the range in view: each
  // event on its own once at most DETAIL_LIMIT are in view, else events closer than a pixel
  // merge into one bar that says so. Redrawn on every zoom, so tooltips always match the view.
  var TL = DATA.timeline;
  var DETAIL_LIMIT = 4000, PIXELS = 1400;
  var tl = { step: null, range: null, selected: -1, drawing: false };
  function str(code) { return code >= 0 ? STRINGS[code] : null; }
  function eventHover(s, j) {
    var e = s.ev, src = str(e.src[j]), module = str(e.module[j]);
    return plotlyText(str(e.name[j]) || "?") + "<br>" + (TL.kinds[e.kind[j]] || "") + " · " + fmtNs(e.dur[j]) +
      " · starts at " + fmtNs(e.start[j]) + (src ? "<br>source: " + plotlyText(src) : "") +
      (module ? "<br>module: " + plotlyText(module) : "") + "<br>click for details";
  }
  function timelineFigure(s, range) {
    var e = s.ev, x0 = range[0] * 1e6, x1 = range[1] * 1e6, vis = [];
    for (var j = 0; j < e.row.length; j++) if (e.start[j] < x1 && e.start[j] + e.dur[j] > x0) vis.push(j);
    var traces = TL.kinds.map(function (k, i) {
      return { type: "bar", orientation: "h", name: KIND_LABELS[k] || k, x: [], base: [], y: [], hovertext: [],
        customdata: [], hoverinfo: "text", marker: { color: TL.colors[i], line: { width: 0 } } };
    });
    var bars = 0, merged = 0;
    function push(kind, start, dur, row, text, idx) {
      var t = traces[kind];
      t.base.push(start / 1e6); t.x.push(Math.max(dur, 1) / 1e6); t.y.push(row);
      t.hovertext.push(text); t.customdata.push(idx); bars++;
    }
    if (vis.length <= DETAIL_LIMIT) {
      vis.forEach(function (j) { push(e.kind[j], e.start[j], e.dur[j], e.row[j], eventHover(s, j), j); });
    } else {
      var px = (x1 - x0) / PIXELS, cur = null;
      var flush = function (c) {
        if (!c) return;
        if (c.count === 1) { push(e.kind[c.longest], e.start[c.longest], e.dur[c.longest], c.row, eventHover(s, c.longest), c.longest); return; }
        merged += c.count;
        push(e.kind[c.longest], c.start, c.end - c.start, c.row, c.count + " events merged at this zoom: zoom in to see each" +
          "<br>busy " + fmtNs(c.busy) + " of " + fmtNs(c.end - c.start) + "<br>longest: " + plotlyText(str(e.name[c.longest]) || "?"), -1);
      };
      vis.forEach(function (j) {  // the data is ordered by row, then start
        var end = e.start[j] + e.dur[j];
        if (cur && cur.row === e.row[j] && e.start[j] <= cur.end + px) {
          cur.end = Math.max(cur.end, end); cur.count++; cur.busy += e.dur[j];
          if (e.dur[j] > e.dur[cur.longest]) cur.longest = j;
        } else { flush(cur); cur = { row: e.row[j], start: e.start[j], end: end, count: 1, busy: e.dur[j], longest: j }; }
      });
      flush(cur);
    }
    var data = traces.filter(function (t) { return t.x.length; }), annotations = [];
    // the critical path: the events on it outlined (merged like the bars when zoomed out)
    var crit = { type: "bar", orientation: "h", name: "critical path", hoverinfo: "skip", x: [], base: [], y: [],
      customdata: [], marker: { color: "rgba(0,0,0,0)", line: { width: 2, color: cssVar("--critical") || "#d62728" } } };
    var px2 = (x1 - x0) / PIXELS, last = null;
    vis.forEach(function (j) {
      if (!e.crit || !e.crit[j]) return;
      var end = e.start[j] + e.dur[j];
      if (last && last.row === e.row[j] && e.start[j] <= last.end + px2) { last.end = Math.max(last.end, end); return; }
      if (last) { crit.base.push(last.start / 1e6); crit.x.push(Math.max(last.end - last.start, 1) / 1e6); crit.y.push(last.row); crit.customdata.push(-1); }
      last = { row: e.row[j], start: e.start[j], end: end };
    });
    if (last) { crit.base.push(last.start / 1e6); crit.x.push(Math.max(last.end - last.start, 1) / 1e6); crit.y.push(last.row); crit.customdata.push(-1); }
    if (crit.x.length) data.push(crit);
    var sel = tl.selected;
    if (sel >= 0) {
      data.push({ type: "bar", orientation: "h", name: "selected", showlegend: false, hoverinfo: "skip",
        base: [e.start[sel] / 1e6], x: [Math.max(e.dur[sel], 1) / 1e6], y: [e.row[sel]], customdata: [sel],
        marker: { color: "rgba(0,0,0,0)", line: { width: 2, color: cssVar("--accent") } } });
      flowsOf(s, sel).forEach(function (f) {
        annotations.push({ x: e.start[f[1]] / 1e6, y: e.row[f[1]], ax: e.start[f[0]] / 1e6, ay: e.row[f[0]],
          xref: "x", yref: "y", axref: "x", ayref: "y", showarrow: true, arrowhead: 3, arrowwidth: 1.5,
          arrowcolor: cssVar("--accent"), text: "" });
      });
    }
    var rows = s.rows.map(plotlyText), ticks = s.rows.map(function (_, i) { return i; });
    return {
      data: data, bars: bars, merged: merged, inView: vis.length,
      layout: {
        barmode: "overlay", bargap: 0.2, height: 150 + 24 * rows.length, annotations: annotations,
        xaxis: { title: { text: "ms since the step started" }, zeroline: false, range: range.slice() },
        yaxis: { autorange: "reversed", automargin: true, tickmode: "array", tickvals: ticks, ticktext: rows,
          range: [rows.length - 0.5, -0.5] },
        legend: { orientation: "h", y: 1.1 }, margin: { t: 40 }, hovermode: "closest", dragmode: "zoom",
      },
    };
  }
  // [launch, launched] pairs of the selected event: its launching call, or what it launched
  function flowsOf(s, j) {
    var link = s.ev.link, out = [];
    if (link[j] >= 0) out.push([link[j], j]);
    for (var k = 0; k < link.length && out.length < 50; k++) if (link[k] === j) out.push([j, k]);
    return out;
  }
  function showDetails(s, j) {
    var box = document.getElementById("timeline-details"), e = s.ev;
    box.textContent = "";
    if (j < 0) { box.hidden = true; return; }
    box.hidden = false;
    var dl = el("dl");
    function row(label, value) { if (value == null || value === "") return; dl.appendChild(el("dt", null, label)); dl.appendChild(el("dd", null, value)); }
    row("Event", str(e.name[j]));
    row("Recorded name", str(e.raw[j]));
    row("Kind", TL.kinds[e.kind[j]]);
    row("Lane", s.rows[e.row[j]]);
    row("Start", "+" + fmtNs(e.start[j]) + " from the step start");
    row("Duration", fmtNs(e.dur[j]));
    row("Source", str(e.src[j]) || "none recorded");
    row("Module", str(e.module[j]));
    row("Event id", String(e.id[j]));
    var flows = flowsOf(s, j);
    if (e.link[j] >= 0) row("Launched by", str(e.name[e.link[j]]) + " at +" + fmtNs(e.start[e.link[j]]));
    var launched = flows.filter(function (f) { return f[0] === j; });
    if (launched.length) row("Launched", launched.map(function (f) { return str(e.name[f[1]]); }).join(", "));
    box.appendChild(el("h3", null, "Selected event"));
    box.appendChild(dl);
    var args = str(e.args[j]);
    if (args) { box.appendChild(el("p", null, "Args:")); box.appendChild(el("pre", { class: "args" }, args)); }
  }
  function renderTimeline() {
    var select = document.getElementById("step-select");
    var div = document.querySelector('[data-figure="timeline"]');
    if (!TL.steps.length) {
      select.parentNode.hidden = true;
      div.replaceWith(el("p", { class: "empty", "data-empty-figure": "timeline" }, "No device work or host ops to draw: the trace holds none."));
      return;
    }
    var slowest = 0;
    TL.steps.forEach(function (s, i) {
      if (s.dur_ns > TL.steps[slowest].dur_ns) slowest = i;
      var label = (s.step < 0 ? "whole trace" : "step " + s.step) + " · " + fmtNs(s.dur_ns);
      select.appendChild(el("option", { value: String(i) }, label));
    });
    select.options[slowest].textContent += " (slowest)";
    var entry = { div: div, layout: null, timeline: true };
    function draw() {
      var s = TL.steps[tl.step], fig = timelineFigure(s, tl.range);
      var info = fmtNum(fig.inView) + " of " + fmtNum(s.events) + " events in view" + (fig.merged
        ? ", drawn as " + fmtNum(fig.bars) + " bars: nearby events merged at this zoom (zoom in to see each)"
        : ", each drawn");
      if (s.downsampled) info += "; this step keeps its " + fmtNum(s.kept) + " longest events";
      document.getElementById("timeline-info").textContent = info;
      tl.drawing = true;
      Plotly.react(div, fig.data, themed(fig.layout), CONFIG);
      tl.drawing = false;
      entry.layout = fig.layout;
      return fig;
    }
    function show(i) {
      var s = TL.steps[i];
      tl.step = i; tl.selected = -1;
      tl.range = [Math.min(0, 0) / 1e6, Math.max(s.dur_ns, 1) / 1e6];
      showDetails(s, -1);
      return draw();
    }
    select.value = String(slowest);
    show(slowest);
    rendered.push(entry);
    var pending = false;
    div.on("plotly_relayout", function (ev) {
      if (tl.drawing) return;
      var s = TL.steps[tl.step];
      if (ev["xaxis.range[0]"] != null) tl.range = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
      else if (ev["xaxis.range"]) tl.range = ev["xaxis.range"].slice();
      else if (ev["xaxis.autorange"]) tl.range = [0, Math.max(s.dur_ns, 1) / 1e6];
      else return;
      if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; draw(); }); }
    });
    div.on("plotly_click", function (ev) {
      var p = ev.points && ev.points[0];
      if (!p) return;
      var s = TL.steps[tl.step], j = p.customdata;
      if (j == null || j < 0) {  // a merged bar: zoom to it
        tl.range = [p.base, p.base + p.x]; draw(); return;
      }
      tl.selected = j; showDetails(s, j); draw();
    });
    select.addEventListener("change", function () { show(Number(select.value)); });
    window.__neuronExplorerTimeline = {
      state: tl, draw: draw,
      zoom: function (a, b) { tl.range = [a, b]; return draw(); },
      select: function (j) { tl.selected = j; showDetails(TL.steps[tl.step], j); return draw(); },
    };
  }

  // ------------------------------------------------------------------ tables
  var NUMERIC = ["int", "float", "ns", "bytes", "pct"];
  function renderTable(name) {
    var spec = DATA.tables[name], host = document.querySelector('[data-table="' + name + '"]');
    if (!spec.columns.length || !spec.shown_rows) { host.remove(); return; }
    var cols = spec.columns, n = spec.shown_rows, order = [];
    for (var i = 0; i < n; i++) order.push(i);
    var table = el("table"), thead = el("thead"), tr = el("tr"), tbody = el("tbody");
    function cell(col, r) {
      var v = spec.rows[col.key][r], numeric = NUMERIC.indexOf(col.type) >= 0;
      var td = el("td", numeric ? { class: "num" } : null);
      if (col.type === "code") { if (v) td.appendChild(el("span", { class: "code" }, v.trim())); return td; }
      td.textContent = col.type === "ns" ? fmtNs(v) : col.type === "bytes" ? fmtBytes(v)
        : col.type === "pct" ? (v == null ? "–" : v.toFixed(2) + "%") : col.type === "int" ? fmtNum(v)
        : col.type === "float" ? (v == null ? "–" : v.toFixed(2)) : (v == null ? "–" : v);
      if (col.type === "ns" && v != null) td.title = fmtNum(v) + " ns";
      else if (col.title && spec.rows[col.title][r] != null) td.title = spec.rows[col.title][r];
      else if (col.type === "text" && v != null) td.title = v;
      return td;
    }
    var texts = cols.filter(function (c) { return NUMERIC.indexOf(c.type) < 0; }), needle = "";
    function matches(r) {
      return !needle || texts.some(function (c) {
        var v = spec.rows[c.key][r];
        return v != null && String(v).toLowerCase().indexOf(needle) >= 0;
      });
    }
    var count = el("span", { class: "filter-count" });
    function fill() {
      tbody.textContent = "";
      var shown = 0;
      order.forEach(function (r) {
        if (!matches(r)) return;
        shown++;
        var row = el("tr");
        cols.forEach(function (c) { row.appendChild(cell(c, r)); });
        tbody.appendChild(row);
      });
      count.textContent = needle ? shown + " of " + order.length + " rows match" : "";
    }
    var filter = el("input", { type: "search", class: "table-filter", placeholder: "filter " + name + "…",
      "aria-label": "filter the " + name + " table", "data-filter": name });
    filter.addEventListener("input", function () { needle = filter.value.trim().toLowerCase(); fill(); });
    var bar = el("div", { class: "filter-bar" }); bar.appendChild(filter); bar.appendChild(count);
    cols.forEach(function (c) {
      var numeric = NUMERIC.indexOf(c.type) >= 0;
      var th = el("th", numeric ? { class: "num", "aria-sort": "none" } : { "aria-sort": "none" });
      var b = el("button", { type: "button", title: "sort by " + c.label }, c.label);
      b.addEventListener("click", function () {
        var desc = th.getAttribute("aria-sort") !== "descending";
        tr.querySelectorAll("th").forEach(function (o) { o.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", desc ? "descending" : "ascending");
        var vals = spec.rows[c.key];
        order.sort(function (a, z) {
          var x = vals[a], y = vals[z];
          if (x == null) return y == null ? 0 : 1;
          if (y == null) return -1;
          var cmp = numeric ? x - y : String(x).localeCompare(String(y));
          return desc ? -cmp : cmp;
        });
        fill();
      });
      th.appendChild(b); tr.appendChild(th);
    });
    thead.appendChild(tr); table.appendChild(thead); table.appendChild(tbody); fill();
    host.parentNode.insertBefore(bar, host); host.appendChild(table);
    if (spec.total_rows > spec.shown_rows) {
      host.after(el("p", { class: "table-note" }, "Showing the top " + fmtNum(spec.shown_rows) + " of " + fmtNum(spec.total_rows) + " rows."));
    }
  }

  // Follow the system theme live: re-theme every figure when it flips.
  function watchTheme() {
    var mq = window.matchMedia("(prefers-color-scheme: dark)");
    var flip = function () {
      rendered.forEach(function (r) {
        if (r.timeline) { window.__neuronExplorerTimeline.draw(); return; }
        Plotly.relayout(r.div, themed(r.layout));
      });
    };
    if (mq.addEventListener) mq.addEventListener("change", flip);
  }

  renderHeader();
  renderFindings();
  var F = DATA.figures;
  plot("breakdown", F.breakdown, "No step breakdown: the trace has no host or device spans.");
  renderTimeline();
  if (DATA.tables.critical_path && DATA.tables.critical_path.shown_rows) {
    document.getElementById("critical-path-text").textContent = DATA.critical_path_text || "";
    renderTable("critical_path");
  } else {
    document.getElementById("critical").remove();
  }
  if (DATA.tables.ranks.shown_rows) {  // (a multi-rank trace only)
    document.getElementById("ranks").hidden = false;
    renderTable("ranks");
    renderTable("collectives");
    renderTable("collective_sizes");  // (removes itself when no message sizes are recorded)
    if (!DATA.tables.collective_sizes.shown_rows) document.getElementById("collective-sizes-caption").remove();
  } else {
    document.getElementById("ranks").remove();
  }
  if (DATA.tables.neuron_summary && DATA.tables.neuron_summary.shown_rows) {  // (a Neuron device profile only)
    document.getElementById("neuron").hidden = false;
    renderTable("neuron_summary");
    renderTable("neuron_engines");
    if (DATA.tables.neuron_operators && DATA.tables.neuron_operators.shown_rows) renderTable("neuron_operators");
    else document.getElementById("neuron-operators").remove();
  } else if (document.getElementById("neuron")) {
    document.getElementById("neuron").remove();
  }
  plot("kernels", F.kernels, "No device kernels in this trace (a host-only or empty profile).");
  renderTable("kernels");
  plot("ops", F.ops, "No framework ops in this trace.");
  renderTable("ops");
  plot("roofline", F.roofline, "No performance models: record with record_shapes=True so op input shapes are in the trace.");
  plot("op_categories", F.op_categories, "No device work to categorize.");
  renderTable("op_perf");
  plot("lines", F.lines, DATA.header.device_profile_only
    ? "No source lines: a Neuron device profile alone holds none; join the framework trace of the same run (docs/neuron.md) to map device time to lines."
    : "No source-line attribution in this trace: record with with_stack=True (or neuron-explorer record) to map time to lines of code.");
  renderTable("lines");
  plot("memory", F.memory, "No memory events in this trace: record with neuron-explorer record --memory (or profile_memory=True) to see a memory timeline.");
  renderTable("memory");
  plot("memory_phases", F.memory_phases, "No allocations with addresses to replay: record with neuron-explorer record --memory (or profile_memory=True).");
  renderTable("memory_at_peak");
  watchTheme();
  window.__neuronExplorerReport = { ready: true, renderMs: performance.now() - started, figures: rendered.length };
})();
