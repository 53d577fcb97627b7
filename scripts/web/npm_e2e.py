#!/usr/bin/env python3
"""The npm package in a web app as a user builds one: serves the Vite app's dist/ (made by
scripts/web/test-npm.sh from web/npm/test-app with the tarball installed) and the model fixtures from a
server that counts requests, opens the app in headless Chromium with WebGPU and without it, twice
each (the second visit must find the model in Cache Storage: no request for its files), and reads
every check's outcome and the figures the page prints. Screenshots in target/npm-e2e/.

    python3 scripts/web/npm_e2e.py APP_DIST NODE_VECTORS_JSON
"""

import base64
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_e2e import CHROMIUM, FLAGS, ROOT, call, start_chromedriver  # noqa: E402

OUT = os.path.join(ROOT, "target", "npm-e2e")
MODELS = os.path.join(ROOT, "tests", "data", "models")
REAL = os.path.join(ROOT, "web", "model.edo")


def server(dist, node_vectors):
    counts = Counter()
    lock = threading.Lock()
    types = {".js": "text/javascript", ".wasm": "application/wasm", ".html": "text/html", ".json": "application/json", ".css": "text/css"}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send(self, body, kind="application/octet-stream", status=200, head=False):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def route(self, head):
            path = self.path.split("?")[0]
            if not head:
                with lock:
                    counts[path] += 1
            for prefix in ("/models/wordpiece/", "/models/wordpiece-worker/"):
                if path.startswith(prefix):
                    name = path[len(prefix):]
                    file = os.path.join(MODELS, "wordpiece", name)
                    if name in ("config.json", "tokenizer.json", "model.safetensors"):
                        return self.send(open(file, "rb").read(), head=head)
            if path == "/models/model.edo" and os.path.exists(REAL):
                return self.send(open(REAL, "rb").read(), head=head)
            if path == "/models/page.edo":
                return self.send(b"<!doctype html><html><body>an app's fallback page</body></html>", "text/html", head=head)
            if path == "/models/slow.edo":
                # Half of the body, then nothing until the client gives up (an aborted download).
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(1 << 20))
                self.end_headers()
                try:
                    self.wfile.write(b"\0" * (1 << 19))
                    self.wfile.flush()
                    time.sleep(20)
                except OSError:
                    pass
                self.close_connection = True
                return
            if path == "/node-vectors.json":
                return self.send(open(node_vectors, "rb").read(), "application/json", head=head)
            file = os.path.normpath(os.path.join(dist, path.lstrip("/") or "index.html"))
            if file.startswith(os.path.abspath(dist)) and os.path.isfile(file):
                return self.send(open(file, "rb").read(), types.get(os.path.splitext(file)[1], "application/octet-stream"), head=head)
            self.send(b"not found", "text/plain", 404, head=head)

        def do_GET(self):
            self.route(False)

        def do_HEAD(self):
            self.route(True)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, counts, lock


def visit(driver, s, url, shot):
    call(driver, "POST", s + "/url", {"url": url})
    read = lambda js: call(driver, "POST", s + "/execute/sync", {"script": "return " + js, "args": []})
    deadline = time.time() + 420
    while time.time() < deadline:
        if read("document.getElementById('status') && document.getElementById('status').dataset.state") == "done":
            break
        time.sleep(0.25)
    results = read("window.edoResults || null")
    status = read("document.getElementById('status').textContent")
    with open(shot, "wb") as f:
        f.write(base64.b64decode(call(driver, "GET", s + "/screenshot")))
    return status, results


def main():
    dist, node_vectors = sys.argv[1], sys.argv[2]
    os.makedirs(OUT, exist_ok=True)
    httpd, counts, lock = server(dist, node_vectors)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    scratch = tempfile.mkdtemp(prefix="edo-npm-e2e-")
    driver_proc, driver = start_chromedriver(scratch)
    failures = []
    figures = {}
    model_files = ["/models/wordpiece/config.json", "/models/wordpiece/tokenizer.json", "/models/wordpiece/model.safetensors", "/models/model.edo"]
    try:
        for webgpu, want in ((True, "webgpu"), (False, "cpu")):
            args = FLAGS + [f"--user-data-dir={tempfile.mkdtemp(dir=scratch)}"] + (["--enable-unsafe-webgpu"] if webgpu else ["--disable-features=WebGPU"])
            caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}}
            session = call(driver, "POST", "/session", caps)["sessionId"]
            s = f"/session/{session}"
            try:
                for n in (1, 2):
                    with lock:
                        before = {p: counts[p] for p in model_files}
                    shot = os.path.join(OUT, f"app-{want}-visit{n}.png")
                    status, results = visit(driver, s, f"{base}/index.html?expect={want}&visit={n}", shot)
                    with lock:
                        requested = {p: counts[p] - before[p] for p in model_files}
                    print(f"{want}, visit {n}: {status}")
                    if not results:
                        failures.append(f"{want}, visit {n}: the page gave no results ({status})")
                        continue
                    for o in results["outcomes"]:
                        print(f"  {'ok ' if o['ok'] else 'BAD'} {o['name']}{': ' + o['detail'] if o['detail'] else ''}")
                        if not o["ok"]:
                            failures.append(f"{want}, visit {n}: {o['name']}: {o['detail']}")
                    figures[f"{want}-visit{n}"] = results["figures"]
                    print(f"  figures: {json.dumps(results['figures'])}")
                    print(f"  model requests: {requested}")
                    if n == 1:
                        if requested["/models/wordpiece/model.safetensors"] != 1:
                            failures.append(f"{want}, visit 1: {requested} requests for the model's files, expected one each")
                    else:
                        if any(requested.values()):
                            failures.append(f"{want}, visit 2: the cached model made requests {requested}")
                    want_checks = 14 if webgpu else 9
                    want_checks -= 0 if results["figures"].get("realModel") else 1
                    want_checks += 1 if n == 1 else 0  # the benchmark module's check
                    if len(results["outcomes"]) != want_checks:
                        failures.append(f"{want}, visit {n}: {len(results['outcomes'])} checks ran, expected {want_checks}")
            finally:
                call(driver, "DELETE", s)
    finally:
        driver_proc.terminate()
        driver_proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)
        httpd.shutdown()
    with open(os.path.join(OUT, "figures.json"), "w") as f:
        json.dump(figures, f, indent=1)
    if not os.path.exists(REAL):
        print("SKIPPED: the real model's timings (no web/model.edo: WordLlama unavailable)")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print(f"npm package in a Vite app: all checks passed (screenshots in {os.path.relpath(OUT, ROOT)})")


if __name__ == "__main__":
    main()
