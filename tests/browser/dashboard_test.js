// The dashboard in a real browser (Debian's chromium, headless, driven by
// puppeteer-core) against a real coordinator and workers on 127.0.0.1: a
// regression job, I = 2, world 4, one spare. Checks:
//   - every URL the page requests is served by the coordinator;
//   - the shard map's segments equal `zshardctl plan --output json`;
//   - a status listing a member dead flashes its segments (and no other's);
//   - kill -9 of an active worker: within 5 s of the spare's commit the map
//     shows the spare owning the dead rank's ranges, and the re-shard list
//     shows the move with bytes = lower bound;
//   - a drain from the page with a wrong token is refused with the server's
//     message; with the right one the member drains;
//   - an expert job's map equals zshardctl plan, one row per instance and
//     expert-parallel group, no two segments of a row overlapping;
//   - a model-parallel job's map is one map per slot, each equal to
//     zshardctl plan --tp T --pp P;
//   - a standby coordinator's page names the leader and links to its
//     dashboard (etcd store).
// Screenshots of each view go to ARTIFACT_DIR.
//   node dashboard_test.js BIN_DIR ARTIFACT_DIR NODE_MODULES_DIR
// Exit 0: passed; 77: skipped (no chromium); else failed.
'use strict';
const fs = require('fs');
const path = require('path');
const { Cluster, sleep, waitFor, startEtcd } = require('./cluster');

const [binDir, artifacts, modules] = process.argv.slice(2);
const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
if (!chromium) { console.log('SKIP chromium is not installed'); process.exit(77); }
const puppeteer = require(path.join(modules, 'node_modules', 'puppeteer-core'));
fs.mkdirSync(artifacts, { recursive: true });

const kToken = 'dashboard-token';
const regressionModel = {
  params: [
    { name: 'fc1.weight', shape: [64, 16], dtype: 'bf16' },
    { name: 'fc1.bias', shape: [64], dtype: 'bf16', no_weight_decay: true },
    { name: 'fc2.weight', shape: [4, 64], dtype: 'bf16' },
    { name: 'fc2.bias', shape: [4], dtype: 'bf16', no_weight_decay: true },
  ],
};
const job = {
  name: 'dashboard', model: regressionModel, layout: { bucket_size: 512 },
  optimizer: { lr: 1e-2 }, world: { instances: 2, min: 2, max: 4 },
  lease_timeout_ms: 2500, heartbeat_interval_ms: 100,
  workload: { kind: 'regression', steps: 1000000, global_batch: 32, step_delay_ms: 20 },
};

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok   ' + what);
}

// Each rank's merged ranges of bucket offsets from zshardctl's pieces, as
// "instance/rank/worker/begin/end" strings, sorted.
function ctlSegments(pieces) {
  const byRank = new Map();
  for (const p of pieces) {
    if (!byRank.has(p.rank)) byRank.set(p.rank, []);
    byRank.get(p.rank).push(p);
  }
  const out = [];
  for (const [rank, list] of byRank) {
    list.sort((a, b) => a.offset_in_bucket - b.offset_in_bucket);
    let cur = null;
    for (const p of list) {
      const begin = p.offset_in_bucket;
      const end = begin + p.end - p.begin;
      if (cur && cur.end === begin) { cur.end = end; continue; }
      cur = { instance: p.instance, rank, worker: p.worker, begin, end };
      out.push(cur);
    }
  }
  return out.map((s) => [s.instance, s.rank, s.worker, s.begin, s.end].join('/')).sort();
}

// The segments drawn for (buffer, bucket); a model-parallel job's in the
// map of `slot` ({tp, pp}).
async function pageSegments(page, buffer, bucket, slot) {
  const scope = slot ? `.slot-map[data-tp="${slot.tp}"][data-pp="${slot.pp}"] ` : '';
  return (await page.$$eval(`${scope}rect.seg[data-buffer="${buffer}"][data-bucket="${bucket}"]`, (rs) => rs.map((r) =>
    [r.dataset.instance, r.dataset.rank, r.dataset.worker, r.dataset.begin, r.dataset.end].join('/')))).sort();
}

