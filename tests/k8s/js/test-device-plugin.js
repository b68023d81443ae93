// cuslice-device-plugin against a fake kubelet (gRPC on its real Unix
// sockets), a fake API server, and the real cusliced on cusim:
// registration (classic, again after a kubelet restart; plugin registry),
// ListAndWatch and its updates when cusliced goes and comes back,
// GetPreferredAllocation packing, Allocate for one and several containers
// and for requests that cannot be met, PreStartContainer binding the group
// to its pod (and the pod's ld.so.preload choice).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { World, until, need } = require('./lib/world');
const { FakeKubelet, PluginConn, registryHandshake, servePodResources, grpc } = require('./lib/kubelet');
const { FakeApiServer } = require('./lib/apiserver');
const schema = require('./lib/schema');

const GiB = 2 ** 30;

// A world with two GPUs (16 GiB and 40 GiB), cusliced, a fake kubelet, a fake
// API server, a PodResources server, and the plugin started with extra args.
async function setup(t, tag, extra = [], { registry = false } = {}) {
  await schema.init();
  const w = new World(tag, { gpus: 'H100:16GiB,A100:40GiB' });
  t.after(() => w.close());
  await w.startDaemon();
  const gpus = (await w.cusliced('GET', '/v1/gpus')).body.gpus;
  const k = new FakeKubelet(w.path('device-plugins'));
  t.after(() => k.stop());
  await k.start();
  const api = new FakeApiServer(w.path('api'));
  await api.start();
  t.after(() => api.stop());
  let pods = [];
  fs.mkdirSync(w.path('pod-resources'));
  const pr = await servePodResources(w.path('pod-resources', 'kubelet.sock'), () => pods);
  t.after(() => pr.stop());
  fs.mkdirSync(w.path('registry'));
  const plugin = w.start('plugin', [need('CS_DEVICE_PLUGIN'),
    '--kubelet-dir', k.dir, ...w.pluginSockets(), '--state-dir', w.path('k8s-state'),
    '--pod-resources', w.path('pod-resources', 'kubelet.sock'), '--registry-dir', w.path('registry'),
    '--lib', '/opt/test/libcuslice.so', '--node-name', 'node-1', '--health-interval', '200ms',
    '--log-level', 'debug', ...(registry ? ['--registration', 'registry'] : []), ...api.flags(), ...extra]);
  t.after(() => w.stop(plugin));
  return { w, k, api, gpus, plugin, setPods: (p) => { pods = p; }, pr };
}

// The plugin of resource once registered and its first device list arrived.
async function registered(k, resource) {
  return until(() => { const c = k.plugins.get(resource); return c && c.lists.length > 0 && c; }, 15000,
    `${resource} to register`);
}

const ids = (list) => list.map((d) => d.ID);

test('classic registration: both resources, options, the devices of every GPU', async (t) => {
  const { w, k, gpus } = await setup(t, 'dp-reg');
  const gpu = await registered(k, 'cuslice.io/gpu');
  const mem = await registered(k, 'cuslice.io/gpu-memory');
  assert.equal(k.registrations.length, 2);
  for (const r of k.registrations) {
    assert.equal(r.version, 'v1beta1');
    assert.deepEqual(r.options, { pre_start_required: true, get_preferred_allocation_available: true });
    assert.match(r.endpoint, /^cuslice-(gpu|mem)\.sock$/);
  }
  assert.deepEqual(gpu.options, { pre_start_required: true, get_preferred_allocation_available: true });
  // 10 shares per GPU; 1 GiB units: 16 + 40.
  const want = [];
  for (const g of gpus) for (let n = 0; n < 10; n++) want.push(`${g.uuid}::${n}`);
  assert.deepEqual(ids(gpu.latest()).sort(), want.sort());
  assert.ok(gpu.latest().every((d) => d.health === 'Healthy'));
  assert.equal(mem.latest().length, 56);
  assert.ok(mem.latest().some((d) => d.ID === `${gpus[1].uuid}::m39`));
  assert.ok(!mem.latest().some((d) => d.ID === `${gpus[0].uuid}::m16`));
  assert.ok(mem.latest().every((d) => d.ID.length <= 63));
  assert.ok(fs.statSync(path.join(k.dir, 'cuslice-gpu.sock')).isSocket());
  void w;
});

