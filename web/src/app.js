// The page's life: picks the view from the URL's hash, refreshes the
// views from the API every 2 s and at once on every streamed event or plan
// change, keeps the previous map to draw a transition's moves, and runs the
// drain dialog. A standby coordinator's page names the leader and links to
// its dashboard.
'use strict';

const state = {
  view: 'job', events: [], lastSeq: 0, plan: null, maps: null, previousMaps: null,
  dead: new Set(), drain: null, refreshing: false, again: false, status: null,
};

function showView() {
  const v = (location.hash || '#job').slice(1);
  state.view = ['job', 'map', 'members', 'events'].includes(v) ? v : 'job';
  for (const s of document.querySelectorAll('.view')) s.classList.toggle('active', s.id === 'view-' + state.view);
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === state.view);
}

function banner(text) {
  const b = document.getElementById('banner');
  b.hidden = !text;
  b.textContent = text || '';
}

// A call that failed because this coordinator stands by: name the leader
// and link to its dashboard (the standby's answer names its HTTP port).
function standby(err) {
  if (!(err instanceof ZS.CallError) || err.code !== 'unavailable') return false;
  const m = /leader is ([^\s,]+)/.exec(err.message);
  const h = /dashboard (http:\/\/\S+)/.exec(err.message);
  const b = document.getElementById('banner');
  b.hidden = false;
  b.replaceChildren('This coordinator is a standby (' + err.message + ')');
  if (h) {
    b.append(': the leader serves the dashboard at ', ZS.el('a', { id: 'leader-link', href: h[1] }, h[1]));
  } else {
    b.append(m ? ': the leader, ' + m[1] + ', serves no dashboard this coordinator knows of.' : '.');
  }
  document.body.dataset.leader = m ? m[1] : '';
  return true;
}

async function refreshMap(plan) {
  const key = ZS.num(plan.epoch) + '/' + plan.planHash;
  if (state.plan && state.planKey === key && state.maps) return;
  const maps = await ZS.loadMaps(plan);
  if (state.maps && state.planKey !== key) state.previousMaps = state.maps;
  state.maps = maps;
  state.plan = plan;
  state.planKey = key;
  state.dead.clear();
}

// Draws the map view from the maps loaded and `status` (GetClusterStatus:
// the members it lists as dead flash).
function drawMapView(status) {
  ZS.drawMaps(document.getElementById('map'), state.maps, state.previousMaps, ZS.deadWorkers(status, state.dead));
}
ZS.drawMapView = drawMapView;

async function refresh() {
  if (state.refreshing) { state.again = true; return; }
  state.refreshing = true;
  try {
    const status = await ZS.dash('GetClusterStatus', {});
    banner(status.isolated ? 'The coordinator is cut off from most members and declares no one dead.' : '');
    document.body.dataset.leader = status.leader || '';
    const [telemetry, checkpoints, explain, history] = await Promise.all([
      ZS.dash('GetTelemetry', { samples: 60 }), ZS.dash('ListCheckpoints', {}),
      ZS.dash('Explain', {}), ZS.dash('GetReshardHistory', {}),
    ]);
    let ledger = {};
    let plan = null;
    if (ZS.num(status.epoch) > 0) {
      [ledger, plan] = await Promise.all([ZS.dash('GetLedger', {}), ZS.dash('GetPlan', {})]);
      await refreshMap(plan);
    }
    ZS.drawJob(status, telemetry, checkpoints, explain);
    ZS.drawMembers(status, telemetry, ledger, openDrain);
    ZS.drawReshards(history);
    const cap = document.getElementById('map-caption');
    const par = status.parallel;
    if (plan) {
      cap.textContent = 'epoch ' + ZS.num(plan.epoch) + ', world ' + ZS.num(plan.world) + (par
        ? ' = tensor ' + ZS.num(par.tensor) + ' x pipeline ' + ZS.num(par.pipeline) + ' x context ' +
          ZS.num(par.context) + ' x ' + ZS.num(plan.world) / ZS.num(par.tensor) / ZS.num(par.pipeline) /
          ZS.num(par.context) + ' replica(s): one map per slot'
        : ' = ' + ZS.num(plan.instances) + ' x ' + ZS.num(plan.shardGroupSize)) + ', plan ' + plan.planHash;
      document.getElementById('map').dataset.epoch = ZS.num(plan.epoch);
      drawMapView(status);
    } else {
      cap.textContent = 'no epoch committed yet';
    }
    const moving = document.getElementById('map-transition');
    const last = (history.reshards || [])[(history.reshards || []).length - 1];
    if (status.state === 'CLUSTER_STATE_TRANSITIONING') {
      moving.textContent = 'transition to epoch ' + ZS.num(status.pendingEpoch) + ' in progress';
    } else if (last && ZS.num(last.epoch) === ZS.num(plan && plan.epoch)) {
      const s = last.summary || {};
      const total = state.maps.reduce((n, m) => n + m.total, 0);
      moving.textContent = 'epoch ' + ZS.num(last.epoch) + ' from epoch ' + state.maps[0].base + ': ' +
        total + ' move(s), ' + ZS.num(s.bytesMoved) + ' bytes moved (lower bound ' +
        ZS.num(s.lowerBoundBytes) + '), ' + (last.outcome || '') +
        (total ? '; arrows: from the sender to the receiver, outlined: changed owner' : '');
    } else {
      moving.textContent = '';
    }
    document.body.dataset.ready = '1';
  } catch (err) {
    if (!standby(err)) banner('error: ' + err.message);
  } finally {
    state.refreshing = false;
    if (state.again) { state.again = false; refresh(); }
  }
}

function onEvent(e) {
  const seq = ZS.num(e.seq);
  if (seq <= state.lastSeq) return;
  state.lastSeq = seq;
  state.events.push(e);
  if (e.kind === 'dead') {
    const m = /^member ([^\s:']+)/.exec(e.reason || '');
    if (m) state.dead.add(m[1]);
  }
  ZS.drawEvents(state.events, document.getElementById('event-filter').value);
  refresh();
}

function openDrain(name) {
  state.drain = name;
  document.getElementById('drain-name').textContent = name;
  document.getElementById('drain-result').textContent = '';
  document.getElementById('drain-dialog').hidden = false;
  document.getElementById('drain-token').focus();
}

async function confirmDrain() {
  const result = document.getElementById('drain-result');
  const token = document.getElementById('drain-token').value;
  try {
    await ZS.call('AdminService', 'DrainWorker', { name: state.drain }, token);
    result.className = 'result ok';
    result.textContent = 'draining ' + state.drain;
    refresh();
  } catch (err) {
    result.className = 'result error';
    result.textContent = err.message;
  }
}

function start() {
  window.addEventListener('hashchange', showView);
  showView();
  document.getElementById('event-filter').addEventListener('input', (ev) => ZS.drawEvents(state.events, ev.target.value));
  document.getElementById('drain-confirm').addEventListener('click', confirmDrain);
  document.getElementById('drain-cancel').addEventListener('click', () => {
    document.getElementById('drain-dialog').hidden = true;
  });
  const live = document.getElementById('live');
  ZS.follow('/events/stream', { event: onEvent }, (up) => { live.textContent = up ? 'live' : 'reconnecting'; });
  ZS.follow('/plan/stream', { plan: () => refresh(), status: () => {} });
  refresh();
  setInterval(refresh, 2000);
}

start();
