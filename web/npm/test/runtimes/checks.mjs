// The checks every JavaScript runtime runs on the package (scripts/web/runtimes_check.py): Node
// (plain, and with Dawn's WebGPU), Deno (its own WebGPU, and without), Bun, and Cloudflare's
// workerd. Plain JavaScript, no runtime's own modules: each runtime's entry (run.mjs, worker.js)
// reads the files and hands them in. The runtime's outputs are returned (as hex of their bytes,
// or of their SHA-256) for the driver to compare with the native CPU path's and with each other's; what a
// runtime alone can check (its GPU against its CPU path, typed errors) is checked here.

/** A Float32Array's or Uint32Array's bytes as hex: outputs compared bit for bit across runtimes. */
export function hex(array) {
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

/** The SHA-256 of an array's bytes, as hex: large outputs compared across runtimes. */
export async function digest(array) {
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  return hex(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)));
}

/** Where `a` and `b` first differ in bits (-1: nowhere), with the lengths checked. */
function firstDifference(a, b) {
  if (a.length !== b.length) return 0;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return i;
  return -1;
}

/** A table of `rows` × `dim` values every runtime makes alike (no Math.random, no Math.sin). */
function tableValues(rows, dim) {
  const out = new Float32Array(rows * dim);
  let s = 0x9e3779b9;
  for (let i = 0; i < out.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32 - 0.5) * 4;
  }
  return out;
}

/**
 * Runs the checks; resolves to a report (`failures` empty when every check passed).
 *   edo:    the package's module
 *   inputs: { texts, model: { config, tokenizer, model } (bytes of a model2vec folder),
 *             engine: options for createEngine (e.g. `{ gpu }`), expectBackend: 'webgpu' | 'cpu' | undefined,
 *             benchmark: run the benchmark suite's tiny matrix too (report.benchmark) }
 */
