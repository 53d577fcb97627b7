// The package in Node, installed from its tarball (scripts/web/test-npm.sh copies this file next to
// the installed node_modules and runs `node --test`). Models are served by a local HTTP server
// that counts requests; their vectors are checked against model2vec's own
// (tests/data/models/expected.json, made by scripts/fixtures/make_model_fixtures.py).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as edo from 'edo-embeddings';

const MODELS = process.env.EDO_MODELS; // tests/data/models
const expected = JSON.parse(readFileSync(path.join(MODELS, 'expected.json'), 'utf8'));
const TEXTS = expected.texts;
// sentence-transformers' own vectors of its static models (scripts/fixtures/make_st_fixtures.py).
const stExpected = JSON.parse(readFileSync(path.join(MODELS, 'st_expected.json'), 'utf8'));

// ---- A server that counts requests ----

let server;
let base;
const requests = new Map(); // path -> count
const routes = new Map(); // path -> handler(req, res)

function serveBytes(bytes, type = 'application/octet-stream') {
  return (req, res) => {
    res.writeHead(200, { 'content-type': type, 'content-length': bytes.length });
    res.end(bytes);
  };
}

before(async () => {
  const wordpiece = path.join(MODELS, 'wordpiece');
  for (const f of ['config.json', 'tokenizer.json', 'model.safetensors']) routes.set(`/wordpiece/${f}`, serveBytes(readFileSync(path.join(wordpiece, f))));
  // A hub laid out as the Hugging Face hub is: /hub/{owner}/{name}/resolve/{revision}/{file}.
  const serveDir = (prefix, dir) => {
    for (const f of readdirSync(dir, { recursive: true })) {
      const file = path.join(dir, f);
      if (statSync(file).isFile()) routes.set(`${prefix}/${f.split(path.sep).join('/')}`, serveBytes(readFileSync(file)));
    }
  };
  serveDir('/hub/acme/wordpiece/resolve/main', wordpiece);
  serveDir('/hub/acme/st-wordpiece/resolve/v1', path.join(MODELS, 'st_wordpiece'));
  serveDir('/hub/acme/st-unigram/resolve/main', path.join(MODELS, 'st_unigram'));
  routes.set('/html/model.edo', serveBytes(Buffer.from('<!DOCTYPE html><html><body>Not here</body></html>'), 'text/html'));
  routes.set('/junk/model.edo', serveBytes(Buffer.from('definitely not an edo file, but long enough to be read')));
  // Sends half the body, then waits (for aborting a download half-way).
  routes.set('/slow/model.edo', (req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 1 << 20 });
    res.write(Buffer.alloc(1 << 19));
    const t = setTimeout(() => res.end(Buffer.alloc(1 << 19)), 20_000);
    res.on('close', () => clearTimeout(t));
  });
  server = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    requests.set(p, (requests.get(p) ?? 0) + 1);
    const route = routes.get(p);
    if (route) route(req, res);
    else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => server.close());

const count = (p) => requests.get(p) ?? 0;

async function rejects(promise, code, pattern) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof edo.EdoError, `an EdoError, not ${e?.constructor?.name}: ${e?.message}`);
    assert.equal(e.code, code, e.message);
    if (pattern) assert.match(e.message, pattern);
    return true;
  });
}

function close(a, b, tol, what) {
  assert.equal(a.length, b.length, `${what}: lengths`);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= tol, `${what}[${i}]: ${a[i]} vs ${b[i]}`);
}

/** A Cache Storage stand-in (Node has none): the same four methods, over a Map. */
function memoryStore() {
  const m = new Map();
  const key = (r) => (typeof r === 'string' ? r : r.url);
  return {
    map: m,
    async match(r) {
      const hit = m.get(key(r));
      return hit && new Response(hit.bytes, { headers: hit.headers });
    },
    async put(r, response) {
      m.set(key(r), { bytes: new Uint8Array(await response.arrayBuffer()), headers: Object.fromEntries(response.headers) });
    },
    async delete(r) {
      return m.delete(key(r));
    },
    async keys() {
      return [...m.keys()].map((url) => ({ url }));
    },
  };
}

// ---- The tests ----

