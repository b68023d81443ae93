// The deployment files: every manifest and example parses and is valid
// against the Kubernetes API schema with strict fields; RBAC grants exactly
// what the plugins use; the programs accept the options and configuration
// the manifests give them; the Helm chart is consistent (no renderer of Go
// templates runs here — neither Debian nor npm ships one that is faithful —
// so the chart is checked statically and against the plain manifests, which
// are its default rendering written out).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const YAML = require('yaml');
const { checkObjectStrict } = require('./lib/strict');
const { World, until, need } = require('./lib/world');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const DEPLOY = path.join(ROOT, 'deploy');
const CHART = path.join(DEPLOY, 'helm', 'cuslice');

function docs(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, 'utf8')).map((d) => {
    assert.deepEqual(d.errors.map(String), [], `${file}: YAML errors`);
    return d.toJS();
  }).filter(Boolean);
}

const manifest = (mode) => docs(path.join(DEPLOY, 'manifests', `cuslice-${mode}.yaml`));
const find = (list, kind) => list.find((o) => o.kind === kind);
const container = (list, name) => find(list, 'DaemonSet').spec.template.spec.containers.find((c) => c.name === name);

test('every manifest and example is valid Kubernetes, with strict fields', async () => {
  const files = ['manifests', 'examples'].flatMap((d) => fs.readdirSync(path.join(DEPLOY, d))
    .filter((f) => f.endsWith('.yaml')).map((f) => path.join(DEPLOY, d, f)));
  assert.ok(files.length >= 6);
  let n = 0;
  for (const f of files) {
    for (const o of docs(f)) {
      assert.deepEqual(await checkObjectStrict(o), [], `${path.relative(ROOT, f)}: ${o.kind} ${o.metadata && o.metadata.name}`);
      n++;
    }
  }
  assert.ok(n >= 20);
  // And the checker itself refuses what the API server would.
  const bad = { apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'x' },
    spec: { selector: {}, template: { spec: { hostPid: true, containers: [{ name: 'c' }] } } } };
  assert.deepEqual(await checkObjectStrict(bad), ['DaemonSet.spec.template.spec.hostPid: unknown field']);
  assert.match((await checkObjectStrict({ apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: { name: 'x' }, spec: { selectors: 'no' } }))[0], /schema: .*selectors must be array/);
});

