// A private world for one test: a temporary directory holding a cusim
// instance (its GPUs set by the test), the real cusliced on its own socket,
// and the processes the test starts. Everything is killed and removed at the
// end (world.close()).
//
// The meson test environment names the built programs: CS_CUSLICED,
// CS_DEVICE_PLUGIN, CS_DRA_DRIVER, CS_PRELOAD (libcuslice.so),
// CS_QUOTA_CLIENT, CS_PROTO_DIR; LD_LIBRARY_PATH reaches cusim.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawn } = require('node:child_process');

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this test through meson (meson test -C build)`);
  return v;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn until it returns a truthy value (returned) or timeoutMs passes (throws what).
async function until(fn, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` +
        (last instanceof Error ? `: ${last.message}` : ''));
    }
    await sleep(50);
  }
}

// One HTTP request over a Unix socket: {status, body (parsed JSON or text)}.
function unixHttp(socketPath, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
    const req = http.request({ socketPath, method, path: urlPath,
      headers: data ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {} },
    (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        let parsed = text;
        try { parsed = text ? JSON.parse(text) : null; } catch (e) { /* not JSON */ }
        resolve({ status: res.statusCode, body: parsed });
      });
    });
    req.on('error', reject);
    req.setTimeout(10000, () => req.destroy(new Error(`${method} ${urlPath}: timeout`)));
    if (data) req.write(data);
    req.end();
  });
}

class World {
  // gpus: cusim's CUSIM_GPUS, e.g. "H100:16GiB,A100:40GiB"; ctx: bytes per context.
  constructor(tag, { gpus = 'H100:16GiB', ctx = 64 * 1024 * 1024 } = {}) {
    this.dir = fs.mkdtempSync(path.join('/dev/shm', `cs-k8s-${tag}-`));
    fs.chmodSync(this.dir, 0o755);
    this.procs = [];
    this.cleanups = []; // run by close() once every process is gone
    this.env = {
      ...process.env,
      CUSIM_INSTANCE: `k8s-${tag}-${process.pid}`,
      CUSIM_SHM_DIR: this.dir,
      CUSIM_GPUS: gpus,
      CUSIM_CTX_MEM: String(ctx),
      CUSLICE_CTX_MEM: String(ctx),
      CUSLICE_SHM_DIR: path.join(this.dir, 'regions'),
    };
    for (const k of ['CUSLICE_GROUP', 'CUSLICE_MEM_LIMIT', 'CUSLICE_CORE_LIMIT', 'LD_PRELOAD',
      'CUDA_VISIBLE_DEVICES', 'CUSIM_FAULTS', 'CUSLICE_SOCKET', 'CUSLICE_DAEMON']) delete this.env[k];
    fs.mkdirSync(this.env.CUSLICE_SHM_DIR);
    // The daemon's registration socket in a directory of its own (what
    // containers get), its admin socket beside that directory.
    this.socket = path.join(this.dir, 'cuslice', 'tenant', 'cusliced.sock');
    this.admin = path.join(this.dir, 'cuslice', 'admin', 'cusliced.sock');
    this.ctx = ctx;
  }

  // The plugins' options about cusliced: the admin socket for their calls,
  // the registration socket for containers (the same path in them: the
  // processes here see the host's paths).
  pluginSockets() {
    return ['--cusliced', this.admin, '--registration-socket', this.socket,
      '--container-socket', this.socket];
  }

  path(...p) { return path.join(this.dir, ...p); }

  // Starts a program; its output goes to DIR/<name>.log. Returns the child.
  start(name, argv, { env = {}, stdio } = {}) {
    const log = fs.openSync(this.path(`${name}.log`), 'a');
    const child = spawn(argv[0], argv.slice(1), {
      env: { ...this.env, ...env },
      stdio: stdio || ['ignore', log, log],
    });
    fs.closeSync(log);
    child.name = name;
    child.exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
    this.procs.push(child);
    return child;
  }

  log(name) {
    try { return fs.readFileSync(this.path(`${name}.log`), 'utf8'); } catch (e) { return ''; }
  }

  async startDaemon() {
    this.daemon = this.start('cusliced', [need('CS_CUSLICED'), '--socket', this.socket,
      '--admin-socket', this.admin, '--state-dir', this.path('state'), '--shm-dir', this.env.CUSLICE_SHM_DIR,
      '--metrics-listen', 'none', '--log-level', 'debug']);
    await until(async () => (await this.cusliced('GET', '/v1/status')).status === 200, 20000,
      'cusliced to answer');
    return this.daemon;
  }

  async stopDaemon() {
    if (!this.daemon) return;
    this.daemon.kill('SIGTERM');
    await this.daemon.exited;
    this.daemon = null;
  }

  // The administrator's API (admin socket), and what a tenant may ask (registration socket).
  cusliced(method, urlPath, body) { return unixHttp(this.admin, method, urlPath, body); }

  tenant(method, urlPath, body) { return unixHttp(this.socket, method, urlPath, body); }

  async group(name) {
    const r = await this.cusliced('GET', `/v1/groups/${name}`);
    return r.status === 200 ? r.body : null;
  }

  async stop(child, sig = 'SIGTERM') {
    if (child.exitCode !== null || child.signalCode !== null) return child.exited;
    child.kill(sig);
    return child.exited;
  }

  // Stops every process (SIGTERM, then SIGKILL after 5 s), so that the
  // sanitizers of the built programs report at exit; throws when a log holds
  // a sanitizer report. Removes the directory unless CS_K8S_KEEP is set.
  async close() {
    for (const p of this.procs.reverse()) {
      if (p.exitCode !== null || p.signalCode !== null) continue;
      p.kill('SIGTERM');
      const timer = setTimeout(() => p.kill('SIGKILL'), 5000);
      await p.exited;
      clearTimeout(timer);
    }
    for (const f of this.cleanups.reverse()) f();
    const reports = fs.readdirSync(this.dir).filter((f) => f.endsWith('.log'))
      .filter((f) => /ERROR: (Address|Leak)Sanitizer|runtime error:/.test(this.log(f.slice(0, -4))));
    if (process.env.CS_K8S_KEEP || reports.length) console.log(`kept ${this.dir}`);
    else fs.rmSync(this.dir, { recursive: true, force: true });
    if (reports.length) throw new Error(`sanitizer reports in ${reports.map((f) => path.join(this.dir, f)).join(', ')}`);
  }
}

module.exports = { World, until, sleep, need, unixHttp };