test('in Node an engine runs on the CPU path and says why', async () => {
  const engine = await edo.createEngine();
  assert.equal(engine.backend, 'cpu');
  assert.match(engine.note, /no window or worker/);
  assert.deepEqual({ ...engine.choice }, { backend: 'cpu', reason: 'no-adapter', adapter: null, note: engine.note });
  assert.equal(engine.gpuDevice, null);
  assert.deepEqual(engine.memoryReport().entries, []);
  assert.equal(edo.VERSION, JSON.parse(readFileSync(new URL('./node_modules/edo-embeddings/package.json', import.meta.url), 'utf8')).version);
  assert.ok((await edo.formats()).includes('q8_0'));
  engine.dispose();
  assert.throws(() => engine.backend, (e) => e.code === 'DISPOSED');
  await rejects(edo.createWorkerEngine(), 'UNSUPPORTED');
});

test('a GPU object given is asked for a core adapter, then a compatibility one; the globals are put back', async () => {
  // A GPU with no adapter, as Dawn's is on a machine with no driver it takes.
  const asked = [];
  const gpu = { requestAdapter: async (options) => (asked.push(options?.featureLevel ?? 'core'), null) };
  await rejects(edo.createEngine({ gpu: 7 }), 'INVALID_ARGUMENT', /options.gpu must be a GPU object/);
  await rejects(edo.createEngine({ gpu }), 'INVALID_ARGUMENT', /Object.assign\(globalThis, globals\)/);
  const before = ['navigator', 'WorkerGlobalScope', 'Window'].map((k) => Object.getOwnPropertyDescriptor(globalThis, k));
  Object.assign(globalThis, { GPUValidationError: class GPUValidationError {}, GPUBufferUsage: {} });
  try {
    const engine = await edo.createEngine({ gpu });
    assert.equal(engine.backend, 'cpu');
    assert.match(engine.note, /no WebGPU adapter/);
    assert.deepEqual(asked, ['core', 'compatibility']);
    // Not asked at all when the CPU path is asked for (preferGpu: false is the older spelling).
    for (const options of [{ preferGpu: false }, { backend: 'cpu' }]) {
      const cpu = await edo.createEngine({ gpu, ...options });
      assert.deepEqual([cpu.backend, cpu.choice.reason, cpu.note], ['cpu', 'requested', 'CPU path requested']);
    }
    assert.equal(asked.length, 2);
    await rejects(edo.createEngine({ backend: 'gpu' }), 'INVALID_ARGUMENT', /options.backend must be one of auto, webgpu, cpu \(got the string "gpu"\)/);
    await rejects(edo.createEngine({ backend: 'webgpu', preferGpu: false }), 'INVALID_ARGUMENT', /disagree/);
    // Nor found where a window or worker would give it: Node's navigator.gpu, when set, is.
    globalThis.navigator ??= {};
    Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });
    await edo.createEngine();
    assert.deepEqual(asked, ['core', 'compatibility', 'core', 'compatibility']);
    delete globalThis.navigator.gpu;
  } finally {
    delete globalThis.GPUValidationError;
    delete globalThis.GPUBufferUsage;
    if (!before[0]) delete globalThis.navigator; // made above: Node 20 has none
  }
  const after = ['navigator', 'WorkerGlobalScope', 'Window'].map((k) => Object.getOwnPropertyDescriptor(globalThis, k));
  assert.deepEqual(after, before);
});

