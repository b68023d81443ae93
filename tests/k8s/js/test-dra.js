// cuslice-dra-driver against a fake kubelet (plugin registry and DRAPlugin
// calls on its real sockets), a fake API server (TLS, token, ResourceClaims,
// ResourceSlice writes checked against resource.k8s.io/v1) and the real
// cusliced on cusim: registration, the published slice, NodePrepareResources
// mapping consumed capacity to an exact group and a CDI spec,
// NodeUnprepareResources, repeats, restarts, shared claims, refusals.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { World, until, need, sleep } = require('./lib/world');
const { registryHandshake, draClient } = require('./lib/kubelet');
const { FakeApiServer } = require('./lib/apiserver');
const schema = require('./lib/schema');

const GiB = 2 ** 30;
const DRIVER = 'gpu.cuslice.io';
const NODE = 'node-1';
const NODE_UID = 'aaaaaaaa-0000-4000-8000-000000000001';

// A released group: no policy left (the daemon may still list it, unmanaged, while its region is open).
const released = (g) => g === null || (g.managed === false && g.policy === null);

const devName = (uuid) => `gpu-${uuid.replace(/^GPU-/i, '').toLowerCase()}`;

async function setup(t, tag, extra = [], { gpus = 'H100:16GiB,A100:40GiB', preSlice } = {}) {
  await schema.init();
  const w = new World(tag, { gpus });
  t.after(() => w.close());
  await w.startDaemon();
  const list = (await w.cusliced('GET', '/v1/gpus')).body.gpus;
  const api = new FakeApiServer(w.path('api'));
  api.nodes.set(NODE, { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE, uid: NODE_UID } });
  if (preSlice) api.slices.set(preSlice.metadata.name, preSlice);
  await api.start();
  t.after(() => api.stop());
  fs.mkdirSync(w.path('registry'));
  const args = [need('CS_DRA_DRIVER'), '--node-name', NODE, ...w.pluginSockets(),
    '--plugin-dir', w.path('plugin'), '--registry-dir', w.path('registry'), '--cdi-dir', w.path('cdi'),
    '--lib', '/opt/test/libcuslice.so', '--shm-dir', w.env.CUSLICE_SHM_DIR,
    '--health-interval', '200ms', '--claim-refresh', '200ms', '--log-level', 'debug', ...api.flags(), ...extra];
  const d = {
    w, api, gpus: list, args,
    start() {
      this.proc = w.start('driver', args);
      return until(() => fs.existsSync(this.sock()), 15000, 'dra.sock');
    },
    sock: () => w.path('plugin', 'dra.sock'),
    async stop() { await w.stop(this.proc); },
    client() {
      const c = draClient(this.sock());
      t.after(() => c.close());
      return c;
    },
  };
  await d.start();
  return d;
}

// An allocated claim as the scheduler leaves it.
function claim(name, uid, results, { pods = [], owner = true, config } = {}) {
  return {
    apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim',
    metadata: { name, namespace: 'team-a', uid,
      ownerReferences: owner && pods.length ? [{ apiVersion: 'v1', kind: 'Pod', name: pods[0].name, uid: pods[0].uid, controller: true }] : undefined },
    spec: { devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: 'gpu.cuslice.io' } }] } },
    status: {
      allocation: { devices: { results, config } },
      reservedFor: pods.map((p) => ({ resource: 'pods', name: p.name, uid: p.uid })),
    },
  };
}

const result = (uuid, consumed, request = 'gpu') => ({ request, driver: DRIVER, pool: NODE, device: devName(uuid),
  ...(consumed ? { consumedCapacity: consumed, shareID: '0f0f0f0f-0000-4000-8000-000000000000' } : {}) });

const UID = (n) => `c1a1${String(n).padStart(4, '0')}-0000-4000-8000-000000000000`;
const POD = (n) => `90d00000-0000-4000-8000-${String(n).padStart(12, '0')}`;

