// A small cluster of real processes on 127.0.0.1 for the browser tests:
// zshard-coordinator (with its HTTP port and an admin token), workers,
// zshardctl, and for the standby check an etcd with two coordinators.
// Every process is killed at exit; every wait has a deadline.
'use strict';
const { spawn, spawnSync } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const procs = [];
process.on('exit', () => { for (const p of procs) { try { p.kill('SIGKILL'); } catch (e) { /* gone */ } } });

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on('error', reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls `fn` (async, returns a truthy value when done) every 100 ms.
async function waitFor(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    await sleep(100);
  }
  throw new Error('timed out after ' + timeoutMs + ' ms waiting for ' + what + (last ? ': ' + last : ''));
}

class Cluster {
  constructor(binDir, job) {
    this.bin = (n) => path.join(binDir, n);
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zshard-browser-'));
    this.job = job;
    this.workers = {};
  }

  start(name, argv) {
    const log = fs.openSync(path.join(this.dir, name + '.log'), 'a');
    const p = spawn(argv[0], argv.slice(1), { stdio: ['ignore', log, log] });
    procs.push(p);
    return p;
  }

  // The coordinator with `extra` flags; resolves once zshardctl status answers.
  async startCoordinator(token, extra = [], name = 'coordinator') {
    this.port = this.port || await freePort();
    this.httpPort = this.httpPort || await freePort();
    const jobPath = path.join(this.dir, 'job.json');
    fs.writeFileSync(jobPath, JSON.stringify(this.job));
    const tokenPath = path.join(this.dir, 'admin.token');
    fs.writeFileSync(tokenPath, token);
    const flags = extra.length ? extra : ['--state-dir', path.join(this.dir, 'state')];
    this.coordinator = this.start(name, [this.bin('zshard-coordinator'), '--job', jobPath,
      '--listen', '127.0.0.1:' + this.port, '--http-listen', '127.0.0.1:' + this.httpPort,
      '--admin-token-file', tokenPath, ...flags]);
    return this;
  }

  get address() { return '127.0.0.1:' + this.port; }
  get url() { return 'http://127.0.0.1:' + this.httpPort + '/'; }

  startWorker(name) {
    this.workers[name] = this.start('worker-' + name, [this.bin('zshard-worker'), '--coordinator', this.address,
      '--name', name, '--labels', 'node=n-' + name]);
    return this.workers[name];
  }

  // zshardctl ARGS --output json; the parsed JSON (throws on failure).
  ctl(args, address) {
    const r = spawnSync(this.bin('zshardctl'), ['--coordinator', address || this.address, ...args,
      '--output', 'json', '--timeout-ms', '3000'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error('zshardctl ' + args.join(' ') + ': exit ' + r.status + ': ' + r.stderr + r.stdout);
    return JSON.parse(r.stdout);
  }

  status() { return this.ctl(['status']); }
}

// etcd on free ports, in `dir`; resolves with its client address.
async function startEtcd(dir) {
  const client = await freePort();
  const peer = await freePort();
  const p = spawn('/usr/bin/etcd', ['--name', 'e0', '--data-dir', path.join(dir, 'etcd'),
    '--listen-client-urls', 'http://127.0.0.1:' + client, '--advertise-client-urls', 'http://127.0.0.1:' + client,
    '--listen-peer-urls', 'http://127.0.0.1:' + peer, '--initial-advertise-peer-urls', 'http://127.0.0.1:' + peer,
    '--initial-cluster', 'e0=http://127.0.0.1:' + peer, '--logger=zap', '--log-level=warn'],
  { stdio: ['ignore', fs.openSync(path.join(dir, 'etcd.log'), 'a'), fs.openSync(path.join(dir, 'etcd.log'), 'a')] });
  procs.push(p);
  await waitFor('etcd health', async () => {
    const r = await fetch('http://127.0.0.1:' + client + '/health');
    return r.ok && (await r.json()).health === 'true';
  }, 20000);
  return '127.0.0.1:' + client;
}

module.exports = { Cluster, freePort, sleep, waitFor, startEtcd };
