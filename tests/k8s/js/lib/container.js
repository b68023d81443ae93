// "Containers" for the end-to-end tests: processes placed in the cgroup a
// kubelet would give a pod's container (cgroupfs layout,
// /kubepods/besteffort/pod<UID>/<container> in the cgroup2 hierarchy), with
// the environment a CDI spec or an Allocate reply gives them, running
// quota-client under libcuslice. No container runtime here: LD_PRELOAD
// stands in for the /etc/ld.so.preload mount, and the processes see the
// host's paths (which the plugins' mounts keep identical anyway).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { need, until } = require('./world');

// The cgroup2 mount point, when this process may create cgroups in it; else null.
function cgroup2Root() {
  let root = null;
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = line.split(' ');
    const sep = f.indexOf('-');
    if (sep > 0 && f[sep + 1] === 'cgroup2') { root = f[4]; break; }
  }
  if (!root) return null;
  try {
    const probe = path.join(root, `cs-k8s-probe-${process.pid}`);
    fs.mkdirSync(probe);
    fs.rmdirSync(probe);
    return root;
  } catch (e) {
    return null;
  }
}

// A pod's cgroups; remove() takes them away once their processes are gone.
class PodCgroups {
  constructor(root, uid) {
    this.root = root;
    this.dir = path.join(root, 'kubepods', 'besteffort', `pod${uid}`);
    this.made = [];
  }

  container(name) {
    const d = path.join(this.dir, name);
    for (const p of [path.join(this.root, 'kubepods'), path.dirname(this.dir), this.dir, d]) {
      if (!fs.existsSync(p)) {
        fs.mkdirSync(p);
        this.made.push(p);
      }
    }
    return d;
  }

  // Its cgroups, and the shared parents once empty (rmdir fails while anything is left in them).
  remove() {
    const dirs = [...this.made.reverse(), this.dir, path.dirname(this.dir), path.join(this.root, 'kubepods')];
    for (const p of dirs) {
      try { fs.rmdirSync(p); } catch (e) { /* gone already, or still used by another pod */ }
    }
  }
}

// env: a CDI spec's containerEdits.env ("K=V" lines) or an Allocate reply's envs object.
function envOf(edits) {
  if (Array.isArray(edits)) return Object.fromEntries(edits.map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  return { ...edits };
}

// quota-client serve in cgroup cg with the world's and the container's environment.
class Client {
  constructor(world, cg, env, name) {
    this.name = name;
    const log = fs.openSync(world.path(`${name}.log`), 'a');
    // The shell joins the cgroup, then becomes the client: every process of it starts there.
    this.proc = spawn('/bin/sh', ['-c', 'echo $$ > "$1/cgroup.procs" && exec "$2" serve', 'sh', cg, need('CS_QUOTA_CLIENT')], {
      env: { ...world.env, ...env, LD_PRELOAD: need('CS_PRELOAD') },
      stdio: ['pipe', 'pipe', log],
    });
    fs.closeSync(log);
    world.procs.push(this.proc);
    this.proc.exited = new Promise((r) => this.proc.on('exit', (code, sig) => r({ code, sig })));
    this.lines = [];
    this.waiters = [];
    readline.createInterface({ input: this.proc.stdout }).on('line', (l) => {
      const w = this.waiters.shift();
      if (w) w(l); else this.lines.push(l);
    });
  }

  next(timeoutMs = 20000) {
    if (this.lines.length) return Promise.resolve(this.lines.shift());
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.name}: no line in ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push((l) => { clearTimeout(t); resolve(l); });
    });
  }

  async ready() {
    const l = await this.next();
    const m = l.match(/^ready pid=(\d+) outer=(\d+)/);
    if (!m) throw new Error(`${this.name}: expected ready, got "${l}"`);
    this.pid = Number(m[2]);
    return this;
  }

  // One command; its reply as {rc, ...key=value}.
  async cmd(line) {
    this.proc.stdin.write(`${line}\n`);
    const reply = await this.next();
    const out = {};
    for (const kv of reply.split(' ')) {
      const [k, v] = kv.split('=');
      out[k] = Number.isNaN(Number(v)) ? v : Number(v);
    }
    return out;
  }

  async quit() {
    this.proc.stdin.end('quit\n');
    return this.proc.exited;
  }
}

module.exports = { cgroup2Root, PodCgroups, Client, envOf, until };