test('tables: lookups equal the CPU path, bad arguments are typed errors naming them', async () => {
  const engine = await edo.createEngine();
  const rows = 300;
  const dim = 37;
  const data = Float32Array.from({ length: rows * dim }, (_, i) => Math.sin(i * 0.37) * 3);
  const fp32 = await edo.createTable(data, { rows, dim });
  assert.deepEqual([fp32.format, fp32.rows, fp32.dim, fp32.bytes], ['fp32', rows, dim, rows * dim * 4]);
  const ids = Uint32Array.from({ length: 101 }, (_, i) => (i * 7919) % rows);
  const got = await fp32.gather(ids);
  for (let i = 0; i < ids.length; i++) assert.deepEqual(got.subarray(i * dim, (i + 1) * dim), data.subarray(ids[i] * dim, (ids[i] + 1) * dim));
  const int8 = await fp32.quantize('int8');
  const resident = await engine.uploadTable(int8);
  assert.equal(resident.backend, 'cpu');
  assert.deepEqual(await resident.gather(ids), await int8.gather(ids));
  // A plain Array of integers is checked and copied; one that is not ids is refused.
  assert.deepEqual(await resident.gather([...ids]), await int8.gather(ids));
  await rejects(resident.gather([1, -1]), 'INVALID_ARGUMENT', /ids\[1\] = number -1/);
  await rejects(resident.gather([0.5]), 'INVALID_ARGUMENT', /ids\[0\]/);
  await rejects(resident.gather('1,2'), 'INVALID_ARGUMENT', /ids must be a Uint32Array/);
  await rejects(resident.gather(Int32Array.of(3, -2)), 'INVALID_ARGUMENT', /ids\[1\]/);
  await rejects(resident.gather([rows]), 'ID_OUT_OF_RANGE', /ids\[0\] = 300 is out of range for a table of 300 rows/);
  await rejects(edo.createTable(data, { rows, dim: 36 }), 'INVALID_ARGUMENT', /data has 11100 values; 10800 were expected/);
  await rejects(edo.createTable(data, { rows, dim: '37' }), 'INVALID_ARGUMENT', /options.dim must be an integer/);
  await rejects(edo.createTable(data, { rows, dim, format: 'int9' }), 'INVALID_ARGUMENT', /unknown format "int9"/);
  await rejects(edo.createTable(Float32Array.of(NaN, 1), { rows: 1, dim: 2, format: 'int8' }), 'NON_FINITE');
  // Bags: sum of rows, with a weight each.
  const bag = await resident.bag([1, 2, 3], [0, 2], { pooling: 'sum' });
  assert.equal(bag.length, 2 * dim);
  await rejects(resident.bag([1, 2], [0], { pooling: 'avg' }), 'INVALID_ARGUMENT', /options.pooling/);
  await rejects(resident.bag([1, 2], [0], { weights: [1] }), 'INVALID_ARGUMENT', /options.weights has 1 values; 2/);
  // Rows that stay on the GPU need a GPU.
  await rejects(resident.gatherToGpu(ids), 'UNSUPPORTED', /CPU path/);
  // .edo files round-trip.
  const back = await edo.readTable(await int8.toBytes(), { name: 't.edo' });
  assert.deepEqual(await back.gather(ids), await int8.gather(ids));
  await rejects(edo.readTable(new Uint8Array(16), { name: 't.edo' }), 'BAD_FILE');
  // Rows aligned to 16 bytes on a GPU: the same rows, the alignment kept in the file.
  const aligned = await edo.createTable(data, { rows, dim, format: 'int8', rowAlignment: 16 });
  assert.deepEqual([int8.rowAlignment, aligned.rowAlignment], [4, 16]);
  const alignedBack = await edo.readTable(await aligned.toBytes(), { name: 'a.edo' });
  assert.equal(alignedBack.rowAlignment, 16);
  assert.deepEqual(await (await engine.uploadTable(alignedBack)).gather(ids), await int8.gather(ids));
  await rejects(edo.createTable(data, { rows, dim, rowAlignment: 12 }), 'INVALID_ARGUMENT', /options.rowAlignment must be a power of two/);
  await rejects(edo.createTable(data, { rows, dim, rowAlignment: 512 }), 'INVALID_ARGUMENT', /options.rowAlignment must be an integer from 4 to 256/);
  // Kernels of aligned rows prepared ahead (the CPU path checks the alignment and resolves).
  await engine.prepare('int8', dim, { rowAlignment: 16 });
  await rejects(engine.prepare('int8', dim, { rowAlignment: 24 }), 'INVALID_ARGUMENT', /options.rowAlignment must be a power of two/);
  for (const t of [aligned, alignedBack]) t.dispose();
  // Disposed objects say so.
  resident.dispose();
  assert.equal(resident.disposed, true);
  await rejects(resident.gather(ids), 'DISPOSED', /resident table was disposed/);
  resident.dispose(); // twice is fine
  await rejects(engine.uploadTable(data), 'INVALID_ARGUMENT', /uploadTable\(table\) must be a Table/);
  for (const t of [fp32, int8, back]) t.dispose();
  engine.dispose();
});

