// The Node entry: the .wasm is read from this package's own file and compiled synchronously.
// Node has no WebGPU of its own: engines run on the CPU path (createEngine says so in `note`)
// unless given a GPU object — Dawn's, from the `webgpu` package — or one set as navigator.gpu.
/// <reference types="node" />
import { readFileSync } from 'node:fs';
import { initSync } from './edo_web.js';
import { _useLoader, _useSuiteLoader, EdoError, type EngineOptions } from './core.js';
import type { WorkerEngine } from './client.js';

_useLoader((source) => initSync({ module: (source as BufferSource | WebAssembly.Module | undefined) ?? readFileSync(new URL('./edo_web_bg.wasm', import.meta.url)) }));
// The benchmark module, read and compiled on first use.
_useSuiteLoader(async (source) => {
  const suite = await import('./edo_web_suite.js');
  suite.initSync({ module: (source as BufferSource | WebAssembly.Module | undefined) ?? readFileSync(new URL('./edo_web_suite_bg.wasm', import.meta.url)) });
  return suite;
});

export * from './core.js';
export type * from './client.js';

/** Browsers only: in Node, run the package in a worker_threads Worker of your own. */
export async function createWorkerEngine(_options?: EngineOptions): Promise<WorkerEngine> {
  throw new EdoError('UNSUPPORTED', 'createWorkerEngine needs a browser (a dedicated Worker); in Node, use the package inside a worker_threads Worker');
}
