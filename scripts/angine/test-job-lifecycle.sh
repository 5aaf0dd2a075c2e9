#!/usr/bin/env bash
# What Angine's scripts/test-job-lifecycle.sh does, against ClayBot: create a job, poll it
# until it ends, answer "yes, proceed" whenever it waits for the user, then print its
# result and artifacts. Exits 0 only if the job completes.
#
# Usage: scripts/angine/test-job-lifecycle.sh [base_url] [api_key]
#    or: BASE_URL=http://127.0.0.1:7331 API_KEY=cb_... scripts/angine/test-job-lifecycle.sh
# The key needs jobs:read and jobs:write. POLL_ATTEMPTS (60) and POLL_INTERVAL_S (2) set
# how long it waits.
set -u
. "$(dirname "$0")/lib.sh"
POLL_ATTEMPTS="${POLL_ATTEMPTS:-60}"
POLL_INTERVAL_S="${POLL_INTERVAL_S:-2}"

echo "ClayBot: a job's whole life at $BASE_URL"

request POST /api/v1/jobs \
  '{"task": "Write a Python script that prints the Fibonacci sequence up to 10 numbers", "model": "anthropic/claude-sonnet-4", "timeout_seconds": 120}'
JOB_ID="$(field id)" || JOB_ID=""
if [ "$STATUS" != "201" ] || [ -z "$JOB_ID" ]; then
  fail "create job"
  exit 1
fi
echo "created job $JOB_ID"

answered=0
for attempt in $(seq 1 "$POLL_ATTEMPTS"); do
  request GET "/api/v1/jobs/$JOB_ID"
  if [ "$STATUS" != "200" ]; then
    fail "get job"
    exit 1
  fi
  state="$(field status)"
  echo "[$attempt] status: $state"
  case "$state" in
    completed)
      echo "result:"
      field result
      request GET "/api/v1/jobs/$JOB_ID/artifacts"
      if [ "$STATUS" != "200" ] || ! is_type artifacts list; then
        fail "list artifacts"
        exit 1
      fi
      echo "artifacts: $(field artifacts)"
      if [ "$answered" -eq 0 ]; then
        echo "(the job never asked anything)"
      fi
      echo "job completed"
      exit 0
      ;;
    failed | cancelled)
      echo "error: $(field error_message)"
      fail "the job $state"
      exit 1
      ;;
    waiting_for_user)
      echo "question: $(field agent_question)"
      echo "answering 'yes, proceed'"
      request POST "/api/v1/jobs/$JOB_ID/respond" '{"answer": "yes, proceed"}'
      if [ "$STATUS" != "200" ] || [ "$(field status)" != "queued" ]; then
        fail "respond"
        exit 1
      fi
      answered=$((answered + 1))
      continue  # read it again at once: it is queued now
      ;;
  esac
  sleep "$POLL_INTERVAL_S"
done

fail "the job did not end after $POLL_ATTEMPTS polls"
exit 1
