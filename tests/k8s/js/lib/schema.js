// Shape checks of what the plugins write:
//
//   checkResourceSlice: the resource.k8s.io/v1 schema (kubernetes-models'
//     validator, generated from Kubernetes' OpenAPI), then what that schema
//     cannot say: no unknown fields (the server's strict field validation),
//     and the API's documented validation rules for slices, devices,
//     attributes, capacities and request policies;
//   checkCdiSpec: a CDI spec (container-device-interface SPEC.md, versions
//     0.3.0-0.8.0) against a JSON schema written from the specification.
//
// init() must be awaited once first (kubernetes-models is an ES module).
'use strict';

const Ajv = require('ajv');

let ResourceSlice = null;

async function init() {
  if (!ResourceSlice) ({ ResourceSlice } = await import('kubernetes-models/resource.k8s.io/v1/ResourceSlice'));
}

// ---- quantities ----

const SUFFIX = { Ki: 2n ** 10n, Mi: 2n ** 20n, Gi: 2n ** 30n, Ti: 2n ** 40n, Pi: 2n ** 50n, Ei: 2n ** 60n,
  k: 10n ** 3n, M: 10n ** 6n, G: 10n ** 9n, T: 10n ** 12n, P: 10n ** 15n, E: 10n ** 18n, '': 1n };

// A Kubernetes quantity as milli-units (BigInt), or null when it is not one.
function quantityMilli(q) {
  if (typeof q !== 'string') return null;
  const m = q.match(/^([+-]?)(\d+)(?:\.(\d*))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/);
  if (!m) return null;
  const frac = m[3] || '';
  let num = BigInt(m[2] + frac) * 1000n; // value * 10^frac.length * 1000
  let den = 10n ** BigInt(frac.length);
  const s = m[4] || '';
  if (s === 'n') den *= 10n ** 9n;
  else if (s === 'u') den *= 10n ** 6n;
  else if (s === 'm') den *= 1000n;
  else if (/^[eE]/.test(s)) {
    const e = BigInt(s.slice(1));
    if (e >= 0n) num *= 10n ** e; else den *= 10n ** -e;
  } else num *= SUFFIX[s];
  // Kubernetes rounds up to the smallest unit it keeps.
  const v = (num + den - 1n) / den;
  return m[1] === '-' ? -v : v;
}

// ---- strict fields ----

const META = ['name', 'generateName', 'namespace', 'uid', 'resourceVersion', 'generation', 'creationTimestamp',
  'deletionTimestamp', 'deletionGracePeriodSeconds', 'labels', 'annotations', 'ownerReferences', 'finalizers',
  'managedFields', 'selfLink'];
const FIELDS = {
  slice: ['apiVersion', 'kind', 'metadata', 'spec'],
  spec: ['driver', 'nodeName', 'nodeSelector', 'allNodes', 'perDeviceNodeSelection', 'pool', 'devices', 'sharedCounters'],
  pool: ['name', 'generation', 'resourceSliceCount'],
  device: ['name', 'attributes', 'capacity', 'allowMultipleAllocations', 'consumesCounters', 'nodeName',
    'nodeSelector', 'allNodes', 'taints', 'bindsToNode', 'bindingConditions', 'bindingFailureConditions',
    'nodeAllocatableResourceMappings'],
  attribute: ['int', 'bool', 'string', 'version', 'ints', 'bools', 'strings', 'versions'],
  capacity: ['value', 'requestPolicy'],
  policy: ['default', 'validValues', 'validRange'],
  range: ['min', 'max', 'step'],
};

function unknownFields(obj, allowed, where, out) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return;
  for (const k of Object.keys(obj)) if (!allowed.includes(k)) out.push(`${where}.${k}: unknown field`);
}

const dnsLabel = (s) => typeof s === 'string' && s.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s);
const dnsSubdomain = (s) => typeof s === 'string' && s.length <= 253 && s.split('.').every(dnsLabel);
// An attribute or capacity name: a C identifier of up to 32 characters, or DOMAIN/IDENTIFIER.
function qualifiedName(s) {
  if (typeof s !== 'string') return false;
  const parts = s.split('/');
  if (parts.length > 2) return false;
  const id = parts[parts.length - 1];
  return /^[a-zA-Z][a-zA-Z0-9_]{0,31}$/.test(id) && (parts.length === 1 || dnsSubdomain(parts[0]));
}