test('RBAC: the device plugin reads pods; the DRA driver claims, its node and ResourceSlices; nothing else', () => {
  assert.deepEqual(find(manifest('deviceplugin'), 'ClusterRole').rules, [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }]);
  assert.deepEqual(find(manifest('dra'), 'ClusterRole').rules, [
    { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims'], verbs: ['get'] },
    { apiGroups: ['resource.k8s.io'], resources: ['resourceslices'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
    { apiGroups: [''], resources: ['nodes'], verbs: ['get'] },
  ]);
  for (const mode of ['deviceplugin', 'dra']) {
    const list = manifest(mode);
    const ds = find(list, 'DaemonSet').spec.template.spec;
    assert.equal(ds.hostPID, true);
    assert.equal(ds.serviceAccountName, find(list, 'ServiceAccount').metadata.name);
    assert.equal(find(list, 'ClusterRoleBinding').subjects[0].name, 'cuslice');
    // Only the daemon is privileged; the plugins run as root without escalation.
    for (const c of ds.containers) {
      assert.equal(Boolean(c.securityContext.privileged), c.name === 'cusliced', c.name);
    }
  }
});

test('the programs accept the options and the configuration the manifests give them', async (t) => {
  const run = (bin, args, env = {}) => spawnSync(bin, args, { encoding: 'utf8', env: { ...process.env, ...env, KUBERNETES_SERVICE_HOST: '' } });
  for (const [mode, name, bin] of [['deviceplugin', 'device-plugin', need('CS_DEVICE_PLUGIN')], ['dra', 'dra-driver', need('CS_DRA_DRIVER')]]) {
    const c = container(manifest(mode), name);
    // Past option parsing, they stop only for want of an API server here.
    const r = run(bin, c.args, { NODE_NAME: 'node-1' });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /API server: no API server: not in a pod/, `${name}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /--help/);
  }
  // cusliced with the ConfigMap's configuration (paths and metrics overridden: nothing here is the node's).
  const w = new World('manifests');
  t.after(() => w.close());
  fs.writeFileSync(w.path('cusliced.conf'), find(manifest('dra'), 'ConfigMap').data['cusliced.conf']);
  const conf = find(manifest('deviceplugin'), 'ConfigMap').data['cusliced.conf'];
  assert.equal(conf, find(manifest('dra'), 'ConfigMap').data['cusliced.conf']);
  w.start('cusliced', [need('CS_CUSLICED'), '--config', w.path('cusliced.conf'), '--socket', w.socket,
    '--admin-socket', w.admin, '--state-dir', w.path('state'), '--shm-dir', w.env.CUSLICE_SHM_DIR,
    '--metrics-listen', 'none']);
  await until(async () => (await w.cusliced('GET', '/v1/status')).status === 200, 20000, 'cusliced with the shipped configuration');
  assert.equal(fs.statSync(w.socket).gid, 10000);
  assert.equal(fs.statSync(path.dirname(w.admin)).mode & 0o777, 0o700);
  // What containers get (the registration socket's directory) holds it alone.
  assert.deepEqual(fs.readdirSync(path.dirname(w.socket)), ['cusliced.sock']);
  // The seed policy file is valid policy.json.
  fs.writeFileSync(w.path('state', 'policy.json'), find(manifest('dra'), 'ConfigMap').data['policy.json']);
});

// ---- the Helm chart ----

const values = YAML.parse(fs.readFileSync(path.join(CHART, 'values.yaml'), 'utf8'));
const templates = fs.readdirSync(path.join(CHART, 'templates')).map((f) => [f, fs.readFileSync(path.join(CHART, 'templates', f), 'utf8')]);

function get(obj, dotted) {
  return dotted.split('.').reduce((o, k) => (o && typeof o === 'object' && k in o ? o[k] : undefined), obj);
}

test('Helm chart: metadata, every value referenced exists, every include is defined, blocks balance', () => {
  const chart = YAML.parse(fs.readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8'));
  assert.equal(chart.apiVersion, 'v2');
  assert.equal(chart.name, 'cuslice');
  assert.match(chart.version, /^\d+\.\d+\.\d+$/);
  assert.equal(chart.appVersion, '0.1.0');
  const defines = new Set();
  for (const [, t] of templates) for (const m of t.matchAll(/\{\{-? *define "([^"]+)"/g)) defines.add(m[1]);
  for (const [f, t] of templates) {
    for (const m of t.matchAll(/\.Values\.([A-Za-z0-9_.]+)/g)) {
      assert.notEqual(get(values, m[1]), undefined, `${f}: .Values.${m[1]} is not in values.yaml`);
    }
    for (const m of t.matchAll(/include "([^"]+)"/g)) assert.ok(defines.has(m[1]), `${f}: include "${m[1]}" is not defined`);
    const opens = (t.match(/\{\{-? *(if|with|range|define)\b/g) || []).length;
    const ends = (t.match(/\{\{-? *end *-?\}\}/g) || []).length;
    assert.equal(opens, ends, `${f}: ${opens} blocks opened, ${ends} ended`);
    // Every action closes before the next opens ("}}" outside actions is text: YAML flow maps).
    for (let i = t.indexOf('{{'); i >= 0; i = t.indexOf('{{', i + 2)) {
      const close = t.indexOf('}}', i + 2);
      assert.ok(close > 0, `${f}: an action at ${i} never closes`);
      assert.ok(t.slice(i + 2, close).indexOf('{{') < 0, `${f}: an action at ${i} opens another`);
    }
  }
  // Every value is documented (a comment) and used by some template.
  const text = fs.readFileSync(path.join(CHART, 'values.yaml'), 'utf8');
  const used = templates.map(([, t]) => t).join('\n');
  const leaves = (o, p = '') => Object.entries(o).flatMap(([k, v]) =>
    (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length ? leaves(v, `${p}${k}.`) : [`${p}${k}`]));
  for (const leaf of leaves(values)) {
    const parts = leaf.split('.');
    // A value is used when its path, or a map it belongs to, is referenced.
    assert.ok(parts.some((_, i) => used.includes(`.Values.${parts.slice(0, i + 1).join('.')}`)), `values.yaml: ${leaf} is used by no template`);
  }
  assert.match(text, /^mode: deviceplugin$/m);
});

// The plain manifests are the chart's default rendering: the plugins' options agree line by line.
test('Helm chart: its plugin options, with the default values, are the plain manifests\'', () => {
  const dsT = templates.find(([f]) => f === 'daemonset.yaml')[1];
  const helpers = templates.find(([f]) => f === '_helpers.tpl')[1];
  const subst = (line, mode) => line
    .replace(/\{\{ if \.Values\.groups\.preload \}\}on\{\{ else \}\}off\{\{ end \}\}/, values.groups.preload ? 'on' : 'off')
    .replace(/\{\{ join "," \.Values\.([\w.]+) \}\}/g, (_, p) => get(values, p).join(','))
    .replace(/\{\{ \.Values\.([\w.]+) \}\}/g, (_, p) => String(get(values, p)))
    .replace(/\{\{ include "cuslice\.image" \. \}\}/, `${values.image.repository}:0.1.0`)
    .replace(/^\s*/, '')
    + (mode ? '' : '');
  const flags = (text) => text.split('\n').filter((l) => /^\s*- --[\w-]+=/.test(l)).map((l) => subst(l).slice(2));
  const [draPart, dpPart] = dsT.split('{{- else }}\n        - name: device-plugin');
  const common = flags(helpers);
  assert.ok(common.length >= 8);
  for (const [mode, name, part] of [['dra', 'dra-driver', draPart.slice(draPart.indexOf('- name: dra-driver'))], ['deviceplugin', 'device-plugin', dpPart]]) {
    const want = [...common, ...flags(part)];
    assert.deepEqual(container(manifest(mode), name).args, want, mode);
  }
  // The daemon's configuration likewise.
  const cmT = templates.find(([f]) => f === 'configmap.yaml')[1];
  const conf = cmT.slice(cmT.indexOf('[daemon]'), cmT.indexOf('  policy.json')).split('\n').map((l) => l.trim()).filter(Boolean)
    .map((l) => l.replace(/\{\{ if \.Values\.daemon\.metrics\.enabled \}\}0\.0\.0\.0:\{\{ \.Values\.daemon\.metrics\.port \}\}\{\{ else \}\}none\{\{ end \}\}/,
      values.daemon.metrics.enabled ? `0.0.0.0:${values.daemon.metrics.port}` : 'none'))
    .map((l) => l.replace(/\{\{ if \.Values\.daemon\.metrics\.statusPage \}\}yes\{\{ else \}\}no\{\{ end \}\}/,
      values.daemon.metrics.statusPage ? 'yes' : 'no'))
    .map((l) => subst(l));
  assert.deepEqual(find(manifest('deviceplugin'), 'ConfigMap').data['cusliced.conf'].trim().split('\n'), conf);
});
