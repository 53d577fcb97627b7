// The demo page: a synthetic (or dropped) table, its size in every format, lookups on the
// engine (WebGPU or the CPU path), and rows before and after quantisation.
import init, { EdoEngine, EdoTable } from './pkg/edo_web.js';

const FORMATS = ['fp32', 'fp16', 'int8', 'q8_0', 'fp8_e4m3', 'int4', 'int4_g64', 'q4_0', 'q4_1', 'int4_zp32', 'binary', 'binary+scale'];
const $ = (id) => document.getElementById(id);
let engine;
let source; // the table as f32 (EdoTable, format fp32)

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
    const table = source.quantize(format);
    const quantised = performance.now();
    await prepared;
    const compiled = performance.now();
    const resident = await engine.upload(table);
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
    const cpu = table.gather(ids);
    let same = cpu.length === out.length;
    for (let i = 0; same && i < cpu.length; i++) same = Object.is(cpu[i], out[i]);
    $('check').innerHTML = same ? '<span class="ok">equal, bit for bit</span>' : '<span class="bad">differ</span>';
    $('check').dataset.equal = same;
    // Sizes of every format, and a few rows before and after.
    const tables = Object.fromEntries(FORMATS.map((f) => [f, f === format ? table : source.quantize(f)]));
    drawBars(tables);
    $('shape').textContent = `(${source.rows.toLocaleString('en')} × ${source.dim})`;
    const few = Uint32Array.from({ length: Math.min(5, source.rows) }, (_, i) => i);
    drawRows(format, few, source.gather(few), await resident.gather(few), source.dim);
    status('Ready.', 'ready');
  } catch (e) {
    status(`Error: ${e.message ?? e}`, 'error');
    console.error(e);
  }
}

// Yields to the event loop, so that requests to the GPU process go out before a long call.
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

async function main() {
  await init();
  const marks = { init: performance.now() };
  // The browser finds the adapter and the device while this thread builds the table.
  const creating = EdoEngine.create();
  await tick();
  source = EdoTable.synthetic(Number($('rows').value), Number($('dim').value), 7);
  marks.table = performance.now();
  engine = await creating;
  marks.engine = performance.now();
  $('backend').textContent = engine.backend;
  $('adapter').textContent = engine.note;
  await run(marks);
  $('run').onclick = () => {
    source = EdoTable.synthetic(Number($('rows').value), Number($('dim').value), 7);
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
      source = EdoTable.fromBytes(bytes, file.name, 'fp32');
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