test('re-registration after the kubelet restarts and wipes its directory', async (t) => {
  const { k } = await setup(t, 'dp-restart');
  await registered(k, 'cuslice.io/gpu');
  await registered(k, 'cuslice.io/gpu-memory');
  for (let round = 1; round <= 2; round++) {
    await k.restart();
    assert.equal(fs.existsSync(path.join(k.dir, 'cuslice-gpu.sock')), false);
    const gpu = await registered(k, 'cuslice.io/gpu');
    await registered(k, 'cuslice.io/gpu-memory');
    assert.equal(k.registrations.length, 2 + 2 * round);
    // The new socket serves: the kubelet's new stream got the devices.
    assert.equal(gpu.latest().length, 20);
    assert.ok(fs.statSync(path.join(k.dir, 'cuslice-gpu.sock')).isSocket());
  }
});

test('a refused registration stops the plugin (exit status 1)', async (t) => {
  const w = new World('dp-refused');
  t.after(() => w.close());
  await w.startDaemon();
  const k = new FakeKubelet(w.path('device-plugins'));
  k.refuse = 'resource name cuslice.io/gpu is already taken';
  await k.start();
  t.after(() => k.stop());
  const api = new FakeApiServer(w.path('api'));
  await api.start();
  t.after(() => api.stop());
  const p = w.start('plugin', [need('CS_DEVICE_PLUGIN'), '--kubelet-dir', k.dir, ...w.pluginSockets(),
    '--state-dir', w.path('st'), ...api.flags()]);
  const { code } = await p.exited;
  assert.equal(code, 1);
  assert.match(w.log('plugin'), /the kubelet refused cuslice\.io\/gpu: .*already taken/);
});

test('ListAndWatch: Unhealthy while cusliced is gone, Healthy when it is back', async (t) => {
  const { w, k } = await setup(t, 'dp-health');
  const gpu = await registered(k, 'cuslice.io/gpu');
  const before = gpu.lists.length;
  await w.stopDaemon();
  await until(() => gpu.lists.length > before && gpu.latest().every((d) => d.health === 'Unhealthy'), 10000,
    'an Unhealthy list');
  assert.equal(gpu.latest().length, 20); // same devices, marked
  const mid = gpu.lists.length;
  await w.startDaemon();
  await until(() => gpu.lists.length > mid && gpu.latest().every((d) => d.health === 'Healthy'), 10000,
    'a Healthy list');
  // Nothing changed in between: no updates for nothing.
  const settled = gpu.lists.length;
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(gpu.lists.length, settled);
});

