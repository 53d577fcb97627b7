#!/usr/bin/env python3
"""The browser's WebGPU round trip, two builds side by side in one headless Chromium (SwiftShader
WebGPU, `--enable-unsafe-webgpu`): a resident INT8 table's `gather` (ids up, rows back to the
page) at 1, 64 and 1024 ids, each call timed on its own, and the engine's bytes before and after
2000 calls (a lean host path reuses its buffers: no growth). Each build's page is opened in turn
for several rounds; the best round of each is printed.

    ./scripts/web/build-npm.sh                                  # web/pkg: the build to measure
    (cd ../old-checkout && ./scripts/web/build-npm.sh)          # the build to compare with
    python3 scripts/web/web_gpu_compare.py ../old-checkout/web/pkg web/pkg [--rounds 3]

Writes target/web-gpu-compare.json.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_cpu_compare import save_results, webgpu_rounds  # noqa: E402

PAGE = """<!doctype html><meta charset="utf-8"><title>edo WebGPU round trip</title><pre id="out">running</pre>
<script type="module">
import { createEngine, syntheticTable } from './pkg/index.js';
const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const out = { sizes: {} };
try {
  const engine = await createEngine({ backend: 'webgpu' });
  out.backend = engine.gpuDevice ? 'webgpu' : 'cpu';
  const [rows, dim] = [100000, 128];
  const table = await (await syntheticTable(rows, dim)).quantize('int8');
  const resident = await engine.uploadTable(table);
  for (const n of [1, 64, 1024]) {
    const sets = [...Array(8)].map((_, k) => new Uint32Array(n).map((_, i) => (i * 7919 + k * 104729 + 13) % rows));
    for (let i = 0; i < 50; i++) await resident.gather(sets[i % 8]);
    const times = [];
    for (let i = 0; i < 300; i++) {
      const s = performance.now();
      await resident.gather(sets[i % 8]);
      times.push(performance.now() - s);
    }
    out.sizes[n] = { p50: pct(times, 0.5), p99: pct(times, 0.99) };
  }
  const before = engine.memoryReport().total;
  const ids = new Uint32Array(64).map((_, i) => (i * 31 + 7) % rows);
  for (let i = 0; i < 2000; i++) await resident.gather(ids);
  out.bytes_before = before;
  out.bytes_after = engine.memoryReport().total;
  resident.dispose();
  table.dispose();
  engine.dispose();
} catch (e) {
  out.error = String(e && e.stack || e);
}
document.getElementById('out').dataset.json = JSON.stringify(out);
document.getElementById('out').textContent = 'done';
</script>
"""


def main():
    rounds, results = webgpu_rounds(PAGE)
    best = lambda name, n, key: min(r["sizes"][str(n)][key] for r in results[name])
    print(f"\nheadless Chromium, WebGPU (SwiftShader), best of {rounds} rounds of 300 calls each; ms per call (old / new = speed-up)")
    print(f"{'gather, 100 000 × 128 INT8':<28} {'P50 old':>9} {'P50 new':>9} {'speed-up':>9} {'P99 old':>9} {'P99 new':>9}")
    for n in (1, 64, 1024):
        o, w = best("old", n, "p50"), best("new", n, "p50")
        print(f"{f'{n} ids':<28} {o:9.3f} {w:9.3f} {o / w:8.2f}× {best('old', n, 'p99'):9.3f} {best('new', n, 'p99'):9.3f}")
    for name in ("old", "new"):
        grown = [r["bytes_after"] - r["bytes_before"] for r in results[name]]
        print(f"{name}: engine bytes grown over 2000 more calls: {grown}")
    save_results(results, "web-gpu-compare.json")


if __name__ == "__main__":
    main()
