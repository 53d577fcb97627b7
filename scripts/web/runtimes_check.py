#!/usr/bin/env python3
"""The npm package in the JavaScript runtimes edge users run it in, from its tarball, each running
the same checks (web/npm/test/runtimes/checks.mjs: a model2vec model's vectors, a search, gathers
and bags of six formats on the runtime's engine against its CPU path, typed errors):

- Node, plain (the CPU path), and with Dawn's WebGPU (npm's `webgpu`) handed to createEngine —
  here on Dawn's OpenGL ES backend over Mesa's llvmpipe (EGL, surfaceless), a compatibility-mode
  adapter: Dawn's Vulkan backend refuses Mesa 22.3's lavapipe;
- Deno, with its own WebGPU (wgpu, on lavapipe) and with no Vulkan driver (the CPU fallback),
  and importing the package as Deno users write it, `npm:edo-embeddings@VERSION`, from a registry
  on loopback that serves the tarball (and passes every other package on to npm's);
- Bun (no WebGPU: the CPU path);
- Cloudflare's workerd: a Worker (module syntax, the .wasm imported as a module) answering the
  checks and WordLlama's INT8 model's embeddings over HTTP on loopback, its WASM memory within
  Workers' 128 MB.

Every runtime's vectors equal the native CPU path's (`edo embed`) bit for bit, and its CPU-path
gathers, bags and search results equal every other runtime's. The runtimes (pinned in
web/npm/test/runtimes/package.json) come from npm. Prints a table of the runtimes side by side and
writes target/runtimes-report.json.

    python3 scripts/web/runtimes_check.py TARBALL EDO_BINARY [--wordllama web/model.edo]

With --benchmark DIR the suite's tiny matrix runs too (in the runtimes on the CPU path; with
--benchmark-gpu in those on WebGPU as well) and natively, and `edo bench compare` sets them side by
side, with any other results files in DIR (scripts/checks/aarch64_check.sh leaves its run under qemu
there), in DIR/compare.md and compare.csv: a check that every runtime writes results compare reads.

Exits 0 when every check passed, 1 when one failed, 3 when the runtimes could not be installed.
"""

import argparse
import base64
import hashlib
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKS = os.path.join(ROOT, "web", "npm", "test", "runtimes")
MODEL = os.path.join(ROOT, "tests", "data", "models", "wordpiece")
WORKERS_MEMORY = 128 << 20  # Cloudflare Workers' memory limit per isolate
WORDLLAMA_TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "embedding tables compressed to eight bits a value",
    "a Worker answers in milliseconds",
    "",
    "naïve café résumé",
]


def run(cmd, cwd, env=None, timeout=600):
    """Runs a command; returns (status, stdout, stderr, seconds)."""
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - start


def native_vectors(edo, model, texts, work, name):
    """The native CPU path's vectors (`edo embed … -o x.npy`) as little-endian f32 bytes."""
    out = os.path.join(work, f"{name}.npy")
    cmd = [edo, "embed", model, "-o", out]
    for t in texts:
        cmd += ["--text", t]
    subprocess.run(cmd, check=True, capture_output=True)
    data = open(out, "rb").read()
    header = struct.unpack("<H", data[8:10])[0]
    return data[10 + header:]