test('registration through the plugin registry, and the node\'s ResourceSlice', async (t) => {
  const d = await setup(t, 'dra-reg');
  const sock = d.w.path('registry', `${DRIVER}-reg.sock`);
  await until(() => fs.existsSync(sock), 10000, 'the registration socket');
  const info = await registryHandshake(sock);
  assert.deepEqual(info, { type: 'DRAPlugin', name: DRIVER, endpoint: d.sock(), supported_versions: ['v1.DRAPlugin'] });
  await until(() => /registered with the kubelet/.test(d.w.log('driver')), 5000, 'the registered line');

  const s = await until(() => d.api.slices.get(`${NODE}.${DRIVER}`), 10000, 'the ResourceSlice');
  assert.deepEqual(d.api.rejected, []);
  assert.deepEqual(schema.checkResourceSlice(s), []);
  assert.equal(s.spec.driver, DRIVER);
  assert.equal(s.spec.nodeName, NODE);
  assert.deepEqual(s.spec.pool, { name: NODE, generation: 1, resourceSliceCount: 1 });
  assert.deepEqual(s.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: NODE, uid: NODE_UID, controller: true }]);
  assert.equal(s.spec.devices.length, 2);
  const [a] = d.gpus;
  const dev = s.spec.devices.find((x) => x.name === devName(a.uuid));
  assert.deepEqual(dev, {
    name: devName(a.uuid), allowMultipleAllocations: true,
    attributes: { uuid: { string: a.uuid }, index: { int: a.index }, productName: { string: a.name }, driverVersion: { version: '0.1.0' } },
    capacity: {
      memory: { value: String(16 * GiB), requestPolicy: { default: String(16 * GiB), validRange: { min: String(256 * 2 ** 20), step: String(256 * 2 ** 20) } } },
      cores: { value: '100', requestPolicy: { default: '0', validRange: { min: '0', max: '100', step: '1' } } },
    },
  });
  // Written with the service-account token, once: nothing changed, nothing rewritten.
  const writes = () => d.api.requests.filter((r) => r.url.startsWith('/apis/resource.k8s.io/v1/resourceslices') && r.method !== 'GET');
  assert.ok(writes().every((r) => r.auth === `Bearer ${d.api.token}`));
  await sleep(800);
  assert.equal(writes().length, 1);
});

test('a stale slice is replaced (generation + 1), a deleted one recreated', async (t) => {
  const stale = { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceSlice',
    metadata: { name: `${NODE}.${DRIVER}`, resourceVersion: '7', uid: 'u' },
    spec: { driver: DRIVER, nodeName: NODE, pool: { name: NODE, generation: 4, resourceSliceCount: 1 }, devices: [] } };
  const d = await setup(t, 'dra-slice', ['--slice-check', '1s'], { preSlice: stale });
  const s = await until(() => { const x = d.api.slices.get(`${NODE}.${DRIVER}`); return x.spec.devices.length === 2 && x; }, 10000, 'the update');
  assert.equal(s.spec.pool.generation, 5);
  assert.ok(d.api.requests.some((r) => r.method === 'PUT'));
  d.api.slices.clear();
  const again = await until(() => d.api.slices.get(`${NODE}.${DRIVER}`), 10000, 'the slice recreated');
  assert.equal(again.spec.pool.generation, 1);
  assert.deepEqual(d.api.rejected, []);
});