function checkPolicy(cap, where, out) {
  const value = quantityMilli(cap.value);
  if (value === null) { out.push(`${where}.value: not a quantity`); return; }
  const p = cap.requestPolicy;
  if (!p) return;
  unknownFields(p, FIELDS.policy, `${where}.requestPolicy`, out);
  if (p.validRange && p.validValues) out.push(`${where}.requestPolicy: validRange and validValues both set`);
  const def = p.default === undefined ? null : quantityMilli(p.default);
  if (p.default !== undefined && def === null) out.push(`${where}.requestPolicy.default: not a quantity`);
  if (p.validRange) {
    const r = p.validRange;
    unknownFields(r, FIELDS.range, `${where}.requestPolicy.validRange`, out);
    const min = quantityMilli(r.min), max = r.max === undefined ? null : quantityMilli(r.max);
    const step = r.step === undefined ? null : quantityMilli(r.step);
    if (min === null) { out.push(`${where}.requestPolicy.validRange.min: required quantity`); return; }
    if (def === null) out.push(`${where}.requestPolicy.default: required with validRange`);
    if (min < 0n || min > value) out.push(`${where}.requestPolicy.validRange.min: must lie in [0, value]`);
    if (max !== null && (max > value || max < min)) out.push(`${where}.requestPolicy.validRange.max: must lie in [min, value]`);
    if (def !== null && (def < min || (max !== null && def > max))) out.push(`${where}.requestPolicy.default: outside validRange`);
    if (step !== null) {
      if (step <= 0n) out.push(`${where}.requestPolicy.validRange.step: must be positive`);
      else {
        if (min + step > value) out.push(`${where}.requestPolicy.validRange: min + step exceeds the capacity`);
        // A multiple of step, whether counted from zero or from min: both readings hold here.
        for (const [n, v] of [['default', def], ['max', max]]) {
          if (v !== null && (v % step !== 0n || (v - min) % step !== 0n)) out.push(`${where}.requestPolicy.${n}: not a multiple of step`);
        }
      }
    }
  }
  if (p.validValues) {
    if (!Array.isArray(p.validValues) || p.validValues.length > 10) out.push(`${where}.requestPolicy.validValues: at most 10`);
    else if (def === null || !p.validValues.map(quantityMilli).some((v) => v === def)) out.push(`${where}.requestPolicy.default: must be a valid value`);
  }
}

// The problems of a ResourceSlice (empty: valid).
function checkResourceSlice(obj) {
  const out = [];
  if (!ResourceSlice) throw new Error('schema.init() was not awaited');
  try {
    new ResourceSlice(obj).validate();
  } catch (e) {
    out.push(`schema: ${e.message}`);
  }
  if (obj.apiVersion !== 'resource.k8s.io/v1') out.push(`apiVersion: ${obj.apiVersion}`);
  if (obj.kind !== 'ResourceSlice') out.push(`kind: ${obj.kind}`);
  unknownFields(obj, FIELDS.slice, 'ResourceSlice', out);
  unknownFields(obj.metadata || {}, META, 'metadata', out);
  if (!obj.metadata || !dnsSubdomain(obj.metadata.name)) out.push('metadata.name: not a DNS subdomain');
  const spec = obj.spec || {};
  unknownFields(spec, FIELDS.spec, 'spec', out);
  if (!dnsSubdomain(spec.driver) || spec.driver.length > 63) out.push('spec.driver: not a lowercase DNS subdomain of up to 63 characters');
  const where = ['nodeName', 'nodeSelector', 'allNodes', 'perDeviceNodeSelection'].filter((k) => spec[k] !== undefined && spec[k] !== false);
  if (where.length !== 1) out.push(`spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection (got ${where.join(', ') || 'none'})`);
  unknownFields(spec.pool, FIELDS.pool, 'spec.pool', out);
  if (!spec.pool || typeof spec.pool.name !== 'string' || !spec.pool.name || spec.pool.name.length > 253) out.push('spec.pool.name: required, up to 253 characters');
  if (!spec.pool || !(spec.pool.resourceSliceCount > 0)) out.push('spec.pool.resourceSliceCount: must be positive');
  if (!spec.pool || !(spec.pool.generation >= 0)) out.push('spec.pool.generation: must not be negative');
  const devices = spec.devices || [];
  if (devices.length > 128) out.push('spec.devices: more than 128');
  const names = new Set();
  devices.forEach((d, i) => {
    const w = `spec.devices[${i}]`;
    unknownFields(d, FIELDS.device, w, out);
    if (!dnsLabel(d.name)) out.push(`${w}.name: not a DNS label`);
    if (names.has(d.name)) out.push(`${w}.name: duplicate`);
    names.add(d.name);
    const attrs = d.attributes || {}, caps = d.capacity || {};
    if (Object.keys(attrs).length + Object.keys(caps).length > 32) out.push(`${w}: more than 32 attributes and capacities`);
    for (const [k, a] of Object.entries(attrs)) {
      if (!qualifiedName(k)) out.push(`${w}.attributes.${k}: not a qualified name`);
      unknownFields(a, FIELDS.attribute, `${w}.attributes.${k}`, out);
      const set = Object.keys(a || {});
      if (set.length !== 1) out.push(`${w}.attributes.${k}: exactly one value`);
      if (typeof a.string === 'string' && a.string.length > 64) out.push(`${w}.attributes.${k}.string: longer than 64`);
    }
    for (const [k, c] of Object.entries(caps)) {
      if (!qualifiedName(k)) out.push(`${w}.capacity.${k}: not a qualified name`);
      unknownFields(c, FIELDS.capacity, `${w}.capacity.${k}`, out);
      if (c.requestPolicy && !d.allowMultipleAllocations) out.push(`${w}.capacity.${k}.requestPolicy: needs allowMultipleAllocations`);
      checkPolicy(c, `${w}.capacity.${k}`, out);
    }
  });
  return out;
}

