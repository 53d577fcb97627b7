// The package's API: a thin layer over the wasm-bindgen exports (edo_web.js) that a web developer
// would write by hand — options objects, typed results, promises, dispose(), typed errors, models
// downloaded with progress and kept in Cache Storage. Entry points: index.js (browsers and
// bundlers), node.js (Node), worker.js (the worker's side of createWorkerEngine).
import * as wasm from './edo_web.js';
import { VERSION } from './version.js';

export { VERSION };

// ---- Loading the module ----------------------------------------------------------------------

let loader = null;
let loading = null;
let memory = null; // the module's WebAssembly.Memory, once loaded
let moduleSeconds = null; // compiling and instantiating it took, for benchmark()'s cold start

/** Set by the entry point: how this environment loads the .wasm. */
export function _useLoader(load) {
  loader = load;
}

/**
 * Loads and starts edo's WebAssembly module; every factory calls it first, so calling it yourself
 * is needed only to load the `.wasm` from somewhere else (`{ wasm: url | Response | bytes |
 * WebAssembly.Module }`) or to load it early.
 */
export function init(options = {}) {
  if (!loading) {
    plainObject(options, 'init(options)');
    loading = Promise.resolve()
      .then(() => {
        const started = performance.now();
        return Promise.resolve(loader(options.wasm)).then((exports) => [exports, (performance.now() - started) / 1000]);
      })
      .then(([exports, seconds]) => {
        memory = exports?.memory ?? null;
        moduleSeconds = seconds;
        wasm.installPanicHook();
      })
      .catch((e) => {
        loading = null;
        throw new EdoError('WASM_LOAD', `edo's WebAssembly module could not be loaded: ${e?.message ?? e}`, { cause: e });
      });
  }
  return loading;
}

/**
 * The bytes of WebAssembly memory the module holds now: its high-water mark, since WebAssembly
 * memory grows and never shrinks (0 before it is loaded). What a 128 MB limit (Cloudflare
 * Workers) counts besides JavaScript's own heap.
 */
export function wasmMemoryBytes() {
  return memory?.buffer.byteLength ?? 0;
}

// ---- Errors ----------------------------------------------------------------------------------

/** Every error edo throws: `code` is stable (see the `ErrorCode` type), `message` names the argument. */
export class EdoError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'EdoError';
    this.code = code;
  }
}

function wrapError(e) {
  if (e instanceof EdoError) return e;
  if (e && e.name === 'EdoError' && typeof e.code === 'string') return new EdoError(e.code, e.message);
  if (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) {
    return new EdoError('INTERNAL', `edo's module stopped (${e.message}); its panic message is on the console`, { cause: e });
  }
  if (e && e.name === 'AbortError') return new EdoError('ABORTED', e.message || 'aborted', { cause: e });
  return new EdoError('INTERNAL', String(e?.message ?? e), { cause: e });
}

async function guarded(f) {
  try {
    return await f();
  } catch (e) {
    throw wrapError(e);
  }
}

function guardedSync(f) {
  try {
    return f();
  } catch (e) {
    throw wrapError(e);
  }
}

const invalid = (message) => new EdoError('INVALID_ARGUMENT', message);

function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an Array';
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (typeof v === 'object') return `a ${v.constructor?.name ?? 'object'}`;
  return `${typeof v} ${String(v)}`;
}

function plainObject(v, name) {
  if (v === undefined) return {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid(`${name} must be an options object (got ${describe(v)})`);
  return v;
}

function integer(v, name, { min = 0, max = Number.MAX_SAFE_INTEGER } = {}) {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw invalid(`${name} must be an integer from ${min} to ${max} (got ${describe(v)})`);
  }
  return v;
}

// A row alignment in bytes: a power of two from 4 to 256.
function rowAlignmentOf(v, name) {
  const bytes = integer(v, name, { min: 4, max: 256 });
  if ((bytes & (bytes - 1)) !== 0) throw invalid(`${name} must be a power of two from 4 to 256 (got ${bytes})`);
  return bytes;
}

// The `rowAlignment` of a call's options (`what` names the call), checked; undefined when absent.
function rowAlignmentOption(options, what) {
  const { rowAlignment } = plainObject(options, what);
  return rowAlignment === undefined ? undefined : rowAlignmentOf(rowAlignment, 'options.rowAlignment');
}

function boolean(v, name, fallback) {
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw invalid(`${name} must be true or false (got ${describe(v)})`);
  return v;
}

function text(v, name) {
  if (typeof v !== 'string') throw invalid(`${name} must be a string (got ${describe(v)})`);
  return v;
}

function optionalText(v, name) {
  return v === undefined || v === null ? undefined : text(v, name);
}

function texts(v, name) {
  if (!Array.isArray(v)) {
    throw invalid(`${name} must be an array of strings (got ${describe(v)}${typeof v === 'string' ? ': wrap one text in [ ]' : ''})`);
  }
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== 'string') throw invalid(`${name}[${i}] must be a string (got ${describe(v[i])})`);
  }
  return v;
}

/** Row ids: a Uint32Array as it is; an Array or another typed array of integers 0…2³²−1, copied. */
function ids(v, name, kind = 'ids') {
  if (v instanceof Uint32Array) return v;
  if (!Array.isArray(v) && !(ArrayBuffer.isView(v) && !(v instanceof DataView))) {
    throw invalid(`${name} must be a Uint32Array or an array of integers (got ${describe(v)})`);
  }
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x = typeof v[i] === 'bigint' ? Number(v[i]) : v[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff) {
      throw invalid(`${name}[${i}] = ${describe(v[i])}: ${kind} are integers from 0 to 4294967295`);
    }
    out[i] = x;
  }
  return out;
}

/** f32 values: a Float32Array as it is; an Array or a Float64Array of numbers, converted. */
function floats(v, name, length) {
  let out;
  if (v instanceof Float32Array) {
    out = v;
  } else if (Array.isArray(v) || v instanceof Float64Array) {
    out = new Float32Array(v.length);
    for (let i = 0; i < v.length; i++) {
      if (typeof v[i] !== 'number') throw invalid(`${name}[${i}] must be a number (got ${describe(v[i])})`);
      out[i] = v[i];
    }
  } else {
    throw invalid(`${name} must be a Float32Array or an array of numbers (got ${describe(v)})`);
  }
  if (length !== undefined && out.length !== length) throw invalid(`${name} has ${out.length} values; ${length} were expected`);
  return out;
}

/** One flag a row: a Uint8Array (0 is false) as it is; an Array of booleans, converted. */
function flags(v, name, length) {
  let out;
  if (v instanceof Uint8Array) {
    out = v;
  } else if (Array.isArray(v)) {
    out = new Uint8Array(v.length);
    for (let i = 0; i < v.length; i++) {
      if (typeof v[i] !== 'boolean') throw invalid(`${name}[${i}] must be a boolean (got ${describe(v[i])})`);
      out[i] = v[i] ? 1 : 0;
    }
  } else {
    throw invalid(`${name} must be a Uint8Array or an array of booleans (got ${describe(v)})`);
  }
  if (out.length !== length) throw invalid(`${name} has ${out.length} flags; ${length} were expected (one a row)`);
  return out;
}

function bytesOf(v, name) {
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  throw invalid(`${name} must be a Uint8Array or an ArrayBuffer (got ${describe(v)})`);
}

function listener(v, name) {
  if (typeof v !== 'function') throw invalid(`${name} must be a function (got ${describe(v)})`);
  return v;
}

// ---- Resources -------------------------------------------------------------------------------

const DISPOSE = Symbol.dispose ?? Symbol.for('Symbol.dispose');

