#!/usr/bin/env bash
# The Python package as aarch64 Linux users get it (a Raspberry Pi OS, Jetson Linux, Graviton): the
# manylinux2014 aarch64 wheel, built by maturin through zig, installed beside numpy's own aarch64
# wheel and pytest into Debian 12's arm64 CPython 3.11 (its .debs unpacked into a folder, not
# installed), and python/tests run there under qemu-aarch64 on an ARMv9 core (`-cpu max`) and an
# ARMv8.0 one (`-cpu cortex-a53`). The GPU tests say SKIPPED (no Vulkan there).
#   ./scripts/checks/python_aarch64.sh             # builds the wheel (the dev profile), then tests it
#   ./scripts/checks/python_aarch64.sh WHEEL.whl   # tests a wheel built already (scripts/edge-release.sh)
# On demand, not in CI: the cross build takes about 8 minutes on 2 cores. Needs qemu-user, PyPI and
# Debian's archive; apt is pointed at a folder of its own (nothing is added to this system's apt).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
target_dir=${CARGO_TARGET_DIR:-target}
work=$(realpath -m "$target_dir")/python-aarch64
mkdir -p "$work"

wheel=${1:-}
if [ -z "$wheel" ]; then
    tools=$target_dir/wheel-tools
    if ! "$tools/bin/pip" freeze 2>/dev/null | grep -q '^ziglang==0.14.1$'; then
        rm -rf "$tools"
        python3 -m venv "$tools" && "$tools/bin/pip" install -q maturin==1.16.0 ziglang==0.14.1
    fi
    rm -rf "$work/wheel"
    PATH=$(realpath -m "$tools")/bin:$PATH "$tools/bin/maturin" build -q --zig --compatibility manylinux2014 \
        --target aarch64-unknown-linux-gnu -m python/Cargo.toml --out "$work/wheel"
    wheel=$(ls "$work"/wheel/edo_embeddings-*manylinux2014_aarch64*.whl)
fi
wheel=$(realpath "$wheel")

# Debian 12's arm64 CPython and the libraries it and numpy load, unpacked into sysroot/.
sysroot=$work/sysroot
if [ ! -x "$sysroot/usr/bin/python3.11" ]; then
    apt_dir=$work/apt
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$work/debs"
    opts=(-q -o APT::Architecture=arm64 -o APT::Architectures=arm64 -o Dir::State::Lists="$apt_dir/lists"
        -o Dir::Cache="$apt_dir/cache" -o Dir::State::status=/dev/null -o Debug::NoLocking=1)
    apt-get "${opts[@]}" update > /dev/null
    (cd "$work/debs" && apt-get "${opts[@]}" download python3.11-minimal libpython3.11-minimal \
        libpython3.11-stdlib libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 \
        liblzma5 libsqlite3-0 libuuid1 libncursesw6 libtinfo6 libreadline8 libdb5.3 libcrypt1 libnsl2 \
        libtirpc3 > /dev/null 2>&1)
    rm -rf "$sysroot"
    for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
fi

# numpy's and pytest's wheels for that Python, and the wheel under test, unpacked as site-packages.
site=$work/site
rm -rf "$site" && mkdir -p "$site" "$work/pypi"
pip download -q --only-binary=:all: --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 \
    --python-version 3.11 --implementation cp --abi cp311 numpy==2.4.6 pytest==9.2.0 -d "$work/pypi"
for w in "$work"/pypi/*.whl "$wheel"; do (cd "$site" && python3 -m zipfile -e "$w" .); done

export QEMU_LD_PREFIX=$sysroot PYTHONPATH=$site
for cpu in max cortex-a53; do
    echo "== python/tests on aarch64 (qemu -cpu $cpu): $(basename "$wheel")"
    (cd "$work" && EDO_REQUIRE_GPU= QEMU_CPU=$cpu qemu-aarch64 "$sysroot/usr/bin/python3.11" -m pytest -q -rs -p no:cacheprovider \
        --import-mode=importlib "$root/python/tests")
done
