#!/usr/bin/env node
// Checks the contract between the manifests and the binaries: every zshard
// container of a rendered kustomization is started locally the way its pod
// would start it (its args with $(VAR) expanded from its env, the downward
// API faked, ConfigMap and Secret volumes written out under a scratch root,
// listen addresses moved to free loopback ports) and must not reject its
// command line: exit status 2 is the binaries' "bad flags or bad input" (a
// malformed job spec included). A process still running at the deadline, or
// one that ends otherwise (say, no coordinator to reach), passes.
// Placeholder TLS material is replaced by certificates from
// deploy/k8s/make-secrets.sh, so TLS files load. A coordinator on an etcd
// store (--store etcd:ENDPOINTS/PREFIX) gets the endpoints of a local etcd
// started here. Containers that run another program by absolute path (the
// etcd members) are started with the host's program of that path, skipped
// when it is not installed.
// While a zshard container runs, each of its httpGet probes on a port it listens
// on here must be served (any answer but 404, within the deadline), and a
// coordinator's readiness probe must answer 200: it is the only
// coordinator on its store here, so it leads.
//
//   node check_manifest_flags.js --modules DIR --bin-dir DIR \
//       (--kustomize DIR | FILE.yaml)...
// Exits 0 when every container passes, 1 when one is rejected, 2 on bad
// usage, 77 (skip) when kubectl or the binaries are missing.
'use strict';

const childProcess = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');
const {createRequire} = require('module');

const kSkip = 77;
const kDeadlineMs = 2000;
// Image name -> the binary its ENTRYPOINT runs (deploy/docker/*.Dockerfile).
const kEntrypoints = {
  'zshard/coordinator': 'zshard-coordinator',
  'zshard/worker': 'zshard-worker',
};

function die(code, message) {
  console.log(message);
  process.exit(code);
}

function parseArgs(argv) {
  const args = {modules: null, binDir: null, sources: []};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) die(2, `check_manifest_flags: ${a} needs a value`);
      return argv[++i];
    };
    if (a === '--modules') args.modules = value();
    else if (a === '--bin-dir') args.binDir = value();
    else if (a === '--kustomize') args.sources.push({kustomize: value()});
    else if (a.startsWith('--')) die(2, `check_manifest_flags: unknown flag '${a}'`);
    else args.sources.push({file: a});
  }
  if (!args.modules || !args.binDir || args.sources.length === 0) {
    die(2, 'usage: check_manifest_flags.js --modules DIR --bin-dir DIR ' +
        '(--kustomize DIR | FILE)...');
  }
  return args;
}

function render(source) {
  if (source.file) return fs.readFileSync(source.file, 'utf8');
  try {
    return childProcess.execFileSync('kubectl', ['kustomize', source.kustomize], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024});
  } catch (e) {
    if (e.code === 'ENOENT') die(kSkip, 'SKIP kubectl not found');
    die(1, `FAIL kubectl kustomize '${source.kustomize}': ${e.stderr || e}`);
  }
}

// A loopback port nobody listens on right now.
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address();
      server.close(() => resolve(port));
    });
  });
}

// Real TLS material, made once, for Secrets that hold placeholders.
let realSecrets = null;
function realSecretFiles(scratch) {
  if (realSecrets) return realSecrets;
  const dir = path.join(scratch, 'generated-secrets');
  const script = path.resolve(__dirname, '../../deploy/k8s/make-secrets.sh');
  childProcess.execFileSync('bash', [script, '--out', dir, '--ca-dir',
    path.join(scratch, 'ca')], {stdio: 'ignore'});
  realSecrets = dir;
  return dir;
}

