#!/usr/bin/env python3
"""The browser's WebGPU binary search, two builds side by side in one headless Chromium
(SwiftShader WebGPU, `--enable-unsafe-webgpu`): `BinaryCodes.search` of 32 queries over 65 536
codes of 256 bits (the synthetic table's signs, uploaded with `engine.uploadCodes`), k = 10, 100 and
1000, each search timed on its own (queries up, neighbours back). Each build's page is opened
in turn for several rounds; the best round of each is printed, and whether both builds return the
same ids and distances.

    ./scripts/web/build-npm.sh                                  # web/pkg: the build to measure
    (cd ../old-checkout && ./scripts/web/build-npm.sh)          # the build to compare with
    python3 scripts/web/web_search_compare.py ../old-checkout/web/pkg web/pkg [--rounds 3]

Writes target/web-search-compare.json.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_cpu_compare import save_results, webgpu_rounds  # noqa: E402

ROWS, DIM, QUERIES, KS = 65536, 256, 32, (10, 100, 1000)

PAGE = """<!doctype html><meta charset="utf-8"><title>edo WebGPU search</title><pre id="out">running</pre>
<script type="module">
import { createEngine, syntheticTable } from './pkg/index.js';
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const out = { ks: {} };
try {
  const engine = await createEngine({ backend: 'webgpu' });
  out.backend = engine.gpuDevice ? 'webgpu' : 'cpu';
  const [rows, dim, nq] = [%d, %d, %d];
  const table = await syntheticTable(rows, dim);
  const codes = await table.quantize('binary');
  const resident = await engine.uploadCodes(codes);
  // Queries: table rows with a deterministic perturbation, so neighbours are meaningful.
  const queries = new Float32Array(nq * dim);
  const first = await table.gather(new Uint32Array(nq).map((_, i) => (i * 2039 + 17) %% rows));
  for (let i = 0; i < queries.length; i++) queries[i] = first[i] + 0.5 * Math.sin(i * 12.9898);
  for (const k of [%s]) {
    for (let i = 0; i < 2; i++) await resident.search(queries, k);
    const times = [];
    let last;
    for (let i = 0; i < 5; i++) {
      const s = performance.now();
      last = await resident.search(queries, k);
      times.push(performance.now() - s);
    }
    let h = 0;
    for (let i = 0; i < last.ids.length; i++) h = (h * 31 + last.ids[i] * 7 + last.distances[i]) >>> 0;
    out.ks[k] = { ms: median(times), hash: h };
  }
  resident.dispose();
  codes.dispose();
  table.dispose();
  engine.dispose();
} catch (e) {
  out.error = String(e && e.stack || e);
}
document.getElementById('out').dataset.json = JSON.stringify(out);
document.getElementById('out').textContent = 'done';
</script>
""" % (ROWS, DIM, QUERIES, ", ".join(map(str, KS)))


def main():
    rounds, results = webgpu_rounds(PAGE)
    print(f"\nheadless Chromium, WebGPU (SwiftShader), best of {rounds} rounds (each the median of 5 searches)")
    print(f"{f'{QUERIES} queries, {ROWS} × {DIM} bits':<30} {'ms old':>9} {'ms new':>9} {'speed-up':>9} {'same results':>13}")
    same_all = True
    for k in KS:
        o = min(r["ks"][str(k)]["ms"] for r in results["old"])
        w = min(r["ks"][str(k)]["ms"] for r in results["new"])
        hashes = {r["ks"][str(k)]["hash"] for r in results["old"] + results["new"]}
        same_all &= len(hashes) == 1
        print(f"{f'k = {k}':<30} {o:9.1f} {w:9.1f} {o / w:8.2f}× {'yes' if len(hashes) == 1 else 'NO':>13}")
    save_results(results, "web-search-compare.json")
    if not same_all:
        sys.exit("the builds' neighbours differ")


if __name__ == "__main__":
    main()
