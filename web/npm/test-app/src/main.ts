// A web app as a user writes one: edo-embeddings installed from its tarball, built by Vite, run in
// headless Chromium by scripts/web/npm_e2e.py — with WebGPU (`?expect=webgpu`) and without it
// (`?expect=cpu`), twice each (`&visit=1`, `&visit=2`: the second finds the model in Cache
// Storage). Every check's outcome and the figures go to `window.edoResults` and the page.
// `tsc --noEmit --strict` checks this file against the package's typings.
import {
  createEngine,
  createTable,
  createWorkerEngine,
  EdoError,
  loadModel,
  modelCache,
  report,
  type DeviceEvent,
  type DownloadProgress,
  type Engine,
  type ErrorCode,
  type ResidentTable,
  type Table,
  Table as TableClass,
} from 'edo-embeddings';

const params = new URLSearchParams(location.search);
const expect = params.get('expect') ?? 'webgpu';
const visit = Number(params.get('visit') ?? '1');
const onGpu = expect === 'webgpu';

interface Outcome {
  name: string;
  ok: boolean;
  detail: string;
}
const outcomes: Outcome[] = [];
const figures: Record<string, number | string | boolean> = {};

function show(o: Outcome): void {
  const li = document.createElement('li');
  li.className = o.ok ? 'ok' : 'bad';
  li.textContent = `${o.name}${o.detail ? ': ' : ''}`;
  const code = document.createElement('code');
  code.textContent = o.detail;
  li.append(code);
  document.getElementById('checks')!.append(li);
}

async function check(name: string, body: () => Promise<string | void>): Promise<void> {
  let outcome: Outcome;
  try {
    outcome = { name, ok: true, detail: (await body()) ?? '' };
  } catch (e) {
    outcome = { name, ok: false, detail: e instanceof Error ? `${e.name}${e instanceof EdoError ? ` ${e.code}` : ''}: ${e.message}` : String(e) };
  }
  outcomes.push(outcome);
  show(outcome);
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

async function rejects(promise: Promise<unknown>, code: ErrorCode, pattern?: RegExp): Promise<void> {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof EdoError, `an EdoError, not ${String(e)}`);
    assert(e.code === code, `code ${e.code}, expected ${code}: ${e.message}`);
    if (pattern) assert(pattern.test(e.message), `${e.message} does not match ${pattern}`);
    return;
  }
  throw new Error(`resolved; expected a ${code} error`);
}

function sameBits(a: Float32Array, b: Float32Array, what: string): void {
  assert(a.length === b.length, `${what}: ${a.length} values vs ${b.length}`);
  for (let i = 0; i < a.length; i++) assert(Object.is(a[i], b[i]), `${what}[${i}]: ${a[i]} vs ${b[i]}`);
}

function near(a: Float32Array | number[], b: Float32Array | number[], tol: number, what: string): void {
  assert(a.length === b.length, `${what}: ${a.length} values vs ${b.length}`);
  for (let i = 0; i < a.length; i++) assert(Math.abs(a[i] - b[i]) <= tol, `${what}[${i}]: ${a[i]} vs ${b[i]}`);
}

function data(rows: number, dim: number, seed: number): Float32Array {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length: rows * dim }, () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return (s / 0xffffffff) * 2 - 1;
  });
}

/**
 * Texts a second embedding 10 000 short texts, the best of several runs after a warm-up run: a
 * module just started (the worker's) runs in V8's baseline tier until its hot code is optimised,
 * on the same two cores.
 */
async function throughput(embed: (texts: string[]) => Promise<Float32Array>): Promise<number> {
  const many = Array.from({ length: 10_000 }, (_, i) => `sentence number ${i} of the batch, with ${i % 97} words more`);
  await embed(many);
  let best = Infinity;
  // On the CPU path a batch takes 40–70 ms, where this machine's noise is large: more runs.
  for (let run = 0; run < (onGpu ? 3 : 9); run++) {
    const t = performance.now();
    await embed(many);
    best = Math.min(best, performance.now() - t);
  }
  return Math.round(10_000 / (best / 1000));
}

const spread = (n: number, rows: number): Uint32Array => Uint32Array.from({ length: n }, (_, i) => (i * 7919 + 13) % rows);
const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 0));