test('reordered and pruned tables: the same rows for the same ids, through .edo bytes and an engine', async () => {
  const engine = await edo.createEngine();
  const rows = 300;
  const dim = 20;
  const data = Float32Array.from({ length: rows * dim }, (_, i) => Math.cos(i * 0.21) * 2 + (i % 7) * 0.1);
  const int8 = await edo.createTable(data, { rows, dim, format: 'int8' });
  assert.equal(int8.remapped, false);
  const ids = Uint32Array.from({ length: 500 }, (_, i) => (i * 97 + (i % 7) * 13) % rows);
  const want = await int8.gather(ids);
  // Row r looked up r times: the last row is stored first.
  const counts = Uint32Array.from({ length: rows }, (_, r) => r);
  const byCounts = await int8.reorder({ counts });
  assert.deepEqual([byCounts.remapped, byCounts.rows, byCounts.storedRows, byCounts.dim, byCounts.format], [true, rows, rows, dim, 'int8']);
  assert.equal(byCounts.bytes, int8.bytes + 4 * rows, 'the rows and the id map');
  assert.deepEqual(await byCounts.gather(ids), want);
  assert.deepEqual(await byCounts.gather([rows - 1, 0]), await int8.gather([rows - 1, 0]));
  const byTrace = await int8.reorder({ trace: ids });
  assert.deepEqual(await byTrace.gather(ids), want);
  // Through .edo bytes (the id map stored with the rows), and requantised as they are read.
  const bytes = await byCounts.toBytes();
  const back = await edo.readTable(bytes, { name: 'reordered.edo' });
  assert.deepEqual([back.remapped, back.rows], [true, rows]);
  assert.deepEqual(await back.gather(ids), want);
  const fp16 = await edo.readTable(bytes, { name: 'reordered.edo', format: 'fp16' });
  assert.deepEqual([fp16.format, fp16.remapped], ['fp16', true]);
  assert.deepEqual(await fp16.gather(ids), await (await int8.quantize('fp16')).gather(ids));
  assert.deepEqual(await (await back.quantize('int4')).gather(ids), await (await int8.quantize('int4')).gather(ids));
  // On an engine: gathers and bags as the plain table's.
  const plain = await engine.uploadTable(int8);
  const resident = await engine.uploadTable(back);
  assert.deepEqual(await resident.gather(ids), want);
  const offsets = [0, 7, 7, 30];
  for (const pooling of ['sum', 'mean', 'max']) {
    assert.deepEqual(await resident.bag(ids.subarray(0, 64), offsets, { pooling }), await plain.bag(ids.subarray(0, 64), offsets, { pooling }), pooling);
  }
  await rejects(resident.gather([rows]), 'ID_OUT_OF_RANGE');
  // Pruned: rows left out take no memory and read as zeros; the kept ones are the plain table's.
  const keep = Array.from({ length: rows }, (_, r) => r % 3 !== 0);
  const pruned = await edo.createTable(data, { rows, dim, format: 'int8', keep });
  assert.deepEqual([pruned.remapped, pruned.rows, pruned.storedRows], [true, rows, 200]);
  assert.ok(pruned.bytes < int8.bytes, `${pruned.bytes} bytes pruned, ${int8.bytes} not`);
  const got = await pruned.gather(ids);
  const onEngine = await (await engine.uploadTable(pruned)).gather(ids);
  assert.deepEqual(onEngine, got);
  for (let i = 0; i < ids.length; i++) {
    const row = got.subarray(i * dim, (i + 1) * dim);
    if (ids[i] % 3 === 0) assert.ok(row.every((v) => v === 0), `pruned row ${ids[i]}`);
    else assert.deepEqual(row, want.subarray(i * dim, (i + 1) * dim), `kept row ${ids[i]}`);
  }
  // Bad input: typed errors.
  await rejects(int8.reorder({ counts: counts.subarray(1) }), 'INVALID_ARGUMENT', /counts has 299 counts; 300 were expected/);
  await rejects(int8.reorder({ counts: [1.5] }), 'INVALID_ARGUMENT', /options.counts\[0\] = number 1.5: counts are integers/);
  // Keeping every row makes a plain table.
  const all = await edo.createTable(data, { rows, dim, format: 'int8', keep: new Uint8Array(rows).fill(1) });
  assert.deepEqual([all.remapped, all.bytes], [false, int8.bytes]);
  await rejects(int8.reorder({ trace: [rows] }), 'ID_OUT_OF_RANGE');
  await rejects(int8.reorder({}), 'INVALID_ARGUMENT', /one of options.counts and options.trace/);
  await rejects(int8.reorder({ counts, trace: ids }), 'INVALID_ARGUMENT', /one of/);
  await rejects(byCounts.reorder({ counts }), 'UNSUPPORTED', /reordered or pruned/);
  await rejects(byCounts.quantizeCodes('centered'), 'UNSUPPORTED', /reordered or pruned/);
  await rejects(engine.uploadCodes(await back.quantize('binary')), 'UNSUPPORTED', /reordered or pruned/);
  await rejects(pruned.toBytes(), 'UNSUPPORTED', /200 of 300 rows kept/);
  await rejects(edo.createTable(data, { rows, dim, keep: keep.slice(1) }), 'INVALID_ARGUMENT', /299 flags; 300 were expected/);
  await rejects(edo.createTable(data, { rows, dim, keep: [1, 0] }), 'INVALID_ARGUMENT', /options.keep\[0\] must be a boolean/);
  const codes = await int8.quantizeCodes('centered');
  await rejects(codes.reorder({ counts }), 'INVALID_ARGUMENT', /would not keep their transform/);
  // A damaged id map (the last tensor) is refused, never read as wrong rows.
  const damaged = bytes.slice();
  damaged[damaged.length - 1] ^= 0xff;
  await rejects(edo.readTable(damaged, { name: 'reordered.edo' }), 'BAD_FILE', /id map does not match its checksum/);
  engine.dispose();
});

