// The demo page: a synthetic (or dropped) table, its size in every format, lookups on the
// engine (WebGPU or the CPU path), and rows before and after quantisation; then semantic search
// with a static text-embedding model over a built-in corpus. It uses the npm package's API, as an
// app would: web/pkg holds the package (scripts/web/build-npm.sh stages it there).
import { createEngine, fileShape, init, modelFromBytes, readTable, report, syntheticTable } from './pkg/index.js';

const FORMATS = ['fp32', 'fp16', 'int8', 'q8_0', 'fp8_e4m3', 'int4', 'int4_g64', 'q4_0', 'q4_1', 'int4_zp32', 'binary', 'binary+scale'];
const $ = (id) => document.getElementById(id);
let engine;
let source; // the table as f32 (a Table in format fp32)
let resident; // the table on the engine (a ResidentTable), replaced by each run

function status(text, state) {
  $('status').textContent = text;
  $('status').dataset.state = state;
}

function mib(bytes) {
  return bytes >= 1 << 20 ? `${(bytes / (1 << 20)).toFixed(2)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
}

function randomIds(n, rows) {
  const ids = new Uint32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    ids[i] = s % rows;
  }
  return ids;
}

function drawBars(tables) {
  const max = tables.fp32.bytes;
  $('bars').replaceChildren(...FORMATS.map((f) => {
    const t = tables[f];
    const row = document.createElement('div');
    row.className = 'bar';
    row.dataset.format = f;
    row.dataset.bytes = t.bytes;
    row.innerHTML = `<span>${f}</span><div><div class="fill ${f === 'fp32' ? 'fp32' : ''}" style="width:${(100 * t.bytes / max).toFixed(2)}%"></div></div>` +
      `<span class="val" id="bytes-${f.replace('+', '-')}">${mib(t.bytes)} · ${(t.bytes / max).toFixed(3)}×</span>`;
    return row;
  }));
}

function drawRows(format, ids, exact, decoded, dim) {
  const show = Math.min(dim, 6);
  const head = `<tr><th>id</th>${Array.from({ length: show }, (_, c) => `<th>fp32[${c}]</th>`).join('')}` +
    `${Array.from({ length: show }, (_, c) => `<th>${format}[${c}]</th>`).join('')}<th>max |err|</th></tr>`;
  const body = Array.from(ids, (id, i) => {
    const a = exact.subarray(i * dim, (i + 1) * dim);
    const b = decoded.subarray(i * dim, (i + 1) * dim);
    let err = 0;
    for (let c = 0; c < dim; c++) err = Math.max(err, Math.abs(a[c] - b[c]));
    const cells = (v) => Array.from(v.subarray(0, show), (x) => `<td>${x.toFixed(4)}</td>`).join('');
    return `<tr><td>${id}</td>${cells(a)}${cells(b)}<td>${err.toExponential(2)}</td></tr>`;
  }).join('');
  $('side').innerHTML = head + body;
  $('rows-format').textContent = `(${format}, first ${show} of ${dim} values)`;
}

async function run(marks) {
  try {
    status('Working…', 'loading');
    const format = $('format').value;
    const nIds = Math.max(1, Number($('ids').value));
    // WebGPU compiles the lookup kernel in the GPU process while this thread quantises; the
    // timer lets the request leave this task first. (Compiled once: later runs find it ready.)
    const prepared = engine.prepare(format, source.dim);
    await tick();
    const table = await source.quantize(format);
    const quantised = performance.now();
    await prepared;
    const compiled = performance.now();
    resident?.dispose(); // the last run's table: its GPU buffers are destroyed now
    resident = await engine.uploadTable(table);
    const uploaded = performance.now();
    const ids = randomIds(nIds, table.rows);
    const out = await resident.gather(ids);
    if (marks) {
      const done = performance.now();
      $('first-lookup-ms').textContent = done.toFixed(0);
      const ms = (a, b) => (b - a).toFixed(0);
      // Each phase up to the moment it finished; "engine" and "kernel" are what was left to wait
      // for after the table and the quantisation, which run meanwhile.
      $('phases').textContent = `wasm ${ms(0, marks.init)} · table ${ms(marks.init, marks.table)} · ` +
        `engine ${ms(marks.table, marks.engine)} · quantise ${ms(marks.engine, quantised)} · kernel ${ms(quantised, compiled)} · ` +
        `upload ${ms(compiled, uploaded)} · lookup ${ms(uploaded, done)}`;
    }
    const times = [];
    for (let i = 0; i < 9; i++) {
      const t = performance.now();
      await resident.gather(ids);
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    const ms = times[4];
    $('n-ids').textContent = nIds;
    $('lookup-ms').textContent = ms.toFixed(2);
    $('rows-per-s').textContent = Math.round(nIds / (ms / 1000)).toLocaleString('en');
    $('shards').textContent = engine.backend === 'webgpu' ? resident.shards : 'none (CPU path)';
    // The engine's rows against the CPU path's, bit for bit.
    const cpu = await table.gather(ids);
    let same = cpu.length === out.length;
    for (let i = 0; same && i < cpu.length; i++) same = Object.is(cpu[i], out[i]);
    $('check').innerHTML = same ? '<span class="ok">equal, bit for bit</span>' : '<span class="bad">differ</span>';
    $('check').dataset.equal = same;
    // Sizes of every format, and a few rows before and after.
    const tables = Object.fromEntries(await Promise.all(FORMATS.map(async (f) => [f, f === format ? table : await source.quantize(f)])));
    drawBars(tables);
    $('shape').textContent = `(${source.rows.toLocaleString('en')} × ${source.dim})`;
    const few = Uint32Array.from({ length: Math.min(5, source.rows) }, (_, i) => i);
    drawRows(format, few, await source.gather(few), await resident.gather(few), source.dim);
    for (const t of Object.values(tables)) t.dispose();
    status('Ready.', 'ready');
  } catch (e) {
    status(`Error: ${e.message ?? e}`, 'error');
    console.error(e);
  }
}

// Yields to the event loop, so that requests to the GPU process go out before a long call.
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

// ---- Semantic search: a static model (model.edo beside the page, or a dropped file) embeds the
// corpus (corpus.txt) on the engine; a query is embedded, searched by Hamming distance among the
// corpus's binary codes and rescored with its INT8 vectors.
let index; // SearchIndex
let corpus; // the lines
let loadedModel; // the semantic-search model (Model), once loaded

function searchStatus(text, state) {
  $('search-status').textContent = text;
  $('search-status').dataset.state = state;
}

async function loadModel(fetchBytes, name) {
  try {
    $('search').disabled = $('query').disabled = true;
    searchStatus(`Loading ${name}…`, 'loading');
    const t0 = performance.now();
    const bytes = await fetchBytes();
    const inMemory = performance.now();
    // The GPU process compiles the model's kernels while this thread reads the file.
    const shape = await fileShape(bytes);
    const prepared = engine.prepareModel(shape.format, shape.dim, { rowAlignment: shape.rowAlignment });
    await tick();
    const model = await modelFromBytes(bytes);
    loadedModel = model;
    await prepared;
    const parsed = performance.now();
    const resident = await engine.uploadModel(model);
    const uploaded = performance.now();
    await resident.embed(['warming up: the first sentence embedded']);
    const first = performance.now();
    $('first-embed-ms').textContent = (first - inMemory).toFixed(0);
    $('model-phases').textContent = `(fetch ${(inMemory - t0).toFixed(0)} ms · read the file and its tokenizer ` +
      `${(parsed - inMemory).toFixed(0)} (kernels compiled meanwhile) · upload ${(uploaded - parsed).toFixed(0)} · embed ${(first - uploaded).toFixed(0)})`;
    $('model-info').textContent = `${name}: ${model.vocabSize.toLocaleString('en')} tokens, ${model.rows.toLocaleString('en')} × ` +
      `${model.dim} table in ${model.format} (${mib(model.bytes)}), ${model.normalize ? 'normalised' : 'not normalised'}, on ${resident.backend}`;
    $('model-info').dataset.backend = resident.backend;
    searchStatus(`Embedding ${corpus.length.toLocaleString('en')} lines…`, 'loading');
    await tick();
    const i0 = performance.now();
    index = await resident.index(corpus);
    const ms = performance.now() - i0;
    $('corpus-info').textContent = `${corpus.length.toLocaleString('en')} lines (first sentences of Python's standard-library ` +
      `docstrings) embedded in ${ms.toFixed(0)} ms (${Math.round(corpus.length / (ms / 1000)).toLocaleString('en')} lines/s); ` +
      `index ${mib(index.bytes)}: binary codes + INT8 vectors`;
    $('corpus-info').dataset.lines = index.rows;
    $('search').disabled = $('query').disabled = false;
    await search();
  } catch (e) {
    searchStatus(`Error: ${e.message ?? e}`, 'error');
    console.error(e);
  }
}

