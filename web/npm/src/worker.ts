// The worker's side of createWorkerEngine: holds the engine and everything made through it, by
// handle, and answers calls posted by the page (client.ts). Typed arrays in answers are
// transferred.
import * as edo from './index.js';
import type { CallMessage, HandleMessage, WorkerMessage } from './client.js';

/** The dedicated worker's global scope, as much of it as this file uses (the DOM's types lack it). */
const scope = self as unknown as {
  postMessage(message: WorkerMessage, transfer?: Transferable[]): void;
  addEventListener(type: 'message', listener: (event: MessageEvent<CallMessage | { abort: number }>) => void): void;
};

/** Any object the worker holds: its methods are called by name. */
type Held = Record<string, unknown> & { dispose(): void; constructor?: { kind?: string } };

const objects = new Map<number, Held>();
const signals = new Map<number, AbortController>();
let next = 1;

// What the page sees of each kind of object without asking: its getters' values at creation.
const PROPS: Record<string, string[]> = {
  Engine: ['backend', 'note', 'choice', 'generation', 'maxBindingBytes'],
  Table: ['format', 'rows', 'dim', 'bytes', 'f32Bytes', 'codes', 'remapped', 'storedRows', 'rowAlignment'],
  ResidentTable: ['backend', 'shards', 'rows', 'dim'],
  Model: ['dim', 'vocabSize', 'rows', 'format', 'rowAlignment', 'bytes', 'normalize'],
  ResidentModel: ['backend', 'dim'],
  SearchIndex: ['rows', 'bytes'],
  RowCache: ['backend'],
  BinaryCodes: [],
};

/** An argument as the page encoded it (client.ts). */
type Encoded = {
  __strings?: string;
  lengths?: Uint32Array;
  __callback?: number;
  __handle?: number;
  __signal?: number;
  aborted?: boolean;
};

const decode = (value: unknown, used: number[]): unknown => {
  if (value && typeof value === 'object' && !ArrayBuffer.isView(value) && !(value instanceof ArrayBuffer)) {
    const v = value as Encoded;
    if (v.__strings !== undefined && v.lengths !== undefined) {
      const out = new Array<string>(v.lengths.length);
      let at = 0;
      for (let i = 0; i < out.length; i++) {
        out[i] = v.__strings.slice(at, at + v.lengths[i]!);
        at += v.lengths[i]!;
      }
      return out;
    }
    if (v.__callback !== undefined) {
      const callback = v.__callback;
      return (...args: unknown[]) => scope.postMessage({ callback, args });
    }
    if (v.__handle !== undefined) {
      const o = objects.get(v.__handle);
      if (!o) throw new edo.EdoError('DISPOSED', 'an argument was disposed');
      return o;
    }
    if (v.__signal !== undefined) {
      const c = new AbortController();
      signals.set(v.__signal, c);
      used.push(v.__signal);
      if (v.aborted) c.abort();
      return c.signal;
    }
    if (Array.isArray(value)) return value.map((x) => decode(x, used));
    return Object.fromEntries(Object.entries(value).map(([k, x]) => [k, decode(x, used)]));
  }
  return value;
};

// Answers: edo's objects stay here as handles; typed arrays that own their buffer are transferred.
const encode = (value: unknown, transfer: Transferable[], sizes: { transferredBytes: number; copiedBytes: number }): unknown => {
  const kind = (value as Held | null)?.constructor?.kind;
  if (value && typeof value === 'object' && kind !== undefined && PROPS[kind]) {
    const handle = next++;
    const held = value as Held;
    objects.set(handle, held);
    return { __handle: handle, kind, props: Object.fromEntries(PROPS[kind].map((p) => [p, held[p]])) } satisfies HandleMessage;
  }
  if (ArrayBuffer.isView(value)) {
    const buffer = value.buffer as ArrayBuffer;
    if (value.byteOffset === 0 && value.byteLength === buffer.byteLength && !transfer.includes(buffer)) {
      transfer.push(buffer);
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

scope.addEventListener('message', async ({ data }) => {
  if ('abort' in data) {
    signals.get(data.abort)?.abort();
    return;
  }
  const { id, target, method, args } = data;
  const used: number[] = [];
  try {
    const object = (target === 0 ? edo : objects.get(target)) as Held | undefined;
    if (!object) throw new edo.EdoError('DISPOSED', `this object was disposed (${method})`);
    let value: unknown;
    if (method === 'dispose' && target !== 0) {
      objects.delete(target);
      value = object.dispose();
    } else if (method === 'gatherToGpu' || method === 'bagToGpu' || method === 'embedToGpu') {
      throw new edo.EdoError('UNSUPPORTED', `${method}: GPU buffers cannot leave the worker's device; use createEngine on the page for rows that stay on the GPU`);
    } else {
      const f = object[method];
      if (typeof f !== 'function') throw new edo.EdoError('INVALID_ARGUMENT', `${method} is not a method of ${object.constructor?.kind ?? 'edo'}`);
      value = await (f as (...a: unknown[]) => unknown).apply(object, args.map((a) => decode(a, used)));
      if (typeof value === 'function') value = undefined; // onDeviceEvent's unsubscribe stays here
    }
    if (id === 0) return; // a finalised handle: nobody waits
    const transfer: Transferable[] = [];
    const sizes = { transferredBytes: 0, copiedBytes: 0 };
    const encoded = encode(value, transfer, sizes);
    scope.postMessage({ id, value: encoded, ...sizes }, transfer);
  } catch (e) {
    if (id === 0) return;
    const err = e as { code?: edo.ErrorCode; message?: string } | null;
    scope.postMessage({ id, error: { code: err?.code ?? 'INTERNAL', message: err?.message ?? String(e) } });
  }
  finally {
    for (const s of used) signals.delete(s);
  }
});
