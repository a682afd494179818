// The Job, Members and Events views, each drawn from the API's responses.
'use strict';

const kPlots = {};

// A uPlot line chart of `ys` over `xs` in `id` (made once, then updated).
ZS.plot = function (id, label, xs, ys) {
  const data = [xs, ys];
  if (!kPlots[id]) {
    kPlots[id] = new uPlot({
      width: 440, height: 180, legend: { show: false },
      scales: { x: { time: false } },
      axes: [{ label: 'step' }, {}],
      series: [{}, { label, stroke: '#3b6fd8', width: 1.5 }],
    }, data, document.getElementById(id));
  } else {
    kPlots[id].setData(data);
  }
};

ZS.drawJob = function (status, telemetry, checkpoints, explain) {
  const members = status.members || [];
  const world = ZS.num(status.world);
  const instances = ZS.num(status.instances);
  const spares = members.filter((m) => m.state === 'MEMBER_STATE_SPARE').length;
  // steps/s from the samples of the first ranked worker.
  const ranked = (telemetry.ranks || []).filter((r) => ZS.num(r.rank) >= 0 && r.samples);
  ranked.sort((a, b) => ZS.num(a.rank) - ZS.num(b.rank));
  const samples = ranked.length ? ranked[0].samples : [];
  let rate = '';
  if (samples.length >= 2) {
    const a = samples[0], b = samples[samples.length - 1];
    const dt = (ZS.num(b.timeMs) - ZS.num(a.timeMs)) / 1000;
    if (dt > 0) rate = ((ZS.num(b.step) - ZS.num(a.step)) / dt).toFixed(1);
  }
  const cps = checkpoints.checkpoints || [];
  const last = cps.length ? ZS.num(cps[cps.length - 1].committedMs) : 0;
  const facts = [
    ['job', status.job || ''],
    ['epoch', ZS.num(status.epoch)],
    ['phase', status.state === 'CLUSTER_STATE_TRANSITIONING'
      ? 'transitioning to epoch ' + ZS.num(status.pendingEpoch) : 'stable'],
    ['world', world + ' = ' + instances + ' x ' + (instances ? world / instances : 0)],
    ['spares', spares],
    ['step', ZS.num(telemetry.maxStep)],
    ['steps/s', rate || '-'],
    ['loss', telemetry.meanLoss !== undefined ? Number(telemetry.meanLoss).toPrecision(5) : '-'],
    ['grad norm', telemetry.meanGradNorm !== undefined ? Number(telemetry.meanGradNorm).toPrecision(5) : '-'],
    ['mean step', ZS.num(telemetry.meanStepMs).toFixed(1) + ' ms'],
    ['last checkpoint', last ? ZS.ago(Date.now() - last) + ' ago (step ' + ZS.num(cps[cps.length - 1].step) + ')' : 'none'],
    ['leader', status.leader || ''],
  ];
  const dl = document.getElementById('job-facts');
  dl.replaceChildren();
  for (const [k, v] of facts) {
    dl.appendChild(ZS.el('dt', {}, k));
    dl.appendChild(ZS.el('dd', { 'data-fact': k }, String(v)));
  }
  ZS.plot('plot-step', 'step ms', samples.map((s) => ZS.num(s.step)), samples.map((s) => ZS.num(s.stepMs)));
  ZS.plot('plot-loss', 'loss', samples.map((s) => ZS.num(s.step)), samples.map((s) => ZS.num(s.loss)));
  const ul = document.getElementById('explain');
  ul.replaceChildren(...(explain.sentences || []).map((s) => ZS.el('li', {}, s)));
};