// The file contents a volume would show, as {relative path: Buffer}.
function volumeFiles(volume, objects, scratch) {
  const find = (kind, name) => objects.find(
      (o) => o.kind === kind && o.metadata && o.metadata.name === name);
  const files = {};
  if (!volume) return files;  // a StatefulSet's volumeClaimTemplate: empty
  if (volume.configMap) {
    const cm = find('ConfigMap', volume.configMap.name);
    if (!cm) throw new Error(`configMap '${volume.configMap.name}' is not rendered`);
    for (const [k, v] of Object.entries(cm.data || {})) files[k] = Buffer.from(v);
  } else if (volume.secret) {
    const secret = find('Secret', volume.secret.secretName);
    if (!secret) throw new Error(`secret '${volume.secret.secretName}' is not rendered`);
    for (const [k, v] of Object.entries(secret.data || {})) {
      files[k] = Buffer.from(v.replace(/[\r\n]/g, ''), 'base64');
    }
    if (Object.values(files).some((b) => b.includes('PLACEHOLDER'))) {
      const dir = realSecretFiles(scratch);
      const role = volume.secret.secretName.includes('worker') ? 'worker' : 'coordinator';
      files['tls.crt'] = fs.readFileSync(path.join(dir, `${role}.crt`));
      files['tls.key'] = fs.readFileSync(path.join(dir, `${role}.key`));
      files['ca.crt'] = fs.readFileSync(path.join(dir, 'ca.crt'));
    }
  }
  return files;
}

// The environment the kubelet would give the container (downward API faked,
// ConfigMap keys read from the rendering).
function containerEnv(container, podName, objects) {
  const env = {};
  for (const e of container.env || []) {
    let value = e.value;
    const ref = e.valueFrom && e.valueFrom.fieldRef;
    if (ref) {
      if (ref.fieldPath === 'metadata.name') value = podName;
      else if (ref.fieldPath === 'metadata.namespace') value = 'zshard';
      else if (ref.fieldPath === 'spec.nodeName') value = 'node-a';
      else if (ref.fieldPath.startsWith('metadata.labels')) value = 'zone-a';
      else if (ref.fieldPath === 'status.podIP') value = '127.0.0.1';
      else value = 'unknown';
    }
    const cmRef = e.valueFrom && e.valueFrom.configMapKeyRef;
    if (cmRef) {
      const cm = objects.find((o) => o.kind === 'ConfigMap' &&
                                     o.metadata && o.metadata.name === cmRef.name);
      value = cm && cm.data ? cm.data[cmRef.key] : undefined;
    }
    // $(VAR) refers to variables defined earlier in the list.
    env[e.name] = expand(value || '', env);
  }
  return env;
}

function expand(text, env) {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name) => {
    if (m === '$$') return '$';
    return Object.prototype.hasOwnProperty.call(env, name) ? env[name] : m;
  });
}

// A local single-member etcd for the coordinators on an etcd store, started
// on first use: resolves to its client endpoint (HOST:PORT).
let localEtcd = null;
function etcdEndpoint(scratch) {
  if (localEtcd) return localEtcd.endpoint;
  localEtcd = {};
  localEtcd.endpoint = (async () => {
    const client = await freePort();
    const peer = await freePort();
    const child = childProcess.spawn('etcd', [
      '--name', 'check', '--data-dir', path.join(scratch, 'etcd'),
      '--listen-client-urls', `http://127.0.0.1:${client}`,
      '--advertise-client-urls', `http://127.0.0.1:${client}`,
      '--listen-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-cluster', `check=http://127.0.0.1:${peer}`,
      '--max-txn-ops', '16384', '--max-request-bytes', '33554432'],
    {stdio: 'ignore'});
    localEtcd.child = child;
    await new Promise((resolve, reject) => {
      child.on('error', (e) => reject(new Error(`cannot start etcd: ${e.message}`)));
      const deadline = Date.now() + 20000;
      const poll = () => {
        const req = http.get(`http://127.0.0.1:${client}/health`, (res) => {
          res.resume();
          if (res.statusCode === 200) resolve();
          else retry();
        });
        req.on('error', retry);
      };
      const retry = () => {
        if (Date.now() > deadline) reject(new Error('local etcd not healthy in 20 s'));
        else setTimeout(poll, 100);
      };
      poll();
    });
    return `127.0.0.1:${client}`;
  })();
  return localEtcd.endpoint;
}