test('GetPreferredAllocation packs onto the fullest GPU that fits, and says when none does', async (t) => {
  const { k, gpus } = await setup(t, 'dp-prefer');
  const gpu = await registered(k, 'cuslice.io/gpu');
  const [a, b] = gpus.map((g) => g.uuid);
  // A has 4 free shares, B 10: 3 go to A, lowest numbers first.
  const avail = ['6', '7', '8', '9'].map((n) => `${a}::${n}`).concat([...Array(10).keys()].map((n) => `${b}::${n}`));
  let r = await gpu.preferred([{ available_deviceIDs: avail, must_include_deviceIDs: [], allocation_size: 3 }]);
  assert.deepEqual(r.container_responses[0].deviceIDs, [`${a}::6`, `${a}::7`, `${a}::8`]);
  // 5 do not fit on A: B.
  r = await gpu.preferred([{ available_deviceIDs: avail, must_include_deviceIDs: [], allocation_size: 5 }]);
  assert.deepEqual(r.container_responses[0].deviceIDs, [0, 1, 2, 3, 4].map((n) => `${b}::${n}`));
  // Must-include devices decide the GPU and come first.
  r = await gpu.preferred([{ available_deviceIDs: avail, must_include_deviceIDs: [`${b}::9`], allocation_size: 2 }]);
  assert.deepEqual(r.container_responses[0].deviceIDs, [`${b}::9`, `${b}::0`]);
  // Two containers in one request.
  r = await gpu.preferred([
    { available_deviceIDs: avail, must_include_deviceIDs: [], allocation_size: 1 },
    { available_deviceIDs: avail, must_include_deviceIDs: [], allocation_size: 10 }]);
  assert.deepEqual(r.container_responses.map((c) => c.deviceIDs.length), [1, 10]);
  // 11 shares fit on no GPU.
  await assert.rejects(gpu.preferred([{ available_deviceIDs: avail, must_include_deviceIDs: [], allocation_size: 11 }]),
    (e) => e.code === grpc.status.RESOURCE_EXHAUSTED &&
      /cuslice\.io\/gpu: 11 devices asked; the most free on one GPU is 10: a container's request must fit on one GPU/.test(e.details));
  // Must-include devices on two GPUs: impossible.
  await assert.rejects(gpu.preferred([{ available_deviceIDs: avail, must_include_deviceIDs: [`${a}::6`, `${b}::0`], allocation_size: 2 }]),
    (e) => e.code === grpc.status.RESOURCE_EXHAUSTED);
});

test('Allocate: one container gets its group, exact limits, env and mounts', async (t) => {
  const { w, k, gpus } = await setup(t, 'dp-alloc', ['--shm-dir', '/dev/shm/cs-test-regions']);
  const gpu = await registered(k, 'cuslice.io/gpu');
  const a = gpus[0];
  const r = await gpu.allocate([[`${a.uuid}::5`, `${a.uuid}::3`, `${a.uuid}::4`]]);
  assert.equal(r.container_responses.length, 1);
  const c = r.container_responses[0];
  const group = `k8s-gpu-${a.uuid}-3`;
  assert.deepEqual(c.envs, {
    CUSLICE_GROUP: group, CUSLICE_SOCKET: w.socket, CUSLICE_DAEMON: 'required',
    CUDA_VISIBLE_DEVICES: a.uuid, NVIDIA_VISIBLE_DEVICES: a.uuid, CUSLICE_SHM_DIR: '/dev/shm/cs-test-regions',
  });
  assert.deepEqual(c.mounts, [
    { container_path: '/opt/cuslice/lib/libcuslice.so', host_path: '/opt/test/libcuslice.so', read_only: true },
    { container_path: path.dirname(w.socket), host_path: path.dirname(w.socket), read_only: true },
    { container_path: '/etc/ld.so.preload', host_path: w.path('k8s-state', 'preload', group), read_only: true },
    { container_path: '/dev/shm/cs-test-regions', host_path: '/dev/shm/cs-test-regions', read_only: false },
  ]);
  assert.deepEqual(c.cdi_devices, []);
  assert.equal(fs.readFileSync(w.path('k8s-state', 'preload', group), 'utf8'), '/opt/cuslice/lib/libcuslice.so\n');
  // The group: 3 of 10 shares of the 16 GiB GPU, 30 % of its time, nothing elsewhere, nobody yet.
  const g = await w.group(group);
  assert.equal(g.managed, true);
  assert.deepEqual(g.policy.memory_limit, { [a.uuid]: Math.floor(16 * GiB * 3 / 10), default: 0 });
  assert.deepEqual(g.policy.core_limit, { [a.uuid]: 30 });
  assert.equal(g.policy.daemon_required, true);
  assert.deepEqual(g.policy.members.pods, ['00000000-0000-0000-0000-000000000000']);
  assert.deepEqual(g.policy.labels, { 'k8s.resource': 'cuslice.io/gpu' });
  const dev = g.devices.find((d) => d.uuid === a.uuid);
  assert.equal(dev.memory_limit, Math.floor(16 * GiB * 3 / 10));
  assert.equal(dev.core_limit, 30);
  // Of cusliced's, the container gets the registration socket's directory alone, and
  // through it a tenant's own view: no policy can be changed from there.
  assert.ok(!c.mounts.some((m) => m.host_path.startsWith(path.dirname(w.admin))));
  assert.deepEqual(fs.readdirSync(path.dirname(w.socket)), ['cusliced.sock']);
  const put = await w.tenant('PUT', `/v1/groups/${group}`, { memory_limit: '64GiB' });
  assert.equal(put.status, 403);
  assert.equal(put.body.error.code, 'admin_socket_required');
  assert.equal((await w.group(group)).policy.memory_limit[a.uuid], Math.floor(16 * GiB * 3 / 10));
  assert.equal((await w.tenant('GET', '/v1/self')).status, 200);
});

test('Allocate: refused while the directory containers would get holds more than the registration socket', async (t) => {
  const { w, k, gpus } = await setup(t, 'dp-alloc-dir');
  const gpu = await registered(k, 'cuslice.io/gpu');
  const a = gpus[0];
  // Something else beside the socket: root in a container could reach it.
  fs.mkdirSync(path.join(path.dirname(w.socket), 'admin'));
  await assert.rejects(gpu.allocate([[`${a.uuid}::0`]]), (e) => {
    assert.equal(e.code, grpc.status.FAILED_PRECONDITION, e.details);
    assert.match(e.details, /holds admin too: it must hold that socket alone/);
    return true;
  });
  assert.equal(await w.group(`k8s-gpu-${a.uuid}-0`), null);
  fs.rmdirSync(path.join(path.dirname(w.socket), 'admin'));
  const r = await gpu.allocate([[`${a.uuid}::0`]]);
  assert.equal(r.container_responses[0].envs.CUSLICE_GROUP, `k8s-gpu-${a.uuid}-0`);
});

test('Allocate: several containers, memory units, CDI injection, and requests that cannot be met', async (t) => {
  const { w, k, gpus } = await setup(t, 'dp-alloc-n', ['--gpu-injection', 'cdi', '--preload', 'off', '--memory-unit', '512MiB']);
  const gpu = await registered(k, 'cuslice.io/gpu');
  const mem = await registered(k, 'cuslice.io/gpu-memory');
  const [a, b] = gpus;
  assert.equal(mem.latest().length, 32 + 80);
  const r = await gpu.allocate([[`${a.uuid}::0`], [`${b.uuid}::1`, `${b.uuid}::2`], [`${b.uuid}::9`]]);
  assert.deepEqual(r.container_responses.map((c) => c.envs.CUSLICE_GROUP),
    [`k8s-gpu-${a.uuid}-0`, `k8s-gpu-${b.uuid}-1`, `k8s-gpu-${b.uuid}-9`]);
  for (const c of r.container_responses) {
    assert.deepEqual(c.cdi_devices, [{ name: `nvidia.com/gpu=${c.envs.CUDA_VISIBLE_DEVICES}` }]);
    assert.equal(c.envs.NVIDIA_VISIBLE_DEVICES, undefined);
    assert.ok(!c.mounts.some((m) => m.container_path === '/etc/ld.so.preload'));
  }
  assert.deepEqual((await w.group(`k8s-gpu-${b.uuid}-1`)).policy.memory_limit, { [b.uuid]: 8 * GiB, default: 0 });
  // Memory units: exactly 7 x 512 MiB, no compute cap.
  const m = await mem.allocate([[0, 1, 2, 3, 4, 5, 6].map((n) => `${b.uuid}::m${n + 10}`)]);
  const mg = await w.group(m.container_responses[0].envs.CUSLICE_GROUP);
  assert.equal(m.container_responses[0].envs.CUSLICE_GROUP, `k8s-mem-${b.uuid}-10`);
  assert.deepEqual(mg.policy.memory_limit, { [b.uuid]: 7 * 512 * 2 ** 20, default: 0 });
  assert.equal(mg.policy.core_limit, null);

  const refused = async (p, ids, code, re) => {
    await assert.rejects(p.allocate(ids), (e) => {
      assert.equal(e.code, code, e.details);
      assert.match(e.details, re);
      return true;
    });
  };
  await refused(gpu, [[`${a.uuid}::0`, `${b.uuid}::0`]], grpc.status.RESOURCE_EXHAUSTED,
    /cuslice\.io\/gpu: the 2 devices lie on more than one GPU .*: a container's request must fit on one GPU/);
  await refused(gpu, [[`${a.uuid}::10`]], grpc.status.INVALID_ARGUMENT, /device .*::10: GPU .* has 10 devices/);
  await refused(gpu, [['GPU-nope::1']], grpc.status.INVALID_ARGUMENT, /GPU GPU-nope is not on this node/);
  await refused(gpu, [[`${a.uuid}::m1`]], grpc.status.INVALID_ARGUMENT, /is not a device of this resource/);
  await refused(mem, [[`${a.uuid}::m32`]], grpc.status.INVALID_ARGUMENT, /has 32 devices/);
  await refused(gpu, [[`${a.uuid}::1`, `${a.uuid}::1`]], grpc.status.INVALID_ARGUMENT, /given twice/);
  // A failed request creates no group.
  assert.equal(await w.group(`k8s-gpu-${a.uuid}-10`), null);
  // Allocate needs cusliced: without it, UNAVAILABLE (the kubelet retries the pod).
  await w.stopDaemon();
  await refused(gpu, [[`${a.uuid}::4`]], grpc.status.UNAVAILABLE, /cusliced at .*/);
});

function pod(name, uid, { annotations = {}, env = [], node = 'node-1', containers = ['main'] } = {}) {
  return { apiVersion: 'v1', kind: 'Pod',
    metadata: { name, namespace: 'team-a', uid, annotations },
    spec: { nodeName: node, containers: containers.map((c) => ({ name: c, image: 'x', env })) } };
}

test('PreStartContainer binds the group to its pod; the pod may opt out of ld.so.preload', async (t) => {
  const { w, k, api, gpus, setPods, pr } = await setup(t, 'dp-bind');
  const gpu = await registered(k, 'cuslice.io/gpu');
  const a = gpus[0].uuid, b = gpus[1].uuid;
  const uid1 = '11111111-2222-4333-8444-555555555555', uid2 = '66666666-7777-4888-9999-aaaaaaaaaaaa';
  await gpu.allocate([[`${a}::0`, `${a}::1`]]);
  await gpu.allocate([[`${b}::4`]]);
  setPods([
    { name: 'web-0', namespace: 'team-a', containers: [
      { name: 'sidecar', devices: [] },
      { name: 'main', devices: [{ resource_name: 'cuslice.io/gpu', device_ids: [`${a}::0`, `${a}::1`] }] }] },
    { name: 'train', namespace: 'team-a', containers: [
      { name: 'main', devices: [{ resource_name: 'cuslice.io/gpu', device_ids: [`${b}::4`] }] }] },
  ]);
  api.setPod(pod('web-0', uid1, { containers: ['sidecar', 'main'] }));
  api.setPod(pod('train', uid2, { annotations: { 'cuslice.io/preload': 'false' } }));
  await gpu.preStart([`${a}::0`, `${a}::1`]);
  await gpu.preStart([`${b}::4`]);
  const g1 = await w.group(`k8s-gpu-${a}-0`), g2 = await w.group(`k8s-gpu-${b}-4`);
  assert.deepEqual(g1.policy.members.pods, [uid1]);
  assert.deepEqual(g1.policy.labels, { 'k8s.resource': 'cuslice.io/gpu', 'k8s.namespace': 'team-a',
    'k8s.pod': 'web-0', 'k8s.container': 'main', 'k8s.pod-uid': uid1 });
  // Binding keeps the limits Allocate set.
  assert.deepEqual(g1.policy.core_limit, { [a]: 20 });
  assert.deepEqual(g2.policy.members.pods, [uid2]);
  assert.equal(fs.readFileSync(w.path('k8s-state', 'preload', `k8s-gpu-${a}-0`), 'utf8'), '/opt/cuslice/lib/libcuslice.so\n');
  assert.equal(fs.readFileSync(w.path('k8s-state', 'preload', `k8s-gpu-${b}-4`), 'utf8'), '');
  // The API server was asked with the service-account token, for exactly those pods.
  const gets = api.requests.filter((r) => r.url.startsWith('/api/v1/'));
  assert.deepEqual(gets.map((r) => r.url), ['/api/v1/namespaces/team-a/pods/web-0', '/api/v1/namespaces/team-a/pods/train']);
  assert.ok(gets.every((r) => r.auth === `Bearer ${api.token}`));
  assert.equal(pr.calls(), 2);

  // A container's own env opts out too; a malformed choice is refused, naming it.
  api.setPod(pod('web-0', uid1, { containers: ['sidecar', 'main'], env: [{ name: 'CUSLICE_PRELOAD', value: 'off' }] }));
  await gpu.preStart([`${a}::0`, `${a}::1`]);
  assert.equal(fs.readFileSync(w.path('k8s-state', 'preload', `k8s-gpu-${a}-0`), 'utf8'), '');
  api.setPod(pod('web-0', uid1, { annotations: { 'cuslice.io/preload': 'maybe' } }));
  await assert.rejects(gpu.preStart([`${a}::0`, `${a}::1`]), (e) => e.code === grpc.status.INVALID_ARGUMENT &&
    /annotation cuslice\.io\/preload: "maybe": expected "true" or "false"/.test(e.details));

  // No pod holds the devices; the pod is on another node; the pod is gone.
  await assert.rejects(gpu.preStart([`${a}::7`]), (e) => e.code === grpc.status.NOT_FOUND &&
    /no pod on this node holds device .*::7/.test(e.details));
  api.setPod(pod('web-0', uid1, { node: 'node-2' }));
  await assert.rejects(gpu.preStart([`${a}::0`]), (e) => e.code === grpc.status.FAILED_PRECONDITION &&
    /pod team-a\/web-0 is bound to node node-2, not node-1/.test(e.details));
  api.pods.clear();
  await assert.rejects(gpu.preStart([`${a}::0`]), (e) => e.code === grpc.status.NOT_FOUND &&
    /reading pod team-a\/web-0: 404: pods "web-0" not found/.test(e.details));
  // A container holding both of our resources is refused (they may lie on two GPUs).
  setPods([{ name: 'both', namespace: 'team-a', containers: [{ name: 'main', devices: [
    { resource_name: 'cuslice.io/gpu', device_ids: [`${a}::2`] },
    { resource_name: 'cuslice.io/gpu-memory', device_ids: [`${a}::m0`] }] }] }]);
  await assert.rejects(gpu.preStart([`${a}::2`]), (e) => e.code === grpc.status.INVALID_ARGUMENT &&
    /container main asks for both cuslice\.io\/gpu and cuslice\.io\/gpu-memory: ask for one/.test(e.details));
  // The groups kept their binding through the refusals.
  assert.deepEqual((await w.group(`k8s-gpu-${a}-0`)).policy.members.pods, [uid1]);
});

test('groups of containers the kubelet no longer holds are collected; others stay', async (t) => {
  const { w, k, api, gpus, setPods } = await setup(t, 'dp-gc', ['--gc-interval', '300ms']);
  const gpu = await registered(k, 'cuslice.io/gpu');
  const a = gpus[0].uuid;
  const c1 = [`${a}::0`], c2 = [`${a}::1`, `${a}::2`];
  const uid1 = '11111111-2222-4333-8444-000000000001', uid2 = '11111111-2222-4333-8444-000000000002';
  await gpu.allocate([c1]);
  await gpu.allocate([c2]);
  const held = (name, ids) => ({ name, namespace: 'ns', containers: [{ name: 'c', devices: [{ resource_name: 'cuslice.io/gpu', device_ids: ids }] }] });
  setPods([held('one', c1), held('two', c2)]);
  api.setPod({ metadata: { name: 'one', namespace: 'ns', uid: uid1 }, spec: { nodeName: 'node-1', containers: [{ name: 'c' }] } });
  await gpu.preStart(c1);
  // An operator's group named like ours but not labelled as ours, and an Allocate nobody holds yet.
  await w.cusliced('PUT', `/v1/groups/k8s-gpu-${a}-9`, { memory_limit: '1GiB' });
  const live = (g) => g && g.managed;
  await new Promise((r) => setTimeout(r, 1500));
  assert.ok(live(await w.group(`k8s-gpu-${a}-0`)));
  assert.ok(live(await w.group(`k8s-gpu-${a}-1`)));
  // Pod one ends: its group and preload file go; two's stay.
  setPods([held('two', c2)]);
  await until(async () => !live(await w.group(`k8s-gpu-${a}-0`)), 5000, 'group 0 collected');
  assert.equal(fs.existsSync(w.path('k8s-state', 'preload', `k8s-gpu-${a}-0`)), false);
  assert.ok(live(await w.group(`k8s-gpu-${a}-1`)));
  assert.ok(live(await w.group(`k8s-gpu-${a}-9`)));
  assert.match(w.log('plugin'), new RegExp(`group k8s-gpu-${a}-0 deleted: no container holds its devices`));
  // An allocation the kubelet never lists (its pod failed admission) goes after the grace time.
  await gpu.allocate([[`${a}::5`]]);
  assert.ok(live(await w.group(`k8s-gpu-${a}-5`)));
  await until(async () => !live(await w.group(`k8s-gpu-${a}-5`)), 5000, 'the unlisted group collected');
  void uid2;
});

test('plugin registry: GetInfo names the endpoint, which serves the device plugin', async (t) => {
  const { w, k } = await setup(t, 'dp-registry', [], { registry: true });
  const sock = w.path('registry', 'cuslice.io-gpu.sock');
  await until(() => fs.existsSync(sock) && fs.existsSync(w.path('registry', 'cuslice.io-mem.sock')), 15000, 'registration sockets');
  const info = await registryHandshake(sock);
  assert.deepEqual(info, { type: 'DevicePlugin', name: 'cuslice.io/gpu', endpoint: path.join(k.dir, 'cuslice-gpu.sock'),
    supported_versions: ['v1beta1'] });
  const conn = new PluginConn(info.endpoint, info.name);
  t.after(() => conn.close());
  await conn.open();
  assert.equal(conn.latest().length, 20);
  // No classic registration happened.
  assert.equal(k.registrations.length, 0);
  assert.match(w.log('plugin'), /cuslice\.io\/gpu: serving .*cuslice-gpu\.sock, registration on .*cuslice\.io-gpu\.sock/);
});

test('bad options and configurations are refused with a line naming them (exit status 2)', () => {
  const { spawnSync } = require('node:child_process');
  const env = { ...process.env };
  delete env.KUBERNETES_SERVICE_HOST;
  const run = (...args) => spawnSync(need('CS_DEVICE_PLUGIN'), args, { encoding: 'utf8', env });
  const cases = [
    [['--shares', '0'], /--shares "0": expected a whole number from 1 to 1000/],
    [['--memory-unit', '1KiB'], /--memory-unit "1KiB": expected a size from 1MiB to 64GiB/],
    [['--resources', 'gpu,tpu'], /--resources "gpu,tpu": "tpu" is not gpu or gpu-memory/],
    [['--resource-prefix', 'Cuslice.IO'], /--resource-prefix "Cuslice.IO": expected a DNS subdomain/],
    [['--registration', 'auto'], /--registration "auto": expected classic or registry/],
    [['--gpu-injection', 'oci'], /--gpu-injection "oci": expected envvar, cdi or none/],
    [['--on-violation', 'warn'], /--on-violation "warn": expected report, stop or kill/],
    [['--cusliced', 'relative.sock'], /--cusliced "relative.sock": expected an absolute path/],
    [['--registration-socket', 'r.sock'], /--registration-socket "r.sock": expected an absolute path/],
    // The admin socket where containers would see it; two file names for one socket.
    [['--cusliced', '/run/cuslice/tenant/admin.sock'], /--cusliced \/run\/cuslice\/tenant\/admin\.sock lies in \/run\/cuslice\/tenant, the directory of the registration socket that containers are given/],
    [['--container-socket', '/run/cuslice/x.sock'], /--container-socket \/run\/cuslice\/x\.sock and --registration-socket \/run\/cuslice\/tenant\/cusliced\.sock: expected the same file name/],
    [['--api-server', 'http://x'], /--api-server "http:\/\/x": expected an https:\/\/ URL/],
    [['--health-interval', '10ms'], /--health-interval "10ms": expected a duration from 100ms to 1m/],
    [['--cusliced-token-file', '/nonexistent/token'], /--cusliced-token-file \/nonexistent\/token: No such file/],
    [['--bogus'], /unknown option --bogus/],
    [['extra'], /unexpected argument "extra"/],
    // Not in a pod and no API server: nothing could be bound to a pod.
    [['--api-token-file', '/dev/null'], /API server: no API server: not in a pod/],
  ];
  for (const [args, re] of cases) {
    const r = run(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
  }
  const h = run('--help');
  assert.equal(h.status, 0);
  assert.match(h.stdout, /--memory-unit SIZE/);
  assert.match(h.stdout, /--cusliced SOCK +cusliced's admin socket/);
  assert.match(h.stdout, /--registration-socket PATH/);
});