// The map (a model-parallel job's map of `slot`) equals zshardctl plan's
// pieces, every bucket of every buffer.
async function mapMatchesCtl(cluster, page, slot) {
  const select = slot ? ['--tp', String(slot.tp), '--pp', String(slot.pp)] : [];
  const plan = cluster.ctl(['plan', ...select]);
  const epoch = await page.$eval('#map', (m) => m.dataset.epoch).catch(() => '');
  if (String(plan.epoch) !== epoch) return false;
  const summary = await fetchJson(cluster.url + 'zshard.v1.DashboardService/GetPlan', slot ? { slot } : {});
  for (let b = 0; b < summary.buffers.length; ++b) {
    for (let k = 0; k < Number(summary.buffers[b].buckets || 0); ++k) {
      const want = ctlSegments(cluster.ctl(['plan', ...select, '--bucket', String(k), '--buffer', String(b)]).pieces);
      const got = await pageSegments(page, b, k, slot);
      if (JSON.stringify(want) !== JSON.stringify(got)) return false;
    }
  }
  return true;
}

async function fetchJson(url, body) {
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return r.json();
}

// Every event kept, over the page's own JSON route.
async function allEvents(cluster) {
  let out = [];
  let after = '0';
  for (let i = 0; i < 100; ++i) {
    const r = await fetchJson(cluster.url + 'zshard.v1.DashboardService/ListEvents', { afterSeq: after, pageSize: 1000 });
    out = out.concat(r.events || []);
    if (!r.more) break;
    after = r.nextSeq;
  }
  return out;
}

async function shot(page, view, name) {
  await page.evaluate((v) => { location.hash = v; }, view);
  await sleep(400);
  // The body's box: the page's content, without the empty window below.
  await (await page.$('body')).screenshot({ path: path.join(artifacts, name) });
}