/** What holds memory in WASM or on the GPU: `dispose()` (or `using`) frees it at once. */
class Resource {
  #raw;
  #what;
  constructor(raw, what) {
    this.#raw = raw;
    this.#what = what;
  }
  /** The wasm-bindgen object, or a DISPOSED error. */
  _raw() {
    if (!this.#raw) throw new EdoError('DISPOSED', `this ${this.#what} was disposed`);
    return this.#raw;
  }
  /** Whether `dispose()` was called. */
  get disposed() {
    return this.#raw === null;
  }
  /** Frees the object's memory now (its GPU buffers are destroyed); later calls are DISPOSED errors. */
  dispose() {
    const raw = this.#raw;
    this.#raw = null;
    raw?.free();
  }
  [DISPOSE]() {
    this.dispose();
  }
}

// ---- The engine ------------------------------------------------------------------------------

const BACKENDS = ['auto', 'webgpu', 'cpu'];

/**
 * An engine on WebGPU or on the CPU path (plain WebAssembly, also in Node). `backend` 'auto' (the
 * default) takes the CPU path where there is no adapter or only a fallback (software) one, and
 * otherwise the faster of the two on a short calibration, remembered per adapter; 'webgpu' and
 * 'cpu' force one. `backend`, `note` and `choice` say which and why.
 */
export async function createEngine(options = {}) {
  plainObject(options, 'createEngine(options)');
  const preferGpu = boolean(options.preferGpu, 'options.preferGpu', undefined);
  const backend = options.backend ?? (preferGpu === false ? 'cpu' : 'auto');
  if (!BACKENDS.includes(backend)) throw invalid(`options.backend must be one of ${BACKENDS.join(', ')} (got ${describe(backend)})`);
  if (preferGpu === false && backend !== 'cpu') throw invalid(`options.preferGpu false and options.backend '${backend}' disagree`);
  const maxShardBytes = options.maxShardBytes === undefined ? undefined : integer(options.maxShardBytes, 'options.maxShardBytes', { min: 4 });
  const gpu = backend === 'cpu' ? undefined : gpuOf(options.gpu);
  await init({ wasm: options.wasm });
  const create = (onGpu) => guarded(async () => new Engine(await wasm.EdoEngine.create(onGpu, maxShardBytes, gpu)));
  const engine = await create(backend !== 'cpu');
  if (engine.backend === 'cpu') {
    return engine._chose({ backend: 'cpu', reason: backend === 'cpu' ? 'requested' : 'no-adapter', adapter: null, note: engine.note });
  }
  const adapter = engine.note;
  if (backend === 'webgpu') return engine._chose({ backend: 'webgpu', reason: 'requested', adapter, note: adapter });
  return chooseBackend(engine, adapter, () => create(false));
}

// The calibration's work: a gather of 4096 ids and sum bags of 16 over them, from an INT8 table
// of 16 384 × 64 (1 MB), on each engine after one untimed call; the best of three.
const CALIBRATION = { rows: 16384, dim: 64, ids: 4096, bag: 16, reps: 3 };

// 'auto' on an adapter: the CPU path on a fallback adapter (a software rasteriser such as
// SwiftShader); otherwise the choice remembered for this adapter and package version, or the
// faster engine on the calibration, then remembered.
async function chooseBackend(gpuEngine, adapter, cpuEngine) {
  const info = gpuEngine.gpuDevice?.adapterInfo ?? {};
  // The CPU path chosen: the calibration's CPU engine when there was one, else a new one.
  const onCpu = async (choice, cpu) => {
    gpuEngine.dispose();
    return (cpu ?? (await cpuEngine()))._chose({ backend: 'cpu', adapter, ...choice });
  };
  if (info.isFallbackAdapter === true) {
    return onCpu({ reason: 'fallback-adapter', note: `CPU path: the adapter is a fallback (software) one, ${adapter}; createEngine({ backend: 'webgpu' }) uses it` });
  }
  const key = `edo ${VERSION} backend: ${[info.vendor, info.architecture, info.device, info.description].join('/')} ${adapter}`;
  let choice = await remembered('get', key);
  let cpu = null;
  if (choice?.backend === 'webgpu' || choice?.backend === 'cpu') {
    choice = { ...choice, reason: 'remembered' };
  } else {
    cpu = await cpuEngine();
    const start = performance.now();
    try {
      const [webgpuMs, cpuMs] = await calibrate([gpuEngine, cpu]);
      choice = { backend: webgpuMs <= cpuMs ? 'webgpu' : 'cpu', webgpuMs, cpuMs, calibrationMs: performance.now() - start };
    } catch (e) {
      // WebGPU failed its own calibration (a lost device, a driver error): the CPU path, not
      // remembered, so the next engine tries again.
      return onCpu({ reason: 'calibration-failed', note: `CPU path: WebGPU failed the calibration on ${adapter} (${e?.message ?? e})` }, cpu);
    }
    await remembered('put', key, choice);
    choice = { ...choice, reason: 'measured' };
  }
  const { webgpuMs, cpuMs } = choice;
  const [won, lost] = choice.backend === 'webgpu' ? ['WebGPU', 'the CPU path'] : ['CPU path', 'WebGPU'];
  const how = choice.reason === 'remembered' ? 'remembered for this adapter' : `calibrated in ${choice.calibrationMs.toFixed(0)} ms`;
  const note = `${won}: ${(Math.max(webgpuMs, cpuMs) / Math.min(webgpuMs, cpuMs)).toFixed(1)}× as fast as ${lost} on a gather and bags (WebGPU ${webgpuMs.toFixed(2)} ms, CPU path ${cpuMs.toFixed(2)} ms; ${how}) on ${adapter}`;
  if (choice.backend === 'cpu') return onCpu({ ...choice, note }, cpu);
  cpu?.dispose();
  return gpuEngine._chose({ ...choice, adapter, note });
}

// Milliseconds of the calibration's work on each engine.
async function calibrate(engines) {
  const { rows, dim, ids: n, bag, reps } = CALIBRATION;
  const source = await syntheticTable(rows, dim);
  const table = await source.quantize('int8');
  source.dispose();
  const ids = new Uint32Array(n);
  for (let i = 0, x = 7; i < n; i++) ids[i] = (x = (Math.imul(x, 1103515245) + 12345) >>> 0) % rows;
  const offsets = Uint32Array.from({ length: n / bag }, (_, b) => b * bag);
  const times = [];
  try {
    for (const engine of engines) {
      const resident = await engine.uploadTable(table);
      try {
        let best = Infinity;
        for (let r = 0; r <= reps; r++) {
          const start = performance.now();
          await resident.gather(ids);
          await resident.bag(ids, offsets);
          if (r > 0) best = Math.min(best, performance.now() - start);
        }
        times.push(best);
      } finally {
        resident.dispose();
      }
    }
  } finally {
    table.dispose();
  }
  return times;
}

// The remembered choices: localStorage where there is one, else IndexedDB (in workers); none
// where neither is (Node, Bun). A store that fails (private modes, quotas) is as none.
async function remembered(op, key, value) {
  try {
    const local = globalThis.localStorage;
    if (local) {
      if (op === 'put') return local.setItem(key, JSON.stringify(value));
      return JSON.parse(local.getItem(key) ?? 'null');
    }
    if (!globalThis.indexedDB) return undefined;
    return await new Promise((resolve, reject) => {
      const open = indexedDB.open('edo', 1);
      open.onupgradeneeded = () => open.result.createObjectStore('backend');
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const db = open.result;
        const store = db.transaction('backend', op === 'put' ? 'readwrite' : 'readonly').objectStore('backend');
        const request = op === 'put' ? store.put(value, key) : store.get(key);
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
        request.transaction.oncomplete = () => db.close();
      };
    });
  } catch {
    return undefined;
  }
}

