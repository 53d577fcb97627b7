// The package's API: a thin layer over the wasm-bindgen exports (edo_web.js) that a web developer
// would write by hand — options objects, typed results, promises, dispose(), typed errors, models
// downloaded with progress and kept in Cache Storage. Entry points: index.ts (browsers and
// bundlers), node.ts (Node), worker.ts (the worker's side of createWorkerEngine). The package's
// `.d.ts` files are generated from these sources (scripts/web/build-npm.sh); what a user may call is
// typed here, and every argument is checked again at run time for callers without types.
/// <reference types="@webgpu/types" preserve="true" />
/// <reference lib="esnext.disposable" preserve="true" />
import * as wasm from './edo_web.js';
import type * as suiteWasm from './edo_web_suite.js';
import { VERSION } from './version.js';

/** This package's version (the crate's). */
export { VERSION };

// ---- Loading the module ----------------------------------------------------------------------

/** Where the `.wasm` comes from, when not from beside the package's own files. */
export type WasmSource = string | URL | Response | BufferSource | WebAssembly.Module;

/** How an entry point loads the module: resolves to its exports (`memory` among them). */
type Loader = (source: WasmSource | undefined) => Promise<{ memory?: WebAssembly.Memory }> | { memory?: WebAssembly.Memory };

let loader: Loader | null = null;
let loading: Promise<void> | null = null;
let memory: WebAssembly.Memory | null = null; // the module's memory, once loaded
let moduleSeconds: number | null = null; // compiling and instantiating it took, for benchmark()'s cold start

/** The benchmark module's exports: edo_web.js's API and the benchmark suite with its reports. */
type SuiteModule = typeof suiteWasm;

/** How an entry point loads the benchmark module: resolves to its glue, started. */
type SuiteLoader = (source: WasmSource | undefined) => Promise<SuiteModule>;

let suiteLoader: SuiteLoader | null = null;
let suiteSource: WasmSource | undefined; // init's `benchmarkWasm`
let suiteLoading: Promise<SuiteModule> | null = null;

/**
 * Set by the entry point: how this environment loads the .wasm.
 * @internal
 */
export function _useLoader(load: Loader): void {
  loader = load;
}

/**
 * Set by the entry point: how this environment loads the benchmark module.
 * @internal
 */
export function _useSuiteLoader(load: SuiteLoader): void {
  suiteLoader = load;
}

/** Where init's modules come from, when not from beside the package's own files. */
export interface InitOptions {
  /** edo's module (`edo_web_bg.wasm`): a URL, a Response, its bytes or a compiled module. */
  wasm?: WasmSource;
  /**
   * The benchmark module (`edo_web_suite_bg.wasm`), which only `engine.benchmark()` and
   * `report()` load: where Workers must import every module (a compiled module), or to serve it
   * from elsewhere.
   */
  benchmarkWasm?: WasmSource;
}

/**
 * Loads and starts edo's WebAssembly module; every factory calls it first, so calling it yourself
 * is needed only to load the `.wasm` from somewhere else (`{ wasm: url | Response | bytes |
 * WebAssembly.Module }`), to load it early, or to say where the benchmark module is.
 */
export function init(options: InitOptions = {}): Promise<void> {
  const { wasm: source, benchmarkWasm } = plainObject(options, 'init(options)');
  if (benchmarkWasm !== undefined) suiteSource = benchmarkWasm as WasmSource;
  if (!loading) {
    loading = Promise.resolve()
      .then(() => {
        const started = performance.now();
        if (!loader) throw new Error('no entry point set a loader (import the package, not core.js)');
        return Promise.resolve(loader(source as WasmSource | undefined)).then((exports) => [exports, (performance.now() - started) / 1000] as const);
      })
      .then(([exports, seconds]) => {
        memory = exports?.memory ?? null;
        moduleSeconds = seconds;
        wasm.installPanicHook();
      })
      .catch((e: unknown) => {
        loading = null;
        throw new EdoError('WASM_LOAD', `edo's WebAssembly module could not be loaded: ${messageOf(e)}`, { cause: e });
      });
  }
  return loading;
}

// The benchmark module (edo_web_suite_bg.wasm): the same API with the benchmark suite and its
// reports, which the module every page loads goes without (97 KB gzipped); fetched, compiled and
// started on the first benchmark() or report(), then kept.
function loadSuite(): Promise<SuiteModule> {
  if (!suiteLoading) {
    suiteLoading = init()
      .then(() => {
        if (!suiteLoader) throw new Error('no entry point set a loader (import the package, not core.js)');
        return suiteLoader(suiteSource);
      })
      .then((suite) => {
        suite.installPanicHook();
        return suite;
      })
      .catch((e: unknown) => {
        suiteLoading = null;
        if (e instanceof EdoError) throw e;
        throw new EdoError('WASM_LOAD', `edo's benchmark module could not be loaded: ${messageOf(e)}`, { cause: e });
      });
  }
  return suiteLoading;
}

/**
 * The bytes of WebAssembly memory the module holds now: its high-water mark, since WebAssembly
 * memory grows and never shrinks (0 before it is loaded). What a 128 MB limit (Cloudflare
 * Workers) counts besides JavaScript's own heap.
 */
export function wasmMemoryBytes(): number {
  return memory?.buffer.byteLength ?? 0;
}

// ---- Errors ----------------------------------------------------------------------------------

/** Stable codes of `EdoError`. */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'DISPOSED'
  | 'ABORTED'
  | 'HTTP'
  | 'NETWORK'
  | 'BAD_FILE'
  | 'UNSUPPORTED_VERSION'
  | 'CHECKSUM'
  | 'NON_FINITE'
  | 'VALUE_OUT_OF_RANGE'
  | 'SHAPE_MISMATCH'
  | 'BAD_OFFSETS'
  | 'ID_OUT_OF_RANGE'
  | 'LIMIT_EXCEEDED'
  | 'NO_GPU'
  | 'GPU_OUT_OF_MEMORY'
  | 'OUT_OF_MEMORY'
  | 'GPU_ERROR'
  | 'DEVICE_LOST'
  | 'BUSY'
  | 'UNSUPPORTED'
  | 'IO'
  | 'TOKENIZER'
  | 'UNKNOWN_TOKEN'
  | 'WASM_LOAD'
  | 'WORKER'
  | 'INTERNAL';

/** Every error edo throws or rejects with: `code` is stable, `message` names the argument. */
export class EdoError extends Error {
  declare readonly name: 'EdoError';
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    (this as { name: string }).name = 'EdoError';
    this.code = code;
  }
}

/** What an exception says: its message, or itself as text. */
function messageOf(e: unknown): string {
  return String((e as { message?: unknown } | null)?.message ?? e);
}

function wrapError(e: unknown): EdoError {
  if (e instanceof EdoError) return e;
  const err = e as { name?: unknown; code?: unknown; message?: unknown } | null;
  if (err && err.name === 'EdoError' && typeof err.code === 'string') return new EdoError(err.code as ErrorCode, String(err.message));
  if (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) {
    return new EdoError('INTERNAL', `edo's module stopped (${e.message}); its panic message is on the console`, { cause: e });
  }
  if (err && err.name === 'AbortError') return new EdoError('ABORTED', String(err.message || 'aborted'), { cause: e });
  return new EdoError('INTERNAL', messageOf(e), { cause: e });
}

async function guarded<T>(f: () => T | Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw wrapError(e);
  }
}

function guardedSync<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw wrapError(e);
  }
}

const invalid = (message: string) => new EdoError('INVALID_ARGUMENT', message);

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an Array';
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (typeof v === 'object') return `a ${(v as { constructor?: { name?: string } }).constructor?.name ?? 'object'}`;
  return `${typeof v} ${String(v)}`;
}

// The validators take what a caller without types may pass (`unknown`) and return it checked.

/** An options object's members (none for `undefined`). */
function plainObject(v: unknown, name: string): Record<string, unknown> {
  if (v === undefined) return {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid(`${name} must be an options object (got ${describe(v)})`);
  return v as Record<string, unknown>;
}

function integer(v: unknown, name: string, { min = 0, max = Number.MAX_SAFE_INTEGER } = {}): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw invalid(`${name} must be an integer from ${min} to ${max} (got ${describe(v)})`);
  }
  return v;
}

// A row alignment in bytes: a power of two from 4 to 256.
function rowAlignmentOf(v: unknown, name: string): number {
  const bytes = integer(v, name, { min: 4, max: 256 });
  if ((bytes & (bytes - 1)) !== 0) throw invalid(`${name} must be a power of two from 4 to 256 (got ${bytes})`);
  return bytes;
}

// The `rowAlignment` of a call's options (`what` names the call), checked; undefined when absent.
function rowAlignmentOption(options: unknown, what: string): number | undefined {
  const { rowAlignment } = plainObject(options, what);
  return rowAlignment === undefined ? undefined : rowAlignmentOf(rowAlignment, 'options.rowAlignment');
}

function boolean<F>(v: unknown, name: string, fallback: F): boolean | F {
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw invalid(`${name} must be true or false (got ${describe(v)})`);
  return v;
}