async function main() {
  const cluster = new Cluster(binDir, job);
  await cluster.startCoordinator(kToken);
  for (let i = 0; i < 5; ++i) {
    cluster.startWorker('w' + i);
    await waitFor('w' + i + ' to join', () => cluster.status().members.some((m) => m.name === 'w' + i), 20000);
  }
  const stable = (s, world, spares) => s.state === 'STABLE' && s.world === world &&
    s.members.filter((m) => m.state === 'ACTIVE').length === world &&
    s.members.filter((m) => m.state === 'SPARE').length === spares;
  await waitFor('a stable world of 4 and a spare', () => stable(cluster.status(), 4, 1), 60000);

  const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1280,900'] });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const requested = [];
    page.on('request', (r) => requested.push(r.url()));
    // Served: no file the page asks for is missing.
    const missing = [];
    page.on('response', (r) => { if (r.status() === 404) missing.push(r.url()); });
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(cluster.url + '#map', { waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 15000 });

    await waitFor('the map to equal zshardctl plan', () => mapMatchesCtl(cluster, page), 15000);
    check(true, 'shard map segments equal zshardctl plan --output json (every bucket, every rank)');
    await viewsMatchCtl(cluster, page);
    await shot(page, 'job', 'job.png');
    await shot(page, 'map', 'shard-map.png');
    await shot(page, 'members', 'members.png');
    await shot(page, 'events', 'events.png');

    // kill -9 an active worker: the spare takes its ranges.
    const before = cluster.status();
    const spare = before.members.find((m) => m.state === 'SPARE').name;
    const victim = before.members.find((m) => m.state === 'ACTIVE' && m.rank === 1);
    const plan0 = await fetchJson(cluster.url + 'zshard.v1.DashboardService/GetPlan', {});
    const victimRanges = [];
    for (let b = 0; b < plan0.buffers.length; ++b) {
      for (let k = 0; k < Number(plan0.buffers[b].buckets || 0); ++k) {
        for (const s of await pageSegments(page, b, k)) {
          const [instance, rank, worker, begin, end] = s.split('/');
          if (worker === victim.name) victimRanges.push({ b, k, instance, rank, begin, end });
        }
      }
    }
    check(victimRanges.length > 0, 'the victim ' + victim.name + ' owns ranges on the map');
    await page.evaluate(() => { location.hash = 'map'; });
    // A dead member's ranges flash until the plan without it arrives: the
    // page fed a status that lists the victim as dead draws its segments,
    // and only its, with the flashing class (in one evaluation, so no
    // refresh comes between the drawing and the reading).
    const flash = await page.evaluate((name) => {
      ZS.drawMapView({ members: [{ name, state: 'MEMBER_STATE_DEAD' }] });
      const rects = [...document.querySelectorAll('#map rect.seg')];
      const mine = rects.filter((r) => r.dataset.worker === name);
      return {
        mine: mine.length, flashing: mine.filter((r) => r.classList.contains('dead')).length,
        others: rects.filter((r) => r.dataset.worker !== name && r.classList.contains('dead')).length,
        animation: mine.length ? getComputedStyle(mine[0]).animationName : '',
      };
    }, victim.name);
    check(flash.mine === victimRanges.length && flash.flashing === flash.mine && flash.others === 0 &&
      flash.animation === 'dead', `a status listing ${victim.name} dead flashes its ${flash.mine} segment(s) ` +
      `(animation "${flash.animation}"), and no other's`);
    cluster.workers[victim.name].kill('SIGKILL');
    const epoch0 = Number(before.epoch);
    await waitFor('the spare to commit', () => {
      const s = cluster.status();
      return Number(s.epoch) > epoch0 && s.members.some((m) => m.name === spare && m.state === 'ACTIVE');
    }, 30000);
    const list = await allEvents(cluster);
    const commit = list.filter((e) => e.kind === 'commit' && Number(e.epoch || 0) >= epoch0).pop();
    check(commit !== undefined, 'the spare\'s commit is in the event log: ' + (commit ? commit.reason : ''));
    const commitMs = Number(commit.timeMs);
    await waitFor('the map to show the spare in the dead rank\'s ranges', async () => {
      for (const r of victimRanges) {
        const sel = `rect.seg[data-buffer="${r.b}"][data-bucket="${r.k}"][data-instance="${r.instance}"]` +
          `[data-begin="${r.begin}"][data-end="${r.end}"]`;
        const w = await page.$eval(sel, (e) => e.dataset.worker).catch(() => '');
        if (w !== spare) return false;
      }
      return true;
    }, 10000);
    const shownAfter = Date.now() - commitMs;
    const moved = await page.$$eval(`rect.move[data-move-to="${spare}"]`, (rs) => rs.map((r) => Number(r.dataset.length)));
    const owned = victimRanges.reduce((n, r) => n + Number(r.end) - Number(r.begin), 0);
    check(moved.length > 0 && moved.reduce((a, b) => a + b, 0) === owned,
      `the map draws ${moved.length} move(s) into ${spare}, ${owned} elements: all of ${victim.name}'s ranges`);
    const ctlMoves = cluster.ctl(['plan', '--moves']).moves
      .map((m) => [m.to_worker, m.from_worker || 'checkpoint', m.offset, m.length].join('/')).sort();
    const pageMoves = (await page.$$eval('rect.move', (rs) => rs.map((r) =>
      [r.dataset.moveTo, r.dataset.moveFrom, r.dataset.offset, r.dataset.length].join('/')))).sort();
    check(JSON.stringify(ctlMoves) === JSON.stringify(pageMoves),
      'the map\'s moves equal zshardctl plan --moves --output json: ' + pageMoves.join(' '));
    check(shownAfter <= 5000, `the spare ${spare} owns ${victim.name}'s ranges on the map ${shownAfter} ms after the commit`);
    const row = await waitFor('the re-shard list to show the move', async () => {
      const rows = await page.$$eval('#reshards tr[data-epoch]', (rs) => rs.map((r) => ({
        epoch: Number(r.dataset.epoch), bytes: Number(r.dataset.bytes), lb: Number(r.dataset.lowerBound), outcome: r.dataset.outcome })));
      return rows.find((r) => r.epoch > epoch0 && r.bytes > 0 && r.outcome === 'stable');
    }, 15000);
    check(row.bytes === row.lb, `re-shard to epoch ${row.epoch}: ${row.bytes} bytes moved = lower bound ${row.lb}`);
    await shot(page, 'map', 'shard-map-after-kill.png');
    await page.evaluate(() => { location.hash = 'events'; });
    await page.type('#event-filter', 'commit');
    const kinds = await page.$$eval('#events tr', (trs) => trs.slice(1).map((tr) => tr.children[3].textContent));
    const commits = (await allEvents(cluster)).filter((e) => e.kind === 'commit' || /commit/i.test(e.reason || '')).length;
    check(kinds.length === commits && kinds.includes('commit'),
      `the event filter "commit" shows the ${commits} events that mention it`);
    await page.$eval('#event-filter', (e) => { e.value = ''; e.dispatchEvent(new Event('input')); });
    await shot(page, 'events', 'events-after-kill.png');

    // Drain from the page.
    await waitFor('a stable world again', () => stable(cluster.status(), 4, 0), 30000);
    const target = cluster.status().members.find((m) => m.state === 'ACTIVE' && m.name !== spare).name;
    await page.evaluate(() => { location.hash = 'members'; });
    await page.waitForSelector(`button[data-drain="${target}"]`, { timeout: 10000 });
    await page.click(`button[data-drain="${target}"]`);
    await page.type('#drain-token', 'wrong-token');
    await page.click('#drain-confirm');
    await page.waitForFunction(() => document.querySelector('#drain-result').textContent !== '', { timeout: 10000 });
    const refused = await page.$eval('#drain-result', (e) => e.textContent);
    check(refused === 'admin token is invalid', 'a wrong token is refused with the server\'s message: "' + refused + '"');
    check(cluster.status().members.find((m) => m.name === target).state === 'ACTIVE', target + ' is still ACTIVE');
    await page.$eval('#drain-token', (e) => { e.value = ''; });
    await page.type('#drain-token', kToken);
    await page.click('#drain-confirm');
    await page.waitForFunction(() => /draining/.test(document.querySelector('#drain-result').textContent), { timeout: 10000 });
    await waitFor(target + ' to drain', () => {
      const m = cluster.status().members.find((x) => x.name === target);
      return !m || m.state !== 'ACTIVE';
    }, 30000);
    check(true, 'the right token drains ' + target);
    await page.screenshot({ path: path.join(artifacts, 'drain.png'), fullPage: true });

    const foreign = requested.filter((u) => !u.startsWith(cluster.url) && !u.startsWith('data:'));
    check(requested.length > 0 && foreign.length === 0,
      `every one of ${requested.length} requests went to the coordinator` + (foreign.length ? ': ' + foreign.join(' ') : ''));
    check(missing.length === 0, 'no request got a 404' + (missing.length ? ': ' + missing.join(' ') : ''));
    check(pageErrors.length === 0, 'no script errors' + (pageErrors.length ? ': ' + pageErrors.join('; ') : ''));
    await expertMap(browser);
    await parallelMaps(browser);
    await standbyNamesLeader(browser);
  } finally {
    await browser.close();
  }
}

