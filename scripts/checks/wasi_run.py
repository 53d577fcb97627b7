"""Runs a WASI module under wasmtime (PyPI's `wasmtime`, pinned in scripts/checks/wasi_check.sh) with the
current directory preopened as `.`, passing the arguments and the exit status through.

    python scripts/checks/wasi_run.py MODULE.wasm ARG...
"""

import sys

import wasmtime


def main() -> int:
    module_path, args = sys.argv[1], sys.argv[2:]
    engine = wasmtime.Engine()
    module = wasmtime.Module.from_file(engine, module_path)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    store = wasmtime.Store(engine)
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["edo-wasi", *args]
    wasi.inherit_stdout()
    wasi.inherit_stderr()
    wasi.preopen_dir(".", ".")
    store.set_wasi(wasi)
    instance = linker.instantiate(store, module)
    try:
        instance.exports(store)["_start"](store)
    except wasmtime.ExitTrap as e:
        return e.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