// The page's own WebGPU pass over edo's output: out[i] = 2 · rows[i] + 1, into a buffer of the
// app's, filled with a sentinel first so a pass that never ran cannot pass.
async function doubledOnGpu(device: GPUDevice, input: GPUBuffer, count: number): Promise<Float32Array> {
  const module = device.createShaderModule({
    code: `
      @group(0) @binding(0) var<storage, read> rows: array<f32>;
      @group(0) @binding(1) var<storage, read_write> out: array<f32>;
      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        if (id.x < arrayLength(&out)) { out[id.x] = 2.0 * rows[id.x] + 1.0; }
      }`,
  });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const out = device.createBuffer({ size: count * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC, mappedAtCreation: true });
  new Float32Array(out.getMappedRange()).fill(-7777);
  out.unmap();
  const read = device.createBuffer({ size: count * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const bind = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: input } },
      { binding: 1, resource: { buffer: out } },
    ],
  });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bind);
  pass.dispatchWorkgroups(Math.ceil(count / 64));
  pass.end();
  encoder.copyBufferToBuffer(out, 0, read, 0, count * 4);
  device.queue.submit([encoder.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const values = new Float32Array(read.getMappedRange().slice(0));
  read.destroy();
  out.destroy();
  return values;
}

async function main(): Promise<void> {
  const started = performance.now();
  let engine: Engine | undefined;
  // backend 'auto' (the default): no adapter → 'no-adapter'; SwiftShader, a fallback adapter, →
  // the CPU path without a calibration, or (were it not flagged a fallback) the calibration on the
  // first visit and its remembered result on the second.
  await check("createEngine() (backend 'auto') takes the CPU path here, and says why", async () => {
    const auto = await createEngine();
    const { choice } = auto;
    figures.autoReason = choice.reason;
    figures.autoEngineMs = Math.round(performance.now() - started);
    if (choice.calibrationMs !== undefined) figures.calibrationMs = Math.round(choice.calibrationMs);
    try {
      assert(auto.backend === 'cpu', `auto chose ${auto.backend}: ${auto.note}`);
      const want = !onGpu ? ['no-adapter'] : visit === 1 ? ['fallback-adapter', 'measured'] : ['fallback-adapter', 'remembered'];
      assert(want.includes(choice.reason), `reason ${choice.reason}, expected ${want.join(' or ')}: ${auto.note}`);
      assert(auto.note === choice.note && auto.note.length > 0, `note ${auto.note}`);
      return `${choice.reason}: ${auto.note}`;
    } finally {
      auto.dispose();
    }
  });
  await check('createEngine({ backend }) gives the backend asked for', async () => {
    const t0 = performance.now();
    engine = await createEngine({ backend: onGpu ? 'webgpu' : 'cpu' });
    assert(engine.choice.reason === 'requested', `reason ${engine.choice.reason}`);
    assert(engine.backend === expect, `backend ${engine.backend} (${engine.note}), expected ${expect}`);
    assert((engine.gpuDevice !== null) === onGpu, `gpuDevice ${String(engine.gpuDevice)}`);
    figures.engineMs = Math.round(performance.now() - t0);
    return `${engine.backend}: ${engine.note}`;
  });
  if (!engine) return;
  const e: Engine = engine;

  const rows = 1000;
  const dim = 70;
  const ids = spread(777, rows);
  const tables: Record<string, { table: Table; resident: ResidentTable }> = {};
  await check('gathers equal the CPU path bit for bit (fp32, int8, q8_0, int4; 777 ids over 1000 × 70)', async () => {
    const source = await createTable(data(rows, dim, 3), { rows, dim });
    for (const format of ['fp32', 'int8', 'q8_0', 'int4']) {
      const table = await source.quantize(format);
      const resident = await e.uploadTable(table);
      tables[format] = { table, resident };
      sameBits(await resident.gather(ids), await table.gather(ids), format);
    }
    source.dispose();
  });

  if (onGpu) {
    await check("rows left on the GPU feed the page's own WGSL pass on edo's device", async () => {
      const { table, resident } = tables.int8;
      const device = e.gpuDevice!;
      const cpu = await table.gather(ids);
      const rowsOnGpu = await resident.gatherToGpu(ids);
      assert(rowsOnGpu.buffer instanceof GPUBuffer, 'a GPUBuffer');
      assert(rowsOnGpu.rows === ids.length && rowsOnGpu.dim === dim && rowsOnGpu.dtype === 'float32', `shape ${rowsOnGpu.rows} × ${rowsOnGpu.dim} ${rowsOnGpu.dtype}`);
      const doubled = await doubledOnGpu(device, rowsOnGpu.buffer, ids.length * dim);
      sameBits(doubled, cpu.map((x) => 2 * x + 1), 'the page pass over edo rows');
      sameBits(await rowsOnGpu.read(), cpu, 'read()');
      rowsOnGpu.destroy();
      await rejects(rowsOnGpu.read(), 'DISPOSED');
      // Bags too.
      const offsets = Uint32Array.of(0, 5, 5, 300);
      const bag = await resident.bagToGpu(ids, offsets, { pooling: 'mean' });
      near(await bag.read(), await resident.bag(ids, offsets, { pooling: 'mean' }), 0, 'bagToGpu');
      bag.dispose();
    });

    await check("onnxruntime-web runs a model on edo's device over rows edo gathered there", async () => {
      // public/dense.onnx (scripts/fixtures/make_onnx_fixture.py): y = Relu(rows · W + b), W and b by formula.
      // onnxruntime-web's WebGPU execution provider takes a device with the session's options
      // (`env.webgpu.device` is the device it made itself: onnxruntime issue 26107).
      const ort = await import('onnxruntime-web/webgpu');
      ort.env.wasm.numThreads = 1; // no cross-origin isolation here: no threads
      const model = await (await fetch('./dense.onnx')).arrayBuffer();
      const session = await ort.InferenceSession.create(model, { executionProviders: [{ name: 'webgpu', device: e.gpuDevice! }] });
      const { table, resident } = tables.int8;
      const rowsOnGpu = await resident.gatherToGpu(ids);
      const dims = [rowsOnGpu.rows, rowsOnGpu.dim];
      try {
        // Without a copy: the rows' GPUBuffer as the input tensor. onnxruntime-web 1.31.1 refuses
        // it on a device given to the session (it tags such tensors with its own default device);
        // then the rows go through the host, once. Any other error fails the check.
        let run: Record<string, { dims: readonly number[]; getData(): Promise<unknown> }>;
        try {
          run = await session.run({ rows: ort.Tensor.fromGpuBuffer(rowsOnGpu.buffer, { dataType: 'float32', dims }) });
          figures.onnxInputWithoutCopy = 'yes';
        } catch (err) {
          if (!/no data transfer registered/.test(String(err))) throw err;
          figures.onnxInputWithoutCopy = `no: ${String(err).slice(String(err).indexOf('There'), String(err).indexOf('There') + 60)}…`;
          run = await session.run({ rows: new ort.Tensor('float32', await rowsOnGpu.read(), dims) });
        }
        const y = run.y;
        assert(y.dims[0] === ids.length && y.dims[1] === 8, `output dims ${y.dims.join(' × ')}`);
        const got = (await y.getData()) as Float32Array;
        // The same on the CPU path's rows, in float64.
        const cpu = await table.gather(ids);
        let worst = 0;
        let positive = 0;
        for (let r = 0; r < ids.length; r++) {
          for (let j = 0; j < 8; j++) {
            let sum = (j - 4) / 4;
            let scale = Math.abs(sum);
            for (let i = 0; i < dim; i++) {
              const term = cpu[r * dim + i] * ((((i * 7 + j * 3) % 11) - 5) / 8);
              sum += term;
              scale += Math.abs(term);
            }
            const want = Math.max(sum, 0);
            positive += want > 0 ? 1 : 0;
            worst = Math.max(worst, Math.abs(got[r * 8 + j] - want) / Math.max(scale, 1e-6));
          }
        }
        assert(worst < 1e-5, `onnxruntime-web's output differs from the CPU path's rows · W by ${worst} (relative to Σ|terms|)`);
        assert(positive > ids.length, `only ${positive} outputs past the Relu: a test of nothing`);
        // The input buffer is still edo's: onnxruntime-web read it and left it alone.
        sameBits(await rowsOnGpu.read(), cpu, 'the rows after the session read them');
        return `${ids.length} × ${dim} rows → ${ids.length} × 8, worst relative difference ${worst.toExponential(1)}; GPUBuffer input ${figures.onnxInputWithoutCopy}`;
      } finally {
        rowsOnGpu.destroy();
        await session.release();
      }
    });

    await check("the page's own validation errors on edo's device do not stop edo", async () => {
      const device = e.gpuDevice!;
      let heard = '';
      device.addEventListener('uncapturederror', (ev) => (heard = (ev as GPUUncapturedErrorEvent).error.message), { once: true });
      // MAP_READ with STORAGE is not allowed: a validation error nobody scoped.
      device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.STORAGE });
      await device.queue.onSubmittedWorkDone();
      for (let i = 0; i < 20 && !heard; i++) await tick();
      assert(heard, 'the page heard its own error');
      sameBits(await tables.int8.resident.gather(ids), await tables.int8.table.gather(ids), 'edo after the error');
      return heard.slice(0, 80);
    });

    await check('10 000 gather → destroy cycles leave the memory report where it was', async () => {
      const { resident } = tables.q8_0;
      // Held for the app: everything but the idle buffers edo keeps for its next lookups.
      const held = () => {
        const r = e.memoryReport();
        return r.total - r.idle;
      };
      const before = held();
      const few = spread(32, rows);
      const t0 = performance.now();
      for (let i = 0; i < 10_000; i++) {
        const out = await resident.gatherToGpu(few);
        out.destroy();
      }
      const ms = performance.now() - t0;
      figures.gpuGatherDestroyCallsPerS = Math.round(10_000 / (ms / 1000));
      // Host-side outputs too (the readback buffers come and go inside the call).
      for (let i = 0; i < 1000; i++) await resident.gather(few);
      const after = held();
      const idle = e.memoryReport().idle;
      assert(after === before, `memory report ${before} → ${after} bytes held`);
      assert(idle <= 16 << 20, `${idle} idle bytes`);
      return `${before} bytes held before and after (${idle} idle); ${figures.gpuGatherDestroyCallsPerS} cycles/s`;
    });
  }

  await check('disposing a table frees its GPU memory in the report', async () => {
    const t = await createTable(data(500, 33, 9), { rows: 500, dim: 33, format: 'int8' });
    const before = e.memoryReport().total;
    const r = await e.uploadTable(t);
    const held = e.memoryReport().total;
    r.dispose();
    const after = e.memoryReport().total;
    await rejects(r.gather([1]), 'DISPOSED', /disposed/);
    t.dispose();
    assert(after === before, `report ${before} → ${held} → ${after}`);
    if (onGpu) assert(held > before, `the upload showed in the report (${before} → ${held})`);
    return `${before} → ${held} → ${after} bytes`;
  });

  // ---- models ----
  const folder = new URL('models/wordpiece/', location.href).href;
  const nodeVectors = (await (await fetch('node-vectors.json')).json()) as { texts: string[]; vectors: number[] };
  const texts = nodeVectors.texts;
  const progress: DownloadProgress[] = [];
  let hostVectors: Float32Array | undefined;
  await check(`loadModel of a model2vec folder (visit ${visit}: ${visit === 1 ? 'downloaded' : 'from Cache Storage'}) gives Node's vectors`, async () => {
    const model = await loadModel(folder, { onProgress: (p) => progress.push(p) });
    const files = new Set(progress.map((p) => p.url));
    assert(files.size === 3, `progress for ${files.size} files`);
    const cached = progress.every((p) => p.fromCache);
    assert(cached === (visit > 1), `fromCache ${cached} on visit ${visit}`);
    for (const url of files) {
      const last = progress.filter((p) => p.url === url).at(-1)!;
      assert(last.loaded === last.total, `${url}: ${last.loaded} of ${last.total}`);
    }
    hostVectors = await model.embed(texts);
    sameBits(hostVectors, Float32Array.from(nodeVectors.vectors), "the WASM CPU path against Node's");
    const resident = await e.uploadModel(model);
    const v = await resident.embed(texts);
    near(v, nodeVectors.vectors, onGpu ? 1e-5 : 0, `the engine (${resident.backend}) against Node`);
    if (onGpu) {
      const gpu = await resident.embedToGpu(texts);
      near(await gpu.read(), v, 0, 'embedToGpu');
      gpu.destroy();
    }
    resident.dispose();
    model.dispose();
    return `${progress.length} progress events`;
  });

  await check('modelCache lists the model; on the second visit it is deleted', async () => {
    const list = await modelCache.list();
    const entry = list.find((m) => m.model === folder);
    assert(entry && entry.files.length === 3 && entry.bytes > 0, `cache list ${JSON.stringify(list)}`);
    if (visit > 1) {
      const gone = await modelCache.delete(folder);
      assert(gone === 3, `${gone} files deleted`);
      const after = await modelCache.list();
      assert(!after.some((m) => m.model === folder), `still listed: ${JSON.stringify(after)}`);
    }
    return `${entry.bytes} bytes in ${entry.files.length} files`;
  });

  // The real model (WordLlama, when the test could make web/model.edo): the first embedding after
  // it loads, from the network on the first visit, from the cache on the second.
  const real = new URL('models/model.edo', location.href).href;
  const haveReal = (await fetch(real, { method: 'HEAD' })).ok;
  figures.realModel = haveReal;
  if (haveReal) {
    await check(`the real model: first embedding after loading it (${visit === 1 ? 'downloaded' : 'cached'})`, async () => {
      const t0 = performance.now();
      const model = await e.loadModel(real);
      const loaded = performance.now();
      await model.embed(['the first sentence embedded']);
      const first = performance.now();
      figures[`realLoadMs`] = Math.round(loaded - t0);
      figures[`realFirstEmbedMs`] = Math.round(first - loaded);
      figures[`realLoadAndEmbedMs`] = Math.round(first - t0);
      // Throughput on the page's thread, for the worker's comparison below (after a warm-up, as
      // there: a fresh module runs in V8's baseline tier at first).
      figures.mainThreadTextsPerS = await throughput((batch) => model.embed(batch));
      model.dispose();
      return `load ${figures.realLoadMs} ms, first embedding ${figures.realFirstEmbedMs} ms`;
    });
  }

  await check('a dedicated worker runs the same API, answers transferred', async () => {
    const worker = await createWorkerEngine({ backend: onGpu ? 'webgpu' : 'cpu' });
    assert(worker.backend === expect, `the worker's engine is on ${worker.backend} (${worker.note})`);
    // Another path to the same files, so the server's counts of the page's own loads stay apart.
    const model = await worker.loadModel('models/wordpiece-worker/', { cache: false });
    const v = await model.embed(texts);
    assert(v instanceof Float32Array, 'a Float32Array');
    near(v, nodeVectors.vectors, onGpu ? 1e-5 : 0, "the worker against Node's");
    const table = await worker.createTable(data(rows, dim, 3), { rows, dim, format: 'int8' });
    const resident = await worker.uploadTable(table);
    sameBits(await resident.gather(ids), await tables.int8.table.gather(ids), 'worker gather');
    // The rest of the engine's API through the worker, as typed.
    await worker.prepare('int8', dim);
    const cache = await worker.cache(table, { capacity: 64 });
    sameBits(await cache.gather(ids), await tables.int8.table.gather(ids), 'worker cache gather');
    assert(((await cache.stats()).misses ?? 0) > 0, 'the worker cache counts its misses');
    const fp32 = await worker.createTable(data(rows, dim, 3), { rows, dim });
    const codes = await fp32.quantizeCodes('centered');
    assert(codes.codes === 'centered' && (await fp32.idOf('x')) === null, 'centred codes in the worker');
    const found = await (await worker.uploadCodes(codes)).search(data(2, dim, 9), 3);
    assert(found.k === 3 && found.ids.length === 6, `the worker's codes search (${found.k}, ${found.ids.length})`);
    await rejects(worker.loadModel('models/missing/'), 'HTTP', /404/);
    if (haveReal) {
      const big = await worker.loadModel(real);
      figures.workerTextsPerS = await throughput((batch) => big.embed(batch));
      // How long the page's thread is held while the worker embeds (timer lateness), measured on
      // a run of its own so that the timer does not take from the throughput.
      let worst = 0;
      let last = performance.now();
      const timer = setInterval(() => {
        const now = performance.now();
        worst = Math.max(worst, now - last - 5);
        last = now;
      }, 5);
      await big.embed(Array.from({ length: 10_000 }, (_, i) => `another sentence, number ${i}`));
      clearInterval(timer);
      figures.pageStallMsDuringWorkerEmbed = Math.round(worst);
      await big.dispose();
    }
    const stats = worker.workerStats();
    assert(stats.copiedBytes === 0 && stats.transferredBytes > 0, `answers: ${stats.transferredBytes} bytes transferred, ${stats.copiedBytes} copied`);
    await worker.dispose();
    await rejects(model.embed(texts), 'DISPOSED');
    return `${stats.calls} calls, ${stats.transferredBytes} bytes transferred, none copied`;
  });

  if (visit === 1) {
    await check('the benchmark module loads on first use, as a chunk of its own: a tiny benchmark and its report', async () => {
      const loaded = () =>
        performance
          .getEntriesByType('resource')
          .map((e) => e.name.split('/').pop() ?? '')
          .filter((name) => name.includes('edo_web_suite'));
      assert(loaded().length === 0, `loaded before any benchmark: ${loaded().join(', ')}`);
      const cpu = await createEngine({ backend: 'cpu' });
      const results = await cpu.benchmark({ scale: 'tiny' });
      cpu.dispose();
      const html = await report(results);
      const charts = html.split('<svg').length - 1;
      assert(results.cases.length > 0 && charts > 0, `${results.cases.length} cases, ${charts} charts`);
      const files = loaded();
      assert(files.some((f) => f.endsWith('.wasm')) && files.some((f) => f.endsWith('.js')), `the benchmark module's files: ${files.join(', ')}`);
      return `${results.cases.length} cases, ${charts} charts; fetched then: ${files.join(', ')}`;
    });
  }

  await check('bad input: typed errors that name the argument', async () => {
    const { resident } = tables.fp32;
    await rejects(resident.gather([1, -2]), 'INVALID_ARGUMENT', /ids\[1\]/);
    await rejects(resident.gather([1.5]), 'INVALID_ARGUMENT', /ids\[0\]/);
    await rejects(resident.gather([rows]), 'ID_OUT_OF_RANGE', /out of range/);
    // Objects come from the package's factories: their constructors are private in the typings.
    // @ts-expect-error: a private constructor
    const construct = () => new TableClass();
    void construct;
    // @ts-expect-error: a string where ids belong
    await rejects(resident.gather('1,2,3'), 'INVALID_ARGUMENT', /ids must be a Uint32Array/);
    // @ts-expect-error: a string where a number belongs
    await rejects(createTable(new Float32Array(6), { rows: 2, dim: '3' }), 'INVALID_ARGUMENT', /options\.dim/);
    await rejects(createTable(new Float32Array(6), { rows: 2, dim: 4 }), 'INVALID_ARGUMENT', /data has 6 values; 8 were expected/);
    await rejects(loadModel('models/missing/model.edo'), 'HTTP', /404/);
    await rejects(loadModel('models/page.edo'), 'BAD_FILE', /HTML page/);
    const controller = new AbortController();
    const slow = loadModel('models/slow.edo', { cache: false, signal: controller.signal, onProgress: (p) => p.loaded > 0 && controller.abort() });
    await rejects(slow, 'ABORTED', /aborted/);
  });

  if (onGpu) {
    await check('a lost device: the engine recovers, the event carries the new GPUDevice, rows stay right', async () => {
      const old = e.gpuDevice;
      const events: DeviceEvent[] = [];
      const recovered = new Promise<void>((resolve) =>
        e.onDeviceEvent((ev) => {
          events.push(ev);
          if (ev.type !== 'lost') resolve();
        }),
      );
      e.loseDevice();
      await recovered;
      const last = events.at(-1)!;
      assert(last.type === 'recovered', `event ${JSON.stringify(events.map((x) => x.type))}`);
      assert(last.device === e.gpuDevice && last.device !== old, 'the event carries the new device, which gpuDevice gives');
      sameBits(await tables.int8.resident.gather(ids), await tables.int8.table.gather(ids), 'after recovery');
      return `recovered in ${last.millis.toFixed(0)} ms, ${last.residents} re-uploaded`;
    });
  }

  for (const { table, resident } of Object.values(tables)) {
    resident.dispose();
    table.dispose();
  }
  e.dispose();
}

main()
  .catch((err: unknown) => outcomes.push({ name: 'the page', ok: false, detail: String(err) }))
  .finally(() => {
    const status = document.getElementById('status')!;
    const failed = outcomes.filter((o) => !o.ok).length;
    status.textContent = `${outcomes.length - failed} of ${outcomes.length} checks passed (${expect}, visit ${visit}).`;
    (window as unknown as { edoResults: unknown }).edoResults = { outcomes, figures };
    status.dataset.state = 'done';
  });
