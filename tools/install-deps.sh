#!/usr/bin/env bash
# Installs the Debian 12 packages Petrel builds with, when run as root; otherwise
# says which are missing and how to install them. Nothing else is downloaded.
#   tools/install-deps.sh            build + test dependencies
#   tools/install-deps.sh --cross    also the ARM cross compilers and qemu-user, and for
#                                    WebAssembly emscripten, Node.js and Chromium
set -euo pipefail
cd "$(dirname "$0")/.."

# sentencepiece (spm_encode/spm_decode) and xz-utils: the tokenizer oracle tests compare
# Petrel's SentencePiece with Debian's on a compressed corpus of real text.
# ccache: tools/test.sh compiles through it (a second run rebuilds only what changed).
packages=(cmake g++ make libxsimd-dev libflatbuffers-dev flatbuffers-compiler catch2
          libbenchmark-dev nlohmann-json3-dev pkgconf sentencepiece xz-utils ccache)
if [[ "${1:-}" == "--cross" ]]; then
  packages+=(g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user emscripten chromium)
fi
# Any Node.js >= 18 runs the WebAssembly tests and petrel-serve's HTTP clients; Debian's when there is none.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
# The Python package (bindings/python: pybind11, a venv for the offline pip install, pytest)
# and petrel-serve (tools/serve: cpp-httplib, as llama.cpp's server).
packages+=(pybind11-dev python3-pybind11 python3-dev python3-venv python3-setuptools python3-wheel python3-pytest
           libcpp-httplib-dev)
packages+=(unicode-data)  # /usr/share/unicode: tools/unicode's table generators (tests read committed fixtures)
# clang and its runtimes (libFuzzer, sanitizers): the clang and fuzz presets, tools/fuzz.sh
packages+=(clang libclang-rt-14-dev)
# llvm-objdump (any target's objects) and python3: tools/check_isa_objects.py; llvm-mca: bench/inner_loops.py
packages+=(llvm-14 python3)

# petrel-serve's tests talk to it with the official `openai` client and load it with
# autocannon, at the versions tests/serve/package-lock.json pins (npm's registry).
install_serve_clients() {
  [[ -d tests/serve/node_modules/openai && -d tests/serve/node_modules/autocannon ]] && return 0
  command -v npm >/dev/null || return 0
  echo "installing tests/serve's clients (npm ci)"
  npm ci --prefix tests/serve --no-audit --no-fund --loglevel=error >/dev/null
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  install_serve_clients
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "Petrel needs these Debian packages: ${missing[*]}" >&2
  echo "Install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_serve_clients