async function search() {
  const query = $('query').value;
  const t0 = performance.now();
  const found = await index.search(query, 10);
  const ms = performance.now() - t0;
  const ids = found.ids;
  const scores = found.scores;
  $('results').replaceChildren(...Array.from(ids, (id, i) => {
    const li = document.createElement('li');
    const line = corpus[id];
    const colon = line.indexOf(': ');
    li.innerHTML = `<span class="score">${scores[i].toFixed(3)}</span><span class="name"></span> <span class="text"></span>`;
    li.querySelector('.name').textContent = line.slice(0, colon + 1);
    li.querySelector('.text').textContent = line.slice(colon + 2);
    li.dataset.score = scores[i];
    return li;
  }));
  $('query-info').textContent = `"${query}": embedded and searched in ${ms.toFixed(1)} ms (top ${ids.length} of ${index.rows.toLocaleString("en")}, ` +
    `Hamming candidates rescored in INT8)`;
  $('query-info').dataset.ms = ms;
  searchStatus('Ready: type a query.', 'ready');
}

async function semantic() {
  const text = await (await fetch('corpus.txt')).text();
  corpus = text.split('\n').filter((l) => l && !l.startsWith('#'));
  $('search-form').onsubmit = (e) => { e.preventDefault(); search().catch((err) => searchStatus(`Error: ${err.message ?? err}`, 'error')); };
  const drop = $('model-drop');
  drop.ondragover = (e) => { e.preventDefault(); drop.classList.add('over'); };
  drop.ondragleave = () => drop.classList.remove('over');
  drop.ondrop = (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    const file = e.dataTransfer.files[0];
    if (file) loadModel(async () => new Uint8Array(await file.arrayBuffer()), file.name);
  };
  const response = await fetch('model.edo');
  if (!response.ok) {
    searchStatus('No model.edo beside the page (scripts/web/make_web_model.sh makes one from WordLlama): drop an .edo model file below.', 'no-model');
    return;
  }
  await loadModel(async () => new Uint8Array(await response.arrayBuffer()), 'model.edo');
}