/** The JavaScript runtime and its version, for benchmark results. */
function runtimeName() {
  const g = globalThis;
  if (g.Deno?.version) return `deno ${g.Deno.version.deno}`;
  if (g.Bun?.version) return `bun ${g.Bun.version}`;
  if (g.process?.versions?.node && typeof g.navigator?.userAgent !== 'string') return `node ${g.process.versions.node}`;
  if (g.navigator?.userAgent === 'Cloudflare-Workers') return 'workerd';
  if (g.process?.versions?.node) return `node ${g.process.versions.node}`;
  return `browser: ${g.navigator?.userAgent ?? 'unknown'}`;
}

const inWindowOrWorker = () => typeof globalThis.Window === 'function' || typeof globalThis.WorkerGlobalScope === 'function';

// The `GPU` object to ask for an adapter: the one given, or `navigator.gpu` where no window or
// worker would give it to wgpu (Node or Electron's main process with Dawn's `webgpu` package
// installed there); undefined to let wgpu find the context's own.
function gpuOf(given) {
  const gpu = given ?? (inWindowOrWorker() ? undefined : globalThis.navigator?.gpu);
  if (gpu === undefined || gpu === null) return undefined;
  if (typeof gpu !== 'object' || typeof gpu.requestAdapter !== 'function') {
    throw invalid(`options.gpu must be a GPU object with requestAdapter() (navigator.gpu, or Dawn's create() in Node) (got ${describe(gpu)})`);
  }
  // wgpu tells WebGPU's errors apart by their classes (GPUValidationError, …), which a browser
  // has as globals and Dawn's package exports as `globals`.
  if (typeof globalThis.GPUValidationError !== 'function' || globalThis.GPUBufferUsage === undefined) {
    throw invalid("WebGPU's classes (GPUValidationError, GPUBufferUsage, …) are not globals here: with Dawn's package, `import { create, globals } from 'webgpu'; Object.assign(globalThis, globals);` before createEngine({ gpu: create([]) })");
  }
  return compatibilityFallback(gpu);
}

// The GPU object wgpu asks: a core adapter first, and where there is none a compatibility-mode one
// (WebGPU over OpenGL ES: Dawn on Mesa's llvmpipe, phones without Vulkan). wgpu asks for no
// feature level, and edo's kernels are valid at both (the package's tests run them on Dawn's
// OpenGL ES backend).
function compatibilityFallback(gpu) {
  return {
    async requestAdapter(options) {
      return (await gpu.requestAdapter(options)) ?? gpu.requestAdapter({ ...options, featureLevel: 'compatibility' });
    },
    getPreferredCanvasFormat: () => gpu.getPreferredCanvasFormat(),
    get wgslLanguageFeatures() {
      return gpu.wgslLanguageFeatures;
    },
  };
}

const EMPTY_REPORT = Object.freeze({ budget: null, total: 0, idle: 0, pressure: null, entries: [], buffers: [] });