function text(v: unknown, name: string): string {
  if (typeof v !== 'string') throw invalid(`${name} must be a string (got ${describe(v)})`);
  return v;
}

function optionalText(v: unknown, name: string): string | undefined {
  return v === undefined || v === null ? undefined : text(v, name);
}

function texts(v: unknown, name: string): string[] {
  if (!Array.isArray(v)) {
    throw invalid(`${name} must be an array of strings (got ${describe(v)}${typeof v === 'string' ? ': wrap one text in [ ]' : ''})`);
  }
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== 'string') throw invalid(`${name}[${i}] must be a string (got ${describe(v[i])})`);
  }
  return v as string[];
}

/** An Array or a typed array other than a DataView: what lists of numbers may come as. */
function isList(v: unknown): v is ArrayLike<unknown> {
  return Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView));
}

/** Row ids: a Uint32Array as it is; an Array or another typed array of integers 0…2³²−1, copied. */
function ids(v: unknown, name: string, kind = 'ids'): Uint32Array {
  if (v instanceof Uint32Array) return v;
  if (!isList(v)) {
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
function floats(v: unknown, name: string, length?: number): Float32Array {
  let out: Float32Array;
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
function flags(v: unknown, name: string, length: number): Uint8Array {
  let out: Uint8Array;
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

function bytesOf(v: unknown, name: string): Uint8Array {
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  throw invalid(`${name} must be a Uint8Array or an ArrayBuffer (got ${describe(v)})`);
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
function listener<F extends Function>(v: unknown, name: string): F {
  if (typeof v !== 'function') throw invalid(`${name} must be a function (got ${describe(v)})`);
  return v as F;
}

// ---- Resources -------------------------------------------------------------------------------

/** Row ids: a Uint32Array, or an array of integers 0 … 2³² − 1 (copied after checking). */
export type Ids = Uint32Array | ArrayLike<number>;
/** f32 values: a Float32Array, or an array of numbers (converted). */
export type Floats = Float32Array | ArrayLike<number>;
/** File bytes. */
export type Bytes = Uint8Array | ArrayBuffer;

/** What holds memory in WebAssembly or on the GPU. */
export interface Disposable {
  /** Whether `dispose()` was called. */
  readonly disposed: boolean;
  /** Frees the memory now (GPU buffers destroyed); later calls reject with DISPOSED. */
  dispose(): void;
  [Symbol.dispose](): void;
}

const DISPOSE: typeof Symbol.dispose = Symbol.dispose ?? (Symbol.for('Symbol.dispose') as typeof Symbol.dispose);

/** What holds memory in WASM or on the GPU: `dispose()` (or `using`) frees it at once. */
class Resource<R extends { free(): void }> implements Disposable {
  #raw: R | null;
  #what: string;
  protected constructor(raw: R, what: string) {
    this.#raw = raw;
    this.#what = what;
  }
  /**
   * The wasm-bindgen object, or a DISPOSED error.
   * @internal
   */
  _raw(): R {
    if (!this.#raw) throw new EdoError('DISPOSED', `this ${this.#what} was disposed`);
    return this.#raw;
  }
  /** Whether `dispose()` was called. */
  get disposed(): boolean {
    return this.#raw === null;
  }
  /** Frees the object's memory now (its GPU buffers are destroyed); later calls are DISPOSED errors. */
  dispose(): void {
    const raw = this.#raw;
    this.#raw = null;
    raw?.free();
  }
  [DISPOSE](): void {
    this.dispose();
  }
}

// ---- The engine ------------------------------------------------------------------------------

/** Where lookups run. */
export type Backend = 'webgpu' | 'cpu';

export interface EngineOptions {
  /**
   * 'auto' (default): the CPU path where there is no adapter or only a fallback (software) one,
   * else the faster of WebGPU and the CPU path on a calibration of tens of milliseconds (a gather
   * and bags), remembered per adapter and package version (localStorage, or IndexedDB in workers)
   * so later visits skip it. 'webgpu' uses any adapter there is (the CPU path where there is
   * none), as for rows that stay on the GPU (`gatherToGpu`); 'cpu' never asks for one.
   */
  backend?: 'auto' | Backend;
  /** `false` is `backend: 'cpu'` (kept from 0.x). */
  preferGpu?: boolean;
  /**
   * The `GPU` object to ask for an adapter instead of the context's `navigator.gpu`: in Node or
   * Electron's main process, Dawn's (`import { create, globals } from 'webgpu'`, with
   * `Object.assign(globalThis, globals)`), or `navigator.gpu` set there. Default: `navigator.gpu`.
   * A GPU object given (or found outside a window or worker) is asked for a core adapter, and
   * where it has none for a compatibility-mode one (WebGPU over OpenGL ES).
   */
  gpu?: GPU;
  /** Largest bytes of one table shard, below the device's binding limit (tests use it). */
  maxShardBytes?: number;
  /** Where the `.wasm` comes from. */
  wasm?: WasmSource;
}

export type DeviceEvent =
  | { type: 'lost'; reason: string }
  | { type: 'recovered'; generation: number; residents: number; failed: string[]; bytes: number; millis: number; device: GPUDevice }
  | { type: 'failed'; reason: string };

export interface MemoryReport {
  budget: number | null;
  total: number;
  /** Bytes of idle buffers kept for the next lookups (part of `total`). */
  idle: number;
  pressure: number | null;
  entries: { owner: string; what: string; buffers: number; bytes: number }[];
  buffers: { owner: string; what: string; bytes: number }[];
}

export interface BenchmarkOptions {
  scale?: 'quick' | 'tiny';
  model?: Model;
  onProgress?: (progress: { done: number; total: number; label: string }) => void | Promise<void>;
}

/** Benchmark results in the schema `edo bench compare` reads. */
export interface BenchmarkResults {
  cases: { [key: string]: unknown }[];
  backends: { name: string; [key: string]: unknown }[];
  skipped: unknown[];
  [key: string]: unknown;
}

export type Pooling = 'sum' | 'mean' | 'max' | 'none';
export type CachePolicy = 'lru' | 'lfu' | 'arc' | 'lru+tinylfu' | 'lfu+tinylfu' | 'arc+tinylfu';

/** Which backend `createEngine` chose, and why. */
export interface BackendChoice {
  readonly backend: Backend;
  /**
   * 'requested' (options.backend), 'no-adapter', 'fallback-adapter' (a software one: the CPU
   * path), 'measured' (the calibration ran), 'remembered' (an earlier calibration on this adapter)
   * or 'calibration-failed' (WebGPU failed it: the CPU path, measured again next time).
   */
  readonly reason: 'requested' | 'no-adapter' | 'fallback-adapter' | 'measured' | 'remembered' | 'calibration-failed';
  /** The adapter's description; null without one. */
  readonly adapter: string | null;
  /** The calibration's milliseconds on each ('measured' and 'remembered'). */
  readonly webgpuMs?: number;
  readonly cpuMs?: number;
  /** How long the calibration took, engines and table included ('measured' and 'remembered'). */
  readonly calibrationMs?: number;
  readonly note: string;
}

const BACKENDS = ['auto', 'webgpu', 'cpu'];

/**
 * An engine on WebGPU or on the CPU path (plain WebAssembly, also in Node). `backend` 'auto' (the
 * default) takes the CPU path where there is no adapter or only a fallback (software) one, and
 * otherwise the faster of the two on a short calibration, remembered per adapter; 'webgpu' and
 * 'cpu' force one. `backend`, `note` and `choice` say which and why.
 */
export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const o = plainObject(options, 'createEngine(options)');
  const preferGpu = boolean(o.preferGpu, 'options.preferGpu', undefined);
  const backend = o.backend ?? (preferGpu === false ? 'cpu' : 'auto');
  if (typeof backend !== 'string' || !BACKENDS.includes(backend)) throw invalid(`options.backend must be one of ${BACKENDS.join(', ')} (got ${describe(backend)})`);
  if (preferGpu === false && backend !== 'cpu') throw invalid(`options.preferGpu false and options.backend '${backend}' disagree`);
  const maxShardBytes = o.maxShardBytes === undefined ? undefined : integer(o.maxShardBytes, 'options.maxShardBytes', { min: 4 });
  const gpu = backend === 'cpu' ? undefined : gpuOf(o.gpu);
  await init({ wasm: o.wasm as WasmSource | undefined });
  const create = (onGpu: boolean) => guarded(async () => Engine._wrap(await wasm.EdoEngine.create(onGpu, maxShardBytes, gpu))._madeWith({ maxShardBytes, gpu }));
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

/** A calibration's outcome, as remembered. */
interface Measured {
  backend: Backend;
  webgpuMs: number;
  cpuMs: number;
  calibrationMs: number;
}

// 'auto' on an adapter: the CPU path on a fallback adapter (a software rasteriser such as
// SwiftShader); otherwise the choice remembered for this adapter and package version, or the
// faster engine on the calibration, then remembered.
async function chooseBackend(gpuEngine: Engine, adapter: string, cpuEngine: () => Promise<Engine>): Promise<Engine> {
  const info: Partial<GPUAdapterInfo> & { isFallbackAdapter?: boolean } = gpuEngine.gpuDevice?.adapterInfo ?? {};
  // The CPU path chosen: the calibration's CPU engine when there was one, else a new one.
  const onCpu = async (choice: Omit<BackendChoice, 'backend' | 'adapter'>, cpu?: Engine | null) => {
    gpuEngine.dispose();
    return (cpu ?? (await cpuEngine()))._chose({ backend: 'cpu', adapter, ...choice });
  };
  if (info.isFallbackAdapter === true) {
    return onCpu({ reason: 'fallback-adapter', note: `CPU path: the adapter is a fallback (software) one, ${adapter}; createEngine({ backend: 'webgpu' }) uses it` });
  }
  const key = `edo ${VERSION} backend: ${[info.vendor, info.architecture, info.device, info.description].join('/')} ${adapter}`;
  const stored = (await remembered('get', key)) as Measured | null | undefined;
  let choice: Measured & { reason: 'remembered' | 'measured' };
  let cpu: Engine | null = null;
  if (stored?.backend === 'webgpu' || stored?.backend === 'cpu') {
    choice = { ...stored, reason: 'remembered' };
  } else {
    cpu = await cpuEngine();
    const start = performance.now();
    let measured: Measured;
    try {
      const [webgpuMs, cpuMs] = await calibrate([gpuEngine, cpu]);
      measured = { backend: webgpuMs <= cpuMs ? 'webgpu' : 'cpu', webgpuMs, cpuMs, calibrationMs: performance.now() - start };
    } catch (e) {
      // WebGPU failed its own calibration (a lost device, a driver error): the CPU path, not
      // remembered, so the next engine tries again.
      return onCpu({ reason: 'calibration-failed', note: `CPU path: WebGPU failed the calibration on ${adapter} (${messageOf(e)})` }, cpu);
    }
    await remembered('put', key, measured);
    choice = { ...measured, reason: 'measured' };
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
async function calibrate(engines: Engine[]): Promise<number[]> {
  const { rows, dim, ids: n, bag, reps } = CALIBRATION;
  const source = await syntheticTable(rows, dim);
  const table = await source.quantize('int8');
  source.dispose();
  const ids = new Uint32Array(n);
  for (let i = 0, x = 7; i < n; i++) ids[i] = (x = (Math.imul(x, 1103515245) + 12345) >>> 0) % rows;
  const offsets = Uint32Array.from({ length: n / bag }, (_, b) => b * bag);
  const times: number[] = [];
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
async function remembered(op: 'get' | 'put', key: string, value?: unknown): Promise<unknown> {
  try {
    const local = globalThis.localStorage as Storage | undefined;
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
        request.transaction!.oncomplete = () => db.close();
      };
    });
  } catch {
    return undefined;
  }
}

/** The JavaScript runtime and its version, for benchmark results. */
function runtimeName(): string {
  // What each runtime puts on the global object (none of them is in the DOM's types).
  const g = globalThis as {
    Deno?: { version?: { deno: string } };
    Bun?: { version?: string };
    process?: { versions?: { node?: string } };
    navigator?: { userAgent?: unknown };
  };
  if (g.Deno?.version) return `deno ${g.Deno.version.deno}`;
  if (g.Bun?.version) return `bun ${g.Bun.version}`;
  if (g.process?.versions?.node && typeof g.navigator?.userAgent !== 'string') return `node ${g.process.versions.node}`;
  if (g.navigator?.userAgent === 'Cloudflare-Workers') return 'workerd';
  if (g.process?.versions?.node) return `node ${g.process.versions.node}`;
  return `browser: ${g.navigator?.userAgent ?? 'unknown'}`;
}

/** What a window or worker has on its global object, and Node and Deno do not. */
const scope = globalThis as { Window?: unknown; WorkerGlobalScope?: unknown; GPUValidationError?: unknown; GPUBufferUsage?: unknown };
const inWindowOrWorker = () => typeof scope.Window === 'function' || typeof scope.WorkerGlobalScope === 'function';

// The `GPU` object to ask for an adapter: the one given, or `navigator.gpu` where no window or
// worker would give it to wgpu (Node or Electron's main process with Dawn's `webgpu` package
// installed there); undefined to let wgpu find the context's own.
function gpuOf(given: unknown): GPU | undefined {
  const gpu = given ?? (inWindowOrWorker() ? undefined : (globalThis.navigator as Navigator | undefined)?.gpu);
  if (gpu === undefined || gpu === null) return undefined;
  if (typeof gpu !== 'object' || typeof (gpu as { requestAdapter?: unknown }).requestAdapter !== 'function') {
    throw invalid(`options.gpu must be a GPU object with requestAdapter() (navigator.gpu, or Dawn's create() in Node) (got ${describe(gpu)})`);
  }
  // wgpu tells WebGPU's errors apart by their classes (GPUValidationError, …), which a browser
  // has as globals and Dawn's package exports as `globals`.
  if (typeof scope.GPUValidationError !== 'function' || scope.GPUBufferUsage === undefined) {
    throw invalid("WebGPU's classes (GPUValidationError, GPUBufferUsage, …) are not globals here: with Dawn's package, `import { create, globals } from 'webgpu'; Object.assign(globalThis, globals);` before createEngine({ gpu: create([]) })");
  }
  return compatibilityFallback(gpu as GPU);
}

// The GPU object wgpu asks: a core adapter first, and where there is none a compatibility-mode one
// (WebGPU over OpenGL ES: Dawn on Mesa's llvmpipe, phones without Vulkan). wgpu asks for no
// feature level, and edo's kernels are valid at both (the package's tests run them on Dawn's
// OpenGL ES backend).
function compatibilityFallback(gpu: GPU): GPU {
  return {
    async requestAdapter(options?: GPURequestAdapterOptions) {
      return (await gpu.requestAdapter(options)) ?? gpu.requestAdapter({ ...options, featureLevel: 'compatibility' });
    },
    getPreferredCanvasFormat: () => gpu.getPreferredCanvasFormat(),
    get wgslLanguageFeatures() {
      return gpu.wgslLanguageFeatures;
    },
  } as GPU;
}

const EMPTY_REPORT: MemoryReport = Object.freeze({ budget: null, total: 0, idle: 0, pressure: null, entries: [], buffers: [] });

/** An engine: tables, models, caches and codes made resident on it run there. */
export class Engine extends Resource<wasm.EdoEngine> {
  get backend(): Backend {
    return this._raw().backend as Backend;
  }
  get generation(): number {
    return this._raw().generation;
  }
  get maxBindingBytes(): number {
    return this._raw().maxBindingBytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'Engine';
  #listeners: Set<(event: DeviceEvent) => void> | null = null;
  #choice: BackendChoice | null = null;
  #made: { maxShardBytes?: number; gpu?: unknown } = {};
  private constructor(raw: wasm.EdoEngine) {
    super(raw, 'engine');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoEngine): Engine {
    return new Engine(raw);
  }
  /** Which backend `createEngine` chose and why. */
  get choice(): BackendChoice {
    this._raw();
    return this.#choice!;
  }
  /** The adapter, or why there is none; with `backend: 'auto'`, why this backend. */
  get note(): string {
    return this.#choice?.note ?? this._raw().note;
  }
  /**
   * What createEngine made this engine with, for the benchmark module's engine.
   * @internal
   */
  _madeWith(made: { maxShardBytes?: number; gpu?: unknown }): this {
    this.#made = made;
    return this;
  }
  /**
   * Sets `choice` once, from createEngine.
   * @internal
   */
  _chose(choice: BackendChoice): this {
    this.#choice = Object.freeze(choice);
    return this;
  }
  /** The `GPUDevice` edo uses now (a new one after each recovery); `null` on the CPU path. */
  get gpuDevice(): GPUDevice | null {
    return (this._raw().gpuDevice as GPUDevice | undefined) ?? null;
  }
  /** Hears of device losses and recoveries (`{ type: 'lost' | 'recovered' | 'failed', … }`); returns a function that stops listening. */
  onDeviceEvent(f: (event: DeviceEvent) => void): () => void {
    listener(f, 'onDeviceEvent(listener)');
    if (!this.#listeners) {
      // Registered with the module on first use only: the module then holds this engine's
      // listeners until the engine is disposed.
      const listeners = (this.#listeners = new Set());
      this._raw().onDeviceEvent((event: DeviceEvent) => {
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
    return () => {
      this.#listeners?.delete(f);
    };
  }
  /** Every GPU buffer the engine holds, by owner and purpose, with the total and the budget. */
  memoryReport(): MemoryReport {
    const report = JSON.parse(this._raw().memoryReport()) as MemoryReport | object;
    return 'total' in report ? report : { ...EMPTY_REPORT };
  }
  /** Compiles the lookup kernel of tables of `format` and `dim` ahead of their first lookup; with `rowAlignment` (a table's), the gather and bag kernels of tables whose rows are aligned so. */
  async prepare(format: string, dim: number, options: { rowAlignment?: number } = {}): Promise<void> {
    const alignment = rowAlignmentOption(options, 'prepare(format, dim, options)');
    return guarded(() => this._raw().prepare(text(format, 'format'), integer(dim, 'dim', { min: 1 }), alignment));
  }
  /** Compiles the kernels a model whose table is in `format` with `dim` values (rows aligned to `rowAlignment` bytes: the model's, or `fileShape`'s) runs to embed a few texts (one `embed` of thousands compiles its own shape at its first use). */
  async prepareModel(format: string, dim: number, options: { rowAlignment?: number } = {}): Promise<void> {
    const alignment = rowAlignmentOption(options, 'prepareModel(format, dim, options)');
    return guarded(() => this._raw().prepareModel(text(format, 'format'), integer(dim, 'dim', { min: 1 }), alignment));
  }
  /** Makes a table resident for lookups: on the GPU in shards, or kept as is on the CPU path. */
  async uploadTable(table: Table): Promise<ResidentTable> {
    const t = need(table, Table, 'uploadTable(table)');
    return guarded(async () => ResidentTable._wrap(await this._raw().upload(t._raw()), t.rows, t.dim));
  }
  /** Makes a model's table resident; its embeddings are pooled on the GPU (or the CPU path). */
  async uploadModel(model: Model): Promise<ResidentModel> {
    const m = need(model, Model, 'uploadModel(model)');
    return guarded(async () => ResidentModel._wrap(await this._raw().uploadModel(m._raw())));
  }
  /** `loadModel(source, options)`, then `uploadModel`: a model ready to embed on this engine. */
  async loadModel(source: ModelSource, options: LoadModelOptions = {}): Promise<ResidentModel> {
    const model = await loadModel(source, options);
    try {
      if (this.backend === 'webgpu') await this.prepareModel(model.format, model.dim, { rowAlignment: model.rowAlignment });
      return await this.uploadModel(model);
    } finally {
      model.dispose(); // the resident model keeps its own copy
    }
  }
  /** A hot-row cache of `capacity` rows of `table` on the GPU (`policy` 'lru', 'lfu', 'arc', or one of them behind W-TinyLFU admission: 'lru+tinylfu', 'lfu+tinylfu', 'arc+tinylfu'). */
  async cache(table: Table, options: { capacity: number; policy?: CachePolicy }): Promise<RowCache> {
    const t = need(table, Table, 'cache(table)');
    const { capacity, policy } = plainObject(options, 'cache(table, options)');
    return guarded(async () => RowCache._wrap(await this._raw().cache(t._raw(), integer(capacity, 'options.capacity', { min: 1 }), optionalText(policy, 'options.policy'))));
  }
  /** A hot-row cache over an `.edo` table file at `url`, read with Range requests. */
  async cacheRemote(url: string, options: { capacity: number; policy?: CachePolicy }): Promise<RowCache> {
    const { capacity, policy } = plainObject(options, 'cacheRemote(url, options)');
    return guarded(async () => RowCache._wrap(await this._raw().cacheRemote(text(url, 'url'), integer(capacity, 'options.capacity', { min: 1 }), optionalText(policy, 'options.policy'))));
  }
  /** Makes binary codes (a table in format 'binary') resident for Hamming search. */
  async uploadCodes(codes: Table): Promise<BinaryCodes> {
    const t = need(codes, Table, 'uploadCodes(codes)');
    return guarded(async () => BinaryCodes._wrap(await this._raw().uploadCodes(t._raw()), t.dim));
  }
  /**
   * edo's benchmark suite in this tab on this engine and the CPU path: `{ scale: 'quick' | 'tiny',
   * model, onProgress({ done, total, label }) }`. Resolves to the results (the schema `edo bench
   * compare` reads); `report(results)` draws them.
   */
  async benchmark(options: BenchmarkOptions = {}): Promise<BenchmarkResults> {
    const { scale, model, onProgress } = plainObject(options, 'benchmark(options)');
    const heard = onProgress === undefined ? undefined : listener<NonNullable<BenchmarkOptions['onProgress']>>(onProgress, 'options.onProgress');
    const progress = heard && ((done: number, total: number, label: string) => heard({ done, total, label }));
    const ua = typeof navigator !== 'undefined' ? navigator.userAgent : `node ${(globalThis as { process?: { version?: string } }).process?.version ?? ''}`;
    const scaleName = optionalText(scale, 'options.scale');
    const source = model === undefined ? undefined : need(model, Model, 'options.model')._raw();
    const onGpu = this._raw().backend === 'webgpu';
    const { maxShardBytes, gpu } = this.#made;
    const suite = await loadSuite();
    // The suite runs in the benchmark module, on an engine of its own made as this one was (the
    // same adapter, or the CPU path), with a copy of the model.
    const json = await guarded(async () => {
      const engine = await suite.EdoEngine.create(onGpu, maxShardBytes, gpu);
      const copy = source && suite.EdoModel.fromBytes(source.toBytes());
      try {
        return await (copy ? engine.benchSuiteWithModel(copy, scaleName, ua, progress) : engine.benchSuite(scaleName, ua, progress));
      } finally {
        copy?.free();
        engine.free();
      }
    });
    // What only JavaScript knows: the runtime, and the module's compile and instantiate time.
    const results = JSON.parse(json) as BenchmarkResults & {
      environment?: { runtime?: string };
      machine?: { os?: string };
      cold_start?: { module_s?: number | null };
    };
    const runtime = runtimeName();
    if (results.environment) results.environment.runtime = runtime;
    if (results.machine && !runtime.startsWith('browser')) results.machine.os = `wasm32 in ${runtime}`;
    if (results.cold_start) results.cold_start.module_s = moduleSeconds;
    return results;
  }
  /** Destroys the WebGPU device as a GPU-process crash would (for testing recovery). */
  loseDevice(): void {
    this._raw().loseDevice();
  }
  /** Rebuilds now if the device is lost; resolves to whether it rebuilt. */
  async recover(): Promise<boolean> {
    return guarded(() => this._raw().recover());
  }
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
function need<T>(v: unknown, Class: Function & { prototype: T }, name: string): T {
  if (!(v instanceof Class)) throw invalid(`${name} must be a ${Class.name} (got ${describe(v)})`);
  return v as T;
}

// ---- Tables ----------------------------------------------------------------------------------

export interface CreateTableOptions {
  rows: number;
  dim: number;
  /** Default 'fp32'. */
  format?: string;
  /** A flag a row: only kept rows are stored; the others read as zeros (a pruned table). */
  keep?: Uint8Array | boolean[];
  /** Bytes each row starts on once uploaded to a GPU: a power of two from 4 to 256. */
  rowAlignment?: number;
}

export interface ReadTableOptions {
  /** The file's name: its extension says its kind. */
  name: string;
  format?: string;
  layout?: string;
  tensor?: string;
  dim?: number;
}

/**
 * Quantises a row-major `rows × dim` table of f32 values to `format` (default 'fp32'). With
 * `keep` (a flag a row), only the kept rows are stored: the others take no memory and read as
 * zeros (a pruned table). With `rowAlignment` (bytes, a power of two from 4 to 256), each row
 * starts on a multiple of it once uploaded to a GPU (16 lets rows of 8-bit codes — INT8, FP8,
 * q8_0 — of a dim that is a multiple of 16 be read sixteen codes a load); the table's own bytes
 * stay packed.
 */
export async function createTable(data: Floats, options: CreateTableOptions): Promise<Table> {
  const { rows, dim, format = 'fp32', keep, rowAlignment } = plainObject(options, 'createTable(data, options)');
  const r = integer(rows, 'options.rows', { min: 1 });
  const d = integer(dim, 'options.dim', { min: 1 });
  const values = floats(data, 'data', r * d);
  const kept = keep === undefined ? undefined : flags(keep, 'options.keep', r);
  const alignment = rowAlignment === undefined ? undefined : rowAlignmentOf(rowAlignment, 'options.rowAlignment');
  await init();
  return guardedSync(() => Table._wrap(wasm.EdoTable.fromFloat32(values, r, d, text(format, 'options.format'), kept, alignment)));
}

/**
 * Reads a table file's bytes, its kind from `options.name`'s extension: `.edo`, `.npy`,
 * `.safetensors`, `.gguf`, word2vec `.txt`; `format` requantises, `layout` names packed arrays
 * (fbgemm8, fbgemm4, packbits, packbits-lsb, or the format `edo export` wrote them in, with
 * `dim` where their width fits several), `tensor` picks one of a file's tensors.
 */
export async function readTable(bytes: Bytes, options: ReadTableOptions): Promise<Table> {
  const { name, format, layout, tensor, dim } = plainObject(options, 'readTable(bytes, options)');
  const b = bytesOf(bytes, 'bytes');
  const width = dim === undefined ? undefined : integer(dim, 'options.dim', { min: 1, max: 0xffffffff });
  await init();
  return guardedSync(() => Table._wrap(wasm.EdoTable.fromBytes(b, text(name, 'options.name'), optionalText(format, 'options.format'), optionalText(layout, 'options.layout'), optionalText(tensor, 'options.tensor'), width)));
}

/** edo's built-in synthetic `rows × dim` table (the demo's default), as f32. */
export async function syntheticTable(rows: number, dim: number, options: { seed?: number } = {}): Promise<Table> {
  const { seed = 7 } = plainObject(options, 'syntheticTable(rows, dim, options)');
  integer(rows, 'rows', { min: 1 });
  integer(dim, 'dim', { min: 1 });
  await init();
  return guardedSync(() => Table._wrap(wasm.EdoTable.synthetic(rows, dim, integer(seed, 'options.seed', { max: 0xffffffff }))));
}

/** The transform binary codes went through. */
export type CodesKind = 'centered' | 'itq';

/** A packed table in WebAssembly memory. */
export class Table extends Resource<wasm.EdoTable> {
  get format(): string {
    return this._raw().format;
  }
  get rows(): number {
    return this._raw().rows;
  }
  get dim(): number {
    return this._raw().dim;
  }
  get bytes(): number {
    return this._raw().bytes;
  }
  get f32Bytes(): number {
    return this._raw().f32Bytes;
  }
  /** Whether the rows are stored in another order than their ids (reordered) or some are left out (pruned). */
  get remapped(): boolean {
    return this._raw().remapped;
  }
  /** Rows stored: `rows`, or fewer for a pruned table. */
  get storedRows(): number {
    return this._raw().storedRows;
  }
  /** Bytes each row starts on once uploaded to a GPU: 4 (packed), or what `createTable`'s `rowAlignment` or the `.edo` file asked for (16 lets rows of 8-bit codes — INT8, FP8, q8_0 — be read sixteen codes a load). */
  get rowAlignment(): number {
    return this._raw().rowAlignment;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'Table';
  private constructor(raw: wasm.EdoTable) {
    super(raw, 'table');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoTable): Table {
    return new Table(raw);
  }
  /** The same table in another format. */
  async quantize(format: string): Promise<Table> {
    return guardedSync(() => Table._wrap(this._raw().quantize(text(format, 'format'))));
  }
  /**
   * Binary codes that keep more neighbours than plain signs: `kind` 'centered' (the mean row
   * subtracted first) or 'itq' (centred, then rotated by a rotation trained on the rows;
   * `options.iterations`, default 50; needs more rows than dim). The codes keep their transform:
   * `Engine.uploadCodes` searches with queries put through it, and `toBytes` stores it.
   */
  async quantizeCodes(kind: CodesKind, options: { iterations?: number } = {}): Promise<Table> {
    const k = text(kind, 'kind');
    if (k !== 'centered' && k !== 'itq') throw invalid(`kind is ${JSON.stringify(k)}, not 'centered' or 'itq'`);
    const { iterations } = plainObject(options, 'quantizeCodes(options)');
    const it = iterations === undefined ? undefined : integer(iterations, 'options.iterations', { min: 1, max: 10000 });
    return guardedSync(() => Table._wrap(this._raw().quantizeCodes(k, it)));
  }
  /**
   * The table with its rows stored by how often they are looked up, the most first, so the rows
   * lookups touch most lie together: from `counts` (one a row) or `trace` (the ids looked up).
   * Lookups take the same ids and give the same rows. The vocabulary is not carried over.
   */
  async reorder(options: { counts: Ids } | { trace: Ids }): Promise<Table> {
    const { counts, trace } = plainObject(options, 'reorder(options)');
    if ((counts === undefined) === (trace === undefined)) throw invalid('reorder(options) takes one of options.counts and options.trace');
    if (counts !== undefined) {
      const c = ids(counts, 'options.counts', 'counts');
      return guardedSync(() => Table._wrap(this._raw().reorderByCounts(c)));
    }
    const t = ids(trace, 'options.trace');
    return guardedSync(() => Table._wrap(this._raw().reorderByTrace(t)));
  }
  /** Decoded rows of `ids` on the CPU path: `ids.length × dim` values (a pruned row reads as zeros). */
  async gather(rowIds: Ids): Promise<Float32Array> {
    const i = ids(rowIds, 'ids');
    return guardedSync(() => this._raw().gather(i));
  }
  /** The transform binary codes went through: 'centered', 'itq', or null (plain signs, or not codes). */
  get codes(): CodesKind | null {
    return (this._raw().codes as CodesKind | undefined) ?? null;
  }
  /** The row of `token`, if the table has a vocabulary holding it. */
  idOf(token: string): number | null {
    return this._raw().idOf(text(token, 'token')) ?? null;
  }
  /** The table as `.edo` file bytes (`chunkBytes`: bytes of rows per checksum, default 1 MiB). */
  async toBytes(options: { chunkBytes?: number } = {}): Promise<Uint8Array> {
    const { chunkBytes } = plainObject(options, 'toBytes(options)');
    return guardedSync(() => this._raw().toBytes(chunkBytes === undefined ? undefined : integer(chunkBytes, 'options.chunkBytes', { min: 1 })));
  }
}

const POOLINGS = ['sum', 'mean', 'max', 'none'];

export interface BagOptions {
  pooling?: Pooling;
  weights?: Floats;
}

/** A table ready for lookups on an engine. */
export class ResidentTable extends Resource<wasm.EdoResident> {
  get backend(): Backend {
    return this._raw().backend as Backend;
  }
  get shards(): number {
    return this._raw().shards;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'ResidentTable';
  #rows: number;
  #dim: number;
  private constructor(raw: wasm.EdoResident, rows: number, dim: number) {
    super(raw, 'resident table');
    this.#rows = rows;
    this.#dim = dim;
  }
  /** @internal */
  static _wrap(raw: wasm.EdoResident, rows: number, dim: number): ResidentTable {
    return new ResidentTable(raw, rows, dim);
  }
  get rows(): number {
    this._raw();
    return this.#rows;
  }
  get dim(): number {
    this._raw();
    return this.#dim;
  }
  /** Decoded rows of `ids`: `ids.length × dim` values. An id out of range is an ID_OUT_OF_RANGE error. */
  async gather(rowIds: Ids): Promise<Float32Array> {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().gather(i));
  }
  /** `gather` rounded to f16 (nearest even), as the bits of each value. */
  async gatherF16(rowIds: Ids): Promise<Uint16Array> {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().gatherF16(i));
  }
  /** EmbeddingBag: PyTorch's `indices` and `offsets`, `pooling` 'sum' (default), 'mean', 'max' or 'none', optional `weights`. */
  async bag(indices: Ids, offsets: Ids, options: BagOptions = {}): Promise<Float32Array> {
    const [i, o, pooling, w] = bagArgs(indices, offsets, options);
    return guarded(() => this._raw().bag(i, o, pooling, w));
  }
  /** `gather` with the rows left on the GPU (WebGPU engines only). */
  async gatherToGpu(rowIds: Ids): Promise<GpuRows> {
    const i = ids(rowIds, 'ids');
    return guarded(async () => GpuRows._wrap(await this._raw().gatherGpu(i)));
  }
  /** `bag` with the rows left on the GPU (WebGPU engines only). */
  async bagToGpu(indices: Ids, offsets: Ids, options: BagOptions = {}): Promise<GpuRows> {
    const [i, o, pooling, w] = bagArgs(indices, offsets, options);
    return guarded(async () => GpuRows._wrap(await this._raw().bagGpu(i, o, pooling, w)));
  }
}

function bagArgs(indices: unknown, offsets: unknown, options: unknown): [Uint32Array, Uint32Array, string, Float32Array | undefined] {
  const { pooling = 'sum', weights } = plainObject(options, 'bag(indices, offsets, options)');
  if (typeof pooling !== 'string' || !POOLINGS.includes(pooling)) throw invalid(`options.pooling must be one of ${POOLINGS.join(', ')} (got ${describe(pooling)})`);
  const i = ids(indices, 'indices');
  const w = weights === undefined ? undefined : floats(weights, 'options.weights', i.length);
  return [i, ids(offsets, 'offsets'), pooling, w];
}

/**
 * Rows left on the GPU: `buffer` is a `GPUBuffer` of the engine's `gpuDevice` (usages STORAGE,
 * COPY_SRC, COPY_DST) holding `rows × dim` values of `dtype`, row after row. `read()` copies them
 * back; `destroy()` (or `dispose()`) frees the buffer at once.
 */
export class GpuRows extends Resource<wasm.EdoGpuRows> {
  get buffer(): GPUBuffer {
    return this._raw().buffer as GPUBuffer;
  }
  get rows(): number {
    return this._raw().rows;
  }
  get dim(): number {
    return this._raw().dim;
  }
  get dtype(): 'float32' | 'float16' {
    return this._raw().dtype as 'float32' | 'float16';
  }
  get bytes(): number {
    return this._raw().bytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'GpuRows';
  private constructor(raw: wasm.EdoGpuRows) {
    super(raw, 'GPU rows');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoGpuRows): GpuRows {
    return new GpuRows(raw);
  }
  /** The rows as f32 values. */
  async read(): Promise<Float32Array> {
    return guarded(() => this._raw().read());
  }
  /** Frees the GPU buffer now. */
  destroy(): void {
    this.dispose();
  }
}

export interface CacheStats {
  hits?: number;
  misses?: number;
  evictions?: number;
  bytesUploaded?: number;
  hitRate?: number;
  capacity?: number;
  cachedRows?: number;
  /** CPU path: ids whose row came from a fetch another overlapping lookup had under way (per id). */
  sharedReads?: number;
  /** Rows prefetches staged, and the misses lookups took from them. */
  prefetched?: number;
  servedFromStaging?: number;
  requests?: number;
  bytesFetched?: number;
}

/**
 * A hot-row cache on an engine (see `Engine.cache`): on WebGPU its slots on the GPU, one lookup at
 * a time; on the CPU path in WASM memory, lookups may overlap and share their fetches.
 */
export class RowCache extends Resource<wasm.EdoCache> {
  get backend(): Backend {
    return this._raw().backend as Backend;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'RowCache';
  private constructor(raw: wasm.EdoCache) {
    super(raw, 'cache');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoCache): RowCache {
    return new RowCache(raw);
  }
  /** Decoded rows of `ids`, missing rows loaded into the cache. */
  async gather(rowIds: Ids): Promise<Float32Array> {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().gather(i));
  }
  /** Stages the rows of the next batch that are not cached (WebGPU: uploaded; CPU path: fetched); resolves to how many. */
  async prefetch(rowIds: Ids): Promise<number> {
    const i = ids(rowIds, 'ids');
    return guarded(() => this._raw().prefetch(i));
  }
  /** Hits, misses, evictions, bytes loaded, hit rate, capacity, rows cached, shared reads (and remote traffic). */
  stats(): CacheStats {
    return JSON.parse(guardedSync(() => this._raw().stats)) as CacheStats;
  }
}

/** Hamming neighbours: `k` ids and distances a query, row after row. */
export interface Neighbors {
  k: number;
  ids: Uint32Array;
  distances: Uint32Array;
}

/** Binary codes resident for Hamming search (see `Engine.uploadCodes`). */
export class BinaryCodes extends Resource<wasm.EdoCodes> {
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'BinaryCodes';
  #dim: number;
  private constructor(raw: wasm.EdoCodes, dim: number) {
    super(raw, 'binary codes');
    this.#dim = dim;
  }
  /** @internal */
  static _wrap(raw: wasm.EdoCodes, dim: number): BinaryCodes {
    return new BinaryCodes(raw, dim);
  }
  /** Exact Hamming top-`k` of float `queries` (`n × dim`, binarised `x > 0` after the codes' transform, if any), ties to the lower row. */
  async search(queries: Floats, k: number): Promise<Neighbors> {
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

// ---- Live tables -----------------------------------------------------------------------------

/** 64-bit keys: a BigUint64Array, or integers (numbers up to 2⁵³ − 1, bigints up to 2⁶⁴ − 1). */
export type Keys = BigUint64Array | ArrayLike<number | bigint>;
/** What a lookup reads for a key the table does not hold: an ID_OUT_OF_RANGE error, a zero row, or the initial row. */
export type Missing = 'error' | 'zero' | 'init';

export interface LiveTableOptions {
  /** Default 'int8'. */
  format?: string;
  dim: number;
  /** Slots at first (they double as keys arrive, up to maxRows). */
  capacity?: number;
  /** The most keys held; past it a new key evicts by `policy`. */
  maxRows?: number;
  /** lru (the default), lfu, arc, or any of them with +tinylfu admission. */
  policy?: string;
  /** A new key's first row (zeros without it). */
  init?: Floats;
}

const MISSING = ['error', 'zero', 'init'];

/** 64-bit keys: a BigUint64Array as it is; an Array or typed array of integers (numbers up to 2⁵³ − 1, or bigints up to 2⁶⁴ − 1), copied. */
function keys64(v: unknown, name: string): BigUint64Array {
  if (v instanceof BigUint64Array) return v;
  if (!isList(v)) {
    throw invalid(`${name} must be a BigUint64Array or an array of integers (got ${describe(v)})`);
  }
  const out = new BigUint64Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    const ok = typeof x === 'bigint' ? x >= 0n && x <= 0xffffffffffffffffn : typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
    if (!ok) throw invalid(`${name}[${i}] = ${describe(x)}: keys are integers from 0 to 2⁶⁴ − 1 (bigints past 2⁵³ − 1)`);
    out[i] = BigInt(x as number | bigint);
  }
  return out;
}

function missingOf(v: unknown): Missing {
  const m = v === undefined ? 'error' : text(v, 'options.missing');
  if (!MISSING.includes(m)) throw invalid(`options.missing is ${JSON.stringify(m)}, not one of ${MISSING.join(', ')}`);
  return m as Missing;
}

function liveOptions(options: unknown, what: string): [number | undefined, number | undefined, string | undefined] {
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
export async function createLiveTable(options: LiveTableOptions): Promise<LiveTable> {
  const { format = 'int8', dim, init: initial } = plainObject(options, 'createLiveTable(options)');
  const d = integer(dim, 'options.dim', { min: 1 });
  const [capacity, maxRows, policy] = liveOptions(options, 'createLiveTable(options)');
  const row = initial === undefined ? undefined : floats(initial, 'options.init', d);
  await init();
  return guardedSync(() => LiveTable._wrap(new wasm.EdoLiveTable(text(format, 'options.format'), d, capacity, maxRows, policy, row)));
}

/** A live table holding an `.edo` file's rows: a live table's `toBytes()`, or a plain table whose row `i` is key `i`. */
export async function readLiveTable(bytes: Bytes, options: { maxRows?: number; policy?: string } = {}): Promise<LiveTable> {
  const b = bytesOf(bytes, 'bytes');
  const [, maxRows, policy] = liveOptions(options, 'readLiveTable(bytes, options)');
  await init();
  return guardedSync(() => LiveTable._wrap(wasm.EdoLiveTable.fromBytes(b, maxRows, policy)));
}

/**
 * A batch of updates as update-log bytes (the `EDOUPDT1` format `edo update` and
 * `LiveTable.applyLog` read); `header: true` (the default) starts a new log with it.
 */
export async function encodeUpdates(keys: Keys, values: Floats, options: { dim: number; header?: boolean }): Promise<Uint8Array> {
  const { dim, header = true } = plainObject(options, 'encodeUpdates(keys, values, options)');
  const d = integer(dim, 'options.dim', { min: 1 });
  const k = keys64(keys, 'keys');
  const v = floats(values, 'values', k.length * d);
  await init();
  return guardedSync(() => wasm.updateLogBytes(d, k, v, header === true));
}

/** A table of rows by 64-bit key that takes new keys, updates and snapshot swaps (on the CPU path); each lookup sees every row wholly old or wholly new. */
export class LiveTable extends Resource<wasm.EdoLiveTable> {
  get format(): string {
    return this._raw().format;
  }
  get dim(): number {
    return this._raw().dim;
  }
  /** Keys held. */
  get keys(): number {
    return this._raw().keys;
  }
  get capacity(): number {
    return this._raw().capacity;
  }
  /** Snapshots swapped in. */
  get version(): number {
    return this._raw().version;
  }
  /** Bytes the table holds: its rows, each slot's bookkeeping and the key index. */
  get bytes(): number {
    return this._raw().bytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'LiveTable';
  private constructor(raw: wasm.EdoLiveTable) {
    super(raw, 'live table');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoLiveTable): LiveTable {
    return new LiveTable(raw);
  }
  /** Whether the table holds `key`. */
  has(key: number | bigint): boolean {
    return this._raw().has(keys64([key], 'key')[0]);
  }
  /** The rows of `keys` (`keys.length × dim` values); an unknown key is an ID_OUT_OF_RANGE error, or with `missing` 'zero' or 'init' a zero or initial row. */
  async gather(keys: Keys, options: { missing?: Missing } = {}): Promise<Float32Array> {
    const { missing } = plainObject(options, 'gather(keys, options)');
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().gather(k, missingOf(missing)));
  }
  /** The rows of `keys`, giving the keys the table does not hold a slot and their initial row first. */
  async findOrInsert(keys: Keys): Promise<Float32Array> {
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().findOrInsert(k));
  }
  /** EmbeddingBag over keys: `offsets` one start per bag and the end (FBGEMM's), `pooling` sum, mean, max or none. */
  async bag(keys: Keys, offsets: Ids, options: BagOptions & { missing?: Missing } = {}): Promise<Float32Array> {
    const { pooling = 'sum', missing, weights } = plainObject(options, 'bag(keys, offsets, options)');
    const k = keys64(keys, 'keys');
    const o = ids(offsets, 'offsets', 'offsets');
    const w = weights === undefined ? undefined : floats(weights, 'options.weights', k.length);
    return guardedSync(() => this._raw().bag(k, o, text(pooling, 'options.pooling'), missingOf(missing), w));
  }
  /** Writes `values` (`keys.length × dim`) as the rows of `keys`, inserting new keys: applied whole, after every update before it, or refused with nothing changed. */
  async update(keys: Keys, values: Floats): Promise<{ sequence: number; inserted: number; evicted: number }> {
    const k = keys64(keys, 'keys');
    const v = floats(values, 'values', k.length * this.dim);
    const [sequence, inserted, evicted] = guardedSync(() => this._raw().update(k, v));
    return { sequence, inserted, evicted };
  }
  /** Replays update-log bytes (`encodeUpdates`, a trainer's file); every batch is checked before the first applies. Returns the batches applied. */
  async applyLog(bytes: Bytes): Promise<number> {
    const b = bytesOf(bytes, 'bytes');
    return guardedSync(() => this._raw().applyLog(b));
  }
  /** Removes `keys`; returns how many the table held. */
  async remove(keys: Keys): Promise<number> {
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().remove(k));
  }
  /** Lookups of each key since it came in (0 for a key not held). */
  async usage(keys: Keys): Promise<BigUint64Array> {
    const k = keys64(keys, 'keys');
    return guardedSync(() => this._raw().usage(k));
  }
  /** Replaces the whole table with `.edo` file bytes once they verify and match the format and dim; otherwise an error and the table as it was. */
  async swap(bytes: Bytes): Promise<{ version: number; keys: number; oldBytes: number; newBytes: number }> {
    const b = bytesOf(bytes, 'bytes');
    const [version, keys, oldBytes, newBytes] = guardedSync(() => this._raw().swap(b));
    return { version, keys, oldBytes, newBytes };
  }
  /** The table as a keyed `.edo` file's bytes (for `readLiveTable`, `swap`, `edo lookup`). */
  async toBytes(): Promise<Uint8Array> {
    return guardedSync(() => this._raw().toBytes());
  }
}

// ---- Models ----------------------------------------------------------------------------------

/** The bytes of a model2vec folder's files (`config` may be omitted). */
export interface ModelFiles {
  config?: Bytes | null;
  tokenizer: Bytes;
  model: Bytes;
}

/** A model from the bytes of an `.edo` model file (`edo quantize-model`). */
export async function modelFromBytes(bytes: Bytes): Promise<Model> {
  const b = bytesOf(bytes, 'bytes');
  await init();
  return guardedSync(() => Model._wrap(wasm.EdoModel.fromBytes(b)));
}

/** A model from a model2vec folder's files (`config` may be omitted). */
export async function modelFromFiles(files: ModelFiles): Promise<Model> {
  const { config, tokenizer, model } = plainObject(files, 'modelFromFiles(files)');
  const c = config === undefined || config === null ? undefined : bytesOf(config, 'files.config');
  const t = bytesOf(tokenizer, 'files.tokenizer');
  const m = bytesOf(model, 'files.model');
  await init();
  return guardedSync(() => Model._wrap(wasm.EdoModel.fromFiles(c, t, m)));
}

/** A static embedding model in WebAssembly memory; `embed` runs it on the CPU path. */
export class Model extends Resource<wasm.EdoModel> {
  get dim(): number {
    return this._raw().dim;
  }
  get vocabSize(): number {
    return this._raw().vocabSize;
  }
  get rows(): number {
    return this._raw().rows;
  }
  get format(): string {
    return this._raw().format;
  }
  /** Bytes each row of the table starts on once uploaded to a GPU: 4 (packed), or what the model file asks for. */
  get rowAlignment(): number {
    return this._raw().rowAlignment;
  }
  get bytes(): number {
    return this._raw().bytes;
  }
  get normalize(): boolean {
    return this._raw().normalize;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'Model';
  private constructor(raw: wasm.EdoModel) {
    super(raw, 'model');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoModel): Model {
    return new Model(raw);
  }
  /** Sentence vectors of `texts` on the CPU path: `texts.length × dim` values. */
  async embed(list: string[]): Promise<Float32Array> {
    const t = texts(list, 'texts');
    return guardedSync(() => this._raw().embed(t));
  }
  /** The token ids of `text` that count. */
  async tokenize(s: string): Promise<Uint32Array> {
    const t = text(s, 'text');
    return guardedSync(() => this._raw().tokenize(t));
  }
  /** The same model with its table in another format. */
  async quantize(format: string): Promise<Model> {
    return guardedSync(() => Model._wrap(this._raw().quantize(text(format, 'format'))));
  }
  /** The model as `.edo` model file bytes. */
  async toBytes(): Promise<Uint8Array> {
    return guardedSync(() => this._raw().toBytes());
  }
}

/** A model ready to embed on an engine (see `Engine.uploadModel`, `Engine.loadModel`). */
export class ResidentModel extends Resource<wasm.EdoResidentModel> {
  get backend(): Backend {
    return this._raw().backend as Backend;
  }
  get dim(): number {
    return this._raw().dim;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'ResidentModel';
  private constructor(raw: wasm.EdoResidentModel) {
    super(raw, 'resident model');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoResidentModel): ResidentModel {
    return new ResidentModel(raw);
  }
  /** Sentence vectors of `texts`: `texts.length × dim` values (tokenized here, pooled on the engine). */
  async embed(list: string[]): Promise<Float32Array> {
    const t = texts(list, 'texts');
    return guarded(() => this._raw().embed(t));
  }
  /** `embed` with the vectors left on the GPU (WebGPU engines only). */
  async embedToGpu(list: string[]): Promise<GpuRows> {
    const t = texts(list, 'texts');
    return guarded(async () => GpuRows._wrap(await this._raw().embedGpu(t)));
  }
  /** A semantic-search index of `lines` (binary codes and INT8 vectors, on the engine). */
  async index(lines: string[]): Promise<SearchIndex> {
    const t = texts(lines, 'lines');
    return guarded(async () => SearchIndex._wrap(await this._raw().index(t)));
  }
}

/** Lines found: their ids and scores, best first. */
export interface Scored {
  ids: Uint32Array;
  scores: Float32Array;
}

/** Sentence vectors of a corpus, searchable by meaning (see `ResidentModel.index`). */
export class SearchIndex extends Resource<wasm.EdoSearchIndex> {
  get rows(): number {
    return this._raw().rows;
  }
  get bytes(): number {
    return this._raw().bytes;
  }
  /** The kind's name, kept by minifiers (which rename classes). */
  static kind = 'SearchIndex';
  private constructor(raw: wasm.EdoSearchIndex) {
    super(raw, 'search index');
  }
  /** @internal */
  static _wrap(raw: wasm.EdoSearchIndex): SearchIndex {
    return new SearchIndex(raw);
  }
  /** The `k` lines nearest `query`: `{ ids, scores }`, best first (`multiplier`: candidates per result, default 4). */
  async search(query: string, k = 10, options: { multiplier?: number } = {}): Promise<Scored> {
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

/**
 * An `.edo` file's URL, a model2vec folder's URL (a relative one ends with '/'), the URLs of a
 * folder's files, or a name on a hub: 'owner/name' (see `LoadModelOptions.revision` and `host`).
 */
export type ModelSource = string | { config?: string; tokenizer: string; model: string };

export interface DownloadProgress {
  /** The file being read. */
  url: string;
  /** Which file (1-based) of how many. */
  file: number;
  files: number;
  /** Bytes of this file so far, and in all (null when the server does not say). */
  loaded: number;
  total: number | null;
  /** Whether it came from the cache (no request). */
  fromCache: boolean;
}

/** Where cached models are kept: Cache Storage's `Cache` fits. */
export interface ModelStore {
  match(url: string | Request): Promise<Response | undefined>;
  put(url: string | Request, response: Response): Promise<void>;
  delete(url: string | Request): Promise<boolean>;
  keys(): Promise<ReadonlyArray<Request>>;
}

export interface LoadModelOptions {
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
  /** true (the default: Cache Storage where there is one), false, or a store of your own. */
  cache?: boolean | ModelStore;
  /** A name's revision: a branch, tag or commit (default 'main'). */
  revision?: string;
  /** A name's hub, laid out as `{host}/{owner}/{name}/resolve/{revision}/{file}` (default 'https://huggingface.co'). */
  host?: string;
}

const CACHE_NAME = 'edo-models';

/** A file of a model: where it is, and which argument of the model's constructor it is. */
interface ModelFile {
  key: string;
  name: string;
  url: string;
  optional?: boolean;
  /** Its bytes, when the plan read them already (a hub's layout file). */
  bytes?: Uint8Array;
}

/** The files to read and how to make the model of them. */
interface Plan {
  id: string;
  kind: 'edo' | 'folder' | 'sentence-transformers';
  files: ModelFile[];
}

const FOLDER_FILES: Omit<ModelFile, 'url'>[] = [
  { name: 'config.json', key: 'config', optional: true },
  { name: 'tokenizer.json', key: 'tokenizer' },
  { name: 'model.safetensors', key: 'model' },
];

function defaultStore(): Promise<ModelStore> | null {
  return typeof caches !== 'undefined' ? caches.open(CACHE_NAME) : null;
}

async function storeOf(cache: unknown): Promise<ModelStore | null> {
  if (cache === false) return null;
  if (cache === undefined || cache === true) return guarded(() => defaultStore());
  const c = cache as Partial<ModelStore> | null;
  if (c && typeof c.match === 'function' && typeof c.put === 'function' && typeof c.delete === 'function') return c as ModelStore;
  throw invalid(`options.cache must be true, false or a Cache (got ${describe(cache)})`);
}

function abortError(url: string, signal: AbortSignal | undefined): EdoError {
  return new EdoError('ABORTED', `the download of ${url} was aborted`, { cause: signal?.reason });
}

/** Fetches `url` whole, reporting progress; an HTML page instead of a file is a BAD_FILE error. */
async function download(
  url: string,
  { signal, report, optional }: { signal?: AbortSignal; report: (loaded: number, total: number | null) => void; optional?: boolean },
): Promise<Uint8Array | null> {
  if (signal?.aborted) throw abortError(url, signal);
  let response: Response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    if (signal?.aborted) throw abortError(url, signal);
    throw new EdoError('NETWORK', `${url}: ${messageOf(e)}`, { cause: e });
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
  const chunks: Uint8Array[] = [];
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
    throw new EdoError('NETWORK', `${url}: the body was cut short after ${loaded} bytes (${messageOf(e)})`, { cause: e });
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

function looksLikeHtml(bytes: Uint8Array): boolean {
  const head = new TextDecoder().decode(bytes.subarray(0, 64)).trimStart().toLowerCase();
  return head.startsWith('<!doctype html') || head.startsWith('<html');
}

// A model on a hub by name ('owner/name', as the Hugging Face hub spells them): two path segments,
// no scheme, no leading or trailing slash, not an .edo file. A relative folder URL ends with '/'.
const HUB = 'https://huggingface.co';
const isName = (source: unknown): source is string => typeof source === 'string' && /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(source) && !/\.edo$/i.test(source);

/** `{ host, revision }` of a name's options, checked, and the folder URL they give. */
function hubOf(name: string, options: { host?: unknown; revision?: unknown }): { id: string; base: string } {
  const host = (optionalText(options.host, 'options.host') ?? HUB).replace(/\/+$/, '');
  const revision = optionalText(options.revision, 'options.revision') ?? 'main';
  return { id: `${name}@${revision} on ${host}`, base: `${host}/${name}/resolve/${encodeURIComponent(revision)}/` };
}

/** A layout file's bytes or null: from the cache only, or (`fromNetwork`) downloaded, a 404 noted in `tried`. */
type FetchOne = (url: string, fromNetwork: boolean, tried?: string[]) => Promise<Uint8Array | null>;

/**
 * The files of a model on a hub: a model2vec model (config.json at the top, with tokenizer.json and
 * model.safetensors) or a sentence-transformers one (modules.json naming its StaticEmbedding
 * module's folder). `fetchOne(url, fromNetwork)` gives a file's bytes or null: the layout is
 * looked up in the cache before the network, so a cached model makes no request.
 */
async function hubPlan(name: string, options: Record<string, unknown>, fetchOne: FetchOne): Promise<Plan> {
  const { id, base } = hubOf(name, options);
  const file = (key: string, name: string, extra?: Partial<ModelFile>): ModelFile => ({ key, name, url: base + name, ...extra });
  const tried: string[] = [];
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
  const layout = modules;
  const dir = guardedSync(() => wasm.EdoModel.sentenceTransformersModule(layout)) ?? '';
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
function filesOf(source: unknown): Plan {
  if (typeof source === 'object' && source !== null && !Array.isArray(source)) {
    const urls = source as Record<string, unknown>;
    const files: ModelFile[] = [];
    for (const f of FOLDER_FILES) {
      if (urls[f.key] === undefined) {
        if (!f.optional) throw invalid(`source.${f.key} (the URL of ${f.name}) is missing`);
      } else {
        files.push({ ...f, url: text(urls[f.key], `source.${f.key}`) });
      }
    }
    return { id: files.map((f) => f.url).join(' '), files, kind: 'folder' };
  }
  const url = text(source, 'source');
  const path = url.split(/[?#]/)[0]!;
  if (/\.edo$/i.test(path)) return { id: url, files: [{ name: 'model.edo', key: 'edo', url }], kind: 'edo' };
  const base = path.endsWith('/') ? url : `${url}/`;
  return { id: base, files: FOLDER_FILES.map((f) => ({ ...f, url: new URL(f.name, absolute(base)).href })), kind: 'folder' };
}

function absolute(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return new URL(url, (globalThis as { location?: { href?: string } }).location?.href ?? 'http://localhost/').href;
  }
}

async function cachedBytes(store: ModelStore | null, url: string): Promise<Uint8Array | null> {
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
export async function loadModel(source: ModelSource, options: LoadModelOptions = {}): Promise<Model> {
  const o = plainObject(options, 'loadModel(source, options)');
  const onProgress = o.onProgress === undefined ? undefined : listener<NonNullable<LoadModelOptions['onProgress']>>(o.onProgress, 'options.onProgress');
  const given = o.signal;
  if (given !== undefined && !(typeof given === 'object' && given !== null && 'aborted' in given)) throw invalid(`options.signal must be an AbortSignal (got ${describe(given)})`);
  const signal = given as AbortSignal | undefined;
  const [store] = await Promise.all([storeOf(o.cache), init()]);
  // A name's layout files: from the cache, or (fromNetwork) downloaded, null when absent (a 404,
  // noted in `tried`).
  const prefetched = new Set<string>();
  const fetchOne: FetchOne = async (url, fromNetwork, tried) => {
    if (!fromNetwork) return guarded(() => cachedBytes(store, url));
    const bytes = await download(url, { signal, report: () => {}, optional: true });
    if (bytes) prefetched.add(url);
    else tried?.push(`${url}: HTTP 404`);
    return bytes;
  };
  const plan = isName(source) ? await hubPlan(source, o, fetchOne) : filesOf(source);
  const fetchAll = async (useCache: boolean) => {
    const got: Record<string, Uint8Array> = {};
    let fromCache = true;
    for (let i = 0; i < plan.files.length; i++) {
      const f = plan.files[i]!;
      const report = (loaded: number, total: number | null, hit = false) => onProgress?.({ url: f.url, file: i + 1, files: plan.files.length, loaded, total, fromCache: hit });
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
  // Every file the plan's kind needs was read (or a download failed before this).
  const read = ({ got }: { got: Record<string, Uint8Array> }) =>
    guardedSync(
      () =>
        Model._wrap(
          plan.kind === 'edo'
            ? wasm.EdoModel.fromBytes(got.edo!)
            : plan.kind === 'sentence-transformers'
              ? wasm.EdoModel.fromSentenceTransformers(got.modules, got.stConfig, got.tokenizer!, got.model!)
              : wasm.EdoModel.fromFiles(got.config, got.tokenizer!, got.model!),
        ),
    );
  let fetched = await fetchAll(true);
  let model: Model;
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
    const { got } = fetched;
    await guarded(() =>
      Promise.all(
        plan.files
          .filter((f) => got[f.key])
          .map((f) => {
            const bytes = got[f.key]!;
            const headers = { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length), 'x-edo-package': VERSION, 'x-edo-model': plan.id, 'x-edo-cached-at': at };
            return store.put(f.url, new Response(bytes as Uint8Array<ArrayBuffer>, { headers }));
          }),
      ),
    );
  }
  return model;
}

export interface CachedModel {
  /** The source it was loaded from. */
  model: string;
  files: string[];
  bytes: number;
  cachedAt: string | null;
  version: string | null;
}

/** The models kept in Cache Storage by `loadModel`, and a way to drop them. */
export const modelCache = {
  /** `[{ model, files, bytes, cachedAt }]`, one entry per model loaded. */
  async list(options: { cache?: boolean | ModelStore } = {}): Promise<CachedModel[]> {
    const store = await storeOf(plainObject(options, 'modelCache.list(options)').cache);
    if (!store) return [];
    const models = new Map<string, CachedModel>();
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
  async delete(source: ModelSource, options: { cache?: boolean | ModelStore; revision?: string; host?: string } = {}): Promise<number> {
    const o = plainObject(options, 'modelCache.delete(source, options)');
    const store = await storeOf(o.cache);
    if (!store) return 0;
    if (isName(source)) {
      // A name's files are those cached under its id (its layout decided which).
      const { id } = hubOf(source, o);
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
  async clear(options: { cache?: boolean | ModelStore } = {}): Promise<void> {
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
export async function report(results: BenchmarkResults | BenchmarkResults[]): Promise<string> {
  const list: unknown[] = Array.isArray(results) ? results : [results];
  const suite = await loadSuite();
  return guardedSync(() => suite.benchReport(list.map((r) => (typeof r === 'string' ? r : JSON.stringify(r)))));
}

/** The format, rows, dim and row alignment an `.edo` file declares in its header. */
export async function fileShape(bytes: Bytes): Promise<{ format: string; rows: number; dim: number; rowAlignment: number }> {
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
export async function formats(): Promise<string[]> {
  await init();
  return wasm.formatNames();
}
