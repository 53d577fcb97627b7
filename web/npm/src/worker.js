// The worker's side of createWorkerEngine: holds the engine and everything made through it, by
// handle, and answers calls posted by the page (client.js). Typed arrays in answers are
// transferred.
import * as edo from './index.js';

const objects = new Map();
const signals = new Map();
let next = 1;

// What the page sees of each kind of object without asking: its getters' values at creation.
const PROPS = {
  Engine: ['backend', 'note', 'choice', 'generation', 'maxBindingBytes'],
  Table: ['format', 'rows', 'dim', 'bytes', 'f32Bytes', 'codes', 'remapped', 'storedRows', 'rowAlignment'],
  ResidentTable: ['backend', 'shards', 'rows', 'dim'],
  Model: ['dim', 'vocabSize', 'rows', 'format', 'rowAlignment', 'bytes', 'normalize'],
  ResidentModel: ['backend', 'dim'],
  SearchIndex: ['rows', 'bytes'],
  RowCache: ['backend'],
  BinaryCodes: [],
};

const decode = (value, used) => {
  if (value && typeof value === 'object' && !ArrayBuffer.isView(value) && !(value instanceof ArrayBuffer)) {
    if (value.__strings !== undefined) {
      const out = new Array(value.lengths.length);
      let at = 0;
      for (let i = 0; i < out.length; i++) {
        out[i] = value.__strings.slice(at, at + value.lengths[i]);
        at += value.lengths[i];
      }
      return out;
    }
    if (value.__callback !== undefined) return (...args) => self.postMessage({ callback: value.__callback, args });
    if (value.__handle !== undefined) {
      const o = objects.get(value.__handle);
      if (!o) throw new edo.EdoError('DISPOSED', 'an argument was disposed');
      return o;
    }
    if (value.__signal !== undefined) {
      const c = new AbortController();
      signals.set(value.__signal, c);
      used.push(value.__signal);
      if (value.aborted) c.abort();
      return c.signal;
    }
    if (Array.isArray(value)) return value.map((v) => decode(v, used));
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decode(v, used)]));
  }
  return value;
};

// Answers: edo's objects stay here as handles; typed arrays that own their buffer are transferred.
const encode = (value, transfer, sizes) => {
  const kind = value?.constructor?.kind;
  if (value && typeof value === 'object' && PROPS[kind]) {
    const handle = next++;
    objects.set(handle, value);
    return { __handle: handle, kind, props: Object.fromEntries(PROPS[kind].map((p) => [p, value[p]])) };
  }
  if (ArrayBuffer.isView(value)) {
    if (value.byteOffset === 0 && value.byteLength === value.buffer.byteLength && !transfer.includes(value.buffer)) {
      transfer.push(value.buffer);
      sizes.transferredBytes += value.byteLength;
    } else {
      sizes.copiedBytes += value.byteLength;
    }
    return value;
  }
  if (Array.isArray(value)) return value.map((v) => encode(v, transfer, sizes));
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, encode(v, transfer, sizes)]));
  }
  return value;
};

self.addEventListener('message', async ({ data }) => {
  if (data.abort !== undefined) {
    signals.get(data.abort)?.abort();
    return;
  }
  const { id, target, method, args } = data;
  const used = [];
  try {
    const object = target === 0 ? edo : objects.get(target);
    if (!object) throw new edo.EdoError('DISPOSED', `this object was disposed (${method})`);
    let value;
    if (method === 'dispose' && target !== 0) {
      objects.delete(target);
      value = object.dispose();
    } else if (method === 'gatherToGpu' || method === 'bagToGpu' || method === 'embedToGpu') {
      throw new edo.EdoError('UNSUPPORTED', `${method}: GPU buffers cannot leave the worker's device; use createEngine on the page for rows that stay on the GPU`);
    } else {
      if (typeof object[method] !== 'function') throw new edo.EdoError('INVALID_ARGUMENT', `${method} is not a method of ${object.constructor?.kind ?? 'edo'}`);
      value = await object[method](...args.map((a) => decode(a, used)));
      if (typeof value === 'function') value = undefined; // onDeviceEvent's unsubscribe stays here
    }
    if (id === 0) return; // a finalised handle: nobody waits
    const transfer = [];
    const sizes = { transferredBytes: 0, copiedBytes: 0 };
    const encoded = encode(value, transfer, sizes);
    self.postMessage({ id, value: encoded, ...sizes }, transfer);
  } catch (e) {
    if (id === 0) return;
    self.postMessage({ id, error: { code: e?.code ?? 'INTERNAL', message: e?.message ?? String(e) } });
  } finally {
    for (const s of used) signals.delete(s);
  }
});
