// The page's side of a worker engine: each object the worker holds is a handle here, whose
// methods post a call and resolve with the answer. Callbacks (onProgress) and AbortSignals cross
// as ids; typed arrays come back transferred.
import { EdoError } from './core.js';

const HANDLE = Symbol('edo worker handle');

export function connectWorker(worker, options) {
  let next = 1;
  const pending = new Map();
  const callbacks = new Map();
  const stats = { calls: 0, transferredBytes: 0, copiedBytes: 0 };
  let closed = null;
  const fail = (why) => {
    closed = why;
    for (const { reject } of pending.values()) reject(why);
    pending.clear();
  };
  worker.addEventListener('message', ({ data }) => {
    if (data.callback !== undefined) {
      callbacks.get(data.callback)?.(...data.args);
      return;
    }
    const p = pending.get(data.id);
    if (!p) return;
    pending.delete(data.id);
    for (const c of p.cleanup) c();
    stats.transferredBytes += data.transferredBytes ?? 0;
    stats.copiedBytes += data.copiedBytes ?? 0;
    if (data.error) p.reject(new EdoError(data.error.code, data.error.message));
    else p.resolve(revive(data.value));
  });
  worker.addEventListener('error', (e) => fail(new EdoError('WORKER', `edo's worker failed: ${e.message ?? e}`)));
  worker.addEventListener('messageerror', () => fail(new EdoError('WORKER', "a message from edo's worker could not be read")));

  const call = (target, method, args) => {
    if (closed) return Promise.reject(closed);
    const id = next++;
    const cleanup = [];
    const message = { id, target, method, args: args.map((a) => encode(a, cleanup)) };
    stats.calls++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject, cleanup });
      try {
        worker.postMessage(message);
      } catch (e) {
        pending.delete(id);
        reject(new EdoError('INVALID_ARGUMENT', `an argument of ${method} cannot be sent to the worker: ${e.message}`));
      }
    });
  };

  // Arguments: handles by id, functions and signals by id, options objects member by member.
  const encode = (value, cleanup) => {
    if (typeof value === 'function') {
      const id = next++;
      callbacks.set(id, value);
      cleanup.push(() => callbacks.delete(id));
      return { __callback: id };
    }
    if (value && typeof value === 'object') {
      if (value[HANDLE] !== undefined) return { __handle: value[HANDLE] };
      if (typeof AbortSignal !== 'undefined' && value instanceof AbortSignal) {
        const id = next++;
        const abort = () => worker.postMessage({ abort: id });
        if (value.aborted) queueMicrotask(abort);
        else value.addEventListener('abort', abort, { once: true });
        cleanup.push(() => value.removeEventListener('abort', abort));
        return { __signal: id, aborted: value.aborted };
      }
      if (Object.getPrototypeOf(value) === Object.prototype) {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, encode(v, cleanup)]));
      }
      if (Array.isArray(value)) {
        // Many texts cross as one string and their lengths: cloning one string is a copy,
        // cloning thousands of small ones costs more than embedding them.
        if (value.length >= 64 && value.every((v) => typeof v === 'string')) {
          return { __strings: value.join(''), lengths: Uint32Array.from(value, (v) => v.length) };
        }
        return value.map((v) => encode(v, cleanup));
      }
    }
    return value;
  };

  const handles = new FinalizationRegistry((handle) => {
    if (!closed) worker.postMessage({ id: 0, target: handle, method: 'dispose', args: [] });
  });

  // Answers: a handle becomes an object with the worker's getters' values and its methods.
  const revive = (value) => {
    if (value && typeof value === 'object' && value.__handle !== undefined) return handleObject(value);
    if (Array.isArray(value)) return value.map(revive);
    return value;
  };

  const handleObject = ({ __handle: handle, kind, props }) => {
    let disposed = false;
    const object = { ...props, kind, disposed: false, [HANDLE]: handle };
    object.dispose = () => {
      if (disposed) return Promise.resolve();
      disposed = true;
      object.disposed = true;
      handles.unregister(object);
      const done = call(handle, 'dispose', []);
      if (kind === 'Engine') return done.finally(() => {
        fail(new EdoError('DISPOSED', 'this worker engine was disposed'));
        worker.terminate();
      });
      return done;
    };
    object[Symbol.dispose ?? Symbol.for('Symbol.dispose')] = object.dispose;
    const proxy = new Proxy(object, {
      get(target, key) {
        if (key in target) return target[key];
        if (typeof key === 'symbol' || key === 'then' || key === 'toJSON') return undefined;
        return (...args) => (disposed ? Promise.reject(new EdoError('DISPOSED', `this ${kind} was disposed`)) : call(handle, key, args));
      },
    });
    handles.register(object, handle, object);
    if (kind === 'Engine') {
      object.worker = worker;
      // The package's factories, run in the worker.
      for (const f of ['createTable', 'readTable', 'syntheticTable']) object[f] = (...args) => call(0, f, args);
      // A relative URL means the page's, not the worker script's; a hub name ('owner/name') stays.
      const here = (url) =>
        typeof url === 'string' && typeof location !== 'undefined' && !(/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(url) && !/\.edo$/i.test(url)) ? new URL(url, location.href).href : url;
      object.loadModel = (source, options = {}) => call(handle, 'loadModel', [here(source), options]);
      object.cacheRemote = (url, options = {}) => call(handle, 'cacheRemote', [here(url), options]);
      object.workerStats = () => ({ ...stats });
      object.onDeviceEvent = (f) => {
        const id = next++;
        callbacks.set(id, f);
        call(handle, 'onDeviceEvent', [{ __callback: id }]);
        return () => callbacks.delete(id);
      };
    }
    return proxy;
  };

  return call(0, 'createEngine', [options]);
}