ZS.drawMembers = function (status, telemetry, ledger, onDrain) {
  const byId = new Map((telemetry.ranks || []).map((r) => [r.workerId, r]));
  const rows = (status.members || []).map((m) => {
    const t = byId.get(m.workerId);
    const phases = t && t.latest && t.latest.phases
      ? t.latest.phases.map((p) => p.phase + ' ' + ZS.num(p.ms).toFixed(1)).join(', ') : '';
    const labels = Object.entries(m.labels || {}).map(([k, v]) => k + '=' + v).join(' ');
    const button = ZS.el('button', { 'data-drain': m.name }, 'drain');
    button.addEventListener('click', () => onDrain(m.name));
    return [m.name, (m.state || '').replace('MEMBER_STATE_', '') + (m.suspect ? '?' : ''),
      ZS.num(m.rank) >= 0 ? String(ZS.num(m.rank)) : '-',
      String(ZS.num(m.step)), ZS.num(m.lastHeartbeatMs) + ' ms', m.address || '', labels, phases, button];
  });
  ZS.table(document.getElementById('members'),
    ['name', 'state', 'rank', 'step', 'heartbeat age', 'address', 'labels', 'last step phases (ms)', ''], rows);
  const root = document.getElementById('memory');
  root.replaceChildren();
  const ranks = ledger.ranks || [];
  let top = 1;
  for (const r of ranks) top = Math.max(top, ZS.num(r.predictedBytes), ZS.num(r.measuredBytes));
  const svg = ZS.el('svg', { width: 1000, height: ranks.length * 34 + 10 });
  ranks.forEach((r, i) => {
    const y = 4 + i * 34;
    const w = (v) => Math.max(0, (ZS.num(v) / top) * 480);
    svg.appendChild(ZS.el('text', { x: 0, y: y + 18, class: 'rowlabel' }, 'rank ' + ZS.num(r.rank) + ' ' + (r.worker || '')));
    svg.appendChild(ZS.el('rect', { x: 110, y, width: w(r.predictedBytes), height: 13, class: 'bar predicted', 'data-rank': ZS.num(r.rank), 'data-predicted': ZS.num(r.predictedBytes) }));
    const measured = ZS.num(r.measuredBytes);
    svg.appendChild(ZS.el('rect', { x: 110, y: y + 14, width: w(measured), height: 13, class: 'bar', 'data-measured': measured }));
    svg.appendChild(ZS.el('text', { x: 600, y: y + 18, class: 'rowlabel' },
      'predicted ' + ZS.bytes(r.predictedBytes) + ', measured ' + (measured < 0 ? 'none yet' : ZS.bytes(measured))));
  });
  root.appendChild(svg);
};

ZS.drawReshards = function (history) {
  const rows = (history.reshards || []).slice().reverse().map((r) => {
    const s = r.summary || {};
    return [String(ZS.num(r.epoch)), r.reason || '', ZS.num(r.worldBefore) + ' -> ' + ZS.num(r.worldAfter),
      String(ZS.num(s.moves)), String(ZS.num(s.bytesMoved)), String(ZS.num(s.lowerBoundBytes)),
      ZS.num(r.durationMs) + ' ms', r.outcome || ''];
  });
  ZS.table(document.getElementById('reshards'),
    ['epoch', 'reason', 'world', 'moves', 'bytes moved', 'lower bound', 'duration', 'outcome'], rows);
  const table = document.getElementById('reshards');
  [...table.querySelectorAll('tr')].slice(1).forEach((tr, i) => {
    const r = history.reshards[history.reshards.length - 1 - i];
    tr.setAttribute('data-epoch', ZS.num(r.epoch));
    tr.setAttribute('data-bytes', ZS.num((r.summary || {}).bytesMoved));
    tr.setAttribute('data-lower-bound', ZS.num((r.summary || {}).lowerBoundBytes));
    tr.setAttribute('data-outcome', r.outcome || '');
  });
};

ZS.drawEvents = function (events, filter) {
  const f = (filter || '').toLowerCase();
  const shown = events.filter((e) => !f || (e.kind || '').toLowerCase().includes(f) ||
    (e.reason || '').toLowerCase().includes(f));
  const rows = shown.slice(-500).reverse().map((e) => [String(ZS.num(e.seq)),
    new Date(ZS.num(e.timeMs)).toISOString().replace('T', ' ').replace('Z', ''),
    String(ZS.num(e.epoch)), e.kind || '', e.reason || '']);
  ZS.table(document.getElementById('events'), ['seq', 'time (UTC)', 'epoch', 'kind', 'reason'], rows);
};
