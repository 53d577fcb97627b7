// The page's side of a worker engine: each object the worker holds is a handle here, whose
// methods post a call and resolve with the answer. Callbacks (onProgress) and AbortSignals cross
// as ids; typed arrays come back transferred. The handles' types (WorkerEngine, WorkerTable, …)
// are written out below: the engine's API with every call a promise and handles for objects.
import {
  EdoError,
  type BackendChoice,
  type BagOptions,
  type BenchmarkOptions,
  type BenchmarkResults,
  type CachePolicy,
  type CacheStats,
  type CodesKind,
  type CreateTableOptions,
  type DeviceEvent,
  type EngineOptions,
  type ErrorCode,
  type Floats,
  type Ids,
  type LoadModelOptions,
  type MemoryReport,
  type ModelSource,
  type Neighbors,
  type ReadTableOptions,
  type Scored,
  type Backend,
  type Bytes,
} from './core.js';

// ---- The handles' types ----------------------------------------------------------------------

/** A handle to an object in the worker: the same getters (their values when it was made) and methods, each a promise. */
export interface WorkerHandle {
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
  readonly codes: CodesKind | null;
  quantize(format: string): Promise<WorkerTable>;
  quantizeCodes(kind: CodesKind, options?: { iterations?: number }): Promise<WorkerTable>;
  reorder(options: { counts: Ids } | { trace: Ids }): Promise<WorkerTable>;
  gather(ids: Ids): Promise<Float32Array>;
  idOf(token: string): Promise<number | null>;
  toBytes(options?: { chunkBytes?: number }): Promise<Uint8Array>;
}

export interface WorkerRowCache extends WorkerHandle {
  readonly kind: 'RowCache';
  readonly backend: Backend;
  gather(ids: Ids): Promise<Float32Array>;
  prefetch(ids: Ids): Promise<number>;
  stats(): Promise<CacheStats>;
}

export interface WorkerBinaryCodes extends WorkerHandle {
  readonly kind: 'BinaryCodes';
  search(queries: Floats, k: number): Promise<Neighbors>;
}

export interface WorkerResidentTable extends WorkerHandle {
  readonly kind: 'ResidentTable';
  readonly backend: Backend;
  readonly shards: number;
  readonly rows: number;
  readonly dim: number;
  gather(ids: Ids): Promise<Float32Array>;
  gatherF16(ids: Ids): Promise<Uint16Array>;
  bag(indices: Ids, offsets: Ids, options?: BagOptions): Promise<Float32Array>;
}

export interface WorkerResidentModel extends WorkerHandle {
  readonly kind: 'ResidentModel';
  readonly backend: Backend;
  readonly dim: number;
  embed(texts: string[]): Promise<Float32Array>;
  index(lines: string[]): Promise<WorkerSearchIndex>;
}

export interface WorkerSearchIndex extends WorkerHandle {
  readonly kind: 'SearchIndex';
  readonly rows: number;
  readonly bytes: number;
  search(query: string, k?: number, options?: { multiplier?: number }): Promise<Scored>;
}

