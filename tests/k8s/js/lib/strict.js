// Kubernetes objects checked two ways: kubernetes-models' validator (the
// OpenAPI schema of the API: types, required fields, enums), and strict
// fields — every key must be a field of its type, as the API server's
// strict field validation (kubectl --validate=strict) would insist. The
// OpenAPI schema allows unknown fields, so the field lists are read from
// kubernetes-models' type declarations (generated from the same OpenAPI).
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const MODELS = path.join(__dirname, '..', 'node_modules');

// The kubernetes-models module of an apiVersion and kind.
function modulePath(apiVersion, kind) {
  return `kubernetes-models/${apiVersion.includes('/') ? apiVersion : apiVersion}/${kind}`;
}

const cache = new Map(); // .d.ts file -> {imports: name -> file, props: {prop -> type}}

function parse(file) {
  if (cache.has(file)) return cache.get(file);
  const text = fs.readFileSync(file, 'utf8');
  const imports = {};
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    const p = m[2].startsWith('.') ? path.resolve(path.dirname(file), m[2].replace(/\.js$/, '')) : path.join(MODELS, m[2]);
    imports[m[1]] = `${p}.d.ts`;
  }
  // The first interface is the type itself; later ones are the class's mirror.
  const body = text.match(/export interface \w+(?: extends [\w, ]+)? \{([\s\S]*?)\n\}/);
  const props = {};
  if (body) {
    const lines = body[1].replace(/\/\*\*[\s\S]*?\*\//g, '').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const m = lines[i].match(/^\s{4}"([^"]+)"\??: (.*)$/);
      if (!m) continue;
      let type = m[1] && m[2];
      // A map spans lines: { [key: string]: T; }
      if (type === '{') {
        const v = lines[i + 1].match(/\[key: string\]: (.*);/);
        type = `map:${v ? v[1] : 'any'}`;
        i += 2;
      }
      props[m[1]] = type.replace(/;$/, '');
    }
  }
  // No declared fields (RawExtension, free-form JSON): anything goes.
  const r = { imports, props, open: !body || Object.keys(props).length === 0 };
  cache.set(file, r);
  return r;
}

// Checks value against type (as written in a .d.ts) of file; pushes problems to out.
function checkValue(value, type, file, where, out) {
  if (value === null || value === undefined) return;
  let m = type.match(/^Array<(.*)>$/);
  if (m) {
    if (Array.isArray(value)) value.forEach((v, i) => checkValue(v, m[1], file, `${where}[${i}]`, out));
    return;
  }
  m = type.match(/^map:(.*)$/);
  if (m) {
    if (typeof value === 'object') for (const [k, v] of Object.entries(value)) checkValue(v, m[1], file, `${where}.${k}`, out);
    return;
  }
  const t = parse(file).imports[type];
  if (t && fs.existsSync(t) && typeof value === 'object' && !Array.isArray(value)) checkObject(value, t, where, out);
}

function checkObject(obj, file, where, out) {
  const { props, open } = parse(file);
  if (open) return; // a type alias (Quantity, IntOrString, JSON): anything goes
  for (const [k, v] of Object.entries(obj)) {
    if (!(k in props)) {
      out.push(`${where}.${k}: unknown field`);
      continue;
    }
    checkValue(v, props[k], file, `${where}.${k}`, out);
  }
}

// The problems of one object (empty: valid): schema, then strict fields.
async function checkObjectStrict(obj) {
  const out = [];
  if (!obj || typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') return ['no apiVersion and kind'];
  const mod = modulePath(obj.apiVersion, obj.kind);
  let Model;
  try {
    Model = (await import(mod))[obj.kind];
  } catch (e) {
    return [`${obj.apiVersion} ${obj.kind}: not a kind this schema knows`];
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    out.push(`schema: ${e.message}`);
  }
  checkObject(obj, path.join(MODELS, `${mod}.d.ts`), obj.kind, out);
  return out;
}

module.exports = { checkObjectStrict };
