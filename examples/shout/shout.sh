#!/usr/bin/env bash
# shout: a SHELL skill. Input: SKILL_INPUT (JSON) in the environment; the same fields are also in "$@".
# stdout carries only the result (one JSON line); logs go to stderr.
set -euo pipefail

echo "shout called with: $*" >&2

python3 - <<'PY'
import json
import os

data = json.loads(os.environ.get("SKILL_INPUT") or "{}")
times = int(data.get("times") or 1)
loud = " ".join([data["text"].upper()] * times)
print(json.dumps({"ok": True, "text": loud}))
PY
