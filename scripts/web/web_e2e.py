#!/usr/bin/env python3
"""End-to-end test of the demo page: serves web/ (after scripts/web/build-npm.sh, which stages the package in web/pkg), drives it in
headless Chromium through chromedriver's WebDriver HTTP API (no Python packages needed), checks
the numbers the page shows, and saves screenshots. Twice: with WebGPU (SwiftShader) and without
it (the CPU fallback).

    python3 scripts/web/web_e2e.py            # screenshots in target/web-e2e/
"""

import base64
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEB = os.path.join(ROOT, "web")
OUT = os.path.join(ROOT, "target", "web-e2e")
RUNTIMES_BENCH = os.path.join(ROOT, "target", "runtimes-bench")  # scripts/web/runtimes_check.py --benchmark
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic", "--window-size=1100,1500"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_chromedriver(scratch):
    """Chromedriver on a free port, everything it and its browsers write in `scratch`: the process
    and its address, once it answers."""
    port = free_port()
    proc = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, TMPDIR=scratch))
    driver = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            call(driver, "GET", "/status")
            break
        except OSError:
            time.sleep(0.1)
    return proc, driver


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"{}").get("value")


def bytes_per_row(fmt, dim):
    blocks = -(-dim // 32)
    words = {"fp32": dim, "fp16": -(-dim // 2), "int8": -(-dim // 4) + 2, "int4": -(-dim // 8) + 1,
             "binary": -(-dim // 32), "binary+scale": -(-dim // 32) + 1,
             # ggml blocks of 32: the codes (8 or 4 words a block, a short last block's as far as
             # its values reach), then the fp16 scales (and minimums).
             "q8_0": -(-dim // 4) + -(-blocks // 2), "q4_0": -(-dim // 8) + -(-blocks // 2),
             "q4_1": -(-dim // 8) + blocks,
             # 4-bit codes (a short last group only as far as its values reach), then one word of
             # fp16 scale and bias per 64 values ...
             "int4_g64": -(-dim // 8) + -(-dim // 64),
             # ... or of fp16 scale and zero point per 32 values.
             "int4_zp32": -(-dim // 8) + -(-dim // 32),
             # FP8 codes, then the f32 scale.
             "fp8_e4m3": -(-dim // 4) + 1}[fmt]
    return 4 * words


def run_page(driver, urls, webgpu, shot):
    """Opens each of `urls` in turn in one fresh browser and reads the page; returns the state and
    readings of each. The first load is a browser's first page; the later ones (other origins,
    so nothing is cached) are first visits in a browser already running."""
    args = FLAGS + (["--enable-unsafe-webgpu"] if webgpu else ["--disable-features=WebGPU"])
    caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}}
    session = call(driver, "POST", "/session", caps)["sessionId"]
    s = f"/session/{session}"
    try:
        # The benchmark runs on the first visit only: once per backend is enough to check it.
        return [read_page(driver, s, url, shot, bench=i == 0) for i, url in enumerate(urls)]
    finally:
        call(driver, "DELETE", s)


def read_page(driver, s, url, shot, bench):
    call(driver, "POST", s + "/url", {"url": url})
    deadline = time.time() + 180
    state = None
    while time.time() < deadline:
        state = call(driver, "POST", s + "/execute/sync", {"script": "return document.getElementById('status').dataset.state", "args": []})
        if state in ("ready", "error"):
            break
        time.sleep(0.25)
    read = lambda js: call(driver, "POST", s + "/execute/sync", {"script": "return " + js, "args": []})
    page = read("""({
        status: document.getElementById('status').textContent,
        backend: document.getElementById('backend').textContent,
        adapter: document.getElementById('adapter').textContent,
        first: document.getElementById('first-lookup-ms').textContent,
        phases: document.getElementById('phases').textContent,
        lookup: document.getElementById('lookup-ms').textContent,
        equal: document.getElementById('check').dataset.equal,
        rows: Number(document.getElementById('rows').value),
        dim: Number(document.getElementById('dim').value),
        bars: Array.from(document.querySelectorAll('.bar')).map(b => [b.dataset.format, Number(b.dataset.bytes)]),
        side: document.querySelectorAll('#side tr').length,
    })""")
    png = base64.b64decode(call(driver, "GET", s + "/screenshot"))
    with open(shot, "wb") as f:
        f.write(png)
    page["search"] = read_search(driver, s, read, shot.replace("demo-", "search-"))
    page["bench"] = read_bench(driver, s, read, shot.replace("demo-", "bench-")) if bench else None
    return state, page


def read_bench(driver, s, read, shot):
    """The Benchmark button: runs the suite on toy tables (`?bench=tiny`), waits for it, and
    returns its results file's JSON and what the page says; a screenshot of the charts."""
    read("(document.getElementById('bench').click(), 1)")
    deadline = time.time() + 900
    state = None
    while time.time() < deadline:
        state = read("document.getElementById('bench-status').dataset.state")
        if state in ("done", "error"):
            break
        time.sleep(0.25)
    out = {"state": state, "status": read("document.getElementById('bench-status').textContent")}
    if state == "done":
        out["json"] = read("document.getElementById('bench-status').dataset.json")
        out["charts"] = read("document.querySelectorAll('#bench-charts svg').length")
        out["download"] = read("document.getElementById('bench-download').href")
        read("(document.getElementById('benchmark').scrollIntoView(), 1)")
        with open(shot, "wb") as f:
            f.write(base64.b64decode(call(driver, "GET", s + "/screenshot")))
    return out


def edo_command():
    """The edo command line the tests built (target/debug/edo), or cargo run."""
    built = os.path.join(ROOT, "target", "debug", "edo")
    return [built] if os.path.exists(built) else ["cargo", "run", "-q", "-p", "edo-cli", "--"]


def read_search(driver, s, read, shot):
    """The semantic-search section: waits for the model and the corpus, then searches by meaning
    and reads the results; a screenshot of the section."""
    deadline = time.time() + 240
    state = None
    while time.time() < deadline:
        state = read("document.getElementById('search-status').dataset.state")
        if state in ("ready", "error", "no-model"):
            break
        time.sleep(0.25)
    out = {"state": state, "status": read("document.getElementById('search-status').textContent")}
    if state != "ready":
        return out
    results = "Array.from(document.querySelectorAll('#results li')).map(li => [li.textContent, Number(li.dataset.score)])"
    out["first"] = read("document.getElementById('first-embed-ms').textContent")
    out["phases"] = read("document.getElementById('model-phases').textContent")
    out["model"] = read("document.getElementById('model-info').textContent")
    out["backend"] = read("document.getElementById('model-info').dataset.backend")
    out["corpus"] = read("document.getElementById('corpus-info').textContent")
    out["lines"] = read("Number(document.getElementById('corpus-info').dataset.lines)")
    out["default"] = read(results)
    out["queries"] = {}

    def ask(query):
        """Types `query`, clicks Search and waits for the page's answer (its timing changes)."""
        before = read("document.getElementById('query-info').dataset.ms")
        read(f"(() => {{ document.getElementById('query').value = {json.dumps(query)}; document.getElementById('search').click(); return 1; }})()")
        for _ in range(200):
            if read("document.getElementById('query-info').dataset.ms") != before:
                break
            time.sleep(0.05)
        return read(results)

    for query in QUERIES:
        out["queries"][query] = {"results": ask(query), "info": read("document.getElementById('query-info').textContent")}
    # Lose the WebGPU device as a GPU-process crash would: the page recovers by itself (nothing on
    # the CPU path), and the same query then gives the same results.
    read("(window.edoLoseDevice(), 1)")
    for _ in range(400):
        if read("document.getElementById('device').dataset.state") in ("recovered", "failed", "none"):
            break
        time.sleep(0.05)
    out["device"] = {"state": read("document.getElementById('device').dataset.state"), "text": read("document.getElementById('device').textContent")}
    if out["device"]["state"] != "none":
        read("(window.scrollTo(0, 0), 1)")
        with open(shot.replace("search-", "device-"), "wb") as f:
            f.write(base64.b64decode(call(driver, "GET", s + "/screenshot")))
    out["device"]["results"] = ask(next(iter(QUERIES)))
    read("(document.getElementById('semantic').scrollIntoView(), 1)")
    with open(shot, "wb") as f:
        f.write(base64.b64decode(call(driver, "GET", s + "/screenshot")))
    out["shot"] = shot
    return out


# Queries by meaning, and a word each one's top 10 must hold somewhere (the corpus says it in other
# words than the query).
QUERIES = {"compress data with gzip": "compress", "current time in seconds": "time", "send an email message": "mail"}


def main():
    if not os.path.exists(os.path.join(WEB, "pkg", "index.js")):
        sys.exit("web/pkg is missing the package: run scripts/web/build-npm.sh first")
    os.makedirs(OUT, exist_ok=True)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=WEB)
    # Two servers, two origins: the second visit in a browser finds nothing cached.
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    # The page's benchmark runs toy tables unless EDO_BENCH_SCALE=quick asks for the real matrix
    # (scripts/peers/bench_docs.sh does, for docs/bench/).
    scale = os.environ.get("EDO_BENCH_SCALE", "tiny")
    # This run's results replace any an earlier run left beside the runtimes'.
    for stale in ("chromium-cpu.json", "chromium-webgpu.json"):
        if os.path.exists(os.path.join(RUNTIMES_BENCH, stale)):
            os.remove(os.path.join(RUNTIMES_BENCH, stale))
    urls = [f"http://127.0.0.1:{server.server_address[1]}/index.html?bench={scale}" for server in servers]
    bench_files = []
    # Chromedriver and Chromium leave a profile and a socket directory in the temporary directory
    # of every browser they start: give them one of their own, removed at the end.
    scratch = tempfile.mkdtemp(prefix="edo-e2e-")
    driver_proc, driver = start_chromedriver(scratch)
    failures = []
    try:
        for webgpu, want in ((True, "webgpu"), (False, "cpu")):
            shot = os.path.join(OUT, f"demo-{want}.png")
            # With WebGPU the page is asked for it: by default ('auto') edo takes the CPU path on
            # SwiftShader, a fallback adapter (the npm app's tests check that choice).
            pages = run_page(driver, [u + "&backend=webgpu" for u in urls] if webgpu else urls, webgpu, shot)
            for visit, (state, page) in zip(("fresh browser", "browser already running"), pages):
                print(f"{want}, {visit}: {page['status']} backend {page['backend']} ({page['adapter']}); first lookup {page['first']} ms "
                      f"after page load ({page['phases']}); lookup {page['lookup']} ms; GPU vs CPU equal: {page['equal']}")
                check = lambda ok, what: ok or failures.append(f"{want}, {visit}: {what}")
                check(state == "ready", f"page state {state}: {page['status']}")
                check(page["backend"] == want, f"backend {page['backend']}, expected {want}")
                check(page["equal"] == "true", "the page's rows differ from the CPU path")
                check(page["first"].isdigit(), f"first lookup time {page['first']!r}")
                bars = dict(page["bars"])
                for fmt, size in bars.items():
                    check(size == page["rows"] * bytes_per_row(fmt, page["dim"]), f"{fmt} shows {size} bytes")
                check(len(bars) == 12, f"{len(bars)} bars")
                check(page["side"] == 6, f"{page['side']} rows in the side-by-side table")
                bench = page["bench"] or {"state": "not run", "status": "(first visit only)"}
                check(bench["state"] == "done" or visit != "fresh browser", f"benchmark state {bench['state']}: {bench['status']}")
                if bench["state"] == "done":
                    results = json.loads(bench["json"])
                    print(f"  benchmark: {bench['status']} {bench['charts']} charts")
                    kinds = sorted({b["kind"] for b in results["backends"]})
                    check(kinds == (["cpu", "gpu"] if want == "webgpu" else ["cpu"]), f"benchmark backends {kinds}")
                    if want == "webgpu":
                        # Chromium grants `timestamp-query` (SwiftShader's adapter has it): the device
                        # cases are timed by the device's own clock, not around submit and wait.
                        clocks = [b.get("clock") for b in results["backends"] if b["kind"] == "gpu"]
                        check(clocks == ["timestamps"], f"the WebGPU cases' clock: {clocks}")
                    check(results["machine"]["user_agent"] and "Chrome" in results["machine"]["user_agent"], "the results name the browser")
                    check(bench["charts"] >= 5, f"{bench['charts']} benchmark charts")
                    check(bench["download"].startswith("blob:"), "a download link for the results")
                    ops = {c["op"] for c in results["cases"]}
                    # (Hashed bags and the cache run on WebGPU only: the browser build's CPU path has neither.)
                    for op in ("gather", "bag_sum", "bag_mean", "search", "latency") + (("cache", "hashed_bag") if want == "webgpu" else ()):
                        check(op in ops, f"the page's benchmark ran no {op}")
                    if visit == "fresh browser":
                        path = os.path.join(OUT, f"bench-{want}.json")
                        with open(path, "w") as f:
                            f.write(bench["json"])
                        bench_files.append(path)
                        # The tiny matrix's results also go where scripts/web/runtimes_check.py sets
                        # every runtime side by side (scripts/web/test-npm.sh runs it after this).
                        if scale == "tiny":
                            os.makedirs(RUNTIMES_BENCH, exist_ok=True)
                            shutil.copy(path, os.path.join(RUNTIMES_BENCH, f"chromium-{want}.json"))
                search = page["search"]
                if search["state"] == "no-model" and not os.path.exists(os.path.join(WEB, "model.edo")):
                    print(f"SKIPPED: semantic search ({search['status']})")
                    continue
                check(search["state"] == "ready", f"semantic search state {search['state']}: {search['status']}")
                if search["state"] != "ready":
                    continue
                print(f"  semantic search: {search['model']}; first embedding {search['first']} ms after the model's bytes were in memory "
                      f"{search['phases']}; {search['corpus']}")
                check(search["backend"] == want, f"the model runs on {search['backend']}, expected {want}")
                check(search["first"].isdigit(), f"first embedding time {search['first']!r}")
                check(search["lines"] > 2000, f"{search['lines']} lines indexed")
                device = search["device"]
                if want == "webgpu":
                    print(f"  device loss: {device['text']}")
                    check(device["state"] == "recovered", f"after a device loss the page says {device['state']}: {device['text']}")
                else:
                    check(device["state"] == "none", f"the CPU path reports a device event: {device['text']}")
                first = search["queries"][next(iter(QUERIES))]["results"]
                check([t for t, _ in device["results"]] == [t for t, _ in first], f"after the device loss the query gives {device['results'][:3]}, before {first[:3]}")
                for query, word in QUERIES.items():
                    got = search["queries"][query]
                    print(f"  {got['info']}: 1. {got['results'][0][0] if got['results'] else '-'}")
                    scores = [score for _, score in got["results"]]
                    check(len(scores) == 10 and scores == sorted(scores, reverse=True), f"{query!r}: scores {scores}")
                    check(any(word in text.lower() for text, _ in got["results"]), f"{query!r}: no {word!r} in the top 10")
            print(f"{want}: screenshots {os.path.relpath(shot, ROOT)}, {os.path.relpath(shot.replace('demo-', 'search-'), ROOT)}")
        # The page's results beside a native run of the same suite: edo bench compare reads them all.
        native = os.path.join(OUT, "bench-native.json")
        edo = edo_command()
        run = subprocess.run(edo + ["bench", "suite", "--scale", scale, "--reps", "2", "--label", "native", "-o", native, "--html", os.path.join(OUT, "bench-native.html")],
                             capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"edo bench suite: {run.stderr.strip()}")
        elif len(bench_files) == 2:
            report = os.path.join(OUT, "bench-compare.html")
            cmp = subprocess.run(edo + ["bench", "compare", native] + bench_files + ["--html", report], capture_output=True, text=True)
            print(cmp.stdout)
            if cmp.returncode != 0:
                failures.append(f"edo bench compare: {cmp.stderr.strip()}")
            for label in ("native · ", "browser: "):
                if label not in cmp.stdout:
                    failures.append(f"edo bench compare shows no {label!r} series")
            print(f"benchmark comparison: {os.path.relpath(report, ROOT)}")
    finally:
        driver_proc.terminate()
        driver_proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)
        for server in servers:
            server.shutdown()
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print("demo page: all checks passed")


if __name__ == "__main__":
    main()