// The Job and Members views against zshardctl status and ledger.
async function viewsMatchCtl(cluster, page) {
  const fact = (k) => page.$eval(`dd[data-fact="${k}"]`, (e) => e.textContent);
  await waitFor('the job view to match zshardctl status', async () => {
    const s = cluster.status();
    const spares = s.members.filter((m) => m.state === 'SPARE').length;
    return await fact('epoch') === String(s.epoch) && await fact('job') === s.job &&
      await fact('world') === `${s.world} = ${s.instances} x ${s.world / s.instances}` &&
      await fact('spares') === String(spares);
  }, 10000);
  check(true, 'the job view shows zshardctl status\'s job, epoch, world (I x D) and spares');
  const s = cluster.status();
  const rows = await page.$$eval('#members tr', (trs) => trs.slice(1).map((tr) =>
    [...tr.children].slice(0, 3).map((td) => td.textContent).join('/')));
  const want = s.members.map((m) => [m.name, m.state, m.rank >= 0 ? String(m.rank) : '-'].join('/'));
  check(JSON.stringify(rows.sort()) === JSON.stringify(want.sort()),
    'the members table shows zshardctl status\'s members, states and ranks: ' + rows.join(' '));
  const ledger = cluster.ctl(['ledger']);
  const bars = await page.$$eval('#memory rect[data-predicted]', (rs) => rs.map((r) =>
    r.dataset.rank + '/' + r.dataset.predicted));
  const ranks = ledger.ranks.map((r) => r.rank + '/' + r.predicted_bytes);
  check(bars.length === 4 && JSON.stringify(bars.sort()) === JSON.stringify(ranks.sort()),
    'the memory bars show zshardctl ledger\'s prediction per rank: ' + bars.join(' '));
}