test('centred and ITQ codes keep their transform through search and .edo bytes', async () => {
  const engine = await edo.createEngine();
  const rows = 400;
  const dim = 24;
  const data = Float32Array.from({ length: rows * dim }, (_, i) => Math.sin(i * 0.37) * 3 + 0.5);
  const queries = data.slice(0, 5 * dim);
  const fp32 = await edo.createTable(data, { rows, dim });
  assert.equal(fp32.codes, null);
  for (const kind of ['centered', 'itq']) {
    const codes = await fp32.quantizeCodes(kind, { iterations: 5 });
    assert.deepEqual([codes.format, codes.codes], ['binary', kind]);
    const found = await (await engine.uploadCodes(codes)).search(queries, 3);
    // A row is its own nearest code.
    assert.deepEqual([...found.ids].filter((_, i) => i % 3 === 0), [0, 1, 2, 3, 4]);
    assert.deepEqual([...found.distances].filter((_, i) => i % 3 === 0), [0, 0, 0, 0, 0]);
    const back = await edo.readTable(await codes.toBytes(), { name: 'codes.edo' });
    assert.equal(back.codes, kind);
    assert.deepEqual((await (await engine.uploadCodes(back)).search(queries, 3)).ids, found.ids);
  }
  await rejects(fp32.quantizeCodes('pca'), 'INVALID_ARGUMENT', /'centered' or 'itq'/);
  const few = await edo.createTable(data.slice(0, 10 * dim), { rows: 10, dim });
  await rejects(few.quantizeCodes('itq'), 'INVALID_ARGUMENT', /10 rows, at least 25 needed/);
  engine.dispose();
});

test('a model2vec folder from a URL: progress, model2vec vectors, a cache that makes the next load request nothing', async () => {
  const store = memoryStore();
  const progress = [];
  const url = `${base}/wordpiece/`;
  const model = await edo.loadModel(url, { cache: store, onProgress: (p) => progress.push(p) });
  assert.equal(model.dim, expected.models.wordpiece.dim);
  const vectors = await model.embed(TEXTS);
  close(vectors, expected.models.wordpiece.vectors.flat(), 1e-5, 'model2vec vectors');
  // Each file's progress reaches its length; three files, in order.
  const last = (file) => progress.filter((p) => p.file === file).at(-1);
  for (const [i, f] of ['config.json', 'tokenizer.json', 'model.safetensors'].entries()) {
    const size = readFileSync(path.join(MODELS, 'wordpiece', f)).length;
    assert.deepEqual(last(i + 1), { url: `${url}${f}`, file: i + 1, files: 3, loaded: size, total: size, fromCache: false });
  }
  assert.equal(count('/wordpiece/model.safetensors'), 1);
  // The second load is answered by the cache.
  const before = [...requests.values()].reduce((a, b) => a + b, 0);
  const again = await edo.loadModel(url, { cache: store });
  assert.equal([...requests.values()].reduce((a, b) => a + b, 0), before, 'no request on the second load');
  assert.deepEqual(await again.embed(TEXTS), vectors);
  const listed = await edo.modelCache.list({ cache: store });
  assert.equal(listed.length, 1);
  assert.equal(listed[0].model, url);
  assert.equal(listed[0].files.length, 3);
  assert.equal(listed[0].version, edo.VERSION);
  // A damaged cached copy is dropped and downloaded again.
  const key = `${url}model.safetensors`;
  store.map.get(key).bytes = store.map.get(key).bytes.slice(0, 100);
  const repaired = await edo.loadModel(url, { cache: store });
  assert.equal(count('/wordpiece/model.safetensors'), 2);
  assert.deepEqual(await repaired.embed(TEXTS), vectors);
  // So is one written by another version of the package.
  store.map.get(key).headers['x-edo-package'] = '0.0.0-other';
  await edo.loadModel(url, { cache: store });
  assert.equal(count('/wordpiece/model.safetensors'), 3);
  assert.equal(await edo.modelCache.delete(url, { cache: store }), 3);
  assert.deepEqual(await edo.modelCache.list({ cache: store }), []);
  // Without a cache every load downloads.
  await edo.loadModel(url, { cache: false });
  assert.equal(count('/wordpiece/model.safetensors'), 4);
  // The vectors, for the browser's check that Node and the page agree.
  if (process.env.EDO_NODE_VECTORS) writeFileSync(process.env.EDO_NODE_VECTORS, JSON.stringify({ texts: TEXTS, vectors: Array.from(vectors) }));
  for (const m of [model, again, repaired]) m.dispose();
});

