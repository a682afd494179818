#!/usr/bin/env node
// Validates Kubernetes manifests against the official API schemas, as
// compiled into the `kubernetes-models` package: every object is
// instantiated as the model class for its apiVersion/kind and validated.
// On top of the schema (which tolerates unknown fields) it rejects fields the
// schema does not define, checks references between the objects of one
// rendering (volumes, selectors, named ports, headless Services), and
// applies the project's pod policy (non-root, images, resources, probes). Prints one line per object; exits 0 when all
// are valid, 1 on any error, 2 on bad usage, 77 (skip) without kubectl.
//
//   node validate_manifests.js --modules NODE_MODULES_DIR \
//       [--kustomize DIR]... [FILE.yaml]... [--no-policy]
'use strict';

const childProcess = require('child_process');
const fs = require('fs');
const path = require('path');
const {createRequire} = require('module');

const kSkip = 77;

function usage(message) {
  console.error(`validate_manifests: ${message}`);
  console.error(
      'usage: validate_manifests.js --modules DIR [--kustomize DIR]... ' +
      '[FILE]... [--no-policy]');
  process.exit(2);
}

function parseArgs(argv) {
  const args = {modules: null, kustomize: [], files: [], policy: true};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--modules' || a === '--kustomize') {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      if (a === '--modules') args.modules = argv[++i];
      else args.kustomize.push(argv[++i]);
    } else if (a === '--no-policy') {
      args.policy = false;
    } else if (a.startsWith('--')) {
      usage(`unknown flag '${a}'`);
    } else {
      args.files.push(a);
    }
  }
  if (!args.modules) usage('--modules is required');
  if (args.kustomize.length === 0 && args.files.length === 0) {
    usage('nothing to validate');
  }
  return args;
}

// Returns the multi-document YAML text rendered by `kubectl kustomize DIR`.
function renderKustomization(dir) {
  try {
    return childProcess.execFileSync('kubectl', ['kustomize', dir], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (e) {
    if (e.code === 'ENOENT') {
      console.log('SKIP kubectl not found: cannot render kustomizations');
      process.exit(kSkip);
    }
    throw new Error(`kubectl kustomize '${dir}' failed: ${e.stderr || e}`);
  }
}

// Resolves the model class for apiVersion/kind, or null if there is none.
function modelClass(req, apiVersion, kind) {
  // Core is "v1"; groups are "group/version". Anything else is not a path we
  // will hand to require().
  if (!/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion) ||
      !/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    return null;
  }
  let group;
  try {
    group = req(`kubernetes-models/${apiVersion}`);
  } catch (e) {
    if (e.code === 'MODULE_NOT_FOUND' || e.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') {
      return null;
    }
    throw e;
  }
  const cls = group[kind];
  if (typeof cls !== 'function' || cls.apiVersion !== apiVersion ||
      cls.kind !== kind) {
    return null;
  }
  return cls;
}

// Runs the model's schema validation while recording which fields the
// compiled schema looks at. A field it never reads is not in the schema.
// Returns {error: string|null, unknown: [json pointer]}.
function validateStrict(model) {
  const reads = new WeakMap();  // object -> Set of read keys, or 'map'.
  const wrap = (value) => {
    if (value === null || typeof value !== 'object') return value;
    return new Proxy(value, {
      get(target, key, receiver) {
        if (typeof key === 'string') {
          let seen = reads.get(target);
          if (seen === undefined) reads.set(target, seen = new Set());
          if (seen !== 'map') seen.add(key);
        }
        return wrap(Reflect.get(target, key, receiver));
      },
      // Enumerating keys means a map (labels, data, resources): any key.
      ownKeys(target) {
        reads.set(target, 'map');
        return Reflect.ownKeys(target);
      },
    });
  };
  let error = null;
  try {
    model.validate.call(wrap(model));
  } catch (e) {
    error = e.message;
  }
  const unknown = [];
  const walk = (value, pointer) => {
    if (value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, `${pointer}/${i}`));
      return;
    }
    const seen = reads.get(value);
    for (const key of Object.keys(value)) {
      if (seen !== 'map' && !(seen && seen.has(key))) {
        unknown.push(`${pointer}/${key}`);  // Its children are moot.
      } else {
        walk(value[key], `${pointer}/${key}`);
      }
    }
  };
  if (error === null) walk(model, '');
  return {error, unknown};
}

const kPodTemplateKinds = {
  Deployment: (o) => o.spec && o.spec.template,
  StatefulSet: (o) => o.spec && o.spec.template,
  DaemonSet: (o) => o.spec && o.spec.template,
  Job: (o) => o.spec && o.spec.template,
  Pod: (o) => o,
};

