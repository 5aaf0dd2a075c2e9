# Shared by the Angine script equivalents: one request at a time, its answer read with
# python3 (no jq needed). Sourced, not run.

# The base URL and the key: the first two arguments (as Angine's scripts take them), else
# BASE_URL and API_KEY from the environment.
BASE_URL="${1:-${BASE_URL:-http://127.0.0.1:7331}}"
BASE_URL="${BASE_URL%/}"
API_KEY="${2:-${API_KEY:-}}"
if [ -z "$API_KEY" ]; then
  echo "no API key: pass it as the second argument or set API_KEY" >&2
  echo "(make one with: claybot keys create --name scripts --scope admin)" >&2
  exit 2
fi

ANSWER_FILE="$(mktemp)"
trap 'rm -f "$ANSWER_FILE"' EXIT
STATUS=""
BODY=""
FAILED=0

# request METHOD PATH [JSON]: sets STATUS (the HTTP status) and BODY (the answer).
request() {
  local method="$1" path="$2" data="${3:-}"
  local args=(-sS -o "$ANSWER_FILE" -w '%{http_code}' -X "$method"
              -H "Authorization: Bearer $API_KEY")
  if [ -n "$data" ]; then
    args+=(-H "Content-Type: application/json" --data "$data")
  fi
  STATUS="$(curl "${args[@]}" "$BASE_URL$path")" || STATUS="000"
  BODY="$(cat "$ANSWER_FILE")"
}

# field PATH: the value at PATH (dots between keys, numbers index lists) in BODY; strings
# bare, anything else as JSON; nothing (and status 1) when BODY is no JSON or lacks it.
field() {
  printf '%s' "$BODY" | python3 -c '
import json, sys
try:
    value = json.load(sys.stdin)
    for step in sys.argv[1].split(".") if sys.argv[1] else []:
        value = value[int(step)] if isinstance(value, list) else value[step]
except (ValueError, KeyError, IndexError, TypeError):
    sys.exit(1)
print(value if isinstance(value, str) else json.dumps(value))
' "$1"
}

# is_type PATH TYPE: whether the value at PATH is a list, object, string, int or bool.
is_type() {
  printf '%s' "$BODY" | python3 -c '
import json, sys
kinds = {"list": list, "object": dict, "string": str, "int": int, "bool": bool}
try:
    value = json.load(sys.stdin)
    for step in sys.argv[1].split(".") if sys.argv[1] else []:
        value = value[int(step)] if isinstance(value, list) else value[step]
except (ValueError, KeyError, IndexError, TypeError):
    sys.exit(1)
wanted = kinds[sys.argv[2]]
ok = isinstance(value, wanted) and not (wanted is int and isinstance(value, bool))
sys.exit(0 if ok else 1)
' "$1" "$2"
}

pass() { echo "PASS: $1"; }
fail() {
  echo "FAIL: $1"
  echo "  status $STATUS, answer: ${BODY:0:500}"
  FAILED=$((FAILED + 1))
}