export async function runChecks(edo, inputs) {
  const failures = [];
  const fail = (what) => failures.push(what);
  const report = { failures, outputs: {} };

  // The engine, as this runtime gives it, and the CPU path beside it.
  const engine = await edo.createEngine(inputs.engine ?? {});
  const cpu = await edo.createEngine({ backend: 'cpu' });
  report.backend = engine.backend;
  report.note = engine.note;
  // What the default ('auto') picks in this runtime, and why: reported beside the engine checked.
  if (inputs.engine?.backend && inputs.engine.backend !== 'auto') {
    const auto = await edo.createEngine({ ...inputs.engine, backend: 'auto' });
    report.auto = { backend: auto.backend, reason: auto.choice.reason, note: auto.note };
    auto.dispose();
    // A measured choice is remembered where there is a store: the next engine skips the calibration.
    if (report.auto.reason === 'measured' && globalThis.localStorage) {
      const again = await edo.createEngine({ ...inputs.engine, backend: 'auto' });
      if (again.choice.reason !== 'remembered' || again.backend !== report.auto.backend) {
        fail(`a second 'auto' engine: ${again.backend} (${again.choice.reason}), expected ${report.auto.backend} (remembered)`);
      }
      report.auto.again = again.choice.reason;
      again.dispose();
    }
  }
  if (inputs.expectBackend && engine.backend !== inputs.expectBackend) {
    fail(`backend ${engine.backend}, expected ${inputs.expectBackend} (${engine.note})`);
  }

  // A model from a model2vec folder's files: its vectors, on the engine and the CPU path.
  const model = await edo.modelFromFiles(inputs.model);
  const vectors = await model.embed(inputs.texts);
  report.outputs.vectors = hex(vectors);
  const resident = await engine.uploadModel(model);
  const pooled = await resident.embed(inputs.texts);
  // Pooling on a GPU sums in another order: within 1e-5 of the CPU path's (each vector's norm is 1).
  for (let i = 0; i < vectors.length; i++) {
    if (!(Math.abs(pooled[i] - vectors[i]) <= 1e-5)) {
      fail(`embedding on ${engine.backend}: value ${i} is ${pooled[i]}, the CPU path's ${vectors[i]}`);
      break;
    }
  }

  // A search over the texts: each text finds itself first (or tied first: texts that differ only
  // in case embed alike).
  const lines = inputs.texts.filter((t) => /\w/.test(t));
  const index = await resident.index(lines);
  const found = [];
  for (const [i, line] of lines.entries()) {
    const { ids, scores } = await index.search(line, 3);
    found.push(Array.from(ids));
    const self = Array.from(ids).indexOf(i);
    if (self < 0 || scores[self] !== scores[0]) fail(`search: ${JSON.stringify(line)} found ${Array.from(ids)}, not itself (${i}) first`);
  }
  report.outputs.search = found;

  // Gathers and bags of every kind of format, on the engine against the CPU path, bit for bit
  // (means within 2 ULP: a GPU may divide after summing in another order of rounding).
  const [rows, dim] = [3001, 37];
  const values = tableValues(rows, dim);
  const ids = new Uint32Array(2049).map((_, i) => (i * 7919 + 13) % rows);
  const offsets = new Uint32Array(129).map((_, i) => Math.min(ids.length, i * 16 - (i % 3)));
  report.outputs.gathers = {};
  for (const format of ['fp32', 'fp16', 'int8', 'int4', 'binary', 'q4_k']) {
    const table = await edo.createTable(values, { rows, dim, format });
    const [onEngine, onCpu] = [await engine.uploadTable(table), await cpu.uploadTable(table)];
    const want = await onCpu.gather(ids);
    report.outputs.gathers[format] = await digest(want);
    const at = firstDifference(await onEngine.gather(ids), want);
    if (at >= 0) fail(`${format} gather on ${engine.backend}: differs from the CPU path at value ${at}`);
    for (const pooling of ['sum', 'mean', 'max']) {
      const got = await onEngine.bag(ids, offsets, { pooling });
      const ref = await onCpu.bag(ids, offsets, { pooling });
      report.outputs.gathers[`${format} ${pooling} bag`] = await digest(ref);
      for (let i = 0; i < ref.length; i++) {
        const ulp = Math.abs(ref[i]) * 2 ** -23 || 2 ** -149;
        const tol = pooling === 'mean' ? 2 * ulp : 0;
        if (!(Math.abs(got[i] - ref[i]) <= tol)) {
          fail(`${format} ${pooling} bag on ${engine.backend}: value ${i} is ${got[i]}, the CPU path's ${ref[i]}`);
          break;
        }
      }
    }
    for (const t of [table, onEngine, onCpu]) t.dispose();
  }

  // Bad arguments: EdoErrors with their codes, and the engine still answers afterwards.
  const table = await edo.createTable(values.subarray(0, 10 * dim), { rows: 10, dim, format: 'int8' });
  const onEngine = await engine.uploadTable(table);
  const errors = [
    ['a row id past the end', () => onEngine.gather([3, 10]), 'ID_OUT_OF_RANGE'],
    ['one text, not an array', () => model.embed('one text'), 'INVALID_ARGUMENT'],
    ['an unknown format', () => edo.createTable(values.subarray(0, dim), { rows: 1, dim, format: 'int3' }), 'INVALID_ARGUMENT'],
    ['a file that is no model', () => edo.modelFromBytes(new Uint8Array(64)), 'BAD_FILE'],
  ];
  report.outputs.errors = [];
  for (const [what, call, code] of errors) {
    try {
      await call();
      fail(`${what}: no error`);
    } catch (e) {
      report.outputs.errors.push(e?.code);
      if (!(e instanceof edo.EdoError) || e.code !== code) fail(`${what}: ${e?.name} ${e?.code} (${e?.message}), not an EdoError ${code}`);
    }
  }
  if ((await onEngine.gather([9])).length !== dim) fail('the engine did not answer after the errors');

  // The benchmark suite's toy matrix, for `edo bench compare` to set the runtimes side by side.
  if (inputs.benchmark) report.benchmark = await engine.benchmark({ scale: 'tiny', model });

  report.wasmMemoryBytes = edo.wasmMemoryBytes();
  for (const o of [onEngine, table, index, resident, model, cpu, engine]) o.dispose();
  return report;
}