// `job` with `world` workers (PREFIX0, PREFIX1, ...), stable, and a page
// on its map view once it has drawn.
async function stableMapPage(browser, job, prefix, world) {
  const cluster = new Cluster(binDir, job);
  await cluster.startCoordinator(kToken);
  for (let i = 0; i < world; ++i) cluster.startWorker(prefix + i);
  await waitFor(`a stable world of ${world} (${job.name})`, () => {
    const s = cluster.status();
    return s.state === 'STABLE' && s.world === world && s.members.filter((m) => m.state === 'ACTIVE').length === world;
  }, 60000);
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(cluster.url + '#map', { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 15000 });
  return { cluster, page };
}

// A mixture-of-experts job (W = 4, I = 1, expert_parallel 2; params 1, 2
// and 4 are experts, several buckets per buffer): in an expert buffer each
// expert-parallel group holds other experts at the same offsets, so the
// map has a row per (instance, group); its segments equal zshardctl plan
// and no two segments of a row overlap.
async function expertMap(browser) {
  const sizes = [1000, 300, 2500, 7, 130, 700];
  const expertJob = {
    name: 'moe',
    model: { params: sizes.map((n, i) => Object.assign({ name: 'p' + i, shape: [n], dtype: 'bf16' },
      [1, 2, 4].includes(i) ? { expert: true } : {})) },
    layout: { bucket_size: 600, expert_parallel: 2 },
    world: { instances: 1, min: 2, max: 4 }, lease_timeout_ms: 2500, heartbeat_interval_ms: 100,
    workload: { kind: 'synthetic', steps: 1000000, global_batch: 8, step_delay_ms: 20 },
  };
  const { cluster, page } = await stableMapPage(browser, expertJob, 'e', 4);
  await waitFor('the expert map to equal zshardctl plan', () => mapMatchesCtl(cluster, page), 15000);
  const plan = await fetchJson(cluster.url + 'zshard.v1.DashboardService/GetPlan', {});
  check(plan.buffers.some((b) => b.expert), 'the job has an expert buffer');
  check(true, 'expert job: the shard map equals zshardctl plan --output json (every bucket, every rank)');
  // As drawn: each rect's row on screen (its svg and y) and its x extent.
  const rects = await page.$$eval('svg.bucket-map', (svgs) => svgs.flatMap((svg, i) =>
    [...svg.querySelectorAll('rect.seg')].map((r) => ({
      row: i + '/' + r.getAttribute('y'), x0: Number(r.getAttribute('x')),
      x1: Number(r.getAttribute('x')) + Number(r.getAttribute('width')), expertRank: r.dataset.expertRank }))));
  const rows = new Map();
  for (const r of rects) {
    if (!rows.has(r.row)) rows.set(r.row, []);
    rows.get(r.row).push([r.x0, r.x1]);
  }
  let overlaps = 0;
  for (const list of rows.values()) {
    list.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < list.length; ++i) if (list[i][0] < list[i - 1][1] - 0.01) ++overlaps;
  }
  const groups = new Set(rects.map((r) => r.expertRank));
  check(groups.size === 2 && overlaps === 0,
    `expert buffers are drawn one row per (instance, expert group): ${groups.size} groups, ${rows.size} rows, ${overlaps} overlaps`);
  await shot(page, 'map', 'shard-map-experts.png');
  await page.close();
}