export class Engine extends Resource {
  get backend() {
    return this._raw().backend;
  }
  get generation() {
    return this._raw().generation;
  }
  get maxBindingBytes() {
    return this._raw().maxBindingBytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'Engine';
  #listeners = null;
  #choice = null;
  constructor(raw) {
    super(raw, 'engine');
  }
  /** Which backend `createEngine` chose and why (see index.d.ts). */
  get choice() {
    this._raw();
    return this.#choice;
  }
  /** The adapter, or why there is none; with `backend: 'auto'`, why this backend. */
  get note() {
    return this.#choice?.note ?? this._raw().note;
  }
  /** Sets `choice` once, from createEngine. */
  _chose(choice) {
    this.#choice = Object.freeze(choice);
    return this;
  }
  /** The `GPUDevice` edo uses now (a new one after each recovery); `null` on the CPU path. */
  get gpuDevice() {
    return this._raw().gpuDevice ?? null;
  }
  /** Calls `listener({ type: 'lost' | 'recovered' | 'failed', … })`; returns a function that stops it. */
  onDeviceEvent(f) {
    listener(f, 'onDeviceEvent(listener)');
    if (!this.#listeners) {
      // Registered with the module on first use only: the module then holds this engine's
      // listeners until the engine is disposed.
      const listeners = (this.#listeners = new Set());
      this._raw().onDeviceEvent((event) => {
        for (const g of [...listeners]) {
          try {
            g(event);
          } catch (e) {
            console.error('edo: a device-event listener threw', e);
          }
        }
      });
    }
    this.#listeners.add(f);
    return () => this.#listeners.delete(f);
  }
  /** Every GPU buffer the engine holds, by owner and purpose, with the total and the budget. */
  memoryReport() {
    const json = this._raw().memoryReport();
    const report = JSON.parse(json);
    return 'total' in report ? report : { ...EMPTY_REPORT };
  }
  /** Compiles the lookup kernel of tables of `format` and `dim` ahead of their first lookup; with `rowAlignment` (a table's), the gather and bag kernels of tables whose rows are aligned so. */
  async prepare(format, dim, options = {}) {
    const alignment = rowAlignmentOption(options, 'prepare(format, dim, options)');
    return guarded(() => this._raw().prepare(text(format, 'format'), integer(dim, 'dim', { min: 1 }), alignment));
  }
  /** Compiles the kernels a model whose table is in `format` with `dim` values (rows aligned to `rowAlignment` bytes: the model's, or `fileShape`'s) runs to embed a few texts (one `embed` of thousands compiles its own shape at its first use). */
  async prepareModel(format, dim, options = {}) {
    const alignment = rowAlignmentOption(options, 'prepareModel(format, dim, options)');
    return guarded(() => this._raw().prepareModel(text(format, 'format'), integer(dim, 'dim', { min: 1 }), alignment));
  }
  /** Makes a table resident for lookups: on the GPU in shards, or kept as is on the CPU path. */
  async uploadTable(table) {
    const t = need(table, Table, 'uploadTable(table)');
    return guarded(async () => new ResidentTable(await this._raw().upload(t._raw()), t.rows, t.dim));
  }
  /** Makes a model's table resident; its embeddings are pooled on the GPU (or the CPU path). */
  async uploadModel(model) {
    const m = need(model, Model, 'uploadModel(model)');
    return guarded(async () => new ResidentModel(await this._raw().uploadModel(m._raw())));
  }
  /** `loadModel(source, options)`, then `uploadModel`: a model ready to embed on this engine. */
  async loadModel(source, options = {}) {
    const model = await loadModel(source, options);
    try {
      if (this.backend === 'webgpu') await this.prepareModel(model.format, model.dim, { rowAlignment: model.rowAlignment });
      return await this.uploadModel(model);
    } finally {
      model.dispose(); // the resident model keeps its own copy
    }
  }
  /** A hot-row cache of `capacity` rows of `table` on the GPU (`policy` 'lru', 'lfu', 'arc', or one of them behind W-TinyLFU admission: 'lru+tinylfu', 'lfu+tinylfu', 'arc+tinylfu'). */
  async cache(table, options = {}) {
    const t = need(table, Table, 'cache(table)');
    const { capacity, policy } = plainObject(options, 'cache(table, options)');
    return guarded(async () => new RowCache(await this._raw().cache(t._raw(), integer(capacity, 'options.capacity', { min: 1 }), optionalText(policy, 'options.policy'))));
  }
  /** A hot-row cache over an `.edo` table file at `url`, read with Range requests. */
  async cacheRemote(url, options = {}) {
    const { capacity, policy } = plainObject(options, 'cacheRemote(url, options)');
    return guarded(async () => new RowCache(await this._raw().cacheRemote(text(url, 'url'), integer(capacity, 'options.capacity', { min: 1 }), optionalText(policy, 'options.policy'))));
  }
  /** Makes binary codes (a table in format 'binary') resident for Hamming search. */
  async uploadCodes(codes) {
    const t = need(codes, Table, 'uploadCodes(codes)');
    return guarded(async () => new BinaryCodes(await this._raw().uploadCodes(t._raw()), t.dim));
  }
  /**
   * edo's benchmark suite in this tab on this engine and the CPU path: `{ scale: 'quick' | 'tiny',
   * model, onProgress({ done, total, label }) }`. Resolves to the results (the schema `edo bench
   * compare` reads); `report(results)` draws them.
   */
  async benchmark(options = {}) {
    const { scale, model, onProgress } = plainObject(options, 'benchmark(options)');
    if (onProgress !== undefined) listener(onProgress, 'options.onProgress');
    const progress = onProgress && ((done, total, label) => onProgress({ done, total, label }));
    const ua = typeof navigator !== 'undefined' ? navigator.userAgent : `node ${globalThis.process?.version ?? ''}`;
    const json = await guarded(() =>
      model === undefined
        ? this._raw().benchSuite(optionalText(scale, 'options.scale'), ua, progress)
        : this._raw().benchSuiteWithModel(need(model, Model, 'options.model')._raw(), optionalText(scale, 'options.scale'), ua, progress),
    );
    // What only JavaScript knows: the runtime, and the module's compile and instantiate time.
    const results = JSON.parse(json);
    const runtime = runtimeName();
    if (results.environment) results.environment.runtime = runtime;
    if (results.machine && !runtime.startsWith('browser')) results.machine.os = `wasm32 in ${runtime}`;
    if (results.cold_start) results.cold_start.module_s = moduleSeconds;
    return results;
  }
  /** Destroys the WebGPU device as a GPU-process crash would (for testing recovery). */
  loseDevice() {
    this._raw().loseDevice();
  }
  /** Rebuilds now if the device is lost; resolves to whether it rebuilt. */
  async recover() {
    return guarded(() => this._raw().recover());
  }
}
function need(v, Class, name) {
  if (!(v instanceof Class)) throw invalid(`${name} must be a ${Class.name} (got ${describe(v)})`);
  return v;
}

// ---- Tables ----------------------------------------------------------------------------------

/**
 * Quantises a row-major `rows × dim` table of f32 values to `format` (default 'fp32'). With
 * `keep` (a flag a row), only the kept rows are stored: the others take no memory and read as
 * zeros (a pruned table). With `rowAlignment` (bytes, a power of two from 4 to 256), each row
 * starts on a multiple of it once uploaded to a GPU (16 lets rows of 8-bit codes — INT8, FP8,
 * q8_0 — of a dim that is a multiple of 16 be read sixteen codes a load); the table's own bytes
 * stay packed.
 */
export async function createTable(data, options) {
  const { rows, dim, format = 'fp32', keep, rowAlignment } = plainObject(options, 'createTable(data, options)');
  integer(rows, 'options.rows', { min: 1 });
  integer(dim, 'options.dim', { min: 1 });
  const values = floats(data, 'data', rows * dim);
  const kept = keep === undefined ? undefined : flags(keep, 'options.keep', rows);
  const alignment = rowAlignment === undefined ? undefined : rowAlignmentOf(rowAlignment, 'options.rowAlignment');
  await init();
  return guardedSync(() => new Table(wasm.EdoTable.fromFloat32(values, rows, dim, text(format, 'options.format'), kept, alignment)));
}

/**
 * Reads a table file's bytes, its kind from `options.name`'s extension: `.edo`, `.npy`,
 * `.safetensors`, `.gguf`, word2vec `.txt`; `format` requantises, `layout` names packed arrays
 * (fbgemm8, fbgemm4, packbits, packbits-lsb, or the format `edo export` wrote them in, with
 * `dim` where their width fits several), `tensor` picks one of a file's tensors.
 */
export async function readTable(bytes, options) {
  const { name, format, layout, tensor, dim } = plainObject(options, 'readTable(bytes, options)');
  const b = bytesOf(bytes, 'bytes');
  const width = dim === undefined ? undefined : integer(dim, 'options.dim', { min: 1, max: 0xffffffff });
  await init();
  return guardedSync(() => new Table(wasm.EdoTable.fromBytes(b, text(name, 'options.name'), optionalText(format, 'options.format'), optionalText(layout, 'options.layout'), optionalText(tensor, 'options.tensor'), width)));
}

/** edo's built-in synthetic `rows × dim` table (the demo's default), as f32. */
export async function syntheticTable(rows, dim, options = {}) {
  const { seed = 7 } = plainObject(options, 'syntheticTable(rows, dim, options)');
  integer(rows, 'rows', { min: 1 });
  integer(dim, 'dim', { min: 1 });
  await init();
  return guardedSync(() => new Table(wasm.EdoTable.synthetic(rows, dim, integer(seed, 'options.seed', { max: 0xffffffff }))));
}

/** A packed table in WebAssembly memory. */

export class Table extends Resource {
  get format() {
    return this._raw().format;
  }
  get rows() {
    return this._raw().rows;
  }
  get dim() {
    return this._raw().dim;
  }
  get bytes() {
    return this._raw().bytes;
  }
  get f32Bytes() {
    return this._raw().f32Bytes;
  }
  get remapped() {
    return this._raw().remapped;
  }
  get storedRows() {
    return this._raw().storedRows;
  }
  get rowAlignment() {
    return this._raw().rowAlignment;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'Table';
  constructor(raw) {
    super(raw, 'table');
  }
  /** The same table in another format. */
  async quantize(format) {
    return guardedSync(() => new Table(this._raw().quantize(text(format, 'format'))));
  }
  /**
   * Binary codes that keep more neighbours than plain signs: `kind` 'centered' (the mean row
   * subtracted first) or 'itq' (centred, then rotated by a rotation trained on the rows;
   * `options.iterations`, default 50; needs more rows than dim). The codes keep their transform:
   * `Engine.uploadCodes` searches with queries put through it, and `toBytes` stores it.
   */
  async quantizeCodes(kind, options = {}) {
    const k = text(kind, 'kind');
    if (k !== 'centered' && k !== 'itq') throw invalid(`kind is ${JSON.stringify(k)}, not 'centered' or 'itq'`);
    const { iterations } = plainObject(options, 'quantizeCodes(options)');
    const it = iterations === undefined ? undefined : integer(iterations, 'options.iterations', { min: 1, max: 10000 });
    return guardedSync(() => new Table(this._raw().quantizeCodes(k, it)));
  }
  /**
   * The table with its rows stored by how often they are looked up, the most first, so the rows
   * lookups touch most lie together: from `counts` (one a row) or `trace` (the ids looked up).
   * Lookups take the same ids and give the same rows. The vocabulary is not carried over.
   */
  async reorder(options) {
    const { counts, trace } = plainObject(options, 'reorder(options)');
    if ((counts === undefined) === (trace === undefined)) throw invalid('reorder(options) takes one of options.counts and options.trace');
    if (counts !== undefined) {
      const c = ids(counts, 'options.counts', 'counts');
      return guardedSync(() => new Table(this._raw().reorderByCounts(c)));
    }
    const t = ids(trace, 'options.trace');
    return guardedSync(() => new Table(this._raw().reorderByTrace(t)));
  }
  /** Decoded rows of `ids` on the CPU path: `ids.length × dim` values (a pruned row reads as zeros). */
  async gather(rowIds) {
    const i = ids(rowIds, 'ids');
    return guardedSync(() => this._raw().gather(i));
  }
  /** The transform binary codes went through: 'centered', 'itq', or null (plain signs, or not codes). */
  get codes() {
    return this._raw().codes ?? null;
  }
  /** The row of `token`, if the table has a vocabulary holding it. */
  idOf(token) {
    return this._raw().idOf(text(token, 'token')) ?? null;
  }
  /** The table as `.edo` file bytes (`chunkBytes`: bytes of rows per checksum, default 1 MiB). */
  async toBytes(options = {}) {
    const { chunkBytes } = plainObject(options, 'toBytes(options)');
    return guardedSync(() => this._raw().toBytes(chunkBytes === undefined ? undefined : integer(chunkBytes, 'options.chunkBytes', { min: 1 })));
  }
}
const POOLINGS = ['sum', 'mean', 'max', 'none'];

/** A table ready for lookups on an engine. */

export class ResidentTable extends Resource {
  get backend() {
    return this._raw().backend;
  }
  get shards() {
    return this._raw().shards;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'ResidentTable';
  #rows;
  #dim;
  constructor(raw, rows, dim) {
    super(raw, 'resident table');
    this.#rows = rows;
    this.#dim = dim;
  }
  get rows() {
    this._raw();
    return this.#rows;
  }
  get dim() {
    this._raw();
    return this.#dim;
  }
  /** Decoded rows of `ids`: `ids.length × dim` values. An id out of range is an ID_OUT_OF_RANGE error. */
  async gather(rowIds) {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().gather(i));
  }
  /** `gather` rounded to f16 (nearest even), as the bits of each value. */
  async gatherF16(rowIds) {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().gatherF16(i));
  }
  /** EmbeddingBag: PyTorch's `indices` and `offsets`, `pooling` 'sum' (default), 'mean', 'max' or 'none', optional `weights`. */
  async bag(indices, offsets, options = {}) {
    const [i, o, pooling, w] = bagArgs(indices, offsets, options);
    return guarded(() => this._raw().bag(i, o, pooling, w));
  }
  /** `gather` with the rows left on the GPU (WebGPU engines only). */
  async gatherToGpu(rowIds) {
    const i = ids(rowIds, 'ids');
    return guarded(async () => new GpuRows(await this._raw().gatherGpu(i)));
  }
  /** `bag` with the rows left on the GPU (WebGPU engines only). */
  async bagToGpu(indices, offsets, options = {}) {
    const [i, o, pooling, w] = bagArgs(indices, offsets, options);
    return guarded(async () => new GpuRows(await this._raw().bagGpu(i, o, pooling, w)));
  }
}
function bagArgs(indices, offsets, options) {
  const { pooling = 'sum', weights } = plainObject(options, 'bag(indices, offsets, options)');
  if (!POOLINGS.includes(pooling)) throw invalid(`options.pooling must be one of ${POOLINGS.join(', ')} (got ${describe(pooling)})`);
  const i = ids(indices, 'indices');
  const w = weights === undefined ? undefined : floats(weights, 'options.weights', i.length);
  return [i, ids(offsets, 'offsets'), pooling, w];
}

/**
 * Rows left on the GPU: `buffer` is a `GPUBuffer` of the engine's `gpuDevice` (usages STORAGE,
 * COPY_SRC, COPY_DST) holding `rows × dim` values of `dtype`, row after row. `read()` copies them
 * back; `destroy()` (or `dispose()`) frees the buffer at once.
 */

export class GpuRows extends Resource {
  get buffer() {
    return this._raw().buffer;
  }
  get rows() {
    return this._raw().rows;
  }
  get dim() {
    return this._raw().dim;
  }
  get dtype() {
    return this._raw().dtype;
  }
  get bytes() {
    return this._raw().bytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'GpuRows';
  constructor(raw) {
    super(raw, 'GPU rows');
  }
  /** The rows as f32 values. */
  async read() {
    return guarded(() => this._raw().read());
  }
  /** Frees the GPU buffer now. */
  destroy() {
    this.dispose();
  }
}
/**
 * A hot-row cache on an engine (see `Engine.cache`): on WebGPU its slots on the GPU, one lookup at
 * a time; on the CPU path in WASM memory, lookups may overlap and share their fetches.
 */

export class RowCache extends Resource {
  get backend() {
    return this._raw().backend;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'RowCache';
  constructor(raw) {
    super(raw, 'cache');
  }
  /** Decoded rows of `ids`, missing rows loaded into the cache. */
  async gather(rowIds) {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().gather(i));
  }
  /** Stages the rows of the next batch that are not cached (WebGPU: uploaded; CPU path: fetched); resolves to how many. */
  async prefetch(rowIds) {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().prefetch(i));
  }
  /** Hits, misses, evictions, bytes loaded, hit rate, capacity, rows cached, shared reads (and remote traffic). */
  stats() {
    return JSON.parse(guardedSync(() => this._raw().stats));
  }
}
/** Binary codes resident for Hamming search (see `Engine.uploadCodes`). */

export class BinaryCodes extends Resource {
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'BinaryCodes';
  #dim;
  constructor(raw, dim) {
    super(raw, 'binary codes');
    this.#dim = dim;
  }
  /** Exact Hamming top-`k` of float `queries` (`n × dim`, binarised `x > 0` after the codes' transform, if any), ties to the lower row. */
  async search(queries, k) {
    const q = floats(queries, 'queries');
    if (q.length % this.#dim !== 0) throw invalid(`queries has ${q.length} values, not a multiple of the codes' dim ${this.#dim}`);
    integer(k, 'k', { min: 1 });
    return guarded(async () => {
      const n = await this._raw().search(q, k);
      try {
        return { k: n.k, ids: n.ids, distances: n.distances };
      } finally {
        n.free();
      }
    });
  }
}

// ---- Models ----------------------------------------------------------------------------------

// ---- Live tables -----------------------------------------------------------------------------

const MISSING = ['error', 'zero', 'init'];

/** 64-bit keys: a BigUint64Array as it is; an Array or typed array of integers (numbers up to 2⁵³ − 1, or bigints up to 2⁶⁴ − 1), copied. */
function keys64(v, name) {
  if (v instanceof BigUint64Array) return v;
  if (!Array.isArray(v) && !(ArrayBuffer.isView(v) && !(v instanceof DataView))) {
    throw invalid(`${name} must be a BigUint64Array or an array of integers (got ${describe(v)})`);
  }
  const out = new BigUint64Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    const ok = typeof x === 'bigint' ? x >= 0n && x <= 0xffffffffffffffffn : typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
    if (!ok) throw invalid(`${name}[${i}] = ${describe(x)}: keys are integers from 0 to 2⁶⁴ − 1 (bigints past 2⁵³ − 1)`);
    out[i] = BigInt(x);
  }
  return out;
}

function missingOf(v) {
  const m = v === undefined ? 'error' : text(v, 'options.missing');
  if (!MISSING.includes(m)) throw invalid(`options.missing is ${JSON.stringify(m)}, not one of ${MISSING.join(', ')}`);
  return m;
}

function liveOptions(options, what) {
  const { capacity, maxRows, policy } = plainObject(options, what);
  return [
    capacity === undefined ? undefined : integer(capacity, 'options.capacity', { min: 1 }),
    maxRows === undefined ? undefined : integer(maxRows, 'options.maxRows', { min: 1 }),
    optionalText(policy, 'options.policy'),
  ];
}

/**
 * A table of rows by 64-bit key (item ids, hashes) that takes new keys, updates, update logs and
 * snapshot swaps on the CPU path: `format` and `dim`; `init`, a new key's first row (zeros
 * without it); past `maxRows` keys a new key evicts by `policy` (lru, lfu, arc, or with
 * +tinylfu). Every lookup sees each row wholly old or wholly new.
 */
export async function createLiveTable(options) {
  const { format = 'int8', dim, init: initial } = plainObject(options, 'createLiveTable(options)');
  integer(dim, 'options.dim', { min: 1 });
  const [capacity, maxRows, policy] = liveOptions(options, 'createLiveTable(options)');
  const row = initial === undefined ? undefined : floats(initial, 'options.init', dim);
  await init();
  return guardedSync(() => new LiveTable(new wasm.EdoLiveTable(text(format, 'options.format'), dim, capacity, maxRows, policy, row)));
}

/** A live table holding an `.edo` file's rows: a live table's `toBytes()`, or a plain table whose row `i` is key `i`. */
export async function readLiveTable(bytes, options = {}) {
  const b = bytesOf(bytes, 'bytes');
  const [, maxRows, policy] = liveOptions(options, 'readLiveTable(bytes, options)');
  await init();
  return guardedSync(() => new LiveTable(wasm.EdoLiveTable.fromBytes(b, maxRows, policy)));
}

/**
 * A batch of updates as update-log bytes (the `EDOUPDT1` format `edo update` and
 * `LiveTable.applyLog` read); `header: true` (the default) starts a new log with it.
 */
export async function encodeUpdates(keys, values, options) {
  const { dim, header = true } = plainObject(options, 'encodeUpdates(keys, values, options)');
  integer(dim, 'options.dim', { min: 1 });
  const k = keys64(keys, 'keys');
  const v = floats(values, 'values', k.length * dim);
  await init();
  return guardedSync(() => wasm.updateLogBytes(dim, k, v, header === true));
}

export class LiveTable extends Resource {
  get format() {
    return this._raw().format;
  }
  get dim() {
    return this._raw().dim;
  }
  get keys() {
    return this._raw().keys;
  }
  get capacity() {
    return this._raw().capacity;
  }
  get version() {
    return this._raw().version;
  }
  get bytes() {
    return this._raw().bytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'LiveTable';
  constructor(raw) {
    super(raw, 'live table');
  }
  /** Whether the table holds `key`. */
  has(key) {
    return this._raw().has(keys64([key], 'key')[0]);
  }
  /** The rows of `keys` (`keys.length × dim` values); an unknown key is an ID_OUT_OF_RANGE error, or with `missing` 'zero' or 'init' a zero or initial row. */
  async gather(keys, options = {}) {
    const { missing } = plainObject(options, 'gather(keys, options)');
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().gather(k, missingOf(missing)));
  }
  /** The rows of `keys`, giving the keys the table does not hold a slot and their initial row first. */
  async findOrInsert(keys) {
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().findOrInsert(k));
  }
  /** EmbeddingBag over keys: `offsets` one start per bag and the end (FBGEMM's), `pooling` sum, mean, max or none. */
  async bag(keys, offsets, options = {}) {
    const { pooling = 'sum', missing, weights } = plainObject(options, 'bag(keys, offsets, options)');
    const k = keys64(keys, 'keys');
    const o = ids(offsets, 'offsets', 'offsets');
    const w = weights === undefined ? undefined : floats(weights, 'options.weights', k.length);
    return guardedSync(() => this._raw().bag(k, o, text(pooling, 'options.pooling'), missingOf(missing), w));
  }
  /** Writes `values` (`keys.length × dim`) as the rows of `keys`, inserting new keys: applied whole, or refused with nothing changed. */
  async update(keys, values) {
    const k = keys64(keys, 'keys');
    const v = floats(values, 'values', k.length * this.dim);
    const [sequence, inserted, evicted] = guardedSync(() => this._raw().update(k, v));
    return { sequence, inserted, evicted };
  }
  /** Replays update-log bytes (`encodeUpdates`, a trainer's file); every batch is checked before the first applies. Returns the batches applied. */
  async applyLog(bytes) {
    const b = bytesOf(bytes, 'bytes');
    return guardedSync(() => this._raw().applyLog(b));
  }
  /** Removes `keys`; returns how many the table held. */
  async remove(keys) {
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().remove(k));
  }
  /** Lookups of each key since it came in (0 for a key not held). */
  async usage(keys) {
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().usage(k));
  }
  /** Replaces the whole table with `.edo` file bytes once they verify and match the format and dim; otherwise an error and the table as it was. */
  async swap(bytes) {
    const b = bytesOf(bytes, 'bytes');
    const [version, keys, oldBytes, newBytes] = guardedSync(() => this._raw().swap(b));
    return { version, keys, oldBytes, newBytes };
  }
  /** The table as a keyed `.edo` file's bytes (for `readLiveTable`, `swap`, `edo lookup`). */
  async toBytes() {
    return guardedSync(() => this._raw().toBytes());
  }
}
/** A model from the bytes of an `.edo` model file (`edo quantize-model`). */
export async function modelFromBytes(bytes) {
  const b = bytesOf(bytes, 'bytes');
  await init();
  return guardedSync(() => new Model(wasm.EdoModel.fromBytes(b)));
}

