// A fake Kubernetes API server for the plugins' tests: HTTPS with a
// certificate signed by a CA the test makes (openssl), a bearer token
// checked on every request, and the few resources the plugins use:
//
//   GET    /api/v1/nodes/NAME
//   GET    /api/v1/namespaces/NS/pods/NAME
//   GET    /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME
//   GET    /apis/resource.k8s.io/v1/resourceslices[/NAME]
//   POST   /apis/resource.k8s.io/v1/resourceslices
//   PUT    /apis/resource.k8s.io/v1/resourceslices/NAME   (resourceVersion checked: 409)
//   DELETE /apis/resource.k8s.io/v1/resourceslices/NAME
//
// Slices are checked as the real server would before they are stored
// (lib/schema.js: the resource.k8s.io/v1 schema, no unknown fields, the
// API's validation rules); a bad one gets 422 and is recorded in
// `rejected`. Every request is recorded in `requests`.
'use strict';

const fs = require('node:fs');
const https = require('node:https');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { checkResourceSlice } = require('./schema');

// A CA and a server certificate for 127.0.0.1 in dir: {ca, key, cert} paths.
function makeCerts(dir) {
  const f = (n) => path.join(dir, n);
  const ossl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ossl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '2',
    '-subj', '/CN=cuslice-test-ca', '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  ossl('req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=kube-apiserver');
  fs.writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  ossl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'),
    '-CAcreateserial', '-out', f('server.crt'), '-days', '2', '-extfile', f('server.ext'));
  return { ca: f('ca.crt'), key: f('server.key'), cert: f('server.crt') };
}

function status(code, reason, message) {
  return { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, message, code };
}

class FakeApiServer {
  constructor(dir, token = 'test-token-0123456789') {
    this.dir = dir;
    fs.mkdirSync(dir, { recursive: true });
    this.certs = makeCerts(dir);
    this.token = token;
    this.tokenFile = path.join(dir, 'token');
    fs.writeFileSync(this.tokenFile, `${token}\n`);
    this.pods = new Map(); // "ns/name" -> pod
    this.claims = new Map(); // "ns/name" -> claim
    this.nodes = new Map(); // name -> node
    this.slices = new Map(); // name -> slice
    this.requests = [];
    this.rejected = [];
    this.version = 1;
    this.delayMs = 0;
  }

  async start() {
    this.server = https.createServer({ key: fs.readFileSync(this.certs.key), cert: fs.readFileSync(this.certs.cert) },
      (req, res) => this.handle(req, res));
    await new Promise((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `https://127.0.0.1:${this.server.address().port}`;
  }

  stop() { return new Promise((r) => this.server.close(r)); }

  // The plugins' flags that point them here.
  flags() { return ['--api-server', this.url, '--api-ca', this.certs.ca, '--api-token-file', this.tokenFile]; }

  setPod(pod) { this.pods.set(`${pod.metadata.namespace}/${pod.metadata.name}`, pod); }
  setClaim(claim) { this.claims.set(`${claim.metadata.namespace}/${claim.metadata.name}`, claim); }

  handle(req, res) {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const entry = { method: req.method, url: req.url, auth: req.headers.authorization || '', body };
      this.requests.push(entry);
      const reply = (code, obj) => setTimeout(() => {
        res.writeHead(code, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(obj));
      }, this.delayMs);
      if (entry.auth !== `Bearer ${this.token}`) {
        reply(401, status(401, 'Unauthorized', 'Unauthorized'));
        return;
      }
      try {
        this.route(req.method, req.url.split('?')[0], body, reply);
      } catch (e) {
        reply(500, status(500, 'InternalError', e.message));
      }
    });
  }

  route(method, url, body, reply) {
    let m = url.match(/^\/api\/v1\/nodes\/([^/]+)$/);
    if (m && method === 'GET') {
      const n = this.nodes.get(m[1]);
      reply(n ? 200 : 404, n || status(404, 'NotFound', `nodes "${m[1]}" not found`));
      return;
    }
    m = url.match(/^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/);
    if (m && method === 'GET') {
      const pod = this.pods.get(`${m[1]}/${m[2]}`);
      reply(pod ? 200 : 404, pod || status(404, 'NotFound', `pods "${m[2]}" not found`));
      return;
    }
    m = url.match(/^\/apis\/resource\.k8s\.io\/v1\/namespaces\/([^/]+)\/resourceclaims\/([^/]+)$/);
    if (m && method === 'GET') {
      const c = this.claims.get(`${m[1]}/${m[2]}`);
      reply(c ? 200 : 404, c || status(404, 'NotFound', `resourceclaims.resource.k8s.io "${m[2]}" not found`));
      return;
    }
    m = url.match(/^\/apis\/resource\.k8s\.io\/v1\/resourceslices(?:\/([^/]+))?$/);
    if (m) {
      this.sliceRoute(method, m[1], body, reply);
      return;
    }
    reply(404, status(404, 'NotFound', `the server could not find the requested resource: ${method} ${url}`));
  }

  sliceRoute(method, name, body, reply) {
    if (method === 'GET' && !name) {
      reply(200, { kind: 'ResourceSliceList', apiVersion: 'resource.k8s.io/v1',
        metadata: { resourceVersion: String(this.version) }, items: [...this.slices.values()] });
      return;
    }
    if (method === 'GET') {
      const s = this.slices.get(name);
      reply(s ? 200 : 404, s || status(404, 'NotFound', `resourceslices.resource.k8s.io "${name}" not found`));
      return;
    }
    if (method === 'DELETE') {
      const s = this.slices.get(name);
      this.slices.delete(name);
      reply(s ? 200 : 404, s || status(404, 'NotFound', `resourceslices.resource.k8s.io "${name}" not found`));
      return;
    }
    let obj;
    try {
      obj = JSON.parse(body);
    } catch (e) {
      reply(400, status(400, 'BadRequest', `not JSON: ${e.message}`));
      return;
    }
    const problems = checkResourceSlice(obj);
    if (problems.length) {
      this.rejected.push({ obj, problems });
      reply(422, status(422, 'Invalid', `ResourceSlice is invalid: ${problems.join('; ')}`));
      return;
    }
    const n = obj.metadata.name;
    const old = this.slices.get(n);
    if (method === 'POST') {
      if (old) {
        reply(409, status(409, 'AlreadyExists', `resourceslices.resource.k8s.io "${n}" already exists`));
        return;
      }
    } else if (method === 'PUT') {
      if (n !== name) {
        reply(400, status(400, 'BadRequest', 'the name of the object does not match the URL'));
        return;
      }
      if (!old) {
        reply(404, status(404, 'NotFound', `resourceslices.resource.k8s.io "${n}" not found`));
        return;
      }
      if (obj.metadata.resourceVersion !== old.metadata.resourceVersion) {
        reply(409, status(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again'));
        return;
      }
    } else {
      reply(405, status(405, 'MethodNotAllowed', method));
      return;
    }
    this.version++;
    obj.metadata.resourceVersion = String(this.version);
    obj.metadata.uid = old ? old.metadata.uid : `00000000-0000-4000-8000-${String(this.version).padStart(12, '0')}`;
    this.slices.set(n, obj);
    reply(method === 'POST' ? 201 : 200, obj);
  }
}

module.exports = { FakeApiServer, makeCerts };
