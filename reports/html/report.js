// trainrx HTML report: draws the JSON document embedded in the page (#trainrx-data), the same
// document `--format json` writes (plus, for analyses, a sampled timeline). No network access, no
// library: the plots are a handful of SVG bar, line and point charts and one canvas timeline, less
// code than any charting library's loader.
// Safety: every string from the document reaches the page through text nodes, attribute values
// set with setAttribute, SVG <title> text or canvas fillText; never through innerHTML.
'use strict';
(function () {
  const errors = window.__trainrxErrors || (window.__trainrxErrors = []);
  const SVGNS = 'http://www.w3.org/2000/svg';
  const PHASES = [
    ['data_wait', 'data wait', '#d9534f'], ['forward', 'forward', '#4a90d9'], ['backward', 'backward', '#7b5fc7'],
    ['optimizer', 'optimizer', '#2e9e6b'], ['other', 'other', '#b0b7c3']];
  const GPU_PARTS = [['gpu_kernel', 'kernels', '#2e7d32'], ['gpu_memcpy', 'memcpy/memset', '#f0a000'], ['gpu_idle', 'GPU idle', '#e57373']];
  const CLASS_COLORS = {
    op: '#8fb3de', annotation: '#c9b6e4', step: '#dfe3ea', data: '#d9534f', forward: '#4a90d9', backward: '#7b5fc7',
    optimizer: '#2e9e6b', runtime: '#f3c969', sync: '#b71c1c', kernel: '#2e7d32', memcpy: '#f0a000', memset: '#c08000'};
  const VERDICT_COLORS = {faster: '#2e7d32', slower: '#c62828'};

  // ---- DOM helpers ----
  function setAttrs(n, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') n.addEventListener(k.slice(2), v);
      else if (k === 'style' && typeof v === 'object') for (const [p, x] of Object.entries(v)) n.style.setProperty(p, String(x));
      else n.setAttribute(k, String(v));
    }
  }
  function append(n, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      n.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return n;
  }
  function el(tag, attrs, ...kids) { const n = document.createElement(tag); setAttrs(n, attrs); return append(n, kids); }
  function sv(tag, attrs, ...kids) { const n = document.createElementNS(SVGNS, tag); setAttrs(n, attrs); return append(n, kids); }
  function section(id, title, ...kids) { return el('section', {id}, el('h2', null, title), ...kids); }
  function tile(k, v) { return el('div', {class: 'tile'}, el('div', {class: 'k'}, k), el('div', {class: 'v'}, v)); }
  function kv(pairs) {
    return el('div', {class: 'kv'}, pairs.filter(p => p && p[1] !== undefined && p[1] !== null && p[1] !== '')
      .map(([k, v]) => [el('div', {class: 'k'}, k), el('div', null, v)]));
  }
  function legend(items) {
    return el('div', {class: 'legend'}, items.map(([label, color]) => el('span', {style: {'--c': color}}, label)));
  }

  // ---- formatting ----
  function fmtNs(ns) {
    if (ns === null || ns === undefined || !isFinite(ns)) return '–';
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(2) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : a >= 1e7 ? 1 : 2) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' µs';
    return Math.round(ns) + ' ns';
  }
  function pct(x, d = 1) { return isFinite(x) ? (100 * x).toFixed(d) + '%' : '–'; }
  function num(x, d = 3) { return typeof x === 'number' && isFinite(x) ? x.toFixed(d) : String(x); }
  function median(xs) {
    const s = xs.slice().sort((a, b) => a - b);
    return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN;
  }
  function quantile(s, q) { const i = (s.length - 1) * q, lo = Math.floor(i); return s[lo] + (s[Math.ceil(i)] - s[lo]) * (i - lo); }

  // ---- charts (SVG) ----
  function axisTicks(lo, hi, n) {
    const span = hi - lo || 1, raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * mag).find(s => span / s <= n) || mag * 10;
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(t);
    return ticks;
  }
  // Stacked bars: bars = [{label, parts: [ns...], note}], series = [[key, label, color]...].
  function stackedBars(bars, series, opts) {
    const W = 1000, H = 270, L = 64, B = 28, T = 22, plotW = W - L - 10, plotH = H - B - T;
    const totals = bars.map(b => b.parts.reduce((a, x) => a + x, 0));
    const max = Math.max(1, ...totals);
    const bw = plotW / Math.max(1, bars.length);
    const svg = sv('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'stacked', role: 'img'});
    for (const t of axisTicks(0, max, 5)) {
      const y = T + plotH - t / max * plotH;
      svg.append(sv('line', {x1: L, x2: W - 10, y1: y, y2: y, stroke: '#e3e7ee'}),
                 sv('text', {x: L - 6, y: y + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#5d6677'}, fmtNs(t)));
    }
    bars.forEach((b, i) => {
      let y = T + plotH;
      const g = sv('g', {class: 'bar-step'}, sv('title', null, `${b.label}${b.note ? ' (' + b.note + ')' : ''}: ${fmtNs(totals[i])}\n` +
        series.map((s, k) => `${s[1]}: ${fmtNs(b.parts[k])}`).join('\n')));
      b.parts.forEach((v, k) => {
        const h = v / max * plotH;
        y -= h;
        if (h > 0) g.append(sv('rect', {x: L + i * bw + bw * 0.1, y, width: Math.max(bw * 0.8, 0.6), height: h,
          fill: series[k][2], 'fill-opacity': b.note ? 0.45 : 1}));
      });
      svg.append(g);
    });
    const every = Math.ceil(bars.length / 20);
    bars.forEach((b, i) => {
      if (i % every === 0) svg.append(sv('text', {x: L + (i + 0.5) * bw, y: H - 10, 'text-anchor': 'middle', 'font-size': 10, fill: '#5d6677'}, String(i + 1)));
    });
    svg.append(sv('text', {x: 4, y: 12, 'font-size': 11, fill: '#5d6677'}, opts.yLabel || ''));
    return el('div', {class: 'chart'}, legend(series.map(s => [s[1], s[2]])), svg);
  }
  // Lines with optional CI whiskers: lines = [{label, color, points: [{x (index), y, lo, hi, title}]}].
  function lineChart(lines, xLabels, opts) {
    const W = 1000, H = 270, L = 64, B = 30, T = 22, plotW = W - L - 20, plotH = H - B - T;
    const ys = lines.flatMap(l => l.points.flatMap(p => [p.y, p.lo ?? p.y, p.hi ?? p.y])).filter(isFinite);
    let lo = Math.min(...ys), hi = Math.max(...ys);
    if (opts.zero) lo = Math.min(0, lo);
    if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }
    const pad = (hi - lo) * 0.08; lo -= opts.zero ? 0 : pad; hi += pad;
    const X = i => L + (xLabels.length <= 1 ? plotW / 2 : i / (xLabels.length - 1) * plotW);
    const Y = v => T + plotH - (v - lo) / (hi - lo) * plotH;
    const svg = sv('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'lines', role: 'img'});
    for (const t of axisTicks(lo, hi, 5)) {
      svg.append(sv('line', {x1: L, x2: W - 20, y1: Y(t), y2: Y(t), stroke: '#e3e7ee'}),
                 sv('text', {x: L - 6, y: Y(t) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#5d6677'}, opts.fmt ? opts.fmt(t) : num(t, 2)));
    }
    const every = Math.ceil(xLabels.length / 20);
    xLabels.forEach((x, i) => { if (i % every === 0) svg.append(sv('text', {x: X(i), y: H - 10, 'text-anchor': 'middle', 'font-size': 10, fill: '#5d6677'}, x)); });
    for (const l of lines) {
      const pts = l.points.filter(p => isFinite(p.y));
      if (pts.length > 1) svg.append(sv('polyline', {points: pts.map(p => `${X(p.x)},${Y(p.y)}`).join(' '), fill: 'none', stroke: l.color, 'stroke-width': 1.6}));
      for (const p of pts) {
        const g = sv('g', {class: 'point'}, sv('title', null, p.title || `${l.label}: ${num(p.y)}`));
        if (isFinite(p.lo) && isFinite(p.hi)) g.append(sv('line', {x1: X(p.x), x2: X(p.x), y1: Y(p.lo), y2: Y(p.hi), stroke: l.color}));
        g.append(sv('circle', {cx: X(p.x), cy: Y(p.y), r: p.mark ? 6 : 3, fill: p.mark ? '#fff' : l.color, stroke: l.color, 'stroke-width': p.mark ? 2.5 : 1}));
        svg.append(g);
      }
    }
    svg.append(sv('text', {x: 4, y: 12, 'font-size': 11, fill: '#5d6677'}, opts.yLabel || ''));
    return el('div', {class: 'chart'}, lines.length > 1 ? legend(lines.map(l => [l.label, l.color])) : null, svg);
  }
  const RANK_COLORS = ['#2458c6', '#c62828', '#2e7d32', '#e07b00', '#7b5fc7', '#00838f', '#6d4c41', '#ad1457'];

  // ---- sortable, filterable tables ----
  // cols = [[label, getter, format]]; rows: objects; other: a summary row kept last.
  function dataTable(id, cols, rows, other, opts) {
    const tbody = el('tbody');
    const mk = (r, cls) => el('tr', {class: cls}, cols.map(([, get, f]) => el('td', null, f ? f(get(r), r) : get(r))));
    let order = rows.slice(), sortCol = -1, asc = false;
    const otherRow = other ? mk(other, 'other') : null;
    const filter = el('input', {class: 'filter', type: 'search', placeholder: 'filter by name', 'aria-label': 'filter ' + id});
    function draw() {
      tbody.textContent = '';
      const q = filter.value.toLowerCase();
      for (const r of order) {
        const tr = mk(r, 'row');
        if (q && !String(cols[0][1](r)).toLowerCase().includes(q)) tr.style.display = 'none';
        tbody.append(tr);
      }
      if (otherRow) tbody.append(otherRow);
    }
    const head = el('tr', null, cols.map(([label, get], i) => el('th', {title: 'sort', onclick: () => {
      asc = sortCol === i ? !asc : i === 0;
      sortCol = i;
      order = rows.slice().sort((a, b) => {
        const x = get(a), y = get(b);
        const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      draw();
    }}, label)));
    filter.addEventListener('input', draw);
    draw();
    return el('div', null, opts && opts.note ? el('div', {class: 'muted'}, opts.note) : null, filter,
              el('table', {class: 'data', id}, el('thead', null, head), tbody));
  }

  // ---- the analysis page ----
  function renderAnalysis(doc, root) {
    const r = doc.report;
    const steps = r.steps || {rows: [], warmup: []};
    document.title = 'trainrx analysis: ' + (r.inputs || []).join(', ');
    root.append(el('header', null, el('h1', null, 'trainrx analysis'), el('div', {class: 'sub'}, (r.inputs || []).join(' · '))));
    const sections = [dataLoss(r), summary(r), findingsSection(r, doc.timeline), stepsSection(steps),
                      breakdownSection(r), criticalPathSection(r), utilizationSection(r), opsSection(r), modulesSection(r), kernelsSection(r), memorySection(r), compileSection(r), timelineSection(doc.timeline, r)]
                     .filter(Boolean);
    // The navigation links to the sections this page has, and to each of them (issue 60: it named
    // critical path and compile on a CPU trace that had neither, and never Modules).
    const navNames = {'data-loss': 'data', 'critical-path': 'critical path', ops: 'operators'};
    root.append(el('nav', {id: 'nav'}, sections.map(s => el('a', {href: '#' + s.id}, navNames[s.id] || s.id))));
    const main = el('main');
    root.append(main);
    main.append(...sections);
    if (TL.tl) showWindow(0, null);  // in the page now: the canvas has its width
  }

  function dataLoss(r) {
    const items = [];
    for (const u of (r.run && r.run.unfinished) || []) {
      items.push(el('div', {class: 'alert'}, `Rank ${u.rank} did not finish (${u.end_reason}): ${fmtNs(u.recorded_ns)} recorded, ${u.steps} steps, ` +
        `${u.open_ranges} ranges left open. Source: ${u.source}`));
    }
    for (const w of (r.run && r.run.windows) || []) {
      if (!w.opened) items.push(el('div', {class: 'alert'}, `Rank ${w.rank} recorded no step: the window skips ${w.skip} steps and the run had ${w.run_boundaries}.`));
      else if (w.closed) items.push(el('div', {class: 'alert info'}, `Rank ${w.rank} recorded steps ${w.skip + 1}-${w.skip + w.steps} of the ${w.run_boundaries} it ran ` +
        `(record --steps ${w.steps}${w.skip ? ' --skip ' + w.skip : ''}); the rest of the run is not in the trace.`));
      else if (w.skip > 0) items.push(el('div', {class: 'alert info'}, `Rank ${w.rank} skipped the first ${w.skip} steps (record --skip ${w.skip}).`));
    }
    for (const m of (r.metrics && r.metrics.memory) || []) {
      if (m.oom_events > 0) items.push(el('div', {class: 'alert'}, `Rank ${m.rank} ran out of memory on ${m.device}: ${m.oom_events} allocation(s) failed, ` +
        `the largest asking ${fmtBytes(m.oom_request_bytes)}${m.oom_op ? ' (first in ' + m.oom_op + ')' : ''}` +
        (m.samples > 0 ? `; peak allocated ${fmtBytes(m.peak_allocated_bytes)}` + (m.capacity_bytes > 0 ? ` of ${fmtBytes(m.capacity_bytes)}` : '')
                       : '; allocated before it: not sampled') + '.'));
    }
    for (const k of r.ranks || []) {
      const c = k.clock;
      if (c && (c.status === 'shifted' || c.status === 'not aligned'))
        items.push(el('div', {class: 'alert info'}, `Clock of rank ${k.rank}: ${c.note}`));
    }
    for (const i of (r.ingest && r.ingest.issues) || []) {
      items.push(el('div', {class: 'alert' + (i.severity === 'info' ? ' info' : '')},
        `${i.severity === 'data_loss' ? 'Data loss' : i.severity === 'error' ? 'Error' : 'Note'}: ${i.kind} × ${i.count}`,
        i.first_seen ? el('span', {class: 'muted'}, ` (first seen: ${i.first_seen})`) : null));
    }
    const ing = r.ingest || {};
    const head = el('p', null, `${ing.events ?? 0} events read from ${((ing.bytes || 0) / 1e6).toFixed(1)} MB; ` +
      `${ing.skipped_events ?? 0} skipped.` + (items.length ? '' : ' Nothing was lost.'));
    return section('data-loss', 'Data loss and run end', head, items);
  }

  function summary(r) {
    const steps = r.steps || {};
    const ranks = r.ranks || [];
    const devices = [...new Set(ranks.flatMap(k => (k.devices || []).map(d => d.name)))];
    const worlds = [...new Set(ranks.map(k => k.world_size))];
    return section('summary', 'Run summary', el('div', {class: 'tiles'},
      tile('source', ranks.length ? ranks.map(k => k.source).filter(Boolean).slice(0, 3).join(', ') + (ranks.length > 3 ? ' …' : '') : '–'),
      tile('ranks', `${ranks.length}` + (worlds.length === 1 && worlds[0] > ranks.length ? ` of ${worlds[0]}` : '')),
      tile('devices', devices.length ? devices.join(', ') : 'CPU only'),
      tile('steps', `${steps.count ?? 0}` + ((steps.warmup || []).length ? ` + ${steps.warmup.length} warm-up` : '')),
      // Issue 34: a trace without steps showed "median step 0 ns".
      tile('median step', steps.count ? fmtNs(steps.median_ns) : '– (no steps)'),
      // Throughput follows the mean step (issue 81.10: the card was 1/median beside a note saying so).
      tile('steps per second', steps.mean_ns > 0 ? (1e9 / steps.mean_ns).toFixed(2) + ' (1 / mean step)' : '–'),
      tile('steps from', steps.source || '–'),
      tile('findings', String((r.findings || []).length)),
      ...((r.metrics && r.metrics.memory) || []).slice(0, 2).map(m => tile(`peak memory ${m.device}`, fmtBytes(m.peak_allocated_bytes) +
        (m.capacity_bytes > 0 ? ` of ${fmtBytes(m.capacity_bytes)}` : '') + (m.oom_events > 0 ? ' · out of memory' : ''))),
      // `trainrx run`: the workload's own figures (throughput summed over ranks).
      (r.runs || []).length ? [tile('workload', `${r.runs[0].workload} ${r.runs[0].changed || ''}`),
        tile('samples per second', r.runs.reduce((a, x) => a + (x.samples_per_s || 0), 0).toFixed(1)),
        tile('loss', `${num(r.runs[0].first_loss, 3)} → ${num(r.runs[0].last_loss, 3)}`)] : null));
  }

  // Where a finding shows on the timeline: event classes or names to light up.
  function highlightFor(f) {
    const id = f.id || '';
    if (id === 'input.pin_memory') return {classes: ['memcpy']};
    if (id.startsWith('input.')) return {classes: ['data']};
    const names = (f.examples || []).map(String).filter(e => e.length >= 4);
    if (id.startsWith('sync.')) return {classes: ['sync'], names};
    if (id === 'gpu.idle') return {classes: ['kernel', 'memcpy', 'memset', 'data', 'sync']};
    if (id.startsWith('gpu.launch')) return {classes: ['kernel', 'runtime']};
    if (id.startsWith('optim.')) return {classes: ['optimizer']};
    if (id.startsWith('dist.')) return {pattern: /^(nccl|rccl)|gloo|all_?reduce|all_?gather|reduce_?scatter|broadcast/i};
    return names.length ? {names} : null;
  }
  function matches(h, names, ev) {
    if (!h) return false;
    if (h.classes && h.classes.includes(ev.cls)) return true;
    const n = names[ev.name] || '';
    if (h.pattern) return h.pattern.test(n);
    // An example names the op ("7 x aten::item (.item(), float())"): the op's name is in it.
    return !!h.names && n.length >= 4 && h.names.some(x => x === n || x.includes(n) || n.includes(x));
  }

  // The step now and with the fix, as the what-if replay predicts it (issue 59): two bars on one
  // scale, the predicted one with its interval as a whisker (the saving's [low, high] of the step).
  function beforeAfter(p) {
    if (p.method !== 'replay' || !(p.step_ns_before > 0) || !(p.step_ns_after >= 0)) return null;
    const lo = p.step_ns_before * (1 - p.high_pct / 100), hi = p.step_ns_before * (1 - p.low_pct / 100);
    const max = Math.max(p.step_ns_before, p.step_ns_after, hi) || 1;
    const W = 420, L = 78, R = 8, X = v => L + Math.max(0, v) / max * (W - L - R);
    const svg = sv('svg', {viewBox: `0 0 ${W} 46`, width: W, class: 'before-after', role: 'img'});
    const bar = (y, v, label, color, textAt) => svg.append(
      sv('text', {x: 0, y: y + 10, 'font-size': 10}, label),
      sv('rect', {class: 'ba-bar', x: L, y, width: Math.max(1, X(v) - L), height: 12, fill: color}, sv('title', null, `${label}: ${fmtNs(v)} a step`)),
      sv('text', {x: Math.min(W - 60, X(textAt) + 4), y: y + 10, 'font-size': 10}, fmtNs(v)));
    bar(4, p.step_ns_before, 'step now', '#5d6677', p.step_ns_before);
    bar(26, p.step_ns_after, 'with the fix', p.step_ns_after <= p.step_ns_before ? '#31a354' : '#c62828', Math.max(p.step_ns_after, hi));
    svg.append(sv('line', {class: 'ba-interval', x1: X(lo), y1: 32, x2: X(hi), y2: 32, stroke: '#222', 'stroke-width': 1.5},
      sv('title', null, `interval: ${fmtNs(lo)} to ${fmtNs(hi)} a step`)));
    return svg;
  }

  // A finding's evidence as a labelled value with its unit (the key's suffix says it: _ns a time,
  // _pct a share, _bytes a size; a flag 1/0 as yes/no), the raw keys behind a fold.
  function evidenceRow(k, v) {
    const bytes = /(^|_)bytes(_|$)/.test(k);
    const label = k.replace(/_(ns|pct)$/, '').replace(/_bytes(?=_|$)/, '').replace(/_is_/g, ' is ').replace(/_/g, ' ');
    if (typeof v !== 'number') return [label, String(v)];
    if (/_ns$/.test(k)) return [label, fmtNs(v)];
    if (/_pct$/.test(k)) return [label, num(v, 1) + '%'];
    if (bytes) return [label, fmtBytes(v)];
    if (/_is_|^is_|^has_/.test(k) && (v === 0 || v === 1)) return [label, v ? 'yes' : 'no'];
    return [label, Number.isInteger(v) ? v.toLocaleString('en-US') : num(v, Math.abs(v) >= 100 ? 1 : 3)];
  }

  function findingsSection(r, tl) {
    const fs = r.findings || [];
    const cards = fs.map((f, i) => {
      const h = highlightFor(f);
      const target = tl ? bestWindow(tl, f, h) : -1;
      const ev = f.evidence || {};
      const saving = f.steps > 0
        ? `up to ${num(f.estimated_saving_pct, 1)}% of the step (${fmtNs(f.estimated_saving_ns)} per step, mean over ${f.steps} steps)`
        : f.estimated_saving_ns > 0 ? `up to ${fmtNs(f.estimated_saving_ns)} over the trace` : '–';
      // The what-if replay's prediction (docs/what-if.md): the step before and after, the interval, its assumptions.
      const p = f.predicted || {};
      const predicted = p.method === 'replay'
        ? `${num(p.saving_pct, 1)}% [${num(p.low_pct, 1)}, ${num(p.high_pct, 1)}] of the step: ${fmtNs(p.step_ns_before)} → ${fmtNs(p.step_ns_after)} (replay error ${num(p.replay_error_pct, 1)}%)`
        : p.method ? p.method : '';
      return el('div', {class: 'finding sev-' + f.severity, 'data-id': f.id, id: 'finding-' + i},
        el('h3', null, f.title),
        el('div', null, el('span', {class: 'badge ' + f.severity}, f.severity), `confidence ${f.confidence} · `,
          el('span', {class: 'id'}, f.id), f.rank >= 0 ? ` · rank ${f.rank}` : ''),
        kv([['measured', `${num(f.measured, 2)} ${f.unit || ''} (threshold ${num(f.threshold, 2)})`],
            ['predicted saving', predicted],
            ['assumes', p.assumptions || ''],
            ['estimated saving', saving],
            // A finding whose saving is memory, or is not claimed, has no time to bound it by.
            // As the text report words it: "1.13 ms of blocked time ...; the replay of T bounds the saving to ...".
            ['bounded by', f.saving_bound ? (f.saving_bound_ns > 0 ? `${fmtNs(f.saving_bound_ns)} of ` : '') + f.saving_bound : ''],
            ...Object.entries(ev).map(([k, v]) => evidenceRow(k, v)),
            ['seen in', (f.examples || []).length ? (f.examples || []).join(' · ') : '']]),
        Object.keys(ev).length ? el('details', {class: 'raw-evidence'}, el('summary', null, `evidence as the JSON has it (${Object.keys(ev).length} keys)`),
          kv(Object.entries(ev).map(([k, v]) => [el('code', null, k), String(v)]))) : null,
        beforeAfter(p),
        f.fix && f.fix.python ? [el('div', {class: 'muted'}, 'Fix in Python'), el('pre', null, f.fix.python)] : null,
        f.fix && f.fix.cpp ? [el('div', {class: 'muted'}, 'Fix in C++ (LibTorch)'), el('pre', null, f.fix.cpp)] : null,
        f.fix && f.fix.knob ? el('div', null, 'Knob (trainrx fix / sweep): ', el('code', null, f.fix.knob)) : null,
        el('button', {class: 'show-on-timeline', disabled: target < 0 ? 'disabled' : null,
          onclick: () => showOnTimeline(target, h, f)}, target < 0 ? 'not in the timeline\'s steps' : 'Show on the timeline'));
    });
    return section('findings', `Findings (${fs.length})`, fs.length ? cards : el('p', null, 'No finding crossed its threshold.'));
  }

  // Every steady step of a rank with every figure its rows carry, as the JSON declares them
  // (steps.fields: a new per-step figure is a column here with no change to this script); the
  // start from the rank's first step.
  function stepTable(fields, mine) {
    const t0 = mine.length ? Math.min(...mine.map(s => s.start_ns)) : 0;
    const shown = fields.filter(f => mine.some(s => s[f.name] !== undefined));
    const cols = [['step', s => s.name]].concat(shown.map(f => [f.label, s => s[f.name] ?? NaN,
      v => Number.isNaN(v) ? '' : fmtNs(f.name === 'start_ns' ? v - t0 : v)]));
    return dataTable('step-table', cols, mine, null,
                     {note: shown.map(f => `${f.label}: ${f.what}`).join('; ') + (shown.length ? '.' : '')});
  }

  function stepsSection(steps) {
    const rows = steps.rows || [], warm = steps.warmup || [];
    const ranks = [...new Set(rows.concat(warm).map(s => s.rank))].sort((a, b) => a - b);
    const box = el('div');
    const out = section('steps', 'Step time', el('p', {class: 'muted'}, `Steps ${steps.source || ''}. Warm-up steps (pale) are left out of every figure.`));
    if (!rows.length && !warm.length) { out.append(el('p', null, 'No steps were found in this trace.')); return out; }
    if (ranks.length > 1) {
      const lines = ranks.map((rk, i) => ({label: 'rank ' + rk, color: RANK_COLORS[i % RANK_COLORS.length],
        points: rows.filter(s => s.rank === rk).map((s, k) => ({x: k, y: s.wall_ns, title: `rank ${rk} ${s.name}: ${fmtNs(s.wall_ns)}`}))}));
      const n = Math.max(...lines.map(l => l.points.length));
      out.append(el('h3', null, 'Step time per rank'), lineChart(lines, Array.from({length: n}, (_, i) => String(i + 1)), {fmt: fmtNs, yLabel: 'step time', zero: true}));
    }
    const pick = el('select', {'aria-label': 'rank'}, ranks.map(rk => el('option', {value: rk}, 'rank ' + rk)));
    function draw() {
      const rk = Number(pick.value);
      const mine = warm.filter(s => s.rank === rk).map(s => ({label: s.name, note: 'warm-up', parts: [0, 0, 0, 0, s.wall_ns]}))
        .concat(rows.filter(s => s.rank === rk).map(s => ({label: s.name, parts: PHASES.map(p => s[p[0] + '_ns'] || 0)})));
      box.textContent = '';
      box.append(stackedBars(mine, PHASES, {yLabel: 'time per step, by phase'}));
      const gpu = rows.filter(s => s.rank === rk && s.gpu_kernel_ns !== undefined);
      if (gpu.length) {
        box.append(el('h3', null, 'GPU per step'), stackedBars(gpu.map(s => ({label: s.name, parts: GPU_PARTS.map(p => s[p[0] + '_ns'] || 0)})),
          GPU_PARTS, {yLabel: 'GPU time per step'}));
      }
      box.append(el('h3', null, 'Steps'), stepTable(steps.fields || [], rows.filter(s => s.rank === rk)));
    }
    pick.addEventListener('change', draw);
    draw();
    append(out, [ranks.length > 1 ? el('div', {class: 'controls'}, 'Phases of ', pick) : null, box]);
    return out;
  }

  function breakdownSection(r) {
    const b = (r.metrics && r.metrics.step_breakdown) || {};
    const out = section('breakdown', 'Where the step time goes');
    if (!(r.steps && r.steps.count)) {  // no steps: no shares of a step to draw (an empty bar said nothing)
      out.append(el('p', null, 'No training steps were found, so there is no breakdown of a step: the tables give totals over the whole trace.'));
      return out;
    }
    const parts = PHASES.map(([k, label, c]) => [label, b[k] || 0, c]);
    out.append(el('div', {class: 'bar', role: 'img'}, parts.filter(p => p[1] > 0).map(([label, v, c]) =>
      el('div', {style: {width: (100 * v) + '%', background: c}, title: `${label}: ${pct(v)}`}))),
      legend(parts.map(([label, v, c]) => [`${label} ${pct(v)}`, c])));
    if (b.gpu_kernel !== undefined) {
      const g = GPU_PARTS.map(([k, label, c]) => [label, b[k] || 0, c]);
      out.append(el('h3', null, 'GPU in the steps'), el('div', {class: 'bar'}, g.filter(p => p[1] > 0).map(([label, v, c]) =>
        el('div', {style: {width: (100 * v) + '%', background: c}, title: `${label}: ${pct(v)}`}))), legend(g.map(([l, v, c]) => [`${l} ${pct(v)}`, c])));
    }
    const tb = (r.metrics && r.metrics.temporal_breakdown) || [];
    if (tb.length) {
      out.append(el('h3', null, 'GPU temporal breakdown (HTA\'s definition, whole trace)'),
        dataTable('temporal-table', [['rank', t => t.rank], ['kernel time', t => t.kernel_time_ns, fmtNs], ['idle', t => t.idle_pct, v => num(v, 2) + '%'],
          ['compute', t => t.compute_pct, v => num(v, 2) + '%'], ['non-compute', t => t.non_compute_pct, v => num(v, 2) + '%']], tb, null));
    }
    return out;
  }

  // The critical path (docs/analyze.md "What waits for what"): per rank, the shares of its classes
  // as a bar, and the median step's path drawn in time (one rect a segment, the class's colour).
  const PATH_COLORS = {cpu: '#5c6bc0', launch: '#8e24aa', allocator: '#d81b60', sync_wait: '#e57373', gpu_compute: '#2e7d32',
    gpu_comm: '#00897b', gpu_copy: '#f0a000', kernel_gap: '#90a4ae', dependency_wait: '#ff7043', rank_wait: '#6d4c41', other: '#bdbdbd'};
  function pathStrip(p) {
    const segs = p.segments || [];
    if (!segs.length) return null;
    const W = 1000, H = 26, t0 = segs[0].start_ns, span = Math.max(1, segs[segs.length - 1].end_ns - t0);
    const svg = sv('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'path-strip', role: 'img'});
    for (const s of segs) {
      const x = (s.start_ns - t0) / span * W, w = Math.max((s.end_ns - s.start_ns) / span * W, 0.3);
      svg.append(sv('rect', {class: 'path-seg', x, y: 2, width: w, height: H - 4, fill: PATH_COLORS[s.class] || '#bdbdbd'},
        sv('title', null, `${s.class}${s.what ? ': ' + s.what : ''} — ${fmtNs(s.end_ns - s.start_ns)}` +
          (s.slack_ns >= 0 ? ` (slack ${fmtNs(s.slack_ns)})` : ''))));
    }
    return svg;
  }
  function criticalPathSection(r) {
    const paths = (r.metrics && r.metrics.critical_path) || [];
    if (!paths.length) return null;
    const out = section('critical-path', 'Critical path: what set the step\'s length');
    for (const p of paths) {
      const total = Math.max(1, p.mean_ns);
      const parts = Object.entries(p.class_ns || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
      out.append(el('h3', null, `rank ${p.rank}: ${fmtNs(p.mean_ns)} ${p.steps ? 'a step' : 'in the trace'}`),
        el('div', {class: 'bar path-bar', role: 'img'}, parts.map(([k, v]) =>
          el('div', {style: {width: (100 * v / total) + '%', background: PATH_COLORS[k] || '#bdbdbd'}, title: `${k}: ${pct(v / total)}`}))),
        legend(parts.map(([k, v]) => [`${k} ${pct(v / total)}`, PATH_COLORS[k] || '#bdbdbd'])));
      const strip = pathStrip(p);
      if (strip) out.append(el('div', {class: 'sub'}, 'the median step\'s path in time (hover a segment):'), strip);
      if (p.note) out.append(el('p', {class: 'sub'}, p.note));
      out.append(dataTable(`path-top-${p.rank}`, [['class', t => t.class], ['on the path', t => t.what], ['time', t => t.ns, fmtNs]], p.top || [], null));
    }
    return out;
  }

  // Hardware utilization (issue 52): MFU with its peak named, and the roofline of the op classes and
  // top ops: achieved TFLOP/s against FLOP/byte on log axes, the device's roof drawn where known.
  function fmtFlops(f) {
    return f >= 1e12 ? (f / 1e12).toFixed(2) + ' TFLOP' : f >= 1e9 ? (f / 1e9).toFixed(2) + ' GFLOP' : f >= 1e6 ? (f / 1e6).toFixed(2) + ' MFLOP' : f.toFixed(0) + ' FLOP';
  }
  // A rate in the unit its magnitude reads best in (a CPU's 35.7 GFLOP/s, not "0.04 TFLOP/s"), as the
  // text report does (issue 60).
  function rateUnit(tflops) {
    return tflops >= 1 ? ['TFLOP/s', 1] : tflops >= 1e-3 ? ['GFLOP/s', 1e3] : ['MFLOP/s', 1e6];
  }
  function fmtRate(tflops, digits) {
    const [unit, k] = rateUnit(tflops);
    return `${num(tflops * k, digits)} ${unit}`;
  }
  function roofline(u) {
    const pts = (u.ops || []).filter(o => o.tflops > 0 && o.intensity > 0);
    if (!pts.length) return null;
    const W = 640, H = 300, L = 56, B = 34;
    // The y axis in one unit for the whole plot, from its largest rate.
    const [unit, k] = rateUnit(Math.max(u.peak_tflops || 0, ...pts.map(o => o.tflops)));
    const xs = pts.map(o => o.intensity), ys = pts.map(o => o.tflops * k);
    const ridge = u.peak_tflops > 0 && u.peak_gbps > 0 ? u.peak_tflops * 1e3 / u.peak_gbps : 0;
    if (u.peak_tflops > 0) ys.push(u.peak_tflops * k);
    if (ridge > 0) xs.push(ridge);
    const lx0 = Math.floor(Math.log10(Math.min(...xs))) , lx1 = Math.ceil(Math.log10(Math.max(...xs)) + 0.01);
    const ly0 = Math.floor(Math.log10(Math.min(...ys))), ly1 = Math.ceil(Math.log10(Math.max(...ys)) + 0.01);
    const X = v => L + (Math.log10(v) - lx0) / Math.max(1e-9, lx1 - lx0) * (W - L - 8);
    const Y = v => H - B - (Math.log10(v) - ly0) / Math.max(1e-9, ly1 - ly0) * (H - B - 8);
    const svg = sv('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'roofline', role: 'img'});
    svg.append(sv('line', {x1: L, y1: H - B, x2: W - 8, y2: H - B, stroke: '#888'}), sv('line', {x1: L, y1: 8, x2: L, y2: H - B, stroke: '#888'}));
    for (let e = lx0; e <= lx1; ++e) svg.append(sv('text', {x: X(10 ** e), y: H - B + 14, 'font-size': 10, 'text-anchor': 'middle'}, `1e${e}`));
    for (let e = ly0; e <= ly1; ++e) svg.append(sv('text', {x: L - 4, y: Y(10 ** e) + 3, 'font-size': 10, 'text-anchor': 'end'}, `1e${e}`));
    svg.append(sv('text', {x: (L + W) / 2, y: H - 4, 'font-size': 11, 'text-anchor': 'middle'}, 'FLOP per byte'),
      sv('text', {x: 12, y: (H - B) / 2, 'font-size': 11, transform: `rotate(-90 12 ${(H - B) / 2})`, 'text-anchor': 'middle'}, unit));
    if (u.peak_tflops > 0) {
      const peak = u.peak_tflops * k;
      const xr = ridge > 0 ? ridge : 10 ** lx0;
      if (ridge > 0) svg.append(sv('line', {class: 'roof', x1: X(10 ** lx0), y1: Y(Math.max(10 ** ly0, u.peak_gbps * 10 ** lx0 / 1e3 * k)), x2: X(xr), y2: Y(peak), stroke: '#5d6677', 'stroke-dasharray': '4 3'}));
      svg.append(sv('line', {class: 'roof', x1: X(xr), y1: Y(peak), x2: X(10 ** lx1), y2: Y(peak), stroke: '#5d6677', 'stroke-dasharray': '4 3'}),
        sv('text', {x: W - 10, y: Y(peak) - 4, 'font-size': 10, 'text-anchor': 'end'}, `${u.dtype} peak ${fmtRate(u.peak_tflops, 1)}`));
    }
    const colors = {matmul: '#2458c6', conv: '#6a3d9a', attention: '#e6550d', norm: '#31a354', softmax: '#969696', loss: '#bcbddc', elementwise: '#c62828', embedding: '#8c6d31'};
    for (const o of pts)
      svg.append(sv('circle', {class: 'roof-op', cx: X(o.intensity), cy: Y(o.tflops * k), r: 4, fill: colors[o.class] || '#444'},
        sv('title', null, `${o.name} (${o.class}, ${o.dtype}): ${fmtRate(o.tflops, 3)} at ${num(o.intensity, 1)} FLOP/byte` + (o.bound ? `, ${o.bound}-bound` : ''))));
    return svg;
  }
  function utilizationSection(r) {
    const us = (r.metrics && r.metrics.utilization) || [];
    if (!us.length) return null;
    const out = section('utilization', 'Hardware utilization (FLOPs from the recorded shapes)');
    for (const u of us) {
      out.append(el('h3', null, `rank ${u.rank}: ${u.device}`), el('div', {class: 'tiles'},
        tile('MFU', u.mfu > 0 ? (u.mfu_lower_bound ? '≥ ' : '') + pct(u.mfu) : '–'),
        tile('model FLOPs', fmtFlops(u.model_flops) + (u.steps ? ' a step' : '')),
        tile('achieved', u.achieved_tflops > 0 ? fmtRate(u.achieved_tflops, 2) : '–'),
        tile('dense peak', u.peak_tflops > 0 ? `${fmtRate(u.peak_tflops, 1)} (${u.dtype})` : 'unknown'),
        tile('costed', `${pct(u.covered_share)} of ${u.time_from === 'kernels' ? 'kernel' : 'op'} time`)));
      if (u.peak_source) out.append(el('p', {class: 'sub'}, 'peak: ' + u.peak_source));
      if (u.recompute_flops > 0)
        out.append(el('p', {class: 'sub'}, `activation recomputation: ${fmtFlops(u.recompute_flops)} a step of forward ops run again in the backward` +
          (u.hfu > 0 ? `; hardware FLOPs utilization (HFU) ${pct(u.hfu)}` : '') + ' (not in MFU)'));
      if (u.note) out.append(el('p', {class: 'sub'}, u.note));
      const plot = roofline(u);
      if (plot) out.append(el('div', {class: 'sub'}, 'the costliest ops on the roofline (hover a point):'), plot);
      out.append(dataTable(`flops-${u.rank}`, [['op', o => o.name], ['class', o => o.class], ['dtype', o => o.dtype], ['FLOPs', o => o.flops, fmtFlops],
        ['time', o => o.time_ns, fmtNs], ['FLOP/s', o => o.tflops, v => fmtRate(v, 3)], ['FLOP/byte', o => o.intensity, v => num(v, 1)], ['bound', o => o.bound || '–']], u.ops || [], null));
    }
    return out;
  }

  function nameTable(id, t, withSelf) {
    if (!t || !(t.rows || []).length) return el('p', null, 'None in this trace.');
    const cols = [['name', x => x.name], ['count', x => x.count]];
    if (t.rows[0].total_ns !== undefined) cols.push(['total', x => x.total_ns ?? NaN, fmtNs]);
    if (withSelf) cols.push(['self', x => x.self_ns ?? NaN, fmtNs]);
    if (t.rows[0].mean_ns !== undefined) cols.push(['mean', x => x.mean_ns ?? NaN, fmtNs]);
    cols.push(['share', x => x.share ?? NaN, v => isFinite(v) ? pct(v) : '–']);
    if (withSelf) cols.push(['self share', x => x.self_share ?? NaN, v => isFinite(v) ? pct(v) : '–']);
    const note = `Top ${t.rows.length} of ${t.names} names; shares of ${t.basis} (${fmtNs(t.basis_ns)} over ${t.steps} steps)` +
      (t.other ? `; the other ${t.other_names} summed in the last row.` : '.');
    return dataTable(id, cols, t.rows, t.other, {note});
  }
  function opsSection(r) { return section('ops', 'Operators', nameTable('op-table', r.metrics && r.metrics.op_table, true)); }
  function kernelsSection(r) { return section('kernels', 'GPU kernels', nameTable('kernel-table', r.metrics && r.metrics.kernel_table, false)); }
  // nn.Module forward ranges (issue 34: the HTML had no module table); their shares are of the
  // steps that have module ranges (the start-up hook records the model's first calls only).
  function modulesSection(r) {
    const t = r.metrics && r.metrics.module_table;
    if (!t || !(t.rows || []).length) return null;
    const out = section('modules', 'Modules (forward, host time)', nameTable('module-table', t, true));
    const all = ((r.steps && r.steps.rows) || []).length;
    if (t.steps > 0 && t.steps < all)
      out.append(el('p', null, `Module ranges cover the model's first calls only: ${t.steps} of the ${all} steps have them, and the shares are of those steps' time.`));
    return out;
  }

  // Memory (issue 36): per device, what is allocated when each step starts and the step's peak,
  // the capacity drawn where known and the highest peak marked; the figures of the text table.
  function fmtBytes(b) {
    if (!isFinite(b) || b < 0) return '–';
    const a = Math.abs(b);
    return a >= 1e9 ? (b / 1e9).toFixed(2) + ' GB' : a >= 1e6 ? (b / 1e6).toFixed(1) + ' MB' : a >= 1e3 ? (b / 1e3).toFixed(1) + ' kB' : b.toFixed(0) + ' B';
  }
  function memorySection(r) {
    const mem = (r.metrics && r.metrics.memory) || [];
    if (!mem.length) return null;
    const out = section('memory', 'Memory');
    out.append(el('p', {class: 'muted'}, 'From the allocator samples in the trace (torch.profiler\'s profile_memory events; trainrx record samples the ' +
      'process heap at step boundaries and when backward starts, so its step peak is a lower bound). Per steady step: allocated when it starts and its peak.'));
    for (const m of mem) {
      const n = Math.max((m.step_start_bytes || []).length, (m.step_peak_bytes || []).length);
      const peaks = m.step_peak_bytes || [];
      const top = peaks.reduce((best, v, i) => v > (best < 0 ? -1 : peaks[best]) ? i : best, -1);
      const line = (label, color, xs, mark) => ({label, color, points: xs.map((y, i) => ({x: i, y: y >= 0 ? y : NaN, mark: mark && i === top,
        title: `step ${i + 1}: ${label} ${fmtBytes(y)}`}))});
      const lines = [line('allocated at step start', '#2458c6', m.step_start_bytes || [], false), line('step peak', '#c62828', peaks, true)];
      // The capacity line only where the peak is a visible part of it (else the steps flatten to nothing).
      if (m.capacity_bytes > 0 && m.peak_allocated_bytes >= 0.1 * m.capacity_bytes) lines.push({label: `capacity (${m.capacity_source})`, color: '#5d6677',
        points: Array.from({length: n}, (_, i) => ({x: i, y: m.capacity_bytes, title: `capacity ${fmtBytes(m.capacity_bytes)}`}))});
      const facts = [['peak allocated', fmtBytes(m.peak_allocated_bytes)], ['peak reserved', m.peak_reserved_bytes > 0 ? fmtBytes(m.peak_reserved_bytes) : '–'],
        ['capacity', m.capacity_bytes > 0 ? `${fmtBytes(m.capacity_bytes)} (${m.capacity_source})` : 'unknown'],
        ['median step peak', fmtBytes(m.median_step_peak_bytes) + (m.capacity_bytes > 0 && m.median_step_peak_bytes >= 0 ? ` (${pct(m.median_step_peak_bytes / m.capacity_bytes, 0)})` : '')],
        ['growth per step', m.growth_steps >= 2 ? fmtBytes(m.growth_bytes_per_step) : '–'],
        ['headroom', m.bytes_per_sample > 0 ? `${fmtBytes(m.bytes_per_sample)} a sample` + (m.fits_samples > 0 ? `: ${m.median_step_samples <= 3 ? 'up to ' : ''}${m.fits_samples} fit (${m.micro_steps > 1 ? `micro-batch ${m.samples_per_step}, ${m.micro_steps} a step` : `batch ${m.samples_per_step}`})` : '') : '–'],
        ['out of memory', m.oom_events > 0 ? `${m.oom_events} (asked ${fmtBytes(m.oom_request_bytes)}${m.oom_op ? ', in ' + m.oom_op : ''})` : '0']];
      out.append(el('h3', null, `rank ${m.rank} · ${m.device}`), kv(facts));
      if (n > 0) out.append(lineChart(lines, Array.from({length: n}, (_, i) => String(i + 1)), {zero: true, fmt: fmtBytes, yLabel: 'bytes'}));
    }
    return out;
  }

  // torch.compile (issue 39): per rank, compilations and their time, compiled regions per step, the
  // eager time between graphs, the graph breaks with their lines and the recompiles with their guards.
  function compileSection(r) {
    const cs = (r.metrics && r.metrics.compile) || [];
    if (!cs.length) return null;
    const out = section('compile', 'torch.compile');
    for (const c of cs) {
      out.append(el('h3', null, `rank ${c.rank}`), kv([
        ['compilations', `${c.compilations} (${fmtNs(c.compile_ns)}${c.compile_in_steps_ns > 0 ? ', ' + fmtNs(c.compile_in_steps_ns) + ' inside the steps' : ''})`],
        ['compiled regions per step', c.steps_with_regions > 0 ? String(c.regions_per_step) : '–'],
        ['eager time between graphs, per step', c.steps_with_regions > 0 ? fmtNs(c.eager_between_ns) : '–'],
        ['recompiles', String(c.recompiles)],
        ['source', c.marks ? 'trainrx record\'s start-up hook (lines and guards)' : 'the trace only (no lines, no guards)']]));
      const rows = [...(c.graph_breaks || []).map(b => ['graph break', b.where, '', b.count, b.reason]),
                    ...(c.recompile_sites || []).map(x => ['recompile', x.where, x.function, x.count, x.reason])];
      if (rows.length)
        out.append(el('table', {class: 'data'}, el('thead', null, el('tr', null, ['what', 'where', 'function', 'count', 'reason / guard'].map(h => el('th', null, h)))),
          el('tbody', null, rows.map(row => el('tr', null, row.map(v => el('td', null, String(v))))))));
    }
    return out;
  }

  // ---- the timeline (canvas) ----
  const TL = {canvas: null, tip: null, select: null, tl: null, w: -1, v0: 0, v1: 1, hl: null, layout: []};
  const LABEL_W = 230, ROW_H = 15, GPU_H = 18, GAP = 6;

  function bestWindow(tl, f, h) {
    if (!h || !tl.windows) return -1;
    let best = -1, bestCount = 0;
    tl.windows.forEach((w, i) => {
      if (f.rank >= 0 && w.rank !== f.rank) return;
      let c = 0;
      for (const lane of w.lanes) for (const e of lane.events) if (matches(h, tl.names, e)) ++c;
      if (c > bestCount) { best = i; bestCount = c; }
    });
    return best;
  }

  function timelineSection(tl, r) {
    const out = section('timeline', 'Timeline');
    if (!tl || !(tl.windows || []).length) { out.append(el('p', null, 'Nothing to draw: the trace has no events with a duration.')); return out; }
    TL.tl = tl;
    TL.select = el('select', {'aria-label': 'window'}, tl.windows.map((w, i) => el('option', {value: i}, w.label)));
    TL.select.addEventListener('change', () => showWindow(Number(TL.select.value), null));
    const info = el('span', {class: 'muted', id: 'timeline-info'});
    out.append(el('p', {class: 'muted'}, `Representative steps of ${tl.ranks_shown.length} of ${tl.ranks_total} ranks ` +
      '(the first rank and the one with the slowest median step): the median step, the slowest step and the first warm-up step. ' +
      'Scroll to zoom, drag to pan, hover for details. Syncs and data waits are always drawn; narrow events are left out to keep the file small, and each lane says how many.'),
      el('div', {class: 'controls'}, 'Window ', TL.select, el('button', {onclick: () => { TL.hl = null; resetView(); }}, 'Reset'), info),
      legend(Object.entries(CLASS_COLORS).map(([k, c]) => [k, c])));
    TL.canvas = el('canvas', {id: 'timeline-canvas'});
    TL.tip = el('div', {id: 'timeline-tip'});
    out.append(el('div', {id: 'timeline-box'}, TL.canvas, TL.tip));
    TL.info = info;
    wireCanvas();
    return out;
  }

  function showOnTimeline(index, h, f) {
    if (index < 0) return;
    TL.select.value = String(index);
    showWindow(index, h);
    TL.info.textContent = `highlighted: ${f.id}`;
    document.getElementById('timeline').scrollIntoView();
  }

  function showWindow(index, h) {
    TL.w = index; TL.hl = h;
    const w = TL.tl.windows[index];
    TL.layout = [];
    let y = 4;
    for (const lane of w.lanes) {
      const depth = lane.gpu ? 1 : Math.max(1, ...lane.events.map(e => e.depth + 1));
      const h2 = lane.gpu ? GPU_H : depth * ROW_H;
      TL.layout.push({lane, y, h: h2});
      y += h2 + GAP;
    }
    TL.height = y + 22;
    if (!h) TL.info.textContent = `${w.events_kept} of ${w.events_in_window} events drawn · ${fmtNs(w.dur_ns)} window`;
    resetView();
  }
  function resetView() { const w = TL.tl.windows[TL.w]; TL.v0 = 0; TL.v1 = w.dur_ns; draw(); }

  function draw() {
    const c = TL.canvas, w = TL.tl.windows[TL.w];
    const cssW = c.clientWidth || 1000, dpr = window.devicePixelRatio || 1;
    c.style.height = TL.height + 'px';
    c.width = Math.round(cssW * dpr); c.height = Math.round(TL.height * dpr);
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, TL.height);
    const plotW = cssW - LABEL_W - 8, scale = plotW / Math.max(1, TL.v1 - TL.v0);
    let drawn = 0;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (const {lane, y, h} of TL.layout) {
      ctx.fillStyle = lane.gpu ? '#f3f7f1' : '#f6f8fb';
      ctx.fillRect(LABEL_W, y, plotW, h);
      const more = lane.left_out ? `+${lane.left_out} not drawn` : '';
      ctx.fillStyle = '#1d2330';
      ctx.fillText(lane.label.slice(0, h >= 28 || !more ? 34 : 18), 4, y + 8);
      if (more) { ctx.fillStyle = '#8a93a3'; ctx.fillText(more, h >= 28 ? 4 : 124, h >= 28 ? y + 21 : y + 8); }
      ctx.save();
      ctx.beginPath(); ctx.rect(LABEL_W, y, plotW, h); ctx.clip();
      for (const e of lane.events) {
        const x0 = LABEL_W + (e.ts - TL.v0) * scale, x1 = LABEL_W + (e.ts + e.dur - TL.v0) * scale;
        if (x1 < LABEL_W || x0 > LABEL_W + plotW) continue;
        const ey = lane.gpu ? y + 1 : y + e.depth * ROW_H + 1, eh = (lane.gpu ? GPU_H : ROW_H) - 2;
        const dim = TL.hl && !matches(TL.hl, TL.tl.names, e);
        ctx.globalAlpha = dim ? 0.18 : 1;
        ctx.fillStyle = CLASS_COLORS[e.cls] || '#999';
        ctx.fillRect(x0, ey, Math.max(x1 - x0, 0.7), eh);
        if (TL.hl && !dim) { ctx.strokeStyle = '#111'; ctx.lineWidth = 1.2; ctx.strokeRect(x0, ey, Math.max(x1 - x0, 0.7), eh); }
        ++drawn;
        if (x1 - x0 > 40) {
          ctx.fillStyle = e.cls === 'sync' || e.cls === 'data' || e.cls === 'kernel' || e.cls === 'backward' ? '#fff' : '#1d2330';
          const name = TL.tl.names[e.name] || '';
          ctx.fillText(name.slice(0, Math.floor((x1 - x0 - 6) / 6)), Math.max(x0, LABEL_W) + 3, ey + eh / 2);
        }
      }
      ctx.restore();
      ctx.globalAlpha = 1;
    }
    // time axis
    ctx.fillStyle = '#5d6677';
    const axisY = TL.height - 12;
    for (const t of axisTicks(TL.v0, TL.v1, 8)) {
      const x = LABEL_W + (t - TL.v0) * scale;
      ctx.fillRect(x, axisY - 8, 1, 4);
      ctx.fillText(fmtNs(t), x + 2, axisY);
    }
    c.dataset.drawn = String(drawn);
    c.dataset.window = String(TL.w);
  }

  function hit(mx, my) {
    const w = TL.tl.windows[TL.w], plotW = TL.canvas.clientWidth - LABEL_W - 8;
    const t = TL.v0 + (mx - LABEL_W) / plotW * (TL.v1 - TL.v0), slack = 2 / plotW * (TL.v1 - TL.v0);
    for (const {lane, y, h} of TL.layout) {
      if (my < y || my > y + h) continue;
      const depth = lane.gpu ? 0 : Math.floor((my - y) / ROW_H);
      let best = null;
      for (const e of lane.events) {
        if ((lane.gpu || e.depth === depth) && t >= e.ts - slack && t <= e.ts + e.dur + slack && (!best || e.dur < best.dur)) best = e;
      }
      return best ? {e: best, lane} : null;
    }
    return null;
  }

  function wireCanvas() {
    const c = TL.canvas;
    let drag = null;
    c.addEventListener('wheel', ev => {
      ev.preventDefault();
      const rect = c.getBoundingClientRect(), plotW = c.clientWidth - LABEL_W - 8;
      const f = Math.min(1, Math.max(0, (ev.clientX - rect.left - LABEL_W) / plotW));
      const at = TL.v0 + f * (TL.v1 - TL.v0), k = ev.deltaY > 0 ? 1.25 : 0.8;
      const span = Math.max(1000, (TL.v1 - TL.v0) * k);
      TL.v0 = at - f * span; TL.v1 = TL.v0 + span;
      draw();
    }, {passive: false});
    c.addEventListener('mousedown', ev => { drag = {x: ev.clientX, v0: TL.v0, v1: TL.v1}; c.style.cursor = 'grabbing'; });
    window.addEventListener('mouseup', () => { drag = null; if (c) c.style.cursor = 'grab'; });
    c.addEventListener('mousemove', ev => {
      const rect = c.getBoundingClientRect(), mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
      if (drag) {
        const plotW = c.clientWidth - LABEL_W - 8, dt = (ev.clientX - drag.x) / plotW * (drag.v1 - drag.v0);
        TL.v0 = drag.v0 - dt; TL.v1 = drag.v1 - dt;
        draw();
        return;
      }
      const h = hit(mx, my);
      if (!h) { TL.tip.style.display = 'none'; return; }
      TL.tip.textContent = '';
      TL.tip.append(el('div', null, el('b', null, TL.tl.names[h.e.name] || '')),
        el('div', null, `${h.e.cls} · ${fmtNs(h.e.dur)} · at ${fmtNs(h.e.ts)} · ${h.lane.label}`));
      TL.tip.style.display = 'block';
      TL.tip.style.left = Math.min(mx + 12, c.clientWidth - 300) + 'px';
      TL.tip.style.top = (my + 14) + 'px';
    });
    c.addEventListener('mouseleave', () => { TL.tip.style.display = 'none'; });
    window.addEventListener('resize', () => { if (TL.w >= 0) draw(); });
  }

  // Events travel as [ts_ns, dur_ns, name index, depth, class index] to keep the file small.
  function unpackTimeline(tl) {
    if (!tl) return null;
    for (const w of tl.windows) {
      for (const lane of w.lanes) {
        lane.events = lane.events.map(a => ({ts: a[0], dur: a[1], name: a[2], depth: a[3], cls: tl.classes[a[4]]}));
      }
    }
    return tl;
  }

  // ---- experiment pages ----
  function header(root, title, sub) {
    document.title = title;
    root.append(el('header', null, el('h1', null, title), sub ? el('div', {class: 'sub'}, sub) : null));
    const main = el('main');
    root.append(main);
    return main;
  }
  function notes(list) { return (list || []).length ? section('notes', 'Notes', el('ul', null, list.map(n => el('li', null, n)))) : null; }
  function verdictColor(v) { return VERDICT_COLORS[v] || '#607080'; }

  // Rows of marks on a shared horizontal scale (forest and strip plots): the scale padded around
  // `xs`, vertical grid lines with their values, and the plot's geometry.
  function xScalePlot(cls, xs, L, rows, rowH, bottom) {
    const W = 1000, R = 20, T = 10, H = T + rows * rowH + bottom;
    let lo = Math.min(...xs), hi = Math.max(...xs);
    const pad = (hi - lo) * 0.08 || 0.05; lo -= pad; hi += pad;
    const X = v => L + (v - lo) / (hi - lo) * (W - L - R);
    const svg = sv('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: cls, role: 'img'});
    for (const t of axisTicks(lo, hi, 8)) {
      svg.append(sv('line', {x1: X(t), x2: X(t), y1: T, y2: H - bottom + 6, stroke: '#eef1f5'}),
                 sv('text', {x: X(t), y: H - bottom + 20, 'text-anchor': 'middle', 'font-size': 11, fill: '#5d6677'}, num(t, 2)));
    }
    return {svg, X, T, H, W, R, lo, hi};
  }

  // Forest plot: one row per item {label, est, lo, hi, color, title}, a reference line at `ref`,
  // and optionally a shaded band [from, to] (the gate's tolerance).
  function forest(items, ref, xLabel, band) {
    const rowH = 28, L = 330;
    const xs = items.flatMap(i => [i.lo, i.hi, i.est]).filter(isFinite).concat([ref]);
    const {svg, X, T, H, W, R, lo, hi} = xScalePlot('forest', xs, L, items.length, rowH, 34);
    if (band) {
      const b0 = X(Math.max(lo, band[0])), b1 = X(Math.min(hi, band[1]));
      if (b1 > b0) svg.append(sv('rect', {class: 'band', x: b0, y: T, width: b1 - b0, height: items.length * rowH, fill: '#2e7d32', 'fill-opacity': 0.08}));
    }
    svg.append(sv('line', {x1: X(ref), x2: X(ref), y1: T, y2: H - 28, stroke: '#1d2330', 'stroke-dasharray': '4 3'}));
    items.forEach((it, i) => {
      const y = T + i * rowH + rowH / 2;
      const g = sv('g', {class: 'forest-row'}, sv('title', null, it.title || it.label));
      g.append(sv('text', {x: L - 10, y: y + 4, 'text-anchor': 'end', 'font-size': 12, fill: '#1d2330'}, it.label.length > 48 ? it.label.slice(0, 47) + '…' : it.label));
      if (isFinite(it.lo) && isFinite(it.hi)) g.append(sv('line', {x1: X(it.lo), x2: X(it.hi), y1: y, y2: y, stroke: it.color, 'stroke-width': 2}));
      g.append(sv('rect', {x: X(it.est) - 5, y: y - 5, width: 10, height: 10, fill: it.color}));
      svg.append(g);
    });
    svg.append(sv('text', {x: W - R, y: H - 2, 'text-anchor': 'end', 'font-size': 11, fill: '#5d6677'}, xLabel));
    return el('div', {class: 'chart'}, svg);
  }

  // A saving as every report prints it: positive when the step got shorter, negative when longer.
  function savingText(saving) { return `${num(saving, 1)}%`; }
  function savingPct(speedup) { return isFinite(speedup) && speedup > 0 ? 100 * (1 - 1 / speedup) : NaN; }

  function renderFix(r, root) {
    const main = header(root, `trainrx fix ${r.workload}`, `baseline ${r.baseline} · ${r.trials} trials per comparison` + (r.order ? ` · order ${r.order}` : '') + ` · unit ${r.unit}`);
    const base = (r.baseline_trials && r.baseline_trials.trial_ms) || [];
    // In-process rows carry their baseline inside each comparison (median_a), not as separate trials.
    const baseMedian = base.length ? median(base) : ((r.fixes || [])[0] || {}).median_a;
    main.append(section('summary', 'Baseline', el('div', {class: 'tiles'}, tile('baseline median', `${num(baseMedian, 2)} ${r.unit}`),
      tile('fixes measured', String((r.fixes || []).length)), tile('trials', String(r.trials)))));
    const fixes = r.fixes || [];
    const items = fixes.map(f => ({label: f.all ? 'all of the above' : f.knob, est: f.speedup, lo: f.ci_low, hi: f.ci_high, color: verdictColor(f.verdict),
      title: `${f.knob}: ${num(f.speedup, 2)}x [${num(f.ci_low, 2)}, ${num(f.ci_high, 2)}], p ${num(f.p_value, 3)}, ${f.verdict}`}));
    main.append(section('forest', 'Measured speedup of each fix (95% CI)', el('p', {class: 'muted'},
      'speedup = baseline median / fixed median; right of the dashed line is faster. Green: faster, red: slower, grey: no significant difference.'),
      fixes.length ? forest(items, 1, 'speedup (×)') : el('p', null, 'No fix was measured.')));
    main.append(section('fixes', 'Estimated vs measured', dataTable('fix-table', [
      ['fix', f => f.all ? 'all of the above' : f.knob], ['finding', f => (f.findings || []).join(', ') || (f.asked ? '(--also)' : '–')], ['design', f => f.method],
      ['predicted saving', f => f.predicted_saving_pct, (v, f) => f.not_predictable !== undefined ? 'not predictable: ' + f.not_predictable
        : isFinite(v) ? `${savingText(v)} [${savingText(f.predicted_low_pct)}, ${savingText(f.predicted_high_pct)}]` : '–'],
      ['bound', f => f.estimated_saving_pct, v => v >= 0.05 ? `≤ ${num(v, 1)}%` : '–'],
      ['measured saving', f => savingPct(f.speedup), v => isFinite(v) ? savingText(v) : '–'],
      ['speedup [95% CI]', f => f.speedup, (v) => num(v, 2) + 'x'], ['CI', f => `[${num(f.ci_low, 2)}, ${num(f.ci_high, 2)}]`],
      ['p', f => f.p_value, v => v < 0.001 ? '<0.001' : num(v, 3)], ['verdict', f => f.verdict]], fixes, null)));
    const code = fixes.filter(f => f.code);
    if (code.length) main.append(section('code', 'The code change that makes each fix permanent', code.map(f => [el('div', {class: 'muted'}, f.knob), el('pre', null, f.code)])));
    const n = notes(r.notes); if (n) main.append(n);
  }

  function renderSweep(r, root) {
    const main = header(root, `trainrx sweep ${r.command || r.workload}`, `${(r.cells || []).length} cells × ${r.trials} trials, interleaved · unit ${r.unit}`);
    const cells = r.cells || [];
    const keys = cells.length ? Object.keys(cells[0].knobs) : [];
    const label = c => keys.map(k => `${k}=${c.knobs[k]}`).join(' ');
    const best = cells[r.best];
    main.append(section('summary', 'Best', el('div', {class: 'tiles'}, tile('best cell', best ? label(best) : '–'),
      tile('median', best ? `${num(best.median_ms, 3)} ${r.unit}` : '–'),
      tile('significant', (r.best_significant ? 'yes: faster than every other cell' : 'no: cells not separated from the best are marked ≈') + (r.test === 'welch_t_few_trials' ? ` (Welch's t on ${r.trials} trials a cell)` : '')))));
    const values = k => [...new Set(cells.map(c => c.knobs[k]))];
    const mn = Math.min(...cells.map(c => c.median_ms)), mx = Math.max(...cells.map(c => c.median_ms));
    const heat = v => { const f = mx > mn ? (v - mn) / (mx - mn) : 0; return `hsl(${120 - 120 * f}, 65%, ${88 - 10 * f}%)`; };
    const cellTd = c => el('td', {class: 'cell' + (c === best ? ' best' : ''), style: {background: heat(c.median_ms)},
      title: `${label(c)}: ${num(c.median_ms, 3)} [${num(c.ci_low, 3)}, ${num(c.ci_high, 3)}] ${r.unit}`},
      `${num(c.median_ms, 2)}${c.tied_with_best && c !== best ? ' ≈' : ''}`, el('div', {class: 'muted'}, `[${num(c.ci_low, 2)}, ${num(c.ci_high, 2)}]`));
    let table;
    if (keys.length === 2) {
      const [a, b] = keys, va = values(a), vb = values(b);
      table = el('table', {class: 'data heat', id: 'sweep-grid'}, el('thead', null, el('tr', null, el('th', null, `${a} \\ ${b}`), vb.map(v => el('th', null, v)))),
        el('tbody', null, va.map(x => el('tr', {class: 'row'}, el('td', null, x), vb.map(y => {
          const c = cells.find(c => c.knobs[a] === x && c.knobs[b] === y);
          return c ? cellTd(c) : el('td', null, '–');
        })))));
    } else {
      table = el('table', {class: 'data heat', id: 'sweep-grid'}, el('thead', null, el('tr', null, el('th', null, 'cell'), el('th', null, `median ${r.unit} [95% CI]`))),
        el('tbody', null, cells.map(c => el('tr', {class: 'row'}, el('td', null, label(c)), cellTd(c)))));
    }
    main.append(section('grid', 'The grid (median, 95% CI; best outlined, ≈ tied with the best)', table));
    if (keys.length) {
      const [a, b] = keys, va = values(a);
      const groups = keys.length === 2 ? values(b) : [null];
      const lines = groups.map((g, i) => ({label: g === null ? 'median' : `${b}=${g}`, color: RANK_COLORS[i % RANK_COLORS.length],
        points: va.map((x, k) => {
          const c = cells.find(c => c.knobs[a] === x && (g === null || c.knobs[b] === g));
          return c ? {x: k, y: c.median_ms, lo: c.ci_low, hi: c.ci_high, mark: c === best, title: `${label(c)}: ${num(c.median_ms, 3)} [${num(c.ci_low, 3)}, ${num(c.ci_high, 3)}]`} : {x: k, y: NaN};
        })}));
      main.append(section('plot', `Median ${r.unit} by ${a} (95% CI; the best cell circled)`, lineChart(lines, va, {yLabel: r.unit})));
    }
  }

  function stripPlot(groups, unit) {
    const rowH = 60, L = 200;
    const xs = groups.flatMap(g => g.values.concat(g.ref === undefined ? [] : [g.ref])).filter(isFinite);
    const {svg, X, T} = xScalePlot('strip', xs, L, groups.length, rowH, 30);
    groups.forEach((g, i) => {
      const y = T + i * rowH + rowH / 2, s = g.values.slice().sort((a, b) => a - b);
      if (g.ref !== undefined) svg.append(sv('line', {x1: X(g.ref), x2: X(g.ref), y1: y - 24, y2: y + 24, stroke: '#1d2330', 'stroke-dasharray': '4 3'}));
      svg.append(sv('text', {x: L - 10, y: y + 4, 'text-anchor': 'end', 'font-size': 12}, g.label.length > 30 ? g.label.slice(0, 29) + '…' : g.label));
      if (s.length) {
        const q1 = quantile(s, 0.25), q3 = quantile(s, 0.75), m = quantile(s, 0.5);
        svg.append(sv('rect', {x: X(q1), y: y - 14, width: Math.max(1, X(q3) - X(q1)), height: 28, fill: g.color, 'fill-opacity': 0.15, stroke: g.color}),
                   sv('line', {x1: X(m), x2: X(m), y1: y - 14, y2: y + 14, stroke: g.color, 'stroke-width': 2.5}));
      }
      g.values.forEach((v, k) => svg.append(sv('circle', {class: 'sample', cx: X(v), cy: y + ((k * 7919) % 21) - 10, r: 3, fill: g.color, 'fill-opacity': 0.8},
        sv('title', null, `${g.label}: ${num(v, 3)} ${unit}`))));
    });
    return el('div', {class: 'chart'}, svg);
  }

  function renderAb(r, root) {
    const main = header(root, 'trainrx ab', `${r.trials} interleaved trials per side · order ${r.order} · unit ${r.unit}`);
    const a = r.a || {trial_ms: []}, b = r.b || {trial_ms: []};
    const ratio = r.speedup > 0 ? 1 / r.speedup : NaN;
    main.append(section('summary', 'Result', el('div', {class: 'verdict ' + r.verdict}, r.verdict === 'faster' ? 'B is faster' : r.verdict === 'slower' ? 'B is slower' : 'No significant difference'),
      el('p', null, `B takes ${num(ratio, 3)}× A's time [${num(1 / r.ci_high, 3)}, ${num(1 / r.ci_low, 3)}], p ${r.p_value < 0.001 ? '< 0.001' : num(r.p_value, 3)}; smallest detectable change ${num(100 * (r.detectable_speedup - 1), 1)}%.`),
      kv([['A', a.label], ['B', b.label]])));
    const why = whySection(r.why); if (why) main.append(why);
    main.append(section('distributions', `Trials (${r.unit}; box: quartiles and median)`, stripPlot([
      {label: 'A', values: a.trial_ms, color: '#2458c6'}, {label: 'B', values: b.trial_ms, color: '#e07b00'}], r.unit)));
    const n = Math.min(a.trial_ms.length, b.trial_ms.length);
    if (n) {
      const d = Array.from({length: n}, (_, i) => b.trial_ms[i] - a.trial_ms[i]);
      main.append(section('paired', `Paired differences B − A, trial by trial (${r.unit}; dashed: no difference)`,
        stripPlot([{label: 'B − A', values: d, color: '#7b5fc7', ref: 0}], r.unit)));
    }
    const nt = notes(r.notes); if (nt) main.append(nt);
  }

  function renderGate(r, root) {
    const main = header(root, 'trainrx gate check', `baseline ${r.baseline} · ${r.spec} · ${r.mode} · ${r.trials} trials`);
    const tol = r.tolerance > 1 ? r.tolerance / 100 : r.tolerance;
    main.append(section('summary', 'Verdict', el('div', {class: 'verdict ' + r.verdict, id: 'gate-verdict'}, r.verdict),
      kv([['baseline', r.baseline], ['what ran', r.spec], ['design', r.mode], ['tolerance', pct(tol)],
          ['largest slowdown a pass may leave undetected', pct(r.max_undetected > 1 ? r.max_undetected / 100 : r.max_undetected)]])));
    const ms = r.metrics || [];
    const items = ms.map(m => ({label: m.name, est: 100 * (m.worse_ratio - 1), lo: 100 * (m.ci_low - 1), hi: 100 * (m.ci_high - 1),
      color: m.verdict === 'fail' ? '#c62828' : m.verdict === 'pass' ? '#2e7d32' : '#e07b00',
      title: `${m.name}: ${num(100 * (m.worse_ratio - 1), 1)}% worse [${num(100 * (m.ci_low - 1), 1)}, ${num(100 * (m.ci_high - 1), 1)}], ${m.verdict}`}));
    if (items.length) {
      const plot = forest(items, 0, '% worse than the baseline (the dashed line: no change)', [0, 100 * tol]);
      main.append(section('metrics-plot', 'Change per metric (95% CI; green band: within the tolerance)', plot));
    }
    main.append(section('metrics', 'Metrics', dataTable('gate-table', [['metric', m => m.name], ['verdict', m => m.verdict],
      ['baseline', m => m.baseline_median, v => num(v, 3)], ['current', m => m.current_median, v => num(v, 3)], ['unit', m => m.unit],
      ['change', m => 100 * (m.worse_ratio - 1), v => `${v >= 0 ? '+' : ''}${num(v, 1)}%`],
      ['95% CI', m => `[${num(100 * (m.ci_low - 1), 1)}%, ${num(100 * (m.ci_high - 1), 1)}%]`],
      ['p (Holm)', m => m.p_holm, v => num(v, 3)], ['detectable', m => 100 * (m.detectable_ratio - 1), v => num(v, 1) + '%']], ms, null)));
    const why = whySection(r.why); if (why) main.append(why);
    if ((r.baseline_fingerprint || null)) main.append(section('fingerprint', 'Baseline fingerprint', kv(Object.entries(r.baseline_fingerprint).map(([k, v]) => [k, String(v)]))));
    const nt = notes(r.warnings); if (nt) main.append(nt);
  }

  // ---- the diff page (trainrx diff --format html), and the "why" under ab and gate ----
  const DIFF_ROW_COLS = [['row', r => r.name], ['kind', r => r.kind], ['A per step', r => r.a_ns, fmtNs], ['B per step', r => r.b_ns, fmtNs],
    ['adds', r => r.contribution_ns, v => (v >= 0 ? '+' : '') + fmtNs(v)], ['3 se', r => 3 * r.se_ns, fmtNs],
    ['', r => [r.note, r.noise ? 'noise' : ''].filter(Boolean).join(', ')]];
  // ab / gate check: the diff of one more traced run of each side, its ranked rows and settings.
  function whySection(w) {
    if (!w) return null;
    const d = w.delta_mean_ns;
    return section('why', 'Why (one more run of each side, recorded and compared)',
      el('p', null, `Step: A ${fmtNs(w.a.mean_step_ns)}, B ${fmtNs(w.b.mean_step_ns)} in the mean (${d >= 0 ? '+' : ''}${fmtNs(d)}` +
        `${w.within_noise ? ', within this traced run\'s noise' : ''}).`),
      (w.ranked || []).length ? dataTable('why-ranked', DIFF_ROW_COLS, w.ranked, null) : el('p', null, 'No row beyond noise.'),
      (w.config || []).length ? dataTable('why-config', [['setting', r => r.name], ['A', r => r.a], ['B', r => r.b]], w.config, null) : null);
  }
  function renderDiff(d, root) {
    const main = header(root, 'trainrx diff', `A: ${d.a.label} · B: ${d.b.label}`);
    const delta = d.delta_mean_ns, base = d.a.mean_step_ns;
    main.append(section('summary', 'Verdict',
      el('div', {class: 'verdict ' + (d.judged === false || d.within_noise ? 'noise' : delta > 0 ? 'slower' : 'faster'), id: 'diff-verdict'},
        d.judged === false ? 'Not judged against noise' : d.within_noise ? 'Within noise' : delta > 0 ? 'B is slower' : 'B is faster'),
      el('p', null, `B − A: ${delta >= 0 ? '+' : ''}${fmtNs(delta)} per step in the mean (${base > 0 ? num(100 * delta / base, 1) + '%' : '–'}), ` +
        `${d.delta_median_ns >= 0 ? '+' : ''}${fmtNs(d.delta_median_ns)} in the median. The rows add up to the change in the mean; ` +
        `the median differs from it by ${fmtNs(d.residual_ns)} (the residual). Per-step noise (standard error of the difference): ${fmtNs(d.noise_ns)}.`),
      kv([['A', d.a.label], ['B', d.b.label], ['steps', `${d.a.steps} / ${d.b.steps}`],
          ['all ops', `×${num(d.uniform_factor, 2)} (uniform speed change${d.uniform && d.uniform.noise ? ', within noise' : ''})`]])));
    // Both sides' step breakdowns side by side: one stacked bar per side, and the change per phase.
    const parts = side => PHASES.map(([k]) => (side.phases_ns || {})[k] || 0);
    main.append(section('breakdown', 'Step breakdown, A and B side by side (mean per step)',
      stackedBars([{label: 'A', parts: parts(d.a)}, {label: 'B', parts: parts(d.b)}], PHASES, {yLabel: 'per step'}),
      el('div', {class: 'muted'}, 'Bar 1: A, bar 2: B.'),
      dataTable('diff-phases', [['phase', p => p.name], ['A', p => p.a_ns, fmtNs], ['B', p => p.b_ns, fmtNs],
        ['B − A', p => p.delta_ns, v => (v >= 0 ? '+' : '') + fmtNs(v)], ['noise', p => p.noise ? 'noise' : '']], d.phases || [], null)));
    const rowCols = DIFF_ROW_COLS;
    main.append(section('ranked', 'Why, ranked (what changed in the program beyond noise, then within noise, then other rows beyond noise)',
      (d.ranked || []).length ? dataTable('diff-ranked', rowCols, d.ranked, null) : el('p', {id: 'diff-ranked-empty'}, 'No row beyond noise.')));
    const ops = (d.ops || []).concat([d.uniform, d.outside].filter(Boolean));
    if ((d.ops || []).length) main.append(section('ops', 'By operator (self time per step; "adds": beyond the uniform change)',
      dataTable('diff-ops', [['operator', r => r.name], ['calls A', r => r.calls_a ?? '', v => v === '' ? '' : num(v, 1)],
        ['calls B', r => r.calls_b ?? '', v => v === '' ? '' : num(v, 1)]].concat(rowCols.slice(2)), ops, null)));
    if ((d.kernels || []).length) main.append(section('kernels', 'By GPU kernel (time per step)', dataTable('diff-kernels', rowCols, d.kernels, null)));
    if ((d.shapes || []).length) main.append(section('shapes', 'Input shapes and dtypes that changed',
      dataTable('diff-shapes', [['operator', r => r.name], ['A inputs', r => r.a_text || ''], ['B inputs', r => r.b_text || ''],
        ['A per step', r => r.a_ns, fmtNs], ['B per step', r => r.b_ns, fmtNs]], d.shapes, null)));
    if ((d.collectives || []).length) main.append(section('collectives', 'Per rank and collective (time per step of that rank)',
      dataTable('diff-collectives', rowCols, d.collectives, null)));
    main.append(section('config', 'Configuration', (d.config || []).length
      ? dataTable('diff-config', [['setting', r => r.name], ['A', r => r.a], ['B', r => r.b]], d.config, null) : el('p', null, 'Nothing recorded differs.')));
    main.append(section('findings', 'Findings', (d.findings || []).length
      ? dataTable('diff-findings', [['finding', r => r.name], ['', r => r.note || ''], ['saving A', r => r.a_ns, fmtNs], ['saving B', r => r.b_ns, fmtNs],
          ['title', r => r.b_text || r.a_text || '']], d.findings, null) : el('p', null, 'The same findings in both.')));
    const nt = notes(d.notes); if (nt) main.append(nt);
  }

  // ---- entry ----
  const root = document.getElementById('app');
  let doc = null;
  try {
    doc = JSON.parse(document.getElementById('trainrx-data').textContent);
    if (doc.kind === 'analysis') { unpackTimeline(doc.timeline); renderAnalysis(doc, root); }
    else if (doc.kind === 'fix') renderFix(doc.report, root);
    else if (doc.kind === 'sweep') renderSweep(doc.report, root);
    else if (doc.kind === 'ab') renderAb(doc.report, root);
    else if (doc.kind === 'gate') renderGate(doc.report, root);
    else if (doc.kind === 'diff') renderDiff(doc.report, root);
    else throw new Error('unknown report kind: ' + doc.kind);
  } catch (e) {
    errors.push(String((e && e.stack) || e));
  }
  // A link to a part of the report (report.html#timeline) lands there once it is drawn.
  if (location.hash.length > 1) { const target = document.getElementById(location.hash.slice(1)); if (target) target.scrollIntoView(); }
  // For readers and for the browser test: what was drawn, and any script error.
  const status = el('div', {id: 'trainrx-status', 'data-kind': doc ? doc.kind : '', 'data-errors': String(errors.length),
    'data-findings': String(document.querySelectorAll('.finding').length)});
  document.body.append(status);
  if (errors.length) document.body.append(el('pre', {id: 'trainrx-errors'}, 'The report could not be drawn:\n' + errors.join('\n')));
})();
