// Types of the edo-embeddings package (hand-written; `tsc --noEmit --strict` checks them against
// the examples in the package tests). GPUDevice and GPUBuffer come from @webgpu/types.
/// <reference types="@webgpu/types" />
/// <reference lib="esnext.disposable" />

/** This package's version (the crate's). */
export const VERSION: string;

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

/** Every error edo throws or rejects with. */
export class EdoError extends Error {
  readonly name: 'EdoError';
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown });
}

/** Where the `.wasm` comes from, when not from beside the package's own files. */
export type WasmSource = string | URL | Response | BufferSource | WebAssembly.Module;

/** Loads edo's WebAssembly module (every factory does it first). */
export function init(options?: { wasm?: WasmSource }): Promise<void>;

/** The bytes of WebAssembly memory the module holds now: its high-water mark (0 before `init`). */
export function wasmMemoryBytes(): number;

/** Row ids: a Uint32Array, or an array of integers 0 … 2³² − 1 (copied after checking). */
export type Ids = Uint32Array | ArrayLike<number>;
/** f32 values: a Float32Array, or an array of numbers (converted). */
export type Floats = Float32Array | ArrayLike<number>;

export interface EngineOptions {
  /**
   * 'auto' (default): the CPU path where there is no adapter or only a fallback (software) one,
   * else the faster of WebGPU and the CPU path on a calibration of tens of milliseconds (a gather
   * and bags), remembered per adapter and package version (localStorage, or IndexedDB in workers)
   * so later visits skip it. 'webgpu' uses any adapter there is (the CPU path where there is
   * none), as for rows that stay on the GPU (`gatherToGpu`); 'cpu' never asks for one.
   */
  backend?: 'auto' | 'webgpu' | 'cpu';
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

/** What holds memory in WebAssembly or on the GPU. */
export interface Disposable {
  /** Whether `dispose()` was called. */
  readonly disposed: boolean;
  /** Frees the memory now (GPU buffers destroyed); later calls reject with DISPOSED. */
  dispose(): void;
  [Symbol.dispose](): void;
}

export type Pooling = 'sum' | 'mean' | 'max' | 'none';
export type CachePolicy = 'lru' | 'lfu' | 'arc' | 'lru+tinylfu' | 'lfu+tinylfu' | 'arc+tinylfu';

export function createEngine(options?: EngineOptions): Promise<Engine>;

/** Which backend `createEngine` chose, and why. */
export interface BackendChoice {
  readonly backend: 'webgpu' | 'cpu';
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

export class Engine implements Disposable {
  private constructor();
  readonly backend: 'webgpu' | 'cpu';
  /** The adapter, or why there is none; with backend 'auto', why this backend. */
  readonly note: string;
  readonly choice: BackendChoice;
  /** The GPUDevice edo uses now (a new one after each recovery); null on the CPU path. */
  readonly gpuDevice: GPUDevice | null;
  readonly generation: number;
  readonly maxBindingBytes: number;
  readonly disposed: boolean;
  /** Hears of device losses and recoveries; returns a function that stops listening. */
  onDeviceEvent(listener: (event: DeviceEvent) => void): () => void;
  memoryReport(): MemoryReport;
  /** Compiles the lookup kernel of tables of `format` and `dim`; with `rowAlignment` (a table's), the gather and bag kernels of tables whose rows are aligned so. */
  prepare(format: string, dim: number, options?: { rowAlignment?: number }): Promise<void>;
  /** Compiles the kernels a model's first embedding runs; `rowAlignment`: the model's (or `fileShape`'s). */
  prepareModel(format: string, dim: number, options?: { rowAlignment?: number }): Promise<void>;
  uploadTable(table: Table): Promise<ResidentTable>;
  uploadModel(model: Model): Promise<ResidentModel>;
  loadModel(source: ModelSource, options?: LoadModelOptions): Promise<ResidentModel>;
  cache(table: Table, options: { capacity: number; policy?: CachePolicy }): Promise<RowCache>;
  cacheRemote(url: string, options: { capacity: number; policy?: CachePolicy }): Promise<RowCache>;
  uploadCodes(codes: Table): Promise<BinaryCodes>;
  benchmark(options?: BenchmarkOptions): Promise<BenchmarkResults>;
  loseDevice(): void;
  recover(): Promise<boolean>;
  dispose(): void;
  [Symbol.dispose](): void;
}

export function createTable(data: Floats, options: { rows: number; dim: number; format?: string; keep?: Uint8Array | boolean[]; rowAlignment?: number }): Promise<Table>;
export function readTable(bytes: Uint8Array | ArrayBuffer, options: { name: string; format?: string; layout?: string; tensor?: string; dim?: number }): Promise<Table>;
export function syntheticTable(rows: number, dim: number, options?: { seed?: number }): Promise<Table>;

export class Table implements Disposable {
  private constructor();
  readonly format: string;
  readonly rows: number;
  readonly dim: number;
  readonly bytes: number;
  readonly f32Bytes: number;
  /** Whether the rows are stored in another order than their ids (reordered) or some are left out (pruned). */
  readonly remapped: boolean;
  /** Rows stored: `rows`, or fewer for a pruned table. */
  readonly storedRows: number;
  /** Bytes each row starts on once uploaded to a GPU: 4 (packed), or what `createTable`'s `rowAlignment` or the `.edo` file asked for (16 lets rows of 8-bit codes — INT8, FP8, q8_0 — be read sixteen codes a load). */
  readonly rowAlignment: number;
  readonly disposed: boolean;
  /** The transform binary codes went through: 'centered', 'itq', or null (plain signs, or not codes). */
  readonly codes: 'centered' | 'itq' | null;
  quantize(format: string): Promise<Table>;
  /** Binary codes that keep more neighbours than plain signs (centred, or rotated by ITQ); they keep their transform. */
  quantizeCodes(kind: 'centered' | 'itq', options?: { iterations?: number }): Promise<Table>;
  /** The rows stored by lookup frequency, most first (one of `counts`, a count a row, and `trace`, the ids looked up); same ids, same rows. */
  reorder(options: { counts: Ids } | { trace: Ids }): Promise<Table>;
  gather(ids: Ids): Promise<Float32Array>;
  idOf(token: string): number | null;
  toBytes(options?: { chunkBytes?: number }): Promise<Uint8Array>;
  dispose(): void;
  [Symbol.dispose](): void;
}

/** 64-bit keys: a BigUint64Array, or integers (numbers up to 2⁵³ − 1, bigints up to 2⁶⁴ − 1). */
export type Keys = BigUint64Array | ArrayLike<number | bigint>;
/** What a lookup reads for a key the table does not hold: an ID_OUT_OF_RANGE error, a zero row, or the initial row. */
export type Missing = 'error' | 'zero' | 'init';

export interface LiveTableOptions {
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

/** A table of rows by 64-bit key that takes new keys, updates and snapshot swaps (on the CPU path); each lookup sees every row wholly old or wholly new. */
export function createLiveTable(options: LiveTableOptions): Promise<LiveTable>;
/** A live table holding an `.edo` file's rows: a live table's `toBytes()`, or a plain table whose row `i` is key `i`. */
export function readLiveTable(bytes: Uint8Array | ArrayBuffer, options?: { maxRows?: number; policy?: string }): Promise<LiveTable>;
/** A batch of updates as update-log bytes (EDOUPDT1, as `edo update` reads); `header` (default true) starts a new log. */
export function encodeUpdates(keys: Keys, values: Floats, options: { dim: number; header?: boolean }): Promise<Uint8Array>;

export class LiveTable implements Disposable {
  private constructor();
  readonly format: string;
  readonly dim: number;
  /** Keys held. */
  readonly keys: number;
  readonly capacity: number;
  /** Snapshots swapped in. */
  readonly version: number;
  readonly bytes: number;
  readonly disposed: boolean;
  has(key: number | bigint): boolean;
  gather(keys: Keys, options?: { missing?: Missing }): Promise<Float32Array>;
  findOrInsert(keys: Keys): Promise<Float32Array>;
  /** `offsets`: one start per bag and the end. */
  bag(keys: Keys, offsets: Ids, options?: BagOptions & { missing?: Missing }): Promise<Float32Array>;
  /** Applied whole, after every update before it, or refused with nothing changed. */
  update(keys: Keys, values: Floats): Promise<{ sequence: number; inserted: number; evicted: number }>;
  /** Replays update-log bytes; every batch checked before the first applies. */
  applyLog(bytes: Uint8Array | ArrayBuffer): Promise<number>;
  remove(keys: Keys): Promise<number>;
  usage(keys: Keys): Promise<BigUint64Array>;
  /** Replaces the table with `.edo` bytes once verified; otherwise an error and the table unchanged. */
  swap(bytes: Uint8Array | ArrayBuffer): Promise<{ version: number; keys: number; oldBytes: number; newBytes: number }>;
  toBytes(): Promise<Uint8Array>;
  dispose(): void;
  [Symbol.dispose](): void;
}

export interface BagOptions {
  pooling?: Pooling;
  weights?: Floats;
}

export class ResidentTable implements Disposable {
  private constructor();
  readonly backend: 'webgpu' | 'cpu';
  readonly shards: number;
  readonly rows: number;
  readonly dim: number;
  readonly disposed: boolean;
  gather(ids: Ids): Promise<Float32Array>;
  gatherF16(ids: Ids): Promise<Uint16Array>;
  bag(indices: Ids, offsets: Ids, options?: BagOptions): Promise<Float32Array>;
  gatherToGpu(ids: Ids): Promise<GpuRows>;
  bagToGpu(indices: Ids, offsets: Ids, options?: BagOptions): Promise<GpuRows>;
  dispose(): void;
  [Symbol.dispose](): void;
}

/** Rows left on the GPU, in a storage buffer of the engine's `gpuDevice`. */
export class GpuRows implements Disposable {
  private constructor();
  readonly buffer: GPUBuffer;
  readonly rows: number;
  readonly dim: number;
  readonly dtype: 'float32' | 'float16';
  readonly bytes: number;
  readonly disposed: boolean;
  read(): Promise<Float32Array>;
  destroy(): void;
  dispose(): void;
  [Symbol.dispose](): void;
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

export class RowCache implements Disposable {
  private constructor();
  readonly backend: 'webgpu' | 'cpu';
  readonly disposed: boolean;
  gather(ids: Ids): Promise<Float32Array>;
  prefetch(ids: Ids): Promise<number>;
  stats(): CacheStats;
  dispose(): void;
  [Symbol.dispose](): void;
}

export class BinaryCodes implements Disposable {
  private constructor();
  readonly disposed: boolean;
  search(queries: Floats, k: number): Promise<{ k: number; ids: Uint32Array; distances: Uint32Array }>;
  dispose(): void;
  [Symbol.dispose](): void;
}

/** An `.edo` model file's URL, a model2vec folder's URL, or the URLs of a folder's files. */
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

export function loadModel(source: ModelSource, options?: LoadModelOptions): Promise<Model>;
export function modelFromBytes(bytes: Uint8Array | ArrayBuffer): Promise<Model>;
export function modelFromFiles(files: { config?: Uint8Array; tokenizer: Uint8Array; model: Uint8Array }): Promise<Model>;

export class Model implements Disposable {
  private constructor();
  readonly dim: number;
  readonly vocabSize: number;
  readonly rows: number;
  readonly format: string;
  /** Bytes each row of the table starts on once uploaded to a GPU: 4 (packed), or what the model file asks for. */
  readonly rowAlignment: number;
  readonly bytes: number;
  readonly normalize: boolean;
  readonly disposed: boolean;
  embed(texts: string[]): Promise<Float32Array>;
  tokenize(text: string): Promise<Uint32Array>;
  quantize(format: string): Promise<Model>;
  toBytes(): Promise<Uint8Array>;
  dispose(): void;
  [Symbol.dispose](): void;
}

export class ResidentModel implements Disposable {
  private constructor();
  readonly backend: 'webgpu' | 'cpu';
  readonly dim: number;
  readonly disposed: boolean;
  embed(texts: string[]): Promise<Float32Array>;
  embedToGpu(texts: string[]): Promise<GpuRows>;
  index(lines: string[]): Promise<SearchIndex>;
  dispose(): void;
  [Symbol.dispose](): void;
}

export class SearchIndex implements Disposable {
  private constructor();
  readonly rows: number;
  readonly bytes: number;
  readonly disposed: boolean;
  search(query: string, k?: number, options?: { multiplier?: number }): Promise<{ ids: Uint32Array; scores: Float32Array }>;
  dispose(): void;
  [Symbol.dispose](): void;
}

export interface CachedModel {
  /** The source it was loaded from. */
  model: string;
  files: string[];
  bytes: number;
  cachedAt: string | null;
  version: string | null;
}

export const modelCache: {
  list(options?: { cache?: boolean | ModelStore }): Promise<CachedModel[]>;
  delete(source: ModelSource, options?: { cache?: boolean | ModelStore; revision?: string; host?: string }): Promise<number>;
  clear(options?: { cache?: boolean | ModelStore }): Promise<void>;
};

/** The charts and table of benchmark results, as an HTML fragment. */
export function report(results: BenchmarkResults | BenchmarkResults[]): Promise<string>;
/** The format, rows, dim and row alignment an `.edo` file declares in its header. */
export function fileShape(bytes: Uint8Array | ArrayBuffer): Promise<{ format: string; rows: number; dim: number; rowAlignment: number }>;
/** The names of every format edo stores. */
export function formats(): Promise<string[]>;

// ---- The worker ----

/** A handle to an object in the worker: the same getters (their values when it was made) and methods, each a promise. */
interface WorkerHandle {
  readonly disposed: boolean;
  dispose(): Promise<void>;
  [Symbol.dispose](): void;
}

export interface WorkerTable extends WorkerHandle {
  readonly kind: 'Table';
  readonly format: string;
  readonly rows: number;
  readonly dim: number;
  readonly bytes: number;
  readonly f32Bytes: number;
  readonly remapped: boolean;
  readonly storedRows: number;
  readonly rowAlignment: number;
  readonly codes: 'centered' | 'itq' | null;
  quantize(format: string): Promise<WorkerTable>;
  quantizeCodes(kind: 'centered' | 'itq', options?: { iterations?: number }): Promise<WorkerTable>;
  reorder(options: { counts: Ids } | { trace: Ids }): Promise<WorkerTable>;
  gather(ids: Ids): Promise<Float32Array>;
  idOf(token: string): Promise<number | null>;
  toBytes(options?: { chunkBytes?: number }): Promise<Uint8Array>;
}

export interface WorkerRowCache extends WorkerHandle {
  readonly kind: 'RowCache';
  readonly backend: 'webgpu' | 'cpu';
  gather(ids: Ids): Promise<Float32Array>;
  prefetch(ids: Ids): Promise<number>;
  stats(): Promise<CacheStats>;
}

export interface WorkerBinaryCodes extends WorkerHandle {
  readonly kind: 'BinaryCodes';
  search(queries: Floats, k: number): Promise<{ k: number; ids: Uint32Array; distances: Uint32Array }>;
}

export interface WorkerResidentTable extends WorkerHandle {
  readonly kind: 'ResidentTable';
  readonly backend: 'webgpu' | 'cpu';
  readonly shards: number;
  readonly rows: number;
  readonly dim: number;
  gather(ids: Ids): Promise<Float32Array>;
  gatherF16(ids: Ids): Promise<Uint16Array>;
  bag(indices: Ids, offsets: Ids, options?: BagOptions): Promise<Float32Array>;
}

export interface WorkerResidentModel extends WorkerHandle {
  readonly kind: 'ResidentModel';
  readonly backend: 'webgpu' | 'cpu';
  readonly dim: number;
  embed(texts: string[]): Promise<Float32Array>;
  index(lines: string[]): Promise<WorkerSearchIndex>;
}

export interface WorkerSearchIndex extends WorkerHandle {
  readonly kind: 'SearchIndex';
  readonly rows: number;
  readonly bytes: number;
  search(query: string, k?: number, options?: { multiplier?: number }): Promise<{ ids: Uint32Array; scores: Float32Array }>;
}

/** An engine in a dedicated worker: the engine's API, every call a promise, results transferred, not copied. */
export interface WorkerEngine extends WorkerHandle {
  readonly kind: 'Engine';
  readonly backend: 'webgpu' | 'cpu';
  readonly note: string;
  readonly choice: BackendChoice;
  readonly generation: number;
  readonly maxBindingBytes: number;
  /** The worker itself. */
  readonly worker: Worker;
  onDeviceEvent(listener: (event: DeviceEvent) => void): () => void;
  memoryReport(): Promise<MemoryReport>;
  createTable(data: Floats, options: { rows: number; dim: number; format?: string; keep?: Uint8Array | boolean[]; rowAlignment?: number }): Promise<WorkerTable>;
  readTable(bytes: Uint8Array | ArrayBuffer, options: { name: string; format?: string; layout?: string; tensor?: string; dim?: number }): Promise<WorkerTable>;
  syntheticTable(rows: number, dim: number, options?: { seed?: number }): Promise<WorkerTable>;
  prepare(format: string, dim: number, options?: { rowAlignment?: number }): Promise<void>;
  prepareModel(format: string, dim: number, options?: { rowAlignment?: number }): Promise<void>;
  uploadTable(table: WorkerTable): Promise<WorkerResidentTable>;
  loadModel(source: ModelSource, options?: LoadModelOptions): Promise<WorkerResidentModel>;
  cache(table: WorkerTable, options: { capacity: number; policy?: CachePolicy }): Promise<WorkerRowCache>;
  cacheRemote(url: string, options: { capacity: number; policy?: CachePolicy }): Promise<WorkerRowCache>;
  uploadCodes(codes: WorkerTable): Promise<WorkerBinaryCodes>;
  /** The page engine's benchmark, run in the worker (a model to embed with is the page engine's only). */
  benchmark(options?: Omit<BenchmarkOptions, 'model'>): Promise<BenchmarkResults>;
  loseDevice(): Promise<void>;
  recover(): Promise<boolean>;
  /** Calls made, and bytes of answers transferred or copied. */
  workerStats(): { calls: number; transferredBytes: number; copiedBytes: number };
  /** Disposes the engine and ends the worker. */
  dispose(): Promise<void>;
}

/** The same engine in a dedicated worker (browsers; in Node it rejects with UNSUPPORTED). */
export function createWorkerEngine(options?: EngineOptions): Promise<WorkerEngine>;