// A model-parallel job (deploy/demo/tp2pp2.json: T = 2, P = 2) of eight
// workers in one instance: one map per slot, titled "slot tp T pp P", each
// equal to zshardctl plan --tp T --pp P (its data-parallel ranks, the
// members at that slot).
async function parallelMaps(browser) {
  const demo = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'deploy', 'demo', 'tp2pp2.json'), 'utf8'));
  const parallelJob = Object.assign(demo, {
    name: 'tp2pp2-browser', world: { instances: 1, min: 8, max: 8 }, lease_timeout_ms: 2500, heartbeat_interval_ms: 100,
    workload: { kind: 'synthetic', steps: 1000000, global_batch: 8, step_delay_ms: 50 },
  });
  const { cluster, page } = await stableMapPage(browser, parallelJob, 'm', 8);
  const slots = [];
  for (let pp = 0; pp < 2; ++pp) for (let tp = 0; tp < 2; ++tp) slots.push({ tp, pp });
  for (const slot of slots) {
    await waitFor(`slot tp ${slot.tp} pp ${slot.pp}'s map to equal zshardctl plan`, () => mapMatchesCtl(cluster, page, slot), 15000);
  }
  const titles = await page.$$eval('.slot-map h3', (hs) => hs.map((h) => h.textContent));
  check(JSON.stringify(titles) === JSON.stringify(slots.map((s) => `slot tp ${s.tp} pp ${s.pp}`)),
    'a model-parallel job has one map per slot: ' + titles.join(', '));
  // Each slot's owners are the members at that slot, at its data-parallel ranks.
  const ctlSlots = cluster.ctl(['plan']).slots;
  for (const s of ctlSlots) {
    const want = s.ranks.map((r) => r.rank + '/' + r.worker).sort();
    const got = [...new Set(await page.$$eval(`.slot-map[data-tp="${s.slot.tp}"][data-pp="${s.slot.pp}"] rect.seg`,
      (rs) => rs.map((r) => r.dataset.rank + '/' + r.dataset.worker)))].sort();
    check(JSON.stringify(want) === JSON.stringify(got),
      `slot tp ${s.slot.tp} pp ${s.slot.pp}: the map's owners are its data-parallel ranks' members: ${got.join(' ')}`);
  }
  check(true, 'model-parallel job: every slot\'s map equals zshardctl plan --tp T --pp P --output json');
  await shot(page, 'map', 'shard-map-slots.png');
  await page.close();
}

// Two coordinators on one etcd prefix: the second's page names the first
// and links to its dashboard.
async function standbyNamesLeader(browser) {
  const leader = new Cluster(binDir, job);
  const etcd = await startEtcd(leader.dir);
  const store = ['--store', 'etcd:' + etcd + '/zshard-browser'];
  await leader.startCoordinator(kToken, store, 'leader');
  await waitFor('the leader to lead', async () => (await fetch(leader.url + 'leader')).ok, 30000);
  const standby = new Cluster(binDir, job);
  await standby.startCoordinator(kToken, store, 'standby');
  await waitFor('the standby to answer', async () => (await fetch(standby.url + 'leader')).status === 503, 30000);
  const page = await browser.newPage();
  await page.goto(standby.url, { waitUntil: 'load' });
  await page.waitForFunction(() => !document.querySelector('#banner').hidden, { timeout: 15000 });
  const text = await page.$eval('#banner', (b) => b.textContent);
  check(text.includes('standby') && text.includes(leader.address),
    'the standby\'s page names the leader ' + leader.address + ': "' + text + '"');
  const href = await page.$eval('#banner a#leader-link', (a) => a.href);
  check(href === leader.url, `the standby's page links to the leader's dashboard: ${href} (the leader serves ${leader.url})`);
  const leaderPage = await fetch(href);
  check(leaderPage.ok && (await leaderPage.text()).includes('<title>zshard</title>'), 'the link serves the leader\'s page');
  await page.screenshot({ path: path.join(artifacts, 'standby.png'), fullPage: true });
}

main().then(() => { console.log('PASS'); process.exit(0); }, (e) => { console.error('FAIL ' + e.stack); process.exit(1); });
