// End to end on cusim with the real cusliced and real processes in pod
// cgroups: two claims on one GPU (3 GiB and 5 GiB) prepared by the DRA
// driver, their "containers" started with what the CDI specs say, get
// exactly those quotas; one pod's processes cannot use the other's group;
// unprepare releases the group. The device plugin's path likewise: Allocate,
// PreStartContainer, a container of the pod gets its shares.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const { World, until, need } = require('./lib/world');
const { draClient, FakeKubelet, servePodResources } = require('./lib/kubelet');
const { FakeApiServer } = require('./lib/apiserver');
const { cgroup2Root, PodCgroups, Client, envOf } = require('./lib/container');
const schema = require('./lib/schema');

const GiB = 2 ** 30, MiB = 2 ** 20;
const CTX = 64 * MiB; // a context's footprint, charged to its group
const OOM = 2; // CUDA_ERROR_OUT_OF_MEMORY
const DRIVER = 'gpu.cuslice.io', NODE = 'node-1';

const root = cgroup2Root();
const skip = root ? false : 'no writable cgroup2 hierarchy here (needs root): pods cannot be made';

async function world(t, tag) {
  await schema.init();
  const w = new World(tag, { gpus: 'H100:16GiB', ctx: CTX });
  t.after(() => w.close());
  await w.startDaemon();
  const api = new FakeApiServer(w.path('api'));
  await api.start();
  t.after(() => api.stop());
  const gpu = (await w.cusliced('GET', '/v1/gpus')).body.gpus[0];
  return { w, api, gpu };
}

function pod(w, name) {
  const uid = crypto.randomUUID();
  const cg = new PodCgroups(root, uid);
  w.cleanups.push(() => cg.remove());
  return { name, uid, cg };
}

async function start(w, p, ctr, env) {
  return new Client(w, p.cg.container(ctr), env, `${p.name}-${ctr}`).ready();
}

async function groupOf(w, pid) {
  const procs = (await w.cusliced('GET', '/v1/processes')).body.processes;
  const p = procs.find((x) => x.pid === pid);
  return p ? p.group : null;
}

test('DRA: two claims on one GPU get exactly 3 GiB and 5 GiB; pods stay in their own groups', { skip }, async (t) => {
  const { w, api, gpu } = await world(t, 'e2e-dra');
  const d = w.start('driver', [need('CS_DRA_DRIVER'), '--node-name', NODE, ...w.pluginSockets(),
    '--plugin-dir', w.path('plugin'), '--registry-dir', w.path('plugin'), '--cdi-dir', w.path('cdi'),
    '--lib', need('CS_PRELOAD'), '--shm-dir', w.env.CUSLICE_SHM_DIR, '--health-interval', '200ms', ...api.flags()]);
  void d;
  await until(() => fs.existsSync(w.path('plugin', 'dra.sock')), 15000, 'the driver');
  const dev = `gpu-${gpu.uuid.replace(/^GPU-/i, '').toLowerCase()}`;
  const pa = pod(w, 'pod-a'), pb = pod(w, 'pod-b'), pc = pod(w, 'pod-c');
  const mk = (name, p, mem) => ({ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim',
    metadata: { name, namespace: 'ml', uid: crypto.randomUUID(),
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: p.name, uid: p.uid, controller: true }] },
    status: { allocation: { devices: { results: [{ request: 'gpu', driver: DRIVER, pool: NODE, device: dev,
      consumedCapacity: { memory: mem, cores: '0' } }] } },
    reservedFor: [{ resource: 'pods', name: p.name, uid: p.uid }] } });
  const ca = mk('claim-a', pa, '3Gi'), cb = mk('claim-b', pb, '5Gi');
  api.setClaim(ca);
  api.setClaim(cb);
  const kubelet = draClient(w.path('plugin', 'dra.sock'));
  t.after(() => kubelet.close());
  const r = await kubelet.prepare([ca, cb].map((c) => ({ namespace: 'ml', uid: c.metadata.uid, name: c.metadata.name })));
  assert.equal(r.claims[ca.metadata.uid].error, '');
  assert.equal(r.claims[cb.metadata.uid].error, '');
  const spec = (c) => JSON.parse(fs.readFileSync(w.path('cdi', `cuslice.io-claim_${c.metadata.uid}.json`), 'utf8'));
  const ea = envOf(spec(ca).devices[0].containerEdits.env), eb = envOf(spec(cb).devices[0].containerEdits.env);
  assert.deepEqual(schema.checkCdiSpec(spec(ca)), []);

  // Container a of pod A: its view is the slice; 3 GiB exactly (its context included).
  const a = await start(w, pa, 'main', ea);
  assert.equal(await groupOf(w, a.pid), ea.CUSLICE_GROUP);
  const info = await a.cmd('info');
  assert.equal(info.rc, 0);
  assert.equal(info.total, 3 * GiB);
  assert.equal(info.free, 3 * GiB - CTX);
  // A second container of pod A that asks for B's group lands in A's: its context is charged there.
  const a2 = await start(w, pa, 'sidecar', { ...ea, CUSLICE_GROUP: eb.CUSLICE_GROUP });
  assert.equal(await groupOf(w, a2.pid), ea.CUSLICE_GROUP);
  assert.equal((await a.cmd('info')).free, 3 * GiB - 2 * CTX);
  assert.equal((await a.cmd(`device ${3 * GiB - 2 * CTX}`)).rc, 0);
  assert.equal((await a.cmd('device 1')).rc, OOM);
  assert.equal((await a2.cmd('device 1')).rc, OOM);

  // Container b of pod B: unaffected, 5 GiB exactly.
  const b = await start(w, pb, 'main', eb);
  assert.equal((await b.cmd(`device ${5 * GiB - CTX - 4096}`)).rc, 0);
  assert.equal((await b.cmd('device 4097')).rc, OOM);
  assert.equal((await b.cmd('device 4096')).rc, 0);
  assert.equal((await w.group(eb.CUSLICE_GROUP)).processes, 1);

  // A process of a pod no claim is reserved for cannot join either group: it fails closed.
  const c = new Client(w, pc.cg.container('main'), eb, 'pod-c-main');
  t.after(() => w.stop(c.proc, 'SIGKILL'));
  // Refused at registration, it fails closed: not even its context can be made.
  assert.equal(await c.next(), 'init-failed');
  assert.match(w.log('pod-c-main'), new RegExp(`cusliced refused this process: group ${eb.CUSLICE_GROUP}: pid \\d+ ` +
    `\\(uid 0, cgroup /kubepods/besteffort/pod${pc.uid}/main\\) is not a member`));
  assert.ok((await w.cusliced('GET', '/v1/events')).body.events.some((e) => e.kind === 'denied'));

  // The groups hold exactly what was allocated.
  const used = async (g) => (await w.group(g)).devices.find((x) => x.uuid === gpu.uuid).memory_used;
  assert.equal(await used(ea.CUSLICE_GROUP), 3 * GiB);
  assert.equal(await used(eb.CUSLICE_GROUP), 5 * GiB);

  // Unprepare A (its pods are gone): the group has no policy left; B keeps its own.
  await a.quit();
  await a2.quit();
  await kubelet.unprepare([{ namespace: 'ml', uid: ca.metadata.uid, name: 'claim-a' }]);
  const ga = await w.group(ea.CUSLICE_GROUP);
  assert.ok(ga === null || (ga.managed === false && ga.policy === null));
  assert.equal(fs.existsSync(w.path('cdi', `cuslice.io-claim_${ca.metadata.uid}.json`)), false);
  assert.equal((await w.group(eb.CUSLICE_GROUP)).policy.memory_limit[gpu.uuid], 5 * GiB);
  assert.equal((await b.cmd('device 1')).rc, OOM);
  await b.quit();
});