function benchStatus(text, state) {
  $('bench-status').textContent = text;
  $('bench-status').dataset.state = state;
}

// The benchmark suite in this tab; `?bench=tiny` in the address runs toy tables (the tests do).
async function benchmark() {
  const scale = new URLSearchParams(location.search).get('bench') ?? 'quick';
  $('bench').disabled = true;
  $('bench-download').hidden = true;
  benchStatus(`Running the ${scale} suite…`, 'running');
  const bar = $('bench-progress');
  const progress = (done, total, label) => {
    bar.max = Math.max(total, 1);
    bar.value = done;
    benchStatus(`${done} of ${total} cases · ${label}`, 'running');
    // A timer, not a microtask: the page repaints before the next case.
    return new Promise((resolve) => setTimeout(resolve, 0));
  };
  try {
    const t0 = performance.now();
    const results = await engine.benchmark({ scale, model: loadedModel, onProgress: ({ done, total, label }) => progress(done, total, label) });
    const json = JSON.stringify(results);
    $('bench-charts').innerHTML = await report(results);
    const link = $('bench-download');
    if (link.href) URL.revokeObjectURL(link.href);
    link.href = URL.createObjectURL(new Blob([json], { type: 'application/json' }));
    link.hidden = false;
    bar.value = bar.max;
    $('bench-status').dataset.json = json;
    benchStatus(`${results.cases.length} cases on ${results.backends.map((b) => b.name).join(' and ')} in ` +
      `${((performance.now() - t0) / 1000).toFixed(1)} s${results.skipped.length ? `, ${results.skipped.length} skipped` : ''}.`, 'done');
  } catch (err) {
    benchStatus(`Error: ${err.message ?? err}`, 'error');
  } finally {
    $('bench').disabled = false;
  }
}

