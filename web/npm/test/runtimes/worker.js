// The runtime checks (checks.mjs) as a Cloudflare Worker, run by workerd (scripts/web/runtimes_check.py
// writes its configuration): module syntax, the package's browser entry, and its `.wasm` files
// imported as modules — Workers may instantiate a compiled module but not compile bytes — with no
// threads.
//   POST /check   body: a JSON array of texts; answers checks.mjs's report for the fixture model
//                 (with ?benchmark, the benchmark suite's tiny matrix too)
//   POST /embed   body: a JSON array of texts; answers the vectors of WordLlama's model (an .edo
//                 file) as little-endian f32, with the WASM memory the Worker holds in a header
import * as edo from './edo/index.js';
import wasm from './edo/edo_web_bg.wasm';
import benchmarkWasm from './edo/edo_web_suite_bg.wasm'; // the benchmark module, for ?benchmark
import { runChecks } from './checks.mjs';
import config from './model/config.json';
import tokenizer from './model/tokenizer.json';
import safetensors from './model/model.safetensors';
import wordllama from './wordllama.edo';

let embedder = null; // WordLlama's model, loaded by the first /embed and kept

export default {
  async fetch(request) {
    await edo.init({ wasm, benchmarkWasm });
    const texts = await request.json();
    const path = new URL(request.url).pathname;
    if (path === '/check') {
      const bytes = (b) => new Uint8Array(b);
      const report = await runChecks(edo, {
        texts,
        model: { config: bytes(config), tokenizer: bytes(tokenizer), model: bytes(safetensors) },
        benchmark: new URL(request.url).searchParams.has('benchmark'),
      });
      return Response.json({ runtime: `workerd ${navigator.userAgent}`, ...report });
    }
    if (path === '/embed') {
      if (wordllama.byteLength === 0) return new Response('no WordLlama model in this Worker', { status: 404 });
      if (!embedder) {
        const engine = await edo.createEngine();
        const model = await edo.modelFromBytes(new Uint8Array(wordllama));
        embedder = await engine.uploadModel(model);
        model.dispose(); // the resident model keeps its own copy
      }
      const vectors = await embedder.embed(texts);
      return new Response(vectors, {
        headers: { 'x-wasm-memory': String(edo.wasmMemoryBytes()), 'x-dim': String(embedder.dim), 'x-backend': embedder.backend },
      });
    }
    return new Response('not found', { status: 404 });
  },
};