test('models by name on a hub: model2vec and sentence-transformers layouts, a revision, the cache, names not there', async () => {
  const host = `${base}/hub`;
  const store = memoryStore();
  const sum = () => [...requests.values()].reduce((a, b) => a + b, 0);
  // model2vec's layout: config.json at the top.
  const progress = [];
  const m2v = await edo.loadModel('acme/wordpiece', { host, cache: store, onProgress: (p) => progress.push(p) });
  close(await m2v.embed(TEXTS), expected.models.wordpiece.vectors.flat(), 1e-5, 'model2vec vectors by name');
  assert.deepEqual([...new Set(progress.map((p) => p.url))], ['config.json', 'tokenizer.json', 'model.safetensors'].map((f) => `${host}/acme/wordpiece/resolve/main/${f}`));
  const before = sum();
  const again = await edo.loadModel('acme/wordpiece', { host, cache: store });
  assert.equal(sum(), before, 'no request on the second load');
  assert.deepEqual(await again.embed(TEXTS), await m2v.embed(TEXTS));
  assert.equal((await edo.modelCache.list({ cache: store }))[0].model, `acme/wordpiece@main on ${host}`);
  // sentence-transformers' layouts: the module's files at the top (then Normalize), or under
  // 0_StaticEmbedding/; vectors as sentence-transformers gives them.
  for (const [name, fixture, revision] of [['acme/st-wordpiece', 'st_wordpiece', 'v1'], ['acme/st-unigram', 'st_unigram', undefined]]) {
    const model = await edo.loadModel(name, { host, revision, cache: store });
    close(await model.embed(stExpected.texts), stExpected.models[fixture].vectors.flat(), 1e-5, `${fixture} by name`);
    assert.equal(model.normalize, stExpected.models[fixture].normalize, `${fixture}: normalised`);
    const n = sum();
    await edo.loadModel(name, { host, revision, cache: store });
    assert.equal(sum(), n, `${fixture}: no request on the second load`);
  }
  assert.equal(count('/hub/acme/st-unigram/resolve/main/0_StaticEmbedding/model.safetensors'), 1);
  // Names not there: the URLs tried and their status.
  await rejects(edo.loadModel('acme/missing', { host, cache: false }), 'HTTP', /acme\/missing@main on .*resolve\/main\/config.json: HTTP 404; .*resolve\/main\/modules.json: HTTP 404/);
  await rejects(edo.loadModel('acme/st-wordpiece', { host, cache: false }), 'HTTP', /acme\/st-wordpiece@main/);
  await rejects(edo.loadModel('acme/wordpiece', { host, revision: 7 }), 'INVALID_ARGUMENT', /options.revision must be a string/);
  assert.equal(await edo.modelCache.delete('acme/wordpiece', { host, cache: store }), 3);
  assert.equal(await edo.modelCache.delete('acme/st-unigram', { host, cache: store }), 4);
});

