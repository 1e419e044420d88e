#!/usr/bin/env bash
# The official MCP conformance suite against `skillyard mcp serve --transport http` (docs/mcp.md#conformance).
# Node 22 and the suite are installed into tests/.cache/conformance (git-ignored), reused when present.
# Exit 0 when every scenario passes or is listed in conformance-baseline.yml; 3 when npm cannot reach the registry.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="$here/../.cache/conformance"
version="0.1.16"
scenarios=(server-initialize ping tools-list tools-call-simple-text tools-call-error resources-list server-sse-multiple-streams
  dns-rebinding-protection)
mkdir -p "$cache"
if [ ! -x "$cache/node_modules/.bin/conformance" ] || [ ! -x "$cache/node_modules/.bin/node" ]; then
  [ -f "$cache/package.json" ] || echo '{"private": true}' > "$cache/package.json"
  if ! (cd "$cache" && timeout 300 npm install --no-audit --no-fund --silent node@22 "@modelcontextprotocol/conformance@$version"); then
    echo "npm could not install the conformance suite (registry unreachable?)" >&2
    exit 3
  fi
fi
node="$cache/node_modules/.bin/node"
port="$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export SKILLYARD_HOME="${SKILLYARD_HOME:-$(mktemp -d)}"
python -m skillyard mcp serve --transport http --no-auth --host 127.0.0.1 --port "$port" \
  --skills-dir "$here/../fixtures/mcp_conformance" --context '{"org_id": "conformance"}' &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 150); do
  if python -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then break; fi
  sleep 0.2
done
status=0
for scenario in "${scenarios[@]}"; do
  if timeout 120 "$node" "$cache/node_modules/.bin/conformance" server --url "http://127.0.0.1:$port/mcp" \
      --scenario "$scenario" --expected-failures "$here/conformance-baseline.yml" >"$cache/$scenario.log" 2>&1; then
    echo "PASS-OR-BASELINED $scenario"
  else
    echo "FAIL $scenario (see $cache/$scenario.log)"
    status=1
  fi
done
exit "$status"