// One argument as the container would see it, made runnable here: mounted
// paths under the pod's scratch root, wildcard listen addresses (plain or
// in URLs) on free loopback ports, etcd store endpoints on the local etcd.
// Handles "--flag=value" as well as separate values.
// `ports` maps each listen port given to the loopback port used instead.
async function localArg(raw, root, mounts, scratch, ports) {
  const eq = /^(--[A-Za-z0-9-]+=)(.*)$/.exec(raw);
  const prefix = eq ? eq[1] : '';
  let a = eq ? eq[2] : raw;
  const mount = mounts.find((p) => a === p || a.startsWith(p + '/'));
  if (mount) a = path.join(root, a);
  const listen = /^(https?:\/\/)?0\.0\.0\.0:(\d+)$/.exec(a);
  if (listen) {
    const local = await freePort();
    ports.set(Number(listen[2]), local);
    a = `${listen[1] || ''}127.0.0.1:${local}`;
  }
  const store = /^etcd:[^/]+(\/.+)$/.exec(a);
  if (store) a = `etcd:${await etcdEndpoint(scratch)}${store[1]}`;
  return prefix + a;
}

// The container's httpGet probes on ports that listen here:
// [{name, path, port (local), want200}].
function localProbes(c, ports, isCoordinator) {
  const out = [];
  for (const name of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
    const get = c[name] && c[name].httpGet;
    if (!get) continue;
    const declared = typeof get.port === 'number' ? get.port :
        ((c.ports || []).find((p) => p.name === get.port) || {}).containerPort;
    if (!ports.has(declared)) continue;
    out.push({name, path: get.path || '/', port: ports.get(declared),
              want200: isCoordinator && name === 'readinessProbe'});
  }
  return out;
}

