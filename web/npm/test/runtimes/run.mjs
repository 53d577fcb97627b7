// The runtime checks (checks.mjs) in Node, Deno or Bun, run where the package is installed:
//   node run.mjs MODEL_DIR TEXTS_JSON [--dawn FLAGS] [--expect webgpu|cpu] [--benchmark]
//   deno run --allow-read --allow-env run.mjs …    bun run.mjs …
// MODEL_DIR is a model2vec folder; TEXTS_JSON a JSON array of texts. With --dawn, Dawn's GPU
// (the `webgpu` package, FLAGS its comma-separated create() flags) is handed to createEngine, as
// a Node user would; --benchmark runs the suite's tiny matrix too. Prints the report as one JSON
// line; exits 1 when a check failed.
import { readFileSync } from 'node:fs';
import * as edo from 'edo-embeddings';
import { runChecks } from './checks.mjs';

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args.splice(i, 2)[1];
};
const dawn = option('--dawn');
const expectBackend = option('--expect');
const benchmark = args.includes('--benchmark') && args.splice(args.indexOf('--benchmark'), 1).length > 0;
const [modelDir, textsFile] = args;

// The runtime's WebGPU where it has one ('auto' could pick the CPU path), checked against its CPU path.
const engine = { backend: 'webgpu' };
if (dawn !== undefined) {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  engine.gpu = create(dawn ? dawn.split(',') : []);
  // Node 20 has no localStorage (22 has one behind --localstorage-file): the two calls edo makes
  // of it, over a Map, so the remembered choice of backend 'auto' is checked here too.
  if (!globalThis.localStorage) {
    const store = new Map();
    globalThis.localStorage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, String(v)) };
  }
}
const file = (name) => new Uint8Array(readFileSync(`${modelDir}/${name}`));
const report = await runChecks(edo, {
  texts: JSON.parse(readFileSync(textsFile, 'utf8')),
  model: { config: file('config.json'), tokenizer: file('tokenizer.json'), model: file('model.safetensors') },
  engine,
  expectBackend,
  benchmark,
});
const runtime = globalThis.Deno ? `deno ${Deno.version.deno}` : globalThis.Bun ? `bun ${Bun.version}` : `node ${process.versions.node}`;
console.log(JSON.stringify({ runtime, ...report }));
// Dawn keeps Node's event loop alive: leave once the report is out.
process.exit(report.failures.length ? 1 : 0);