/** An engine in a dedicated worker: the engine's API, every call a promise, results transferred, not copied. */
export interface WorkerEngine extends WorkerHandle {
  readonly kind: 'Engine';
  readonly backend: Backend;
  readonly note: string;
  readonly choice: BackendChoice;
  readonly generation: number;
  readonly maxBindingBytes: number;
  /** The worker itself. */
  readonly worker: Worker;
  onDeviceEvent(listener: (event: DeviceEvent) => void): () => void;
  memoryReport(): Promise<MemoryReport>;
  createTable(data: Floats, options: CreateTableOptions): Promise<WorkerTable>;
  readTable(bytes: Bytes, options: ReadTableOptions): Promise<WorkerTable>;
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

// ---- The messages ----------------------------------------------------------------------------

/**
 * A call posted to the worker: `target` 0 is the package itself, else a handle.
 * @internal
 */
export interface CallMessage {
  id: number;
  target: number;
  method: string;
  args: unknown[];
}

/**
 * What the worker posts back: a callback's arguments, or a call's answer or error.
 * @internal
 */
export type WorkerMessage =
  | { callback: number; args: unknown[] }
  | { callback?: undefined; id: number; value?: unknown; error?: { code: ErrorCode; message: string }; transferredBytes?: number; copiedBytes?: number };

/**
 * An object the worker holds, as it crosses: its handle, its kind and its getters' values.
 * @internal
 */
export interface HandleMessage {
  __handle: number;
  kind: string;
  props: Record<string, unknown>;
}

const HANDLE = Symbol('edo worker handle');

/** Whether `url` names a model on a hub ('owner/name'), which stays as it is. */
const isHubName = (url: string) => /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(url) && !/\.edo$/i.test(url);

/**
 * Starts the engine in `worker` (running worker.js) and resolves to its handle.
 * @internal
 */
export function connectWorker(worker: Worker, options: EngineOptions): Promise<WorkerEngine> {
  let next = 1;
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (why: unknown) => void; cleanup: (() => void)[] }>();
  const callbacks = new Map<number, (...args: unknown[]) => void>();
  const stats = { calls: 0, transferredBytes: 0, copiedBytes: 0 };
  let closed: EdoError | null = null;
  const fail = (why: EdoError) => {
    closed = why;
    for (const { reject } of pending.values()) reject(why);
    pending.clear();
  };
  worker.addEventListener('message', ({ data }: MessageEvent<WorkerMessage>) => {
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

  const call = (target: number, method: string, args: unknown[]): Promise<unknown> => {
    if (closed) return Promise.reject(closed);
    const id = next++;
    const cleanup: (() => void)[] = [];
    const message: CallMessage = { id, target, method, args: args.map((a) => encode(a, cleanup)) };
    stats.calls++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject, cleanup });
      try {
        worker.postMessage(message);
      } catch (e) {
        pending.delete(id);
        reject(new EdoError('INVALID_ARGUMENT', `an argument of ${method} cannot be sent to the worker: ${(e as Error).message}`));
      }
    });
  };

  // Arguments: handles by id, functions and signals by id, options objects member by member.
  const encode = (value: unknown, cleanup: (() => void)[]): unknown => {
    if (typeof value === 'function') {
      const id = next++;
      callbacks.set(id, value as (...args: unknown[]) => void);
      cleanup.push(() => callbacks.delete(id));
      return { __callback: id };
    }
    if (value && typeof value === 'object') {
      const handle = (value as { [HANDLE]?: number })[HANDLE];
      if (handle !== undefined) return { __handle: handle };
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
          return { __strings: value.join(''), lengths: Uint32Array.from(value as string[], (v) => v.length) };
        }
        return value.map((v) => encode(v, cleanup));
      }
    }
    return value;
  };

  const handles = new FinalizationRegistry<number>((handle) => {
    if (!closed) worker.postMessage({ id: 0, target: handle, method: 'dispose', args: [] } satisfies CallMessage);
  });

  // Answers: a handle becomes an object with the worker's getters' values and its methods.
  const revive = (value: unknown): unknown => {
    if (value && typeof value === 'object' && (value as Partial<HandleMessage>).__handle !== undefined) return handleObject(value as HandleMessage);
    if (Array.isArray(value)) return value.map(revive);
    return value;
  };

  const handleObject = ({ __handle: handle, kind, props }: HandleMessage): WorkerHandle => {
    let disposed = false;
    // The handle's own members; any other name is a method of the worker's object.
    const object: Record<string | symbol, unknown> = { ...props, kind, disposed: false, [HANDLE]: handle };
    const dispose = () => {
      if (disposed) return Promise.resolve();
      disposed = true;
      object.disposed = true;
      handles.unregister(object);
      const done = call(handle, 'dispose', []);
      if (kind === 'Engine') {
        return done.finally(() => {
          fail(new EdoError('DISPOSED', 'this worker engine was disposed'));
          worker.terminate();
        });
      }
      return done;
    };
    object.dispose = dispose;
    object[Symbol.dispose ?? Symbol.for('Symbol.dispose')] = dispose;
    const proxy = new Proxy(object, {
      get(target, key) {
        if (key in target) return target[key];
        if (typeof key === 'symbol' || key === 'then' || key === 'toJSON') return undefined;
        return (...args: unknown[]) => (disposed ? Promise.reject(new EdoError('DISPOSED', `this ${kind} was disposed`)) : call(handle, key, args));
      },
    });
    handles.register(object, handle, object);
    if (kind === 'Engine') {
      object.worker = worker;
      // The package's factories, run in the worker.
      for (const f of ['createTable', 'readTable', 'syntheticTable']) object[f] = (...args: unknown[]) => call(0, f, args);
      // A relative URL means the page's, not the worker script's; a hub name ('owner/name') stays.
      const here = (url: unknown) => (typeof url === 'string' && typeof location !== 'undefined' && !isHubName(url) ? new URL(url, location.href).href : url);
      object.loadModel = (source: unknown, options = {}) => call(handle, 'loadModel', [here(source), options]);
      object.cacheRemote = (url: unknown, options = {}) => call(handle, 'cacheRemote', [here(url), options]);
      object.workerStats = () => ({ ...stats });
      object.onDeviceEvent = (f: (...args: unknown[]) => void) => {
        const id = next++;
        callbacks.set(id, f);
        void call(handle, 'onDeviceEvent', [{ __callback: id }]);
        return () => callbacks.delete(id);
      };
    }
    return proxy as unknown as WorkerHandle;
  };

  return call(0, 'createEngine', [options]) as Promise<WorkerEngine>;
}