// ---- CDI ----

const cdiName = '^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$';
const cdiEdits = {
  type: 'object',
  additionalProperties: false,
  properties: {
    env: { type: 'array', items: { type: 'string', pattern: '^[^=]+=' } },
    deviceNodes: { type: 'array', items: { type: 'object', required: ['path'], additionalProperties: false,
      properties: { path: { type: 'string', pattern: '^/' }, hostPath: { type: 'string', pattern: '^/' },
        type: { type: 'string' }, major: { type: 'integer' }, minor: { type: 'integer' },
        fileMode: { type: 'integer' }, permissions: { type: 'string', pattern: '^[rwm]*$' },
        uid: { type: 'integer' }, gid: { type: 'integer' } } } },
    mounts: { type: 'array', items: { type: 'object', required: ['hostPath', 'containerPath'], additionalProperties: false,
      properties: { hostPath: { type: 'string', pattern: '^/' }, containerPath: { type: 'string', pattern: '^/' },
        type: { type: 'string' }, options: { type: 'array', items: { type: 'string' } } } } },
    hooks: { type: 'array', items: { type: 'object', required: ['hookName', 'path'], additionalProperties: false,
      properties: { hookName: { enum: ['createRuntime', 'createContainer', 'startContainer', 'poststart', 'poststop', 'prestart'] },
        path: { type: 'string', pattern: '^/' }, args: { type: 'array', items: { type: 'string' } },
        env: { type: 'array', items: { type: 'string' } }, timeout: { type: 'integer', minimum: 1 } } } },
    additionalGids: { type: 'array', items: { type: 'integer', minimum: 0 } },
    intelRdt: { type: 'object' },
  },
};
const cdiSchema = {
  type: 'object',
  required: ['cdiVersion', 'kind', 'devices'],
  additionalProperties: false,
  properties: {
    cdiVersion: { enum: ['0.3.0', '0.4.0', '0.5.0', '0.6.0', '0.7.0', '0.8.0'] },
    // vendor (a DNS subdomain) / class (alphanumeric ends; - _ . inside)
    kind: { type: 'string', pattern: '^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*/[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?$' },
    annotations: { type: 'object', additionalProperties: { type: 'string' } },
    devices: { type: 'array', minItems: 1, items: { type: 'object', required: ['name'], additionalProperties: false,
      properties: { name: { type: 'string', pattern: cdiName }, annotations: { type: 'object' }, containerEdits: cdiEdits } } },
    containerEdits: cdiEdits,
  },
};
const validateCdi = new Ajv({ allErrors: true }).compile(cdiSchema);

// The problems of a CDI spec (empty: valid), beyond the schema: unique device names, and the
// features of later versions not used under an earlier cdiVersion.
function checkCdiSpec(spec) {
  const out = [];
  if (!validateCdi(spec)) for (const e of validateCdi.errors) out.push(`${e.instancePath || '/'} ${e.message}`);
  const names = (spec.devices || []).map((d) => d.name);
  if (new Set(names).size !== names.length) out.push('devices: duplicate names');
  const v = String(spec.cdiVersion || '0.0.0').split('.').map(Number);
  const older = (maj, min) => v[0] < maj || (v[0] === maj && v[1] < min);
  const edits = [spec.containerEdits, ...(spec.devices || []).map((d) => d.containerEdits)].filter(Boolean);
  if (older(0, 6, 0) && (spec.annotations || (spec.devices || []).some((d) => d.annotations))) out.push('annotations need cdiVersion 0.6.0');
  if (older(0, 7, 0) && edits.some((e) => e.additionalGids || e.intelRdt)) out.push('additionalGids/intelRdt need cdiVersion 0.7.0');
  if (older(0, 5, 0) && edits.some((e) => (e.deviceNodes || []).some((d) => d.hostPath))) out.push('deviceNodes.hostPath needs cdiVersion 0.5.0');
  if (older(0, 4, 0) && edits.some((e) => (e.mounts || []).some((m) => m.type))) out.push('mounts.type needs cdiVersion 0.4.0');
  return out;
}

module.exports = { init, checkResourceSlice, checkCdiSpec, quantityMilli };