test("byte-level BPE tokenizers (GPT-2's, Llama 3's) give the ids HF tokenizers gives", async () => {
  const dir = path.join(MODELS, 'bytelevel_bpe');
  const file = (name) => new Uint8Array(readFileSync(path.join(dir, name)));
  const want = JSON.parse(readFileSync(path.join(dir, 'expected.json'), 'utf8'));
  for (const [tokenizer, key] of [['tokenizer.json', 'gpt2'], ['tokenizer_llama3.json', 'llama3']]) {
    const model = await edo.modelFromFiles({ config: file('config.json'), tokenizer: file(tokenizer), model: file('model.safetensors') });
    for (const [i, t] of want.texts.entries()) assert.deepEqual([...(await model.tokenize(t))], want[key][i], `${key}: ${JSON.stringify(t)}`);
    model.dispose();
  }
});

test('an .edo model file from a URL, on an engine, with a search index', async () => {
  const folder = await edo.loadModel(`${base}/wordpiece/`, { cache: false });
  const bytes = await (await folder.quantize('int8')).toBytes();
  routes.set('/int8/model.edo', serveBytes(bytes));
  const engine = await edo.createEngine();
  const model = await engine.loadModel(`${base}/int8/model.edo`, { cache: false });
  assert.equal(model.backend, 'cpu');
  // The header gives the shape and row alignment to prepare the kernels with (checked, then
  // nothing to compile on the CPU path).
  const shape = await edo.fileShape(bytes);
  assert.deepEqual(shape, { format: 'int8', rows: folder.rows, dim: folder.dim, rowAlignment: 4 });
  assert.equal(folder.rowAlignment, 4);
  await engine.prepareModel(shape.format, shape.dim, { rowAlignment: 16 });
  await rejects(engine.prepareModel('int8', shape.dim, { rowAlignment: 24 }), 'INVALID_ARGUMENT', /options.rowAlignment must be a power of two/);
  const v = await model.embed(TEXTS);
  const want = expected.models.wordpiece.vectors;
  for (let t = 0; t < TEXTS.length; t++) {
    const a = v.subarray(t * model.dim, (t + 1) * model.dim);
    const b = want[t];
    const dot = a.reduce((s, x, i) => s + x * b[i], 0);
    const norm = Math.hypot(...b);
    if (norm > 0) assert.ok(dot / norm > 0.99, `text ${t}: INT8 cosine ${dot / norm}`);
  }
  const index = await model.index(TEXTS.filter(Boolean));
  const found = await index.search(TEXTS[1], 3);
  assert.equal(found.ids.length, 3);
  assert.ok(found.ids instanceof Uint32Array && found.scores instanceof Float32Array);
  await rejects(model.embed('one text'), 'INVALID_ARGUMENT', /texts must be an array of strings \(got the string "one text": wrap one text in \[ \]\)/);
  await rejects(model.embed(['a', 3]), 'INVALID_ARGUMENT', /texts\[1\] must be a string/);
  for (const o of [index, model, folder, engine]) o.dispose();
});

test('bad downloads: 404, an HTML page, junk, an abort half-way', async () => {
  await rejects(edo.loadModel(`${base}/nothing/model.edo`, { cache: false }), 'HTTP', /HTTP 404/);
  await rejects(edo.loadModel(`${base}/nothing/`, { cache: false }), 'HTTP', /tokenizer\.json: HTTP 404/);
  await rejects(edo.loadModel(`${base}/html/model.edo`, { cache: false }), 'BAD_FILE', /answered with an HTML page/);
  await rejects(edo.loadModel(`${base}/junk/model.edo`, { cache: false }), 'BAD_FILE');
  const controller = new AbortController();
  const seen = [];
  const loading = edo.loadModel(`${base}/slow/model.edo`, {
    cache: false,
    signal: controller.signal,
    onProgress: (p) => {
      seen.push(p.loaded);
      if (p.loaded >= 1 << 19) controller.abort();
    },
  });
  await rejects(loading, 'ABORTED', /was aborted/);
  assert.ok(seen.at(-1) >= 1 << 19 && seen.at(-1) < 1 << 20, `aborted half-way (${seen.at(-1)} bytes)`);
  const aborted = AbortSignal.abort();
  await rejects(edo.loadModel(`${base}/wordpiece/`, { cache: false, signal: aborted }), 'ABORTED');
  await rejects(edo.loadModel(42), 'INVALID_ARGUMENT', /source must be a string/);
  await rejects(edo.loadModel(`${base}/wordpiece/`, { cache: 'yes' }), 'INVALID_ARGUMENT', /options.cache/);
  await rejects(edo.loadModel(`${base}/wordpiece/`, { signal: 'stop' }), 'INVALID_ARGUMENT', /options.signal/);
});

