// The browser (and bundler) entry: the .wasm is fetched beside this file (`new URL(…,
// import.meta.url)`, which Vite and webpack 5 follow), and createWorkerEngine runs the same
// API in a dedicated worker. The loader is set here, at import: package.json lists this file (and
// node.js, worker.js) as having side effects, so no bundler drops it while keeping core.js.
import wasmInit from './edo_web.js';
import { _useLoader, _useSuiteLoader, type EngineOptions } from './core.js';
import { connectWorker, type WorkerEngine } from './client.js';

_useLoader((source) => wasmInit(source === undefined ? undefined : { module_or_path: source }));
// The benchmark module, imported on first use: bundlers make it a chunk of its own.
_useSuiteLoader(async (source) => {
  const suite = await import('./edo_web_suite.js');
  await suite.default(source === undefined ? undefined : { module_or_path: source });
  return suite;
});

export * from './core.js';
export type * from './client.js';

/**
 * The same engine in a dedicated worker, so that long embeddings never block the page: every
 * method of the engine and of what it returns is there, answering promises; results
 * (Float32Array, Uint32Array) are transferred, not copied. `dispose()` ends the worker.
 * (Browsers; in Node it rejects with UNSUPPORTED.)
 */
export function createWorkerEngine(options: EngineOptions = {}): Promise<WorkerEngine> {
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'edo' });
  return connectWorker(worker, options);
}