/** A model from a model2vec folder's files (`config` may be omitted). */
export async function modelFromFiles(files) {
  const { config, tokenizer, model } = plainObject(files, 'modelFromFiles(files)');
  const c = config === undefined || config === null ? undefined : bytesOf(config, 'files.config');
  const t = bytesOf(tokenizer, 'files.tokenizer');
  const m = bytesOf(model, 'files.model');
  await init();
  return guardedSync(() => new Model(wasm.EdoModel.fromFiles(c, t, m)));
}

/** A static embedding model in WebAssembly memory; `embed` runs it on the CPU path. */
export class Model extends Resource {
  get dim() {
    return this._raw().dim;
  }
  get vocabSize() {
    return this._raw().vocabSize;
  }
  get rows() {
    return this._raw().rows;
  }
  get format() {
    return this._raw().format;
  }
  get rowAlignment() {
    return this._raw().rowAlignment;
  }
  get bytes() {
    return this._raw().bytes;
  }
  get normalize() {
    return this._raw().normalize;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'Model';
  constructor(raw) {
    super(raw, 'model');
  }
  /** Sentence vectors of `texts` on the CPU path: `texts.length × dim` values. */
  async embed(list) {
    const t = texts(list, 'texts');
    return guardedSync(() => this._raw().embed(t));
  }
  /** The token ids of `text` that count. */
  async tokenize(s) {
    const t = text(s, 'text');
    return guardedSync(() => this._raw().tokenize(t));
  }
  /** The same model with its table in another format. */
  async quantize(format) {
    return guardedSync(() => new Model(this._raw().quantize(text(format, 'format'))));
  }
  /** The model as `.edo` model file bytes. */
  async toBytes() {
    return guardedSync(() => this._raw().toBytes());
  }
}
/** A model ready to embed on an engine (see `Engine.uploadModel`, `Engine.loadModel`). */

export class ResidentModel extends Resource {
  get backend() {
    return this._raw().backend;
  }
  get dim() {
    return this._raw().dim;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'ResidentModel';
  constructor(raw) {
    super(raw, 'resident model');
  }
  /** Sentence vectors of `texts`: `texts.length × dim` values (tokenized here, pooled on the engine). */
  async embed(list) {
    const t = texts(list, 'texts');
    return guarded(() => this._raw().embed(t));
  }
  /** `embed` with the vectors left on the GPU (WebGPU engines only). */
  async embedToGpu(list) {
    const t = texts(list, 'texts');
    return guarded(async () => new GpuRows(await this._raw().embedGpu(t)));
  }
  /** A semantic-search index of `lines` (binary codes and INT8 vectors, on the engine). */
  async index(lines) {
    const t = texts(lines, 'lines');
    return guarded(async () => new SearchIndex(await this._raw().index(t)));
  }
}
/** Sentence vectors of a corpus, searchable by meaning (see `ResidentModel.index`). */

export class SearchIndex extends Resource {
  get rows() {
    return this._raw().rows;
  }
  get bytes() {
    return this._raw().bytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'SearchIndex';
  constructor(raw) {
    super(raw, 'search index');
  }
  /** The `k` lines nearest `query`: `{ ids, scores }`, best first (`multiplier`: candidates per result, default 4). */
  async search(query, k = 10, options = {}) {
    const q = text(query, 'query');
    integer(k, 'k', { min: 1 });
    const { multiplier } = plainObject(options, 'search(query, k, options)');
    const m = multiplier === undefined ? undefined : integer(multiplier, 'options.multiplier', { min: 1 });
    return guarded(async () => {
      const found = await this._raw().search(q, k, m);
      try {
        return { ids: found.ids, scores: found.scores };
      } finally {
        found.free();
      }
    });
  }
}
// ---- Downloads and the model cache -----------------------------------------------------------

const CACHE_NAME = 'edo-models';
const FOLDER_FILES = [
  { name: 'config.json', key: 'config', optional: true },
  { name: 'tokenizer.json', key: 'tokenizer' },
  { name: 'model.safetensors', key: 'model' },
];

function defaultStore() {
  return typeof caches !== 'undefined' ? caches.open(CACHE_NAME) : null;
}

async function storeOf(cache) {
  if (cache === false) return null;
  if (cache === undefined || cache === true) return guarded(() => defaultStore());
  if (cache && typeof cache.match === 'function' && typeof cache.put === 'function' && typeof cache.delete === 'function') return cache;
  throw invalid(`options.cache must be true, false or a Cache (got ${describe(cache)})`);
}

function abortError(url, signal) {
  return new EdoError('ABORTED', `the download of ${url} was aborted`, { cause: signal?.reason });
}

/** Fetches `url` whole, reporting progress; an HTML page instead of a file is a BAD_FILE error. */
async function download(url, { signal, report, optional }) {
  if (signal?.aborted) throw abortError(url, signal);
  let response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    if (signal?.aborted) throw abortError(url, signal);
    throw new EdoError('NETWORK', `${url}: ${e?.message ?? e}`, { cause: e });
  }
  if (!response.ok) {
    if (optional && response.status === 404) return null;
    throw new EdoError('HTTP', `${url}: HTTP ${response.status} ${response.statusText}`.trim());
  }
  const type = response.headers.get('content-type') ?? '';
  const lengthHeader = response.headers.get('content-length');
  const encoded = response.headers.get('content-encoding');
  // A compressed body's length is not what the reader sees: no total then.
  const total = lengthHeader !== null && !encoded ? Number(lengthHeader) : null;
  const chunks = [];
  let loaded = 0;
  report(loaded, total);
  try {
    if (response.body) {
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
        loaded += value.length;
        report(loaded, total);
      }
    } else {
      const all = new Uint8Array(await response.arrayBuffer());
      chunks.push(all);
      loaded = all.length;
      report(loaded, total);
    }
  } catch (e) {
    if (signal?.aborted) throw abortError(url, signal);
    throw new EdoError('NETWORK', `${url}: the body was cut short after ${loaded} bytes (${e?.message ?? e})`, { cause: e });
  }
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.length;
  }
  if (total !== null && loaded !== total) throw new EdoError('NETWORK', `${url}: ${loaded} of ${total} bytes arrived`);
  if (type.includes('text/html') || looksLikeHtml(bytes)) {
    throw new EdoError('BAD_FILE', `${url} answered with an HTML page, not a model file (is the address right?)`);
  }
  return bytes;
}