function deviceEvent(e) {
  const line = $('device');
  line.hidden = false;
  line.dataset.state = e.type;
  if (e.type === 'lost') {
    line.textContent = `GPU device lost (${e.reason}); recovering…`;
  } else if (e.type === 'recovered') {
    const failed = e.failed.length ? `; ${e.failed.length} could not be and retry at their next use: ${e.failed[0]}` : '';
    line.textContent = `GPU device recovered in ${e.millis.toFixed(0)} ms: device #${e.generation + 1}, ${e.residents} tables re-uploaded (${mib(e.bytes)})${failed}.`;
  } else {
    line.textContent = `GPU device lost and not recovered: ${e.reason}`;
  }
}

async function main() {
  // The package's .wasm (every factory would load it first), compiled since the page's head
  // started it; where that failed, init fetches it again itself.
  await init({ wasm: await window.edoModule.catch(() => undefined) });
  const marks = { init: performance.now() };
  // The browser finds the adapter and the device while this thread builds the table.
  // ?backend=webgpu or cpu forces one; by default edo measures which is faster here.
  const creating = createEngine({ backend: new URLSearchParams(location.search).get('backend') ?? 'auto' });
  await tick();
  source = await syntheticTable(Number($('rows').value), Number($('dim').value), { seed: 7 });
  marks.table = performance.now();
  engine = await creating;
  marks.engine = performance.now();
  $('backend').textContent = engine.backend;
  $('adapter').textContent = engine.note;
  // WebGPU devices can be lost (the GPU process crashed, the driver reset): the engine rebuilds
  // itself and uploads its tables, cache, model and index again; the page says so.
  engine.onDeviceEvent(deviceEvent);
  // For tests of that path: destroys the device as a crash would.
  window.edoLoseDevice = () => engine.loseDevice();
  await run(marks);
  $('bench').onclick = benchmark;
  $('bench').disabled = false;
  benchStatus('Ready.', 'idle');
  semantic().catch((e) => searchStatus(`Error: ${e.message ?? e}`, 'error'));
  $('run').onclick = async () => {
    source?.dispose();
    source = await syntheticTable(Number($('rows').value), Number($('dim').value), { seed: 7 });
    run(null);
  };
  const drop = $('drop');
  drop.ondragover = (e) => { e.preventDefault(); drop.classList.add('over'); };
  drop.ondragleave = () => drop.classList.remove('over');
  drop.ondrop = async (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    const file = e.dataTransfer.files[0];
    if (!file) return;
    try {
      const bytes = new Uint8Array(await file.arrayBuffer());
      const read = await readTable(bytes, { name: file.name, format: 'fp32' });
      source?.dispose();
      source = read;
      $('rows').value = source.rows;
      $('dim').value = source.dim;
      drop.textContent = `${file.name}: ${source.rows} × ${source.dim}`;
      run(null);
    } catch (err) {
      status(`Error reading ${file.name}: ${err.message ?? err}`, 'error');
    }
  };
}

main().catch((e) => status(`Error: ${e.message ?? e}`, 'error'));