// The project's pod policy. Returns a list of problems.
function checkPodPolicy(obj) {
  const getTemplate = kPodTemplateKinds[obj.kind];
  if (!getTemplate) return [];
  const problems = [];
  const template = getTemplate(obj) || {};
  const spec = template.spec || {};
  const podSc = spec.securityContext || {};
  if (podSc.runAsNonRoot !== true) {
    problems.push('pod securityContext.runAsNonRoot is not true');
  }
  if (spec.automountServiceAccountToken !== false) {
    problems.push('pod mounts a service account token it does not need');
  }
  for (const c of spec.containers || []) {
    const name = `container '${c.name}'`;
    if (!c.image) problems.push(`${name} has no image`);
    const limits = (c.resources || {}).limits || {};
    if (!limits.memory) problems.push(`${name} has no memory limit`);
    if (!c.readinessProbe) problems.push(`${name} has no readinessProbe`);
    if (!c.livenessProbe) problems.push(`${name} has no livenessProbe`);
    const sc = c.securityContext || {};
    if (sc.allowPrivilegeEscalation !== false) {
      problems.push(`${name} allows privilege escalation`);
    }
  }
  return problems;
}

function matches(selector, labels) {
  if (!selector) return false;
  return Object.entries(selector).every(([k, v]) => labels && labels[k] === v);
}

// Cross-object checks the schemas cannot make: what a rendered set of objects
// refers to must be in the set, and selectors must select something. Returns
// a map from describe(obj) to a list of problems.
function checkReferences(objects) {
  const problems = new Map();
  const add = (obj, p) => {
    const key = describe(obj);
    if (!problems.has(key)) problems.set(key, []);
    problems.get(key).push(p);
  };
  const named = (kind, name) => objects.some(
      (o) => o.kind === kind && o.metadata && o.metadata.name === name);
  const workloads = objects.filter((o) => kPodTemplateKinds[o.kind] &&
                                          o.kind !== 'Pod');
  const podLabels = (w) => (((w.spec || {}).template || {}).metadata || {}).labels || {};
  for (const w of workloads) {
    const spec = ((w.spec || {}).template || {}).spec || {};
    const selector = ((w.spec || {}).selector || {}).matchLabels;
    if (selector && !matches(selector, podLabels(w))) {
      add(w, 'selector does not match the pod template labels');
    }
    // A StatefulSet's volumeClaimTemplates are volumes of its pods too.
    const volumes = new Set([
      ...(spec.volumes || []).map((v) => v.name),
      ...((w.spec || {}).volumeClaimTemplates || []).map(
          (t) => (t.metadata || {}).name)]);
    for (const v of spec.volumes || []) {
      if (v.configMap && !v.configMap.optional && !named('ConfigMap', v.configMap.name)) {
        add(w, `volume '${v.name}': configMap '${v.configMap.name}' is not defined`);
      }
      if (v.secret && !v.secret.optional && !named('Secret', v.secret.secretName)) {
        add(w, `volume '${v.name}': secret '${v.secret.secretName}' is not defined`);
      }
      if (v.persistentVolumeClaim &&
          !named('PersistentVolumeClaim', v.persistentVolumeClaim.claimName)) {
        add(w, `volume '${v.name}': persistentVolumeClaim '${
            v.persistentVolumeClaim.claimName}' is not defined`);
      }
    }
    for (const c of [...(spec.initContainers || []), ...(spec.containers || [])]) {
      for (const e of c.env || []) {
        const ref = (e.valueFrom || {}).configMapKeyRef;
        if (ref && !ref.optional) {
          const cm = objects.find((o) => o.kind === 'ConfigMap' &&
                                         o.metadata && o.metadata.name === ref.name);
          if (!cm) {
            add(w, `env '${e.name}': configMap '${ref.name}' is not defined`);
          } else if (!Object.prototype.hasOwnProperty.call(cm.data || {}, ref.key)) {
            add(w, `env '${e.name}': configMap '${ref.name}' has no key '${ref.key}'`);
          }
        }
      }
      for (const m of c.volumeMounts || []) {
        if (!volumes.has(m.name)) {
          add(w, `container '${c.name}' mounts undeclared volume '${m.name}'`);
        }
      }
      const ports = new Set((c.ports || []).map((p) => p.name).filter(Boolean));
      for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
        const action = c[probe] && (c[probe].httpGet || c[probe].tcpSocket);
        if (action && typeof action.port === 'string' && !ports.has(action.port)) {
          add(w, `container '${c.name}' ${probe} uses unknown port '${action.port}'`);
        }
      }
    }
    if (w.kind === 'StatefulSet') {
      const svc = objects.find((o) => o.kind === 'Service' &&
                                      o.metadata.name === w.spec.serviceName);
      if (!svc || (svc.spec || {}).clusterIP !== 'None') {
        add(w, `serviceName '${w.spec.serviceName}' is not a headless Service`);
      }
    }
  }
  for (const o of objects) {
    if (o.kind === 'Service' && o.spec && o.spec.selector) {
      const targets = workloads.filter((w) => matches(o.spec.selector, podLabels(w)));
      if (targets.length === 0) add(o, 'selector matches no workload');
      for (const p of o.spec.ports || []) {
        if (typeof p.targetPort !== 'string') continue;
        const has = targets.some((w) => w.spec.template.spec.containers.some(
            (c) => (c.ports || []).some((cp) => cp.name === p.targetPort)));
        if (targets.length > 0 && !has) {
          add(o, `targetPort '${p.targetPort}' is no container port of its pods`);
        }
      }
    }
    const selector =
        (o.kind === 'PodDisruptionBudget' && o.spec && o.spec.selector) ||
        (o.kind === 'NetworkPolicy' && o.spec && o.spec.podSelector);
    if (selector && selector.matchLabels &&
        !workloads.some((w) => matches(selector.matchLabels, podLabels(w)))) {
      add(o, 'selector matches no workload');
    }
  }
  return problems;
}