// GET http://127.0.0.1:port/path: the status code, or 0 when nothing answers.
function httpStatus(port, urlPath) {
  return new Promise((resolve) => {
    const req = http.get({host: '127.0.0.1', port, path: urlPath, timeout: 500},
                         (res) => { res.resume(); resolve(res.statusCode); });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

// Starts one container's binary; resolves to {verdict, detail}. While it
// runs, asks each of `probes` until it passes (see the header).
async function runContainer(binary, argv, env, probes) {
  const answers = new Map();  // probe name -> last status
  const passes = (p) => {
    const code = answers.get(p.name) || 0;
    return p.want200 ? code === 200 : code !== 0 && code !== 404;
  };
  let polling = true;
  const poll = async () => {
    while (polling && !probes.every(passes)) {
      for (const p of probes) {
        if (!passes(p)) answers.set(p.name, await httpStatus(p.port, p.path));
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const polled = poll();
  const probeFailures = () => probes.filter((p) => !passes(p)).map((p) => {
    const code = answers.get(p.name) || 0;
    return `${p.name} GET ${p.path} ${code === 0 ? 'got no answer' :
        `answered ${code}`}${p.want200 ? ' (want 200)' : ''}`;
  });
  const result = await new Promise((resolve) => {
    const child = childProcess.spawn(binary, argv, {
      env: {PATH: process.env.PATH, ...env}, stdio: ['ignore', 'pipe', 'pipe']});
    let output = '';
    const keep = (d) => { output = (output + d).slice(-4000); };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let probesAtDeadline = null;  // failures, once the deadline came
    const timer = setTimeout(() => {
      probesAtDeadline = probeFailures();
      polling = false;
      child.kill('SIGTERM');
      // A graceful leave may take a moment; make sure it ends.
      setTimeout(() => child.kill('SIGKILL'), 5000).unref();
    }, kDeadlineMs);
    let started = true;
    child.on('error', (e) => {
      started = false;
      clearTimeout(timer);
      resolve({verdict: 'FAIL', detail: `cannot start: ${e.message}`});
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (!started) return;
      const last = output.trim().split('\n').pop() || '';
      // The worker checks its GPU after every flag parsed: on a machine
      // without one, that line means the command line itself was accepted.
      const noGpu = /: --device cuda(:\d+)?: (no usable CUDA device|this machine has \d+ CUDA device|this build has no CUDA support)/;
      if (code === 2 && noGpu.test(last)) {
        resolve({verdict: 'ok  ', detail: `accepted its command line (no GPU here: ${last})`});
      } else if (code === 2) {
        resolve({verdict: 'FAIL', detail: `rejected its command line: ${last}`});
      } else if (probesAtDeadline && probesAtDeadline.length > 0) {
        resolve({verdict: 'FAIL', detail: `probes: ${probesAtDeadline.join('; ')}`});
      } else if (probesAtDeadline && probes.length > 0) {
        const answered = probes.map((p) => `${p.path} ${answers.get(p.name)}`);
        resolve({verdict: 'ok  ', detail: 'accepted its command line and served its ' +
            `probes (${answered.join(', ')})`});
      } else if (signal) {
        resolve({verdict: 'ok  ', detail: 'accepted its command line (still running at the deadline)'});
      } else {
        resolve({verdict: 'ok  ', detail: `accepted its command line (exited ${code}: ${last})`});
      }
    });
  });
  polling = false;
  await polled;
  return result;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const req = createRequire(path.join(path.resolve(args.modules), 'package.json'));
  const yaml = req('js-yaml');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'zshard-flags-'));
  let ran = 0;
  let failed = 0;
  try {
    for (const source of args.sources) {
      const objects = yaml.loadAll(render(source)).filter((o) => o && o.kind);
      for (const obj of objects) {
        if (obj.kind !== 'Deployment' && obj.kind !== 'StatefulSet') continue;
        const pod = obj.spec.template.spec;
        const podName = `${obj.metadata.name}-0`;
        for (const c of pod.containers) {
          const imageName = (c.image || '').replace(/[:@].*$/, '');
          const program = c.command ? c.command[0] : kEntrypoints[imageName];
          if (!program) continue;
          const ours = path.basename(program).startsWith('zshard');
          const binary = ours || !path.isAbsolute(program) ?
              path.join(args.binDir, path.basename(program)) : program;
          const label = `${obj.kind}/${obj.metadata.name} ${c.name}`;
          if (!fs.existsSync(binary)) {
            console.log(`SKIP ${label}: ${binary} is not ${ours ? 'built' : 'installed'}`);
            continue;
          }
          const root = fs.mkdtempSync(path.join(scratch, 'pod-'));
          const mounts = [];
          for (const m of c.volumeMounts || []) {
            const volume = (pod.volumes || []).find((v) => v.name === m.name);
            const dir = path.join(root, m.mountPath);
            fs.mkdirSync(dir, {recursive: true});
            for (const [f, data] of Object.entries(volumeFiles(volume, objects, scratch))) {
              fs.writeFileSync(path.join(dir, f), data, {mode: 0o600});
            }
            mounts.push(m.mountPath);
          }
          const env = containerEnv(c, podName, objects);
          const argv = [];
          const ports = new Map();
          for (const raw of c.args || []) {
            argv.push(await localArg(expand(raw, env), root, mounts, scratch, ports));
          }
          const probes = ours ?
              localProbes(c, ports, path.basename(binary) === 'zshard-coordinator') : [];
          const {verdict, detail} = await runContainer(binary, argv, env, probes);
          console.log(`${verdict} ${label}: ${detail}`);
          ran++;
          if (verdict === 'FAIL') failed++;
        }
      }
    }
  } finally {
    if (localEtcd && localEtcd.child) localEtcd.child.kill('SIGKILL');
    fs.rmSync(scratch, {recursive: true, force: true});
  }
  if (ran === 0) die(kSkip, 'SKIP no zshard binary built to check');
  console.log(`${ran} containers, ${failed} rejected`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => die(1, `FAIL ${e.stack || e}`));