def npm_registry(tarball):
    """An npm registry on loopback serving the package's tarball as the only version of its name,
    and passing every other request on to registry.npmjs.org (its dependencies): what an
    `npm:` specifier resolves through. Returns (server, url, name, version); `server.served`
    counts the tarball's downloads; `server.shutdown()` and `server_close()` end it."""
    data = open(tarball, "rb").read()
    with tarfile.open(tarball) as t:
        manifest = json.load(t.extractfile("package/package.json"))
    name, version = manifest["name"], manifest["version"]
    file = f"/{name}/-/{name}-{version}.tgz"
    packument = {}

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            path = urllib.parse.unquote(self.path.split("?")[0])
            if path == f"/{name}":
                body, kind = json.dumps(packument).encode(), "application/json"
            elif path == file:
                body, kind = data, "application/octet-stream"
                self.server.served += 1
            else:
                try:
                    with urllib.request.urlopen("https://registry.npmjs.org" + self.path, timeout=60) as r:
                        body, kind = r.read(), r.headers.get("content-type", "application/json")
                except urllib.error.HTTPError as e:  # npm's answer, passed on (a 404 stays a 404)
                    self.send_error(e.code, str(e.reason))
                    return
                except Exception as e:  # noqa: BLE001 — npm unreachable: the client sees a 502
                    self.send_error(502, str(e))
                    return
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    server.served = 0
    url = f"http://127.0.0.1:{server.server_address[1]}"
    dist = {
        "tarball": url + file,
        "shasum": hashlib.sha1(data).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
    }
    packument.update({"name": name, "dist-tags": {"latest": version}, "versions": {version: {**manifest, "dist": dist}}})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, url, name, version


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workerd_config(stage, pkg, port, wordllama):
    """A workerd configuration (Cap'n Proto text) serving worker.js with the package's files as
    modules, the fixture model's files and WordLlama's .edo file as data modules, all copied into
    `stage` (workerd embeds files by paths relative to its configuration)."""
    modules = [
        ("worker.js", "esModule", os.path.join(CHECKS, "worker.js")),
        ("checks.mjs", "esModule", os.path.join(CHECKS, "checks.mjs")),
    ]
    for f in ["index.js", "core.js", "client.js", "edo_web.js", "edo_web_suite.js", "version.js"]:
        modules.append((f"edo/{f}", "esModule", os.path.join(pkg, f)))
    for f in ["edo_web_bg.wasm", "edo_web_suite_bg.wasm"]:
        modules.append((f"edo/{f}", "wasm", os.path.join(pkg, f)))
    for f in ["config.json", "tokenizer.json", "model.safetensors"]:
        modules.append((f"model/{f}", "data", os.path.join(MODEL, f)))
    modules.append(("wordllama.edo", "data", wordllama))
    for name, _, path in modules:
        os.makedirs(os.path.dirname(os.path.join(stage, name)), exist_ok=True)
        if path:
            shutil.copy(path, os.path.join(stage, name))
        else:
            open(os.path.join(stage, name), "wb").close()  # no model: /embed answers 404
    listed = ",\n    ".join(f'(name = "{n}", {kind} = embed "{n}")' for n, kind, _ in modules)
    return f"""using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .edo)],
  sockets = [(name = "http", address = "127.0.0.1:{port}", http = (), service = "main")],
);
const edo :Workerd.Worker = (
  modules = [
    {listed}
  ],
  compatibilityDate = "2025-09-01",
);
"""


def post(url, body, timeout=300):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return r.read(), dict(r.headers)


def peak_rss(pid):
    """The process's peak resident memory in bytes (Linux), or None."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run_workerd(work, pkg, texts, wordllama, benchmark):
    """workerd serving worker.js: its /check report, and /embed's vectors with WordLlama's model."""
    port = free_port()
    stage = os.path.join(work, "worker")
    os.makedirs(stage)
    config = os.path.join(stage, "edo.capnp")
    text = workerd_config(stage, pkg, port, wordllama)
    open(config, "w").write(text)
    binary = os.path.join(work, "node_modules", ".bin", "workerd")
    log = open(os.path.join(work, "workerd.log"), "w")
    server = subprocess.Popen([binary, "serve", config], cwd=stage, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("workerd did not start: " + open(log.name).read()[-2000:])
                time.sleep(0.2)
        start = time.monotonic()
        body, _ = post(f"http://127.0.0.1:{port}/check" + ("?benchmark" if benchmark else ""), texts)
        report = json.loads(body)
        report["seconds"] = time.monotonic() - start
        if wordllama:
            start = time.monotonic()
            body, headers = post(f"http://127.0.0.1:{port}/embed", WORDLLAMA_TEXTS)
            report["wordllama"] = {
                "vectors": body,
                "dim": int(headers["x-dim"]),
                "backend": headers["x-backend"],
                "wasmMemoryBytes": int(headers["x-wasm-memory"]),
                "seconds": time.monotonic() - start,
            }
        report["peakRss"] = peak_rss(server.pid)
        return report
    finally:
        server.terminate()
        server.wait(timeout=30)


def slug(name):
    """A runtime's name as a file name: `node + Dawn` → `node-Dawn`."""
    return name.replace(" + ", "-").replace(", ", "-").replace(" ", "-")