test('device plugin: Allocate + PreStartContainer give a pod\'s container its 3 shares of the GPU', { skip }, async (t) => {
  const { w, api, gpu } = await world(t, 'e2e-dp');
  const k = new FakeKubelet(w.path('device-plugins'));
  await k.start();
  t.after(() => k.stop());
  fs.mkdirSync(w.path('pod-resources'));
  let pods = [];
  const pr = await servePodResources(w.path('pod-resources', 'kubelet.sock'), () => pods);
  t.after(() => pr.stop());
  w.start('plugin', [need('CS_DEVICE_PLUGIN'), '--kubelet-dir', k.dir, ...w.pluginSockets(),
    '--state-dir', w.path('state'), '--pod-resources', w.path('pod-resources', 'kubelet.sock'),
    '--lib', need('CS_PRELOAD'), '--shm-dir', w.env.CUSLICE_SHM_DIR, '--node-name', NODE, '--resources', 'gpu', ...api.flags()]);
  const plugin = await until(() => { const c = k.plugins.get('cuslice.io/gpu'); return c && c.lists.length && c; }, 15000, 'registration');
  const p = pod(w, 'web');
  const ids = [`${gpu.uuid}::7`, `${gpu.uuid}::8`, `${gpu.uuid}::9`];
  const env = envOf((await plugin.allocate([ids])).container_responses[0].envs);
  // Before PreStartContainer the group admits nobody: a process of the pod fails closed.
  const early = new Client(w, p.cg.container('early'), env, 'web-early');
  t.after(() => w.stop(early.proc, 'SIGKILL'));
  assert.equal(await early.next(), 'init-failed');
  assert.match(w.log('web-early'), /cusliced refused this process: .* is not a member/);
  pods = [{ name: 'web', namespace: 'default', containers: [{ name: 'main', devices: [{ resource_name: 'cuslice.io/gpu', device_ids: ids }] }] }];
  api.setPod({ metadata: { name: 'web', namespace: 'default', uid: p.uid }, spec: { nodeName: NODE, containers: [{ name: 'main' }] } });
  await plugin.preStart(ids);
  const c = await start(w, p, 'main', env);
  const limit = Math.floor(16 * GiB * 3 / 10);
  assert.equal(await groupOf(w, c.pid), env.CUSLICE_GROUP);
  assert.equal((await c.cmd('info')).total, limit);
  assert.equal((await c.cmd(`device ${limit - CTX}`)).rc, 0);
  assert.equal((await c.cmd('device 1')).rc, OOM);
  const g = await w.group(env.CUSLICE_GROUP);
  assert.equal(g.policy.labels['k8s.pod'], 'web');
  assert.equal(g.processes, 1);
  await c.quit();
});
