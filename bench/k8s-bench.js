// Latency of the Kubernetes plugins' kubelet calls on a node filling up to
// 100 slices (make bench: the `k8s` benchmark). The real plugins, cusliced
// and cusim; the fake kubelet and API server of tests/k8s/js (gRPC on Unix
// sockets, HTTPS on loopback). Each call is timed from the kubelet's side,
// one at a time, as the kubelet makes them (one pod's container or claims
// per call):
//
//   device plugin  Allocate (1 share of 4 GPUs x 25) and PreStartContainer,
//                  100 containers;
//   DRA driver     NodePrepareResources (one claim of 512 MiB and 1 % per
//                  call) for 100 claims, then NodeUnprepareResources.
//
// Prints p50/p90/p99/max per call kind, in milliseconds. Target: p99 < 50 ms.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const lib = path.join(__dirname, '..', 'tests', 'k8s', 'js', 'lib');
const { World, until, need } = require(path.join(lib, 'world'));
const { FakeKubelet, servePodResources, draClient } = require(path.join(lib, 'kubelet'));
const { FakeApiServer } = require(path.join(lib, 'apiserver'));

const N = 100;
const GPUS = 'H100:80GiB,H100:80GiB,H100:80GiB,H100:80GiB';

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
  return { n: s.length, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: s[s.length - 1] };
}

async function timed(fn) {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function devicePlugin(rows) {
  const w = new World('bench-dp', { gpus: GPUS });
  try {
    await w.startDaemon();
    const api = new FakeApiServer(w.path('api'));
    await api.start();
    const k = new FakeKubelet(w.path('device-plugins'));
    await k.start();
    fs.mkdirSync(w.path('pod-resources'));
    const pods = [];
    const pr = await servePodResources(w.path('pod-resources', 'kubelet.sock'), () => pods);
    w.start('plugin', [need('CS_DEVICE_PLUGIN'), '--kubelet-dir', k.dir, ...w.pluginSockets(),
      '--state-dir', w.path('state'), '--pod-resources', w.path('pod-resources', 'kubelet.sock'),
      '--node-name', 'node-1', '--resources', 'gpu', '--shares', '25', '--log-level', 'warn', ...api.flags()]);
    const gpu = await until(() => { const c = k.plugins.get('cuslice.io/gpu'); return c && c.lists.length && c; }, 20000, 'registration');
    const ids = gpu.latest().map((d) => d.ID);
    const alloc = [], pre = [];
    for (let i = 0; i < N; i++) {
      const dev = [ids[i]];
      alloc.push(await timed(() => gpu.allocate([dev])));
      const uid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      pods.push({ name: `p${i}`, namespace: 'bench', containers: [{ name: 'c', devices: [{ resource_name: 'cuslice.io/gpu', device_ids: dev }] }] });
      api.setPod({ metadata: { name: `p${i}`, namespace: 'bench', uid }, spec: { nodeName: 'node-1', containers: [{ name: 'c' }] } });
      pre.push(await timed(() => gpu.preStart(dev)));
    }
    rows.push(['device plugin: Allocate', stats(alloc)]);
    rows.push(['device plugin: PreStartContainer', stats(pre)]);
    gpu.close();
    await k.stop();
    await pr.stop();
    await api.stop();
  } finally {
    await w.close();
  }
}

async function dra(rows) {
  const w = new World('bench-dra', { gpus: GPUS });
  try {
    await w.startDaemon();
    const gpus = (await w.cusliced('GET', '/v1/gpus')).body.gpus;
    const api = new FakeApiServer(w.path('api'));
    api.nodes.set('node-1', { metadata: { name: 'node-1', uid: 'node-uid' } });
    await api.start();
    w.start('driver', [need('CS_DRA_DRIVER'), '--node-name', 'node-1', ...w.pluginSockets(),
      '--plugin-dir', w.path('plugin'), '--registry-dir', w.path('plugin'), '--cdi-dir', w.path('cdi'),
      '--log-level', 'warn', ...api.flags()]);
    await until(() => fs.existsSync(w.path('plugin', 'dra.sock')), 20000, 'the driver');
    const c = draClient(w.path('plugin', 'dra.sock'));
    const claims = [];
    for (let i = 0; i < N; i++) {
      const g = gpus[i % gpus.length];
      const uid = `c1a10000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      const pod = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      api.setClaim({ metadata: { name: `c${i}`, namespace: 'bench', uid,
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: `p${i}`, uid: pod, controller: true }] },
      status: { allocation: { devices: { results: [{ request: 'gpu', driver: 'gpu.cuslice.io', pool: 'node-1',
        device: `gpu-${g.uuid.replace(/^GPU-/i, '').toLowerCase()}`, consumedCapacity: { memory: '512Mi', cores: '1' } }] } },
      reservedFor: [{ resource: 'pods', name: `p${i}`, uid: pod }] } });
      claims.push({ namespace: 'bench', uid, name: `c${i}` });
    }
    const prep = [], unprep = [];
    for (const cl of claims) {
      let r;
      prep.push(await timed(async () => { r = await c.prepare([cl]); }));
      if (r.claims[cl.uid].error) throw new Error(r.claims[cl.uid].error);
    }
    const groups = (await w.cusliced('GET', '/v1/groups')).body.groups.filter((g) => g.managed).length;
    for (const cl of claims) unprep.push(await timed(() => c.unprepare([cl])));
    rows.push([`DRA: NodePrepareResources (${groups} groups at the end)`, stats(prep)]);
    rows.push(['DRA: NodeUnprepareResources', stats(unprep)]);
    c.close();
    await api.stop();
  } finally {
    await w.close();
  }
}

(async () => {
  const rows = [];
  await devicePlugin(rows);
  await dra(rows);
  const cpus = os.cpus();
  console.log(`# ${N} slices on a node of 4 GPUs; ${cpus.length} CPUs (${cpus[0].model}); load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log(`# plugins: ${need('CS_DEVICE_PLUGIN')}`);
  console.log('| call | n | p50 ms | p90 ms | p99 ms | max ms |');
  console.log('|---|---:|---:|---:|---:|---:|');
  let worst = 0;
  for (const [name, s] of rows) {
    console.log(`| ${name} | ${s.n} | ${s.p50.toFixed(2)} | ${s.p90.toFixed(2)} | ${s.p99.toFixed(2)} | ${s.max.toFixed(2)} |`);
    worst = Math.max(worst, s.p99);
  }
  console.log(`worst p99: ${worst.toFixed(2)} ms (target < 50 ms): ${worst < 50 ? 'met' : 'MISSED'}`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