function looksLikeHtml(bytes) {
  const head = new TextDecoder().decode(bytes.subarray(0, 64)).trimStart().toLowerCase();
  return head.startsWith('<!doctype html') || head.startsWith('<html');
}

// A model on a hub by name ('owner/name', as the Hugging Face hub spells them): two path segments,
// no scheme, no leading or trailing slash, not an .edo file. A relative folder URL ends with '/'.
const HUB = 'https://huggingface.co';
const isName = (source) => typeof source === 'string' && /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(source) && !/\.edo$/i.test(source);

/** `{ host, revision }` of a name's options, checked, and the folder URL they give. */
function hubOf(name, options) {
  const host = (optionalText(options.host, 'options.host') ?? HUB).replace(/\/+$/, '');
  const revision = optionalText(options.revision, 'options.revision') ?? 'main';
  return { id: `${name}@${revision} on ${host}`, base: `${host}/${name}/resolve/${encodeURIComponent(revision)}/` };
}

/**
 * The files of a model on a hub: a model2vec model (config.json at the top, with tokenizer.json and
 * model.safetensors) or a sentence-transformers one (modules.json naming its StaticEmbedding
 * module's folder). `fetchOne(url, fromNetwork)` gives a file's bytes or null: the layout is
 * looked up in the cache before the network, so a cached model makes no request.
 */
