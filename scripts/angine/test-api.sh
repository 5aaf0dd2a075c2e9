#!/usr/bin/env bash
# The checks Angine's scripts/test-api.sh makes, against ClayBot's seed 002 API: the
# landing page, the job routes, the MCP registry, the admin routes. Exits 1 if any fails.
#
# Usage: scripts/angine/test-api.sh [base_url] [api_key]
#    or: BASE_URL=http://127.0.0.1:7331 API_KEY=cb_... scripts/angine/test-api.sh
# The key needs admin (the workers and metrics); make one with
#   claybot keys create --name scripts --scope admin
set -u
. "$(dirname "$0")/lib.sh"

echo "ClayBot: seed 002's API at $BASE_URL"

# 1. The landing page. ClayBot's is its dashboard, which sends a visitor without a
# session on to its login page: followed, that answers 200.
STATUS="$(curl -sS -L -o /dev/null -w '%{http_code}' "$BASE_URL/")" || STATUS="000"
BODY=""
if [ "$STATUS" = "200" ]; then pass "landing page"; else fail "landing page"; fi

# 2. Jobs, listed.
request GET /api/v1/jobs
if [ "$STATUS" = "200" ] && is_type jobs list && is_type count int; then
  pass "list jobs ($(field count) jobs)"
else
  fail "list jobs"
fi

# 3. A job, created.
request POST /api/v1/jobs \
  '{"task": "Calculate the sum of numbers from 1 to 100 and print the result", "model": "anthropic/claude-sonnet-4"}'
JOB_ID="$(field id)" || JOB_ID=""
if [ "$STATUS" = "201" ] && [ -n "$JOB_ID" ] && [ "$(field status)" = "queued" ]; then
  pass "create job ($JOB_ID)"
else
  fail "create job"
  JOB_ID=""
fi

if [ -n "$JOB_ID" ]; then
  # 4. The job, read back.
  request GET "/api/v1/jobs/$JOB_ID"
  if [ "$STATUS" = "200" ] && [ "$(field id)" = "$JOB_ID" ] && is_type artifacts list; then
    pass "get job ($(field status))"
  else
    fail "get job"
  fi

  # 5. Its log.
  request GET "/api/v1/jobs/$JOB_ID/logs"
  if [ "$STATUS" = "200" ] && is_type logs list && [ -n "$(field logs.0.message)" ]; then
    pass "get job logs ($(field count) lines)"
  else
    fail "get job logs"
  fi
fi

# 6. The MCP servers in the registry.
request GET /api/v1/agents
if [ "$STATUS" = "200" ] && is_type agents list; then
  pass "list agents ($(field count) servers)"
else
  fail "list agents"
fi

# 7. Servers that fit a task.
request POST /api/v1/agents/discover '{"task": "scrape a website and analyze the data"}'
if [ "$STATUS" = "200" ] && is_type agents list && is_type count int; then
  pass "discover agents ($(field count) found)"
else
  fail "discover agents"
fi

# 8. Workers (admin).
request GET /api/v1/admin/workers
if [ "$STATUS" = "200" ] && is_type workers list && is_type summary.healthy int; then
  pass "list workers ($(field summary.healthy) healthy)"
else
  fail "list workers (the key needs admin)"
fi

# 9. Metrics (admin).
request GET /api/v1/admin/metrics
if [ "$STATUS" = "200" ] && is_type jobs.total int && is_type jobs.by_status object; then
  pass "get metrics ($(field jobs.total) jobs)"
else
  fail "get metrics (the key needs admin)"
fi

if [ "$FAILED" -gt 0 ]; then
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "every check passed"
