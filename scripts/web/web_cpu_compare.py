#!/usr/bin/env python3
"""The browser's CPU path, two builds side by side in one headless Chromium: the package's CPU
gather per format and a real model's load, first embedding and a batch of embeddings, each build's
page opened in turn for several rounds (the best of the rounds is printed: a round now and then
runs 3-4x slower on a shared machine, for either build), so that a change
to the WASM build is measured against what it replaces on the same machine in the same run.

    ./scripts/web/build-web.sh                                  # web/pkg: the build to measure
    (cd ../old-checkout && ./scripts/web/build-web.sh)          # the build to compare with
    python3 scripts/web/web_cpu_compare.py ../old-checkout/web/pkg web/pkg [--model web/model.edo] [--rounds 3]

Each directory is a wasm-bindgen output with the package's wrapper (scripts/web/build-npm.sh stages
web/pkg so); the model is an .edo model file (scripts/web/make_web_model.sh: WordLlama's, INT8), the
texts web/corpus.txt's lines. Writes target/web-cpu-compare.json.
"""

import argparse
import functools
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_e2e import CHROMIUM, FLAGS, ROOT, call, free_port, start_chromedriver  # noqa: E402

PAGE = """<!doctype html><meta charset="utf-8"><title>edo CPU path</title><pre id="out">running</pre>
<script type="module">
import { syntheticTable, modelFromBytes } from './pkg/index.js';
const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
const out = { formats: {} };
try {
  const [rows, dim, n] = [200000, 128, 65536];
  const ids = new Uint32Array(n).map((_, i) => (i * 7919 + 13) % rows);
  const f32 = await syntheticTable(rows, dim);
  for (const format of FORMATS) {
    const t = await f32.quantize(format);
    // A warm-up of a second: V8 runs new wasm code in its baseline compiler until the optimised
    // code is ready, which a loaded machine can delay past a few calls.
    for (const start = performance.now(); performance.now() - start < 1000; ) await t.gather(ids);
    const times = [];
    for (let i = 0; i < 15; i++) {
      const s = performance.now();
      await t.gather(ids);
      times.push(performance.now() - s);
    }
    out.formats[format] = median(times);
    t.dispose();
  }
  f32.dispose();
  const bytes = new Uint8Array(await (await fetch('/model.edo')).arrayBuffer());
  const lines = (await (await fetch('/corpus.txt')).text()).split('\\n').filter((l) => l).slice(0, 5000);
  let s = performance.now();
  const model = await modelFromBytes(bytes);
  out.load = performance.now() - s;
  s = performance.now();
  await model.embed(['read a file line by line']);
  out.first = performance.now() - s;
  await model.embed(lines);
  const times = [];
  for (let i = 0; i < 5; i++) {
    s = performance.now();
    await model.embed(lines);
    times.push(performance.now() - s);
  }
  out.batch = median(times);
  out.texts = lines.length;
  model.dispose();
} catch (e) {
  out.error = String(e && e.stack || e);
}
document.getElementById('out').dataset.json = JSON.stringify(out);
document.getElementById('out').textContent = 'done';
</script>
"""

FORMATS = ["int8", "q8_0", "fp16", "int4", "q4_0", "q4_k", "q6_k", "fp8_e4m3", "int8_g32"]


def run_rounds(old, new, page, files, rounds, chrome_args):
    """Serves each build's `pkg` beside `page` (and `files`: name -> path, at the site's root),
    then in one headless Chromium opens the old and new page in turn (alternating which goes
    first) for `rounds` rounds, each time reading the JSON the page leaves in #out's
    `data-json` once its text is `done`. Returns {"old": [...], "new": [...]}."""
    site = tempfile.mkdtemp()
    for name, pkg in (("old", old), ("new", new)):
        os.makedirs(os.path.join(site, name))
        shutil.copytree(pkg, os.path.join(site, name, "pkg"))
        with open(os.path.join(site, name, "index.html"), "w") as f:
            f.write(page)
    for name, path in files.items():
        shutil.copy(path, os.path.join(site, name))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=site)
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scratch = tempfile.mkdtemp()
    proc, driver = start_chromedriver(scratch)
    results = {"old": [], "new": []}
    try:
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": CHROMIUM, "args": FLAGS + chrome_args}}}}
        session = call(driver, "POST", "/session", caps)["sessionId"]
        s = f"/session/{session}"
        read = lambda js: call(driver, "POST", s + "/execute/sync", {"script": "return " + js, "args": []})
        for r in range(rounds):
            for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                call(driver, "POST", s + "/url", {"url": f"http://127.0.0.1:{port}/{name}/index.html"})
                deadline = time.time() + 600
                while time.time() < deadline and read("document.getElementById('out').textContent") != "done":
                    time.sleep(0.5)
                got = json.loads(read("document.getElementById('out').dataset.json"))
                if "error" in got:
                    sys.exit(f"{name}: {got['error']}")
                results[name].append(got)
                print(f"round {r + 1} {name}: {json.dumps(got)}", flush=True)
        call(driver, "DELETE", s)
    finally:
        proc.terminate()
        server.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(site, ignore_errors=True)
    return results


def webgpu_rounds(page):
    """The command line of a WebGPU comparison (OLD NEW [--rounds N]), its rounds run with WebGPU
    on (`run_rounds`), each checked to have run on WebGPU, not the CPU path. Returns (rounds,
    results)."""
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    results = run_rounds(a.old, a.new, page, {}, a.rounds, ["--enable-unsafe-webgpu"])
    for name in ("old", "new"):
        backends = {r["backend"] for r in results[name]}
        if backends != {"webgpu"}:
            sys.exit(f"{name}: ran on {backends}, not WebGPU")
    return a.rounds, results


def save_results(results, name):
    """Writes the rounds' results to target/NAME and says where."""
    out = os.path.join(ROOT, "target", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {out}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--model", default=os.path.join(ROOT, "web", "model.edo"))
    p.add_argument("--corpus", default=os.path.join(ROOT, "web", "corpus.txt"))
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    page = PAGE.replace("FORMATS", json.dumps(FORMATS))
    files = {"model.edo": a.model, "corpus.txt": a.corpus}
    results = run_rounds(a.old, a.new, page, files, a.rounds, ["--disable-features=WebGPU"])
    med = lambda name, key: min(x[key] for x in results[name])
    medf = lambda name, f: min(x["formats"][f] for x in results[name])
    print(f"\nheadless Chromium, WebGPU off (the CPU path), best of {a.rounds} rounds (each a median of 15 calls; embeddings of 5); ms (old / new = speed-up)")
    print(f"{'gather 65 536 ids, 200 000 × 128':<34} {'old':>9} {'new':>9} {'speed-up':>9}")
    for f in FORMATS:
        o, n = medf("old", f), medf("new", f)
        print(f"{f:<34} {o:9.2f} {n:9.2f} {o / n:8.2f}×")
    for key, label in (("load", "model load"), ("first", "first embedding"), ("batch", f"{results['new'][0]['texts']} texts")):
        o, n = med("old", key), med("new", key)
        print(f"{label:<34} {o:9.2f} {n:9.2f} {o / n:8.2f}×")
    save_results(results, "web-cpu-compare.json")


if __name__ == "__main__":
    main()