test('a live table takes new keys, updates, update logs and swaps', async () => {
  const dim = 6;
  const t = await edo.createLiveTable({ format: 'fp32', dim, maxRows: 100, policy: 'lru+tinylfu', init: new Float32Array(dim).fill(0.5) });
  const big = 2n ** 63n + 11n;
  const rows = await t.findOrInsert([7, big]);
  assert.deepEqual(Array.from(rows), new Array(2 * dim).fill(0.5));
  assert.equal(t.keys, 2);
  assert.ok(t.has(big) && !t.has(8));
  const values = Float32Array.from({ length: 2 * dim }, (_, i) => i / 4);
  assert.deepEqual(await t.update([7, 9], values), { sequence: 1, inserted: 1, evicted: 0 });
  assert.deepEqual(Array.from(await t.gather(new BigUint64Array([9n, 7n]))), [...values.slice(dim), ...values.slice(0, dim)]);
  // Unknown keys; a bad update changes nothing.
  await rejects(t.gather([7, 8]), 'ID_OUT_OF_RANGE', /keys\[1\] = 8 is not in the table/);
  assert.deepEqual(Array.from(await t.gather([8], { missing: 'zero' })), new Array(dim).fill(0));
  const bad = values.slice();
  bad[dim + 2] = NaN;
  await rejects(t.update([7, 40], bad), 'NON_FINITE');
  assert.ok(!t.has(40));
  await rejects(t.gather([-1]), 'INVALID_ARGUMENT', /keys are integers/);
  await rejects(t.gather([2 ** 60]), 'INVALID_ARGUMENT', /bigints past/);
  // Bags over keys.
  const sum = await t.bag([7, 9, 9], [0, 1, 3], { pooling: 'sum' });
  assert.deepEqual(Array.from(sum.slice(dim)), Array.from(values.slice(dim), (v) => 2 * v));
  // An update log, made here and replayed; a damaged one refused whole.
  const log = new Uint8Array([
    ...(await edo.encodeUpdates([7], new Float32Array(dim).fill(3), { dim })),
    ...(await edo.encodeUpdates([300n], new Float32Array(dim).fill(4), { dim, header: false })),
  ]);
  assert.equal(await t.applyLog(log), 2);
  assert.deepEqual(Array.from(await t.gather([300])), new Array(dim).fill(4));
  await rejects(t.applyLog(log.slice(0, log.length - 2)), 'BAD_FILE', /batch 1/);
  // Snapshots: another table reads them; a swap installs one, a damaged one never.
  const snapshot = await t.toBytes();
  const u = await edo.readLiveTable(snapshot);
  assert.deepEqual(Array.from(await u.gather([300, 7])), Array.from(await t.gather([300, 7])));
  const v = await edo.createLiveTable({ format: 'fp32', dim });
  const before = v.bytes;
  const report = await v.swap(snapshot);
  assert.deepEqual([report.version, report.keys, report.oldBytes], [1, 4, before]);
  assert.ok(report.newBytes > 0);
  const damaged = snapshot.slice();
  damaged[damaged.length - 3] ^= 1;
  await rejects(v.swap(damaged), 'CHECKSUM');
  assert.equal(v.version, 1);
  assert.deepEqual(Array.from(await v.gather([big])), new Array(dim).fill(0.5));
  await rejects(edo.readTable(snapshot, { name: 'live.edo' }), 'UNSUPPORTED', /keys/);
});

// Last: a panic leaves the module unusable.
test('a panic prints its message before the module stops', async () => {
  await edo.init();
  const glue = await import(new URL('./node_modules/edo-embeddings/edo_web.js', import.meta.url));
  const seen = [];
  const original = console.error;
  console.error = (...args) => seen.push(args.join(' '));
  try {
    assert.throws(() => glue.__panicForTests(), WebAssembly.RuntimeError);
  } finally {
    console.error = original;
  }
  assert.match(seen.join('\n'), /edo panicked: .*the panic hook's test/s);
});