test('NodePrepareResources: consumed capacity becomes an exact group and a CDI spec', async (t) => {
  const d = await setup(t, 'dra-prep');
  const [a] = d.gpus;
  d.api.setClaim(claim('train', UID(1), [result(a.uuid, { memory: '3Gi', cores: '25' })], { pods: [{ name: 'p1', uid: POD(1) }] }));
  const c = d.client();
  const r = await c.prepare([{ namespace: 'team-a', uid: UID(1), name: 'train' }]);
  assert.deepEqual(r.claims[UID(1)], { devices: [{ request_names: ['gpu'], pool_name: NODE, device_name: devName(a.uuid),
    cdi_device_ids: [`cuslice.io/claim=${UID(1)}`] }], error: '' });
  const g = await d.w.group(`k8s-claim-${UID(1)}`);
  assert.deepEqual(g.policy.memory_limit, { [a.uuid]: 3 * GiB, default: 0 });
  assert.deepEqual(g.policy.core_limit, { [a.uuid]: 25 });
  assert.deepEqual(g.policy.members.pods, [POD(1)]);
  assert.equal(g.policy.daemon_required, true);
  assert.deepEqual(g.policy.labels, { 'k8s.namespace': 'team-a', 'k8s.claim': 'train', 'k8s.claim-uid': UID(1), 'k8s.pod': 'p1' });
  // The CDI spec: valid, and what a container of the group needs.
  const file = d.w.path('cdi', `cuslice.io-claim_${UID(1)}.json`);
  const spec = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.deepEqual(schema.checkCdiSpec(spec), []);
  assert.equal(fs.statSync(file).mode & 0o777, 0o644);
  assert.deepEqual(spec, { cdiVersion: '0.5.0', kind: 'cuslice.io/claim', devices: [{ name: UID(1), containerEdits: {
    env: [`CUSLICE_GROUP=k8s-claim-${UID(1)}`, `CUSLICE_SOCKET=${d.w.socket}`, 'CUSLICE_DAEMON=required',
      `CUDA_VISIBLE_DEVICES=${a.uuid}`, `CUSLICE_SHM_DIR=${d.w.env.CUSLICE_SHM_DIR}`, `NVIDIA_VISIBLE_DEVICES=${a.uuid}`],
    mounts: [
      { hostPath: '/opt/test/libcuslice.so', containerPath: '/opt/cuslice/lib/libcuslice.so', options: ['ro', 'nosuid', 'nodev', 'bind'] },
      { hostPath: path.dirname(d.w.socket), containerPath: path.dirname(d.w.socket), options: ['ro', 'nosuid', 'nodev', 'bind'] },
      { hostPath: d.w.path('plugin', 'ld.so.preload'), containerPath: '/etc/ld.so.preload', options: ['ro', 'nosuid', 'nodev', 'bind'] },
      { hostPath: d.w.env.CUSLICE_SHM_DIR, containerPath: d.w.env.CUSLICE_SHM_DIR, options: ['rw', 'nosuid', 'nodev', 'bind'] },
    ] } }] });
  assert.equal(fs.readFileSync(d.w.path('plugin', 'ld.so.preload'), 'utf8'), '/opt/cuslice/lib/libcuslice.so\n');
  // Of cusliced's, the claim's containers get the registration socket's directory alone.
  assert.ok(!spec.devices[0].containerEdits.mounts.some((m) => m.hostPath.startsWith(path.dirname(d.w.admin))));
});

test('NodePrepareResources: refused while the directory containers would get holds more than the registration socket', async (t) => {
  const d = await setup(t, 'dra-dir');
  const [a] = d.gpus;
  d.api.setClaim(claim('train', UID(1), [result(a.uuid, { memory: '1Gi' })], { pods: [{ name: 'p1', uid: POD(1) }] }));
  const c = d.client();
  fs.writeFileSync(path.join(path.dirname(d.w.socket), 'notes'), 'x');
  let r = await c.prepare([{ namespace: 'team-a', uid: UID(1), name: 'train' }]);
  assert.match(r.claims[UID(1)].error, /claim team-a\/train: .* holds notes too: it must hold that socket alone/);
  assert.equal(await d.w.group(`k8s-claim-${UID(1)}`), null);
  assert.equal(fs.existsSync(d.w.path('cdi', `cuslice.io-claim_${UID(1)}.json`)), false);
  fs.unlinkSync(path.join(path.dirname(d.w.socket), 'notes'));
  r = await c.prepare([{ namespace: 'team-a', uid: UID(1), name: 'train' }]);
  assert.equal(r.claims[UID(1)].error, '');
});