async function hubPlan(name, options, fetchOne) {
  const { id, base } = hubOf(name, options);
  const file = (key, name, extra) => ({ key, name, url: base + name, ...extra });
  const tried = [];
  let config = await fetchOne(base + 'config.json', false);
  let modules = config ? null : await fetchOne(base + 'modules.json', false);
  if (!config && !modules) {
    config = await fetchOne(base + 'config.json', true, tried);
    if (!config) modules = await fetchOne(base + 'modules.json', true, tried);
  }
  if (config) {
    return { id, files: [file('config', 'config.json', { bytes: config }), file('tokenizer', 'tokenizer.json'), file('model', 'model.safetensors')], kind: 'folder' };
  }
  if (!modules) {
    throw new EdoError('HTTP', `${id}: no model there (${tried.join('; ')}): a model2vec model has config.json, a sentence-transformers one modules.json`);
  }
  const dir = guardedSync(() => wasm.EdoModel.sentenceTransformersModule(modules)) ?? '';
  const sub = dir ? `${dir.replace(/\/+$/, '')}/` : '';
  return {
    id,
    kind: 'sentence-transformers',
    files: [
      file('modules', 'modules.json', { bytes: modules }),
      file('stConfig', 'config_sentence_transformers.json', { optional: true }),
      file('tokenizer', `${sub}tokenizer.json`),
      file('model', `${sub}model.safetensors`),
    ],
  };
}