// kustomize folds long base64 values of Secret.data over several lines; the
// API server's decoder (Go's encoding/base64) skips \r and \n, so do the same
// before checking the schema's "byte" format.
function normalizeSecretData(obj) {
  if (obj.apiVersion !== 'v1' || obj.kind !== 'Secret' || !obj.data ||
      typeof obj.data !== 'object') {
    return;
  }
  for (const [key, value] of Object.entries(obj.data)) {
    if (typeof value === 'string') obj.data[key] = value.replace(/[\r\n]/g, '');
  }
}

function describe(obj) {
  const meta = (obj && obj.metadata) || {};
  return `${obj.apiVersion} ${obj.kind} ${meta.name || '<unnamed>'}`;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const modulesDir = path.resolve(args.modules);
  if (!fs.existsSync(path.join(modulesDir, 'node_modules', 'kubernetes-models'))) {
    console.error(`validate_manifests: kubernetes-models is not installed under '${
        modulesDir}' (run npm ci there)`);
    process.exit(2);
  }
  const req = createRequire(path.join(modulesDir, 'package.json'));
  const yaml = req('js-yaml');

  const sources = [];
  for (const dir of args.kustomize) {
    sources.push({name: `kustomize ${dir}`, text: renderKustomization(dir)});
  }
  for (const file of args.files) {
    sources.push({name: file, text: fs.readFileSync(file, 'utf8')});
  }

  let objects = 0;
  let errors = 0;
  for (const source of sources) {
    let docs;
    try {
      docs = yaml.loadAll(source.text);
    } catch (e) {
      console.log(`FAIL ${source.name}: yaml does not parse: ${e.message}`);
      errors++;
      continue;
    }
    const wellFormed = docs.filter((o) => o && typeof o === 'object' &&
                                          o.metadata && typeof o.kind === 'string');
    const references = checkReferences(wellFormed);
    for (const obj of docs) {
      if (obj === null || obj === undefined) continue;
      objects++;
      if (typeof obj !== 'object' || Array.isArray(obj) ||
          typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') {
        console.log(`FAIL ${source.name}: document without apiVersion/kind`);
        errors++;
        continue;
      }
      const cls = modelClass(req, obj.apiVersion, obj.kind);
      if (cls === null) {
        console.log(`FAIL ${describe(obj)}: unknown kind '${obj.kind}' in '${
            obj.apiVersion}'`);
        errors++;
        continue;
      }
      normalizeSecretData(obj);
      const {error, unknown} = validateStrict(new cls(obj));
      const problems = [];
      if (error !== null) problems.push(`schema: ${error}`);
      for (const p of unknown) problems.push(`unknown field ${p}`);
      if (args.policy) {
        for (const p of checkPodPolicy(obj)) problems.push(`policy: ${p}`);
      }
      for (const p of references.get(describe(obj)) || []) {
        problems.push(`reference: ${p}`);
      }
      if (problems.length === 0) {
        console.log(`ok   ${describe(obj)}`);
      } else {
        console.log(`FAIL ${describe(obj)}: ${problems.join('; ')}`);
        errors++;
      }
    }
  }
  if (objects === 0) {
    console.log('FAIL no objects to validate');
    errors++;
  }
  console.log(`${objects} objects, ${errors} invalid`);
  process.exit(errors === 0 ? 0 : 1);
}

main();