test('prepare is idempotent, survives restarts; unprepare releases the group and is idempotent', async (t) => {
  const d = await setup(t, 'dra-idem');
  const [a, b] = d.gpus;
  d.api.setClaim(claim('x', UID(2), [result(b.uuid, { memory: '5Gi', cores: '0' })], { pods: [{ name: 'p2', uid: POD(2) }] }));
  let c = d.client();
  const req = [{ namespace: 'team-a', uid: UID(2), name: 'x' }];
  const first = await c.prepare(req);
  const claimGets = () => d.api.requests.filter((r) => r.url.endsWith('/resourceclaims/x')).length;
  assert.equal(claimGets(), 1);
  assert.deepEqual(await c.prepare(req), first);
  assert.equal(claimGets(), 1); // the second answer came from the checkpoint
  const cp = JSON.parse(fs.readFileSync(d.w.path('plugin', 'checkpoint.json'), 'utf8'));
  assert.deepEqual(Object.keys(cp.claims), [UID(2)]);
  // The driver restarts; the kubelet asks again: the same answer, still no API call.
  await d.stop();
  await d.start();
  c = d.client();
  assert.deepEqual(await c.prepare(req), first);
  assert.equal(claimGets(), 1);
  // No cap on time: core_limit null.
  assert.equal((await d.w.group(`k8s-claim-${UID(2)}`)).policy.core_limit, null);
  // Unprepare after the restart: group gone, CDI spec gone, checkpoint empty.
  assert.deepEqual(await c.unprepare(req), { claims: { [UID(2)]: { error: '' } } });
  assert.ok(released(await d.w.group(`k8s-claim-${UID(2)}`)));
  assert.equal(fs.existsSync(d.w.path('cdi', `cuslice.io-claim_${UID(2)}.json`)), false);
  assert.deepEqual(JSON.parse(fs.readFileSync(d.w.path('plugin', 'checkpoint.json'), 'utf8')).claims, {});
  // Again, and for a claim never prepared here: fine.
  assert.deepEqual(await c.unprepare(req), { claims: { [UID(2)]: { error: '' } } });
  assert.deepEqual(await c.unprepare([{ namespace: 'team-a', uid: UID(99), name: 'never' }]), { claims: { [UID(99)]: { error: '' } } });
  // Even without the checkpoint (lost with the node's disk), unprepare finds the group by UID.
  d.api.setClaim(claim('y', UID(3), [result(a.uuid, { memory: '1Gi' })], { pods: [{ name: 'p3', uid: POD(3) }] }));
  await c.prepare([{ namespace: 'team-a', uid: UID(3), name: 'y' }]);
  await d.stop();
  fs.rmSync(d.w.path('plugin', 'checkpoint.json'));
  await d.start();
  c = d.client();
  await c.unprepare([{ namespace: 'team-a', uid: UID(3), name: 'y' }]);
  assert.ok(released(await d.w.group(`k8s-claim-${UID(3)}`)));
  assert.equal(fs.existsSync(d.w.path('cdi', `cuslice.io-claim_${UID(3)}.json`)), false);
});

test('several claims at once; each fails on its own, with a message naming it', async (t) => {
  const d = await setup(t, 'dra-errors');
  const [a, b] = d.gpus;
  const pods = [{ name: 'p', uid: POD(9) }];
  d.api.setClaim(claim('ok', UID(10), [result(a.uuid, { memory: '2Gi', cores: '10' }), result(a.uuid, { memory: '1Gi', cores: '5' }, 'extra')], { pods }));
  d.api.setClaim(claim('whole', UID(11), [result(b.uuid, null)], { pods }));
  d.api.setClaim(claim('mismatch', UID(99), [result(a.uuid, { memory: '1Gi' })], { pods }));
  d.api.setClaim(claim('unallocated', UID(13), undefined, { pods }));
  d.api.setClaim(claim('elsewhere', UID(14), [{ ...result(a.uuid, { memory: '1Gi' }), pool: 'node-2' }], { pods }));
  d.api.setClaim(claim('nogpu', UID(15), [{ ...result(a.uuid, { memory: '1Gi' }), device: 'gpu-ffffffff' }], { pods }));
  d.api.setClaim(claim('badcfg', UID(16), [result(a.uuid, { memory: '1Gi' })], { pods,
    config: [{ source: 'FromClaim', requests: [], opaque: { driver: DRIVER, parameters: { apiVersion: 'gpu.cuslice.io/v1alpha1', kind: 'GpuConfig', preload: 'no' } } }] }));
  d.api.setClaim(claim('badqty', UID(17), [result(a.uuid, { memory: 'lots' })], { pods }));
  const c = d.client();
  const ids = [['ok', 10], ['whole', 11], ['mismatch', 12], ['unallocated', 13], ['elsewhere', 14], ['nogpu', 15],
    ['badcfg', 16], ['badqty', 17], ['missing', 18]];
  const r = await c.prepare(ids.map(([n, i]) => ({ namespace: 'team-a', uid: UID(i), name: n })));
  const err = (i) => r.claims[UID(i)].error;
  assert.equal(err(10), '');
  assert.equal(r.claims[UID(10)].devices.length, 2);
  assert.deepEqual(r.claims[UID(10)].devices.map((x) => x.request_names), [['gpu'], ['extra']]);
  // Two shares of one GPU in one claim: one group, their sum.
  const g = await d.w.group(`k8s-claim-${UID(10)}`);
  assert.deepEqual(g.policy.memory_limit, { [a.uuid]: 3 * GiB, default: 0 });
  assert.deepEqual(g.policy.core_limit, { [a.uuid]: 15 });
  // Allocated whole (no consumed capacity): all of the GPU's memory, no cap.
  assert.equal(err(11), '');
  assert.deepEqual((await d.w.group(`k8s-claim-${UID(11)}`)).policy.memory_limit, { [b.uuid]: 40 * GiB, default: 0 });
  assert.match(err(12), new RegExp(`claim team-a/mismatch: its uid is ${UID(99)}, the kubelet asked for ${UID(12)}`));
  assert.match(err(13), /claim team-a\/unallocated is not allocated/);
  assert.match(err(14), /claim team-a\/elsewhere has no device of gpu\.cuslice\.io on node node-1/);
  assert.match(err(15), /claim team-a\/nogpu: device gpu-ffffffff is not a GPU of this node/);
  assert.match(err(16), /claim team-a\/badcfg: opaque parameters: field "preload": expected \{"apiVersion": "gpu\.cuslice\.io\/v1alpha1", "kind": "GpuConfig", "preload": true\|false, "mode": "hard"\|"burst", "priority": "high"\|"normal"\|"best-effort" \(in a DeviceClass only\), "oversubscribe": "100%" to "1000%" \(in a DeviceClass only\)\}/);
  assert.match(err(17), /claim team-a\/badqty: consumedCapacity\.memory "lots" is not a quantity/);
  assert.match(err(18), /claim team-a\/missing: reading it: 404: resourceclaims\.resource\.k8s\.io "missing" not found/);
  // Failed claims leave nothing behind.
  for (const i of [12, 13, 14, 15, 16, 17, 18]) {
    assert.equal(await d.w.group(`k8s-claim-${UID(i)}`), null);
    assert.equal(fs.existsSync(d.w.path('cdi', `cuslice.io-claim_${UID(i)}.json`)), false);
  }
});