/** The files a source names: one `.edo` file, or a model2vec folder's three. */
function filesOf(source) {
  if (typeof source === 'object' && source !== null && !Array.isArray(source)) {
    const files = [];
    for (const f of FOLDER_FILES) {
      if (source[f.key] === undefined) {
        if (!f.optional) throw invalid(`source.${f.key} (the URL of ${f.name}) is missing`);
      } else {
        files.push({ ...f, url: text(source[f.key], `source.${f.key}`) });
      }
    }
    return { id: files.map((f) => f.url).join(' '), files, kind: 'folder' };
  }
  const url = text(source, 'source');
  const path = url.split(/[?#]/)[0];
  if (/\.edo$/i.test(path)) return { id: url, files: [{ name: 'model.edo', key: 'edo', url }], kind: 'edo' };
  const base = path.endsWith('/') ? url : `${url}/`;
  return { id: base, files: FOLDER_FILES.map((f) => ({ ...f, url: new URL(f.name, absolute(base)).href })), kind: 'folder' };
}

function absolute(url) {
  try {
    return new URL(url).href;
  } catch {
    return new URL(url, globalThis.location?.href ?? 'http://localhost/').href;
  }
}

async function cachedBytes(store, url) {
  if (!store) return null;
  const hit = await store.match(url);
  if (!hit) return null;
  if (hit.headers.get('x-edo-package') !== VERSION) return null; // written by another version of the package
  return new Uint8Array(await hit.arrayBuffer());
}

/**
 * A model from a URL: an `.edo` model file, or a model2vec folder (its `config.json`,
 * `tokenizer.json` and `model.safetensors`; or an object of their URLs); or by name on a hub,
 * 'owner/name' (`options.revision`, default 'main'; `options.host`, default the Hugging Face hub):
 * a model2vec or sentence-transformers static model's files. Streams each file,
 * calling `onProgress({ url, file, files, loaded, total, fromCache })`; `signal` aborts; kept in
 * Cache Storage (`cache: true`, the default where there is one; `false`; or your own `Cache`) so
 * the next load makes no request. A cached copy that no longer reads is dropped and downloaded
 * again.
 */
export async function loadModel(source, options = {}) {
  const { onProgress, signal, cache } = plainObject(options, 'loadModel(source, options)');
  if (onProgress !== undefined) listener(onProgress, 'options.onProgress');
  if (signal !== undefined && !(typeof signal === 'object' && signal !== null && 'aborted' in signal)) throw invalid(`options.signal must be an AbortSignal (got ${describe(signal)})`);
  const [store] = await Promise.all([storeOf(cache), init()]);
  // A name's layout files: from the cache, or (fromNetwork) downloaded, null when absent (a 404,
  // noted in `tried`).
  const prefetched = new Set();
  const fetchOne = async (url, fromNetwork, tried) => {
    if (!fromNetwork) return guarded(() => cachedBytes(store, url));
    const bytes = await download(url, { signal, report: () => {}, optional: true });
    if (bytes) prefetched.add(url);
    else tried.push(`${url}: HTTP 404`);
    return bytes;
  };
  const plan = isName(source) ? await hubPlan(source, options, fetchOne) : filesOf(source);
  const fetchAll = async (useCache) => {
    const got = {};
    let fromCache = true;
    for (let i = 0; i < plan.files.length; i++) {
      const f = plan.files[i];
      const report = (loaded, total, hit = false) => onProgress?.({ url: f.url, file: i + 1, files: plan.files.length, loaded, total, fromCache: hit });
      let bytes = useCache ? (f.bytes ?? (await guarded(() => cachedBytes(store, f.url)))) : null;
      if (bytes && prefetched.has(f.url)) {
        fromCache = false;
        report(bytes.length, bytes.length);
      } else if (bytes) {
        report(bytes.length, bytes.length, true);
      } else {
        fromCache = false;
        bytes = await download(f.url, { signal, report, optional: f.optional });
      }
      if (bytes) got[f.key] = bytes;
    }
    if (signal?.aborted) throw abortError(plan.id, signal);
    return { got, fromCache };
  };
  const read = ({ got }) =>
    guardedSync(
      () =>
        new Model(
          plan.kind === 'edo'
            ? wasm.EdoModel.fromBytes(got.edo)
            : plan.kind === 'sentence-transformers'
              ? wasm.EdoModel.fromSentenceTransformers(got.modules, got.stConfig, got.tokenizer, got.model)
              : wasm.EdoModel.fromFiles(got.config, got.tokenizer, got.model),
        ),
    );
  let fetched = await fetchAll(true);
  let model;
  try {
    model = read(fetched);
  } catch (e) {
    if (!fetched.fromCache || !store) throw e;
    // The cached copy is damaged: drop it and download the files again.
    await Promise.all(plan.files.map((f) => store.delete(f.url)));
    fetched = await fetchAll(false);
    model = read(fetched);
  }
  if (store && !fetched.fromCache) {
    const at = new Date().toISOString();
    await guarded(() =>
      Promise.all(
        plan.files
          .filter((f) => fetched.got[f.key])
          .map((f) => {
            const bytes = fetched.got[f.key];
            const headers = { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length), 'x-edo-package': VERSION, 'x-edo-model': plan.id, 'x-edo-cached-at': at };
            return store.put(f.url, new Response(bytes, { headers }));
          }),
      ),
    );
  }
  return model;
}

/** The models kept in Cache Storage by `loadModel`, and a way to drop them. */
export const modelCache = {
  /** `[{ model, files, bytes, cachedAt }]`, one entry per model loaded. */
  async list(options = {}) {
    const store = await storeOf(plainObject(options, 'modelCache.list(options)').cache);
    if (!store) return [];
    const models = new Map();
    for (const request of await store.keys()) {
      const hit = await store.match(request);
      if (!hit) continue;
      const model = hit.headers.get('x-edo-model') ?? request.url;
      const entry = models.get(model) ?? { model, files: [], bytes: 0, cachedAt: hit.headers.get('x-edo-cached-at'), version: hit.headers.get('x-edo-package') };
      entry.files.push(request.url);
      entry.bytes += Number(hit.headers.get('content-length') ?? 0);
      models.set(model, entry);
    }
    return [...models.values()];
  },
  /** Drops the cached files of `source` (as given to `loadModel`, with a name's `revision` and `host`); resolves to how many. */
  async delete(source, options = {}) {
    const store = await storeOf(plainObject(options, 'modelCache.delete(source, options)').cache);
    if (!store) return 0;
    if (isName(source)) {
      // A name's files are those cached under its id (its layout decided which).
      const { id } = hubOf(source, options);
      let gone = 0;
      for (const request of await store.keys()) {
        if ((await store.match(request))?.headers.get('x-edo-model') === id && (await store.delete(request))) gone++;
      }
      return gone;
    }
    const plan = filesOf(source);
    const gone = await Promise.all(plan.files.map((f) => store.delete(f.url)));
    return gone.filter(Boolean).length;
  },
  /** Drops every cached model. */
  async clear(options = {}) {
    const { cache } = plainObject(options, 'modelCache.clear(options)');
    if (cache === undefined || cache === true) {
      if (typeof caches !== 'undefined') await caches.delete(CACHE_NAME);
      return;
    }
    const store = await storeOf(cache);
    if (store) for (const request of await store.keys()) await store.delete(request);
  },
};

// ---- Benchmark reports -----------------------------------------------------------------------

/** The charts and table of benchmark results (`engine.benchmark()`), as an HTML fragment. */
export async function report(results) {
  await init();
  const list = Array.isArray(results) ? results : [results];
  return guardedSync(() => wasm.benchReport(list.map((r) => (typeof r === 'string' ? r : JSON.stringify(r)))));
}

/** The format, rows, dim and row alignment an `.edo` file declares in its header. */
export async function fileShape(bytes) {
  const b = bytesOf(bytes, 'bytes');
  await init();
  return guardedSync(() => {
    const s = wasm.tableShape(b);
    try {
      return { format: s.format, rows: s.rows, dim: s.dim, rowAlignment: s.rowAlignment };
    } finally {
      s.free();
    }
  });
}

/** The names of every format edo stores, in `Format::ALL`'s order (for pickers). */
export async function formats() {
  await init();
  return wasm.formatNames();
}