def compare_benchmarks(args, reports, work):
    """Writes each runtime's benchmark results (labelled by runtime) and a native run's to
    args.benchmark, and sets them side by side with `edo bench compare`."""
    os.makedirs(args.benchmark, exist_ok=True)
    # This check's own files of an earlier run go first (a runtime not run now leaves none).
    for r in reports:
        stale = os.path.join(args.benchmark, slug(r["name"]) + ".json")
        if os.path.exists(stale):
            os.remove(stale)
    files = []
    native = os.path.join(args.benchmark, "native.json")
    subprocess.run(
        [args.edo, "bench", "suite", "--scale", "tiny", "--model", MODEL, "--label", "native", "-o", native, "--html", os.path.join(work, "native.html")],
        check=True,
        capture_output=True,
    )
    files.append(native)
    for r in reports:
        if "benchmark" not in r:
            continue
        results = r["benchmark"]
        results["label"] = r["name"]
        path = os.path.join(args.benchmark, slug(r["name"]) + ".json")
        json.dump(results, open(path, "w"), indent=1)
        files.append(path)
    # Results other checks left there: scripts/checks/aarch64_check.sh's run under qemu (marked emulated)
    # and scripts/checks/wasi_check.sh's under wasmtime.
    written = {os.path.abspath(f) for f in files}
    for name in sorted(os.listdir(args.benchmark)):
        path = os.path.abspath(os.path.join(args.benchmark, name))
        if name.endswith(".json") and path not in written:
            files.append(path)
    out = os.path.join(args.benchmark, "compare")
    p = subprocess.run([args.edo, "bench", "compare", *files, "--markdown", out + ".md", "--csv", out + ".csv"], capture_output=True, text=True)
    print(p.stdout)
    if p.returncode != 0:
        for r in reports:
            r["failures"].append(f"edo bench compare refused the results: {p.stderr.strip()}")
            break


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tarball")
    ap.add_argument("edo", help="the native edo binary (its CPU path is the oracle)")
    ap.add_argument("--wordllama", help="WordLlama's model as an .edo file (scripts/web/make_web_model.sh), for workerd's /embed")
    ap.add_argument("--require-gpu", action="store_true", help="Deno must find WebGPU (lavapipe) and Node Dawn's adapter")
    ap.add_argument(
        "--benchmark",
        metavar="DIR",
        help="also run the benchmark suite's tiny matrix in the runtimes on the CPU path and natively (`edo bench suite`), "
        "write each results file to DIR and set them side by side (`edo bench compare`: DIR/compare.md, .csv)",
    )
    ap.add_argument(
        "--benchmark-gpu",
        action="store_true",
        help="with --benchmark, in the runtimes on WebGPU too (Deno, Node with Dawn: a minute more on lavapipe)",
    )
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="edo-runtimes-")
    registry, npm_dir = None, None
    try:
        shutil.copy(os.path.join(CHECKS, "package.json"), work)
        for f in ["checks.mjs", "run.mjs"]:
            shutil.copy(os.path.join(CHECKS, f), work)
        status, out, err, _ = run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", os.path.abspath(args.tarball)], work)
        if status != 0:
            print(f"the runtimes could not be installed from npm:\n{err[-2000:]}", file=sys.stderr)
            return 3
        pkg = os.path.join(work, "node_modules", "edo-embeddings")
        expected = json.load(open(os.path.join(ROOT, "tests", "data", "models", "expected.json")))
        texts = expected["texts"]
        texts_file = os.path.join(work, "texts.json")
        json.dump(texts, open(texts_file, "w"))
        native = native_vectors(args.edo, MODEL, texts, work, "native")

        bin_ = lambda name: os.path.join(work, "node_modules", ".bin", name)  # noqa: E731
        gpu = "webgpu" if args.require_gpu else None
        # Each: name, command, environment, the backend it must pick (None: whichever it finds).
        # A backend Linux has not: Deno's WebGPU finds no adapter (with Vulkan hidden it takes
        # Mesa's OpenGL instead).
        no_gpu = {"DENO_WEBGPU_BACKEND": "dx12"}
        # Deno importing `npm:edo-embeddings@VERSION` from a folder with no package.json or
        # node_modules above it (Deno would resolve `npm:` from those): the tarball through the
        # loopback registry into a cache of its own.
        registry, registry_url, pkg_name, pkg_version = npm_registry(os.path.abspath(args.tarball))
        npm_dir = tempfile.mkdtemp(prefix="edo-deno-npm-")
        shutil.copy(os.path.join(CHECKS, "checks.mjs"), npm_dir)
        source = open(os.path.join(CHECKS, "run.mjs")).read()
        assert "from 'edo-embeddings';" in source, "run.mjs imports the package by its name"
        open(os.path.join(npm_dir, "run.mjs"), "w").write(source.replace("from 'edo-embeddings';", f"from 'npm:{pkg_name}@{pkg_version}';"))
        npm_env = {**no_gpu, "DENO_NO_UPDATE_CHECK": "1", "NPM_CONFIG_REGISTRY": registry_url + "/", "DENO_DIR": os.path.join(npm_dir, "deno-cache")}
        dawn_env = {"EGL_PLATFORM": "surfaceless", "XDG_RUNTIME_DIR": work}
        runs = [
            ("node", ["node", "run.mjs", MODEL, texts_file], {}, "cpu"),
            ("node + Dawn", ["node", "run.mjs", MODEL, texts_file, "--dawn", "backend=opengles"], dawn_env, gpu),
            ("deno", [bin_("deno"), "run", "--allow-read", "--allow-env", "run.mjs", MODEL, texts_file], {"XDG_RUNTIME_DIR": work, "DENO_NO_UPDATE_CHECK": "1"}, gpu),
            ("deno, no adapter", [bin_("deno"), "run", "--allow-read", "--allow-env", "run.mjs", MODEL, texts_file], {**no_gpu, "DENO_NO_UPDATE_CHECK": "1"}, "cpu"),
            ("deno, npm: import", [bin_("deno"), "run", "--allow-read", "--allow-env", "run.mjs", MODEL, texts_file], npm_env, "cpu", npm_dir),
            ("bun", [bin_("bun"), "run.mjs", MODEL, texts_file], {}, "cpu"),
        ]
        reports = []
        for name, cmd, env, want, *where in runs:
            if want:
                cmd = cmd + ["--expect", want]
            if args.benchmark and (want == "cpu" or args.benchmark_gpu):
                cmd = cmd + ["--benchmark"]
            status, out, err, seconds = run(cmd, where[0] if where else work, env)
            line = next((l for l in reversed(out.splitlines()) if l.startswith("{")), None)
            if line is None:
                reports.append({"name": name, "failures": [f"no report (exit {status}): {err.strip()[-1500:]}"]})
                continue
            report = json.loads(line)
            report.update(name=name, seconds=seconds)
            if name == "deno, npm: import" and registry.served == 0:
                report["failures"].append("Deno did not download the tarball from the registry (it resolved `npm:` elsewhere)")
            reports.append(report)
        try:
            report = run_workerd(work, pkg, texts, args.wordllama, bool(args.benchmark))
            report["name"] = "workerd"
            reports.append(report)
        except Exception as e:  # the report says what failed; the run goes on to the others' table
            reports.append({"name": "workerd", "failures": [f"{type(e).__name__}: {e}"]})

        # Across runtimes: vectors equal to the native CPU path's, CPU-path outputs equal to Node's.
        reference = next((r for r in reports if r["name"] == "node" and "outputs" in r), None)
        for r in reports:
            if "outputs" not in r:
                continue
            vectors = bytes.fromhex(r["outputs"]["vectors"])
            if vectors != native:
                r["failures"].append("vectors differ from the native CPU path's (edo embed)")
            if reference and r is not reference:
                for key in ["gathers", "search", "errors"]:
                    if r["outputs"][key] != reference["outputs"][key]:
                        r["failures"].append(f"{key} differ from plain Node's")
        workerd = next(r for r in reports if r["name"] == "workerd")
        wordllama = workerd.get("wordllama")
        if wordllama:
            want = native_vectors(args.edo, args.wordllama, WORDLLAMA_TEXTS, work, "wordllama")
            if wordllama["vectors"] != want:
                workerd["failures"].append("WordLlama's vectors differ from the native CPU path's")
            if wordllama["wasmMemoryBytes"] > WORKERS_MEMORY:
                workerd["failures"].append(f"WordLlama's Worker holds {wordllama['wasmMemoryBytes']} bytes of WASM memory, over 128 MB")
            wordllama["vectors"] = f"{len(wordllama['vectors'])} bytes"

        if args.benchmark:
            compare_benchmarks(args, reports, work)

        print(f"{'runtime':<22} {'version':<28} {'backend':<8} {'WASM MB':>8} {'s':>6}  checks")
        for r in reports:
            version = r.get("runtime", "?")[:28]
            memory = r.get("wasmMemoryBytes")
            print(
                f"{r['name']:<22} {version:<28} {r.get('backend', '?'):<8} {memory / 2**20 if memory else float('nan'):>8.1f} "
                f"{r.get('seconds', float('nan')):>6.1f}  {'passed' if not r['failures'] else 'FAILED'}"
            )
            print(f"{'':<22} {r.get('note', '')}")
            if "auto" in r:
                again = f"; a second engine: {r['auto']['again']}" if "again" in r["auto"] else ""
                print(f"{'':<22} backend 'auto': {r['auto']['backend']} ({r['auto']['reason']}{again}): {r['auto']['note']}")
            for f in r["failures"]:
                print(f"{'':<22} FAILED: {f}")
        if wordllama:
            rss = workerd.get("peakRss")
            print(
                f"workerd, WordLlama INT8 ({wordllama['dim']} dims, {wordllama['backend']}): {len(WORDLLAMA_TEXTS)} texts equal to native "
                f"{'yes' if not any('WordLlama' in f for f in workerd['failures']) else 'NO'}; WASM memory "
                f"{wordllama['wasmMemoryBytes'] / 2**20:.1f} MB of the 128 MB limit"
                + (f"; workerd's peak RSS {rss / 2**20:.0f} MB (the runtime itself included)" if rss else "")
            )
        else:
            print("SKIPPED: workerd with WordLlama's model (no --wordllama file: scripts/web/make_web_model.sh)")
        for r in reports:
            r.get("outputs", {}).pop("vectors", None)
            r.pop("benchmark", None)
        os.makedirs(os.path.join(ROOT, "target"), exist_ok=True)
        json.dump(reports, open(os.path.join(ROOT, "target", "runtimes-report.json"), "w"), indent=1)
        return 1 if any(r["failures"] for r in reports) else 0
    finally:
        if registry:
            registry.shutdown()
            registry.server_close()
        if npm_dir:
            shutil.rmtree(npm_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