test('opaque configuration: no ld.so.preload, burst mode, the class\'s priority', async (t) => {
  const d = await setup(t, 'dra-config', ['--gpu-injection', 'cdi']);
  const [a] = d.gpus;
  d.api.setClaim(claim('cfg', UID(20), [result(a.uuid, { memory: '1Gi', cores: '50' })], { pods: [{ name: 'p', uid: POD(20) }],
    config: [{ source: 'FromClass', requests: [], opaque: { driver: 'other.example.com', parameters: { anything: 1 } } },
      { source: 'FromClass', requests: [], opaque: { driver: DRIVER, parameters: { apiVersion: 'gpu.cuslice.io/v1alpha1', kind: 'GpuConfig', priority: 'high' } } },
      { source: 'FromClaim', requests: [], opaque: { driver: DRIVER, parameters: { apiVersion: 'gpu.cuslice.io/v1alpha1', kind: 'GpuConfig', preload: false, mode: 'burst' } } }] }));
  const r = await d.client().prepare([{ namespace: 'team-a', uid: UID(20), name: 'cfg' }]);
  assert.deepEqual(r.claims[UID(20)].devices[0].cdi_device_ids, [`cuslice.io/claim=${UID(20)}`, `nvidia.com/gpu=${a.uuid}`]);
  const spec = JSON.parse(fs.readFileSync(d.w.path('cdi', `cuslice.io-claim_${UID(20)}.json`), 'utf8'));
  assert.deepEqual(schema.checkCdiSpec(spec), []);
  const edits = spec.devices[0].containerEdits;
  assert.ok(!edits.mounts.some((m) => m.containerPath === '/etc/ld.so.preload'));
  assert.ok(!edits.env.some((e) => e.startsWith('NVIDIA_VISIBLE_DEVICES=')));
  assert.equal((await d.w.group(`k8s-claim-${UID(20)}`)).policy.mode, 'burst');
  // The class's priority (an administrator's) is the group's.
  assert.equal((await d.w.group(`k8s-claim-${UID(20)}`)).policy.priority, 'high');
});

