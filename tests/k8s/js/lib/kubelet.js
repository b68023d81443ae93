// A fake kubelet for the plugins' tests: the gRPC peers the real kubelet
// would be, on the plugins' real Unix sockets, speaking the protocol from
// src/k8s/proto (the same files the plugins are built from).
//
//   classic device-plugin registration: serves v1beta1.Registration on
//     DIR/kubelet.sock; on Register it dials the plugin back, asks its
//     options, opens ListAndWatch (read for ever), then answers;
//   the plugin registry: finds sockets in a plugins_registry directory,
//     asks GetInfo, dials the endpoint, reports NotifyRegistrationStatus;
//   PodResources: serves v1.PodResourcesLister/List with what the test says;
//   clients of the DevicePlugin and DRAPlugin services.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { need, until } = require('./world');

function load(file) {
  const def = protoLoader.loadSync(path.join(need('CS_PROTO_DIR'), file),
    { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
  return grpc.loadPackageDefinition(def);
}

const dp = load('deviceplugin.proto').v1beta1;
const reg = load('pluginregistration.proto').pluginregistration;
const dra = load('dra.proto').k8s.io.kubelet.pkg.apis.dra.v1;
const podres = load('podresources.proto').v1;

const addr = (p) => `unix://${p}`;

// A promise of one unary call with a deadline.
function call(client, method, req, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    client[method](req, { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

function serve(server, sock) {
  return new Promise((resolve, reject) => {
    server.bindAsync(addr(sock), grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
  });
}

// A device plugin as the kubelet holds it: its client, options and the device lists it streamed.
class PluginConn {
  constructor(sock, resource) {
    this.sock = sock;
    this.resource = resource;
    this.client = new dp.DevicePlugin(addr(sock), grpc.credentials.createInsecure());
    this.lists = []; // every ListAndWatchResponse, in order
    this.closed = false;
  }

  async open() {
    this.options = await call(this.client, 'GetDevicePluginOptions', {});
    this.stream = this.client.ListAndWatch({});
    this.stream.on('data', (m) => this.lists.push(m.devices));
    this.stream.on('error', () => { this.closed = true; });
    this.stream.on('end', () => { this.closed = true; });
    await until(() => this.lists.length > 0, 10000, `the first ListAndWatch of ${this.resource}`);
  }

  latest() { return this.lists[this.lists.length - 1]; }

  preferred(reqs) { return call(this.client, 'GetPreferredAllocation', { container_requests: reqs }); }
  allocate(containers) {
    return call(this.client, 'Allocate', { container_requests: containers.map((ids) => ({ devices_ids: ids })) });
  }
  preStart(ids) { return call(this.client, 'PreStartContainer', { devices_ids: ids }); }

  close() {
    if (this.stream) this.stream.cancel();
    this.client.close();
  }
}

class FakeKubelet {
  // dir: the device-plugins directory (kubelet.sock goes there).
  constructor(dir) {
    this.dir = dir;
    this.registrations = []; // RegisterRequests, in order
    this.plugins = new Map(); // resource name -> PluginConn (the latest)
    this.refuse = null; // a message to refuse Register with
  }

  // Serves Registration on DIR/kubelet.sock (as a freshly started kubelet).
  async start() {
    fs.mkdirSync(this.dir, { recursive: true });
    this.server = new grpc.Server();
    this.server.addService(dp.Registration.service, {
      Register: (c, cb) => this.onRegister(c.request).then(() => cb(null, {}), (e) => cb(e)),
    });
    await serve(this.server, path.join(this.dir, 'kubelet.sock'));
  }

  async onRegister(req) {
    this.registrations.push(req);
    if (this.refuse) {
      const e = new Error(this.refuse);
      e.code = grpc.status.INVALID_ARGUMENT;
      throw e;
    }
    if (req.version !== 'v1beta1') throw Object.assign(new Error(`version ${req.version}`), { code: 3 });
    // The real kubelet dials the plugin back before answering.
    const old = this.plugins.get(req.resource_name);
    if (old) old.close();
    const conn = new PluginConn(path.join(this.dir, req.endpoint), req.resource_name);
    this.plugins.set(req.resource_name, conn);
    await conn.open();
  }

  // The kubelet restarts: its server goes, the directory is wiped, kubelet.sock comes back.
  async restart() {
    await new Promise((r) => this.server.tryShutdown(r));
    for (const c of this.plugins.values()) c.close();
    this.plugins.clear();
    for (const f of fs.readdirSync(this.dir)) fs.rmSync(path.join(this.dir, f), { force: true, recursive: true });
    await this.start();
  }

  async stop() {
    for (const c of this.plugins.values()) c.close();
    if (this.server) await new Promise((r) => this.server.tryShutdown(r));
  }
}

// The plugin watcher's side of the plugin registry: one registration socket.
async function registryHandshake(sock, { accept = true, error = '' } = {}) {
  const client = new reg.Registration(addr(sock), grpc.credentials.createInsecure());
  try {
    const info = await call(client, 'GetInfo', {});
    await call(client, 'NotifyRegistrationStatus', { plugin_registered: accept, error });
    return info;
  } finally {
    client.close();
  }
}

// PodResources: List answers what pods() returns at the time of the call.
async function servePodResources(sock, pods) {
  const server = new grpc.Server();
  let calls = 0;
  server.addService(podres.PodResourcesLister.service, {
    List: (c, cb) => { calls++; cb(null, { pod_resources: pods() }); },
  });
  await serve(server, sock);
  return { server, calls: () => calls, stop: () => new Promise((r) => server.tryShutdown(r)) };
}

function draClient(sock) {
  const client = new dra.DRAPlugin(addr(sock), grpc.credentials.createInsecure());
  return {
    prepare: (claims) => call(client, 'NodePrepareResources', { claims }, 45000),
    unprepare: (claims) => call(client, 'NodeUnprepareResources', { claims }, 45000),
    close: () => client.close(),
  };
}

module.exports = { FakeKubelet, PluginConn, registryHandshake, servePodResources, draClient, grpc };
