"""Runs a WASI module under wasmtime (PyPI's `wasmtime`, pinned in scripts/checks/wasi_check.sh) with the
current directory preopened as `.`, passing the arguments and the exit status through. The module
sees what the host measured of it in its environment (edo-wasi's `bench-suite` records it):
EDO_RUNTIME, EDO_MODULE_S (seconds compiling it), EDO_MODULE_BYTES, and for `bench-suite` EDO_MODULE_GZIP_BYTES.

    python scripts/checks/wasi_run.py [--dir DIR]... MODULE.wasm ARG...

--dir preopens DIR too, at the same path (a test runner: cargo's tests read fixtures by absolute
path, so edo-core's tests under WASI run with `--dir /`).
"""

import gzip
import os
import sys
import time
from importlib.metadata import version

import wasmtime


def main() -> int:
    argv, dirs = sys.argv[1:], []
    while argv[:1] == ["--dir"] and len(argv) > 2:
        dirs.append(argv[1])
        argv = argv[2:]
    module_path, args = argv[0], argv[1:]
    engine = wasmtime.Engine()
    started = time.perf_counter()
    module = wasmtime.Module.from_file(engine, module_path)
    compiled = time.perf_counter() - started
    with open(module_path, "rb") as f:
        raw = f.read()
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    store = wasmtime.Store(engine)
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["edo-wasi", *args]
    env = [
        ("EDO_RUNTIME", f"wasmtime {version('wasmtime')} (PyPI, Cranelift)"),
        ("EDO_MODULE_S", f"{compiled:.6f}"),
        ("EDO_MODULE_BYTES", str(len(raw))),
    ]
    # edo's own settings pass through (EDO_EXPECT_SIMD for edo-core's tests, EDO_CPU_SIMD).
    env += [(k, v) for k, v in os.environ.items() if k.startswith("EDO_") and k not in dict(env)]
    if args[:1] == ["bench-suite"]:  # a tenth of a second a run: only where it is recorded
        env.append(("EDO_MODULE_GZIP_BYTES", str(len(gzip.compress(raw, 9)))))
    wasi.env = env
    wasi.inherit_stdout()
    wasi.inherit_stderr()
    wasi.preopen_dir(".", ".")
    for d in dirs:
        wasi.preopen_dir(d, d)
    store.set_wasi(wasi)
    instance = linker.instantiate(store, module)
    try:
        instance.exports(store)["_start"](store)
    except wasmtime.ExitTrap as e:
        return e.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