test('a class that oversubscribes: 150% of the consumed memory as unified memory, the consumed memory as the device limit', async (t) => {
  const d = await setup(t, 'dra-oversub');
  const [a] = d.gpus;
  const cfg = (source) => [{ source, requests: [], opaque: { driver: DRIVER, parameters: { apiVersion: 'gpu.cuslice.io/v1alpha1', kind: 'GpuConfig', oversubscribe: '150%' } } }];
  d.api.setClaim(claim('ov', UID(40), [result(a.uuid, { memory: '2Gi' })], { pods: [{ name: 'p', uid: POD(40) }], config: cfg('FromClass') }));
  d.api.setClaim(claim('ovself', UID(41), [result(a.uuid, { memory: '2Gi' })], { pods: [{ name: 'q', uid: POD(41) }], config: cfg('FromClaim') }));
  const r = await d.client().prepare([{ namespace: 'team-a', uid: UID(40), name: 'ov' }, { namespace: 'team-a', uid: UID(41), name: 'ovself' }]);
  assert.equal(r.claims[UID(40)].error, '');
  // The daemon took it: the stored policy is what applies.
  const g = await d.w.group(`k8s-claim-${UID(40)}`);
  assert.deepEqual(g.policy.memory_limit, { [a.uuid]: 3 * GiB, default: 0 });
  assert.equal(g.policy.memory_mode, 'oversubscribe');
  assert.equal(g.policy.oversubscribe_single, true);
  assert.deepEqual(g.policy.device_memory_limit, { [a.uuid]: 2 * GiB });
  // A claim cannot give itself more than the scheduler set aside.
  assert.match(r.claims[UID(41)].error, /claim team-a\/ovself: opaque parameters: "oversubscribe" is set by a DeviceClass \(an administrator\), not by a claim/);
  assert.equal(await d.w.group(`k8s-claim-${UID(41)}`), null);
});

test('a shared claim: pods added to its reservations join its group', async (t) => {
  const d = await setup(t, 'dra-shared');
  const [a] = d.gpus;
  const c1 = claim('shared', UID(30), [result(a.uuid, { memory: '4Gi' })], { pods: [{ name: 'p1', uid: POD(31) }], owner: false });
  d.api.setClaim(c1);
  await d.client().prepare([{ namespace: 'team-a', uid: UID(30), name: 'shared' }]);
  assert.deepEqual((await d.w.group(`k8s-claim-${UID(30)}`)).policy.members.pods, [POD(31)]);
  // The scheduler reserves it for a second pod; the kubelet does not call prepare again.
  c1.status.reservedFor.push({ resource: 'pods', name: 'p2', uid: POD(32) });
  const g = await until(async () => { const x = await d.w.group(`k8s-claim-${UID(30)}`); return x.policy.members.pods.length === 2 && x; },
    5000, 'the second pod in the group');
  assert.deepEqual(g.policy.members.pods, [POD(31), POD(32)]);
  assert.deepEqual(g.policy.memory_limit, { [a.uuid]: 4 * GiB, default: 0 }); // limits untouched
  assert.equal(g.policy.labels['k8s.pod'], undefined); // two pods: no single pod label
  const cp = JSON.parse(fs.readFileSync(d.w.path('plugin', 'checkpoint.json'), 'utf8'));
  assert.deepEqual(cp.claims[UID(30)].pods, [POD(31), POD(32)]);
  assert.equal(cp.claims[UID(30)].shared, true);
});

test('bad options are refused with a line naming them (exit status 2)', () => {
  const { spawnSync } = require('node:child_process');
  const env = { ...process.env };
  delete env.NODE_NAME;
  const run = (...args) => spawnSync(need('CS_DRA_DRIVER'), args, { encoding: 'utf8', env });
  const cases = [
    [[], /no node name: set --node-name or \$NODE_NAME/],
    [['--node-name', 'n', '--driver-name', 'GPU.example'], /--driver-name "GPU\.example": expected a lowercase DNS subdomain/],
    [['--node-name', 'n', '--memory-step', '1'], /--memory-step "1": expected a size from 1MiB to 64GiB/],
    [['--node-name', 'n', '--cores-default', '101'], /--cores-default "101": expected a whole percentage from 0 to 100/],
    [['--node-name', 'n', '--claim-refresh', '2h'], /--claim-refresh "2h": expected a duration/],
    [['--node-name', 'n', '--cdi-dir', 'cdi'], /--cdi-dir "cdi": expected an absolute path/],
  ];
  for (const [args, re] of cases) {
    const r = run(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
  }
});
