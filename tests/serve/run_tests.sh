#!/usr/bin/env bash
# ctest serve_http: tests/serve's Node tests against this build's petrel-serve.
#   run_tests.sh NODE TOOLS_DIR SOURCE_DIR      (TOOLS_DIR: the build's tools/ directory)
# Skipped (77) without Node.js or tests/serve/node_modules (npm ci --prefix tests/serve).
set -euo pipefail
node=${1:-} serve_dir=$2 source_dir=$3
tests="$source_dir/tests/serve"
if [[ -z "$node" || ! -x "$(command -v "$node" || true)" ]]; then
  echo "serve_http: skipped: Node.js not found (it runs the HTTP clients)"
  exit 77
fi
if [[ ! -d "$tests/node_modules/openai" || ! -d "$tests/node_modules/autocannon" ]]; then
  echo "serve_http: skipped: the test clients are not installed (npm ci --prefix tests/serve)"
  exit 77
fi
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT
export PETREL_TOOLS_DIR="$serve_dir/.." PETREL_SERVE_MODELS="$models"
cd "$tests"
# One file at a time: the load test and the servers share two cores.
"$node" --test --test-concurrency=1 api.test.mjs hostile.test.mjs load.test.mjs
