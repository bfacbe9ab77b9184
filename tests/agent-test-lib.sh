# Helpers shared by the agent tests that drive a real client against a fake model (issue 55:
# scripts/test-gemini, scripts/test-copilot). Sourced inside the test's inner phase, with:
#   AGENT    the agent's name for people (`Gemini CLI 0.61.0`), in every ok/FAIL line
#   AGENT_DIR the agent's directory in the project, left out of file comparisons (`.gemini`)
#   CAIRN    the cairn binary; P the project; D the run's directory; SCENARIO what runs now
# shellcheck shell=bash

fail() {
  echo "FAIL [$AGENT] $SCENARIO: $*" >&2
  exit 1
}
ok() { echo "ok [$AGENT] $SCENARIO: $*"; }
cairn() { "$CAIRN" -C "$P" "$@"; }
# jq -e FILTER... FILE, false also when FILE is empty.
holds() { [[ -s "${!#}" ]] && jq -e "$@"; }
# Copies the project's files (not the agent's directory, not .git) to $D/NAME.
save_files() {
  mkdir -p "$D/$1"
  (cd "$P" && tar -c --exclude="./$AGENT_DIR" --exclude=./.git .) | tar -x -C "$D/$1"
}
# Whether the project's files equal the copy $D/NAME.
files_equal() { diff -r -x "$AGENT_DIR" -x .git "$D/$1" "$P" >"$D/diff-$1.txt" 2>&1; }

# run_logged NAME CMD...: runs CMD in $P with stdin empty, its output in $D/NAME.out and
# .err; fails the scenario with both and the model's log when it fails.
run_logged() {
  local name="$1"
  shift
  local rc=0
  (cd "$P" && timeout 120 "$@" <"$D/empty" >"$D/$name.out" 2>"$D/$name.err") || rc=$?
  if [[ $rc != 0 ]]; then
    {
      echo "--- $name stderr:"
      cat "$D/$name.err"
      echo "--- $name stdout:"
      cat "$D/$name.out"
      echo "--- model log:"
      cat "$D/model.log" || true
    } >&2
    fail "$name failed (rc=$rc; 124 = timeout): $*"
  fi
}

# start_model FAKE.mjs: the fake model on 127.0.0.1, logging to $D; prints nothing, sets
# MODEL_URL (http://127.0.0.1:PORT) and kills it when the shell exits.
start_model() {
  : >"$D/requests.jsonl"
  node "$1" 0 "$D/model.log" "$D/requests.jsonl" >"$D/model.port" 2>"$D/model.err" &
  MODEL_PID=$!
  trap 'kill "$MODEL_PID" 2>/dev/null || true' EXIT
  local deadline=$((SECONDS + 10))
  until [[ -s "$D/model.port" ]]; do
    ((SECONDS < deadline)) || fail "the fake model did not start: $(cat "$D/model.err")"
    sleep 0.05
  done
  MODEL_URL="http://127.0.0.1:$(head -1 "$D/model.port")"
}

# check_request WORD [--holds S...] [--lacks S...]: the first request the fake model received
# for the turn whose prompt contains WORD holds each --holds string and none of the --lacks.
check_request() {
  local word="$1" mode="" s
  shift
  jq -c --arg w "$word" 'select(.prompt | contains($w)) | .body' "$D/requests.jsonl" | head -1 >"$D/request-$word.json"
  [[ -s "$D/request-$word.json" ]] || fail "the fake model received no request for the prompt with $word"
  for s in "$@"; do
    case "$s" in
    --holds | --lacks) mode="$s" ;;
    *)
      if grep -qF -- "$s" "$D/request-$word.json"; then
        [[ "$mode" == --holds ]] || fail "the model's request for the $word prompt holds '$s' (see $D/request-$word.json)"
      else
        [[ "$mode" == --lacks ]] || fail "the model's request for the $word prompt lacks '$s' (see $D/request-$word.json)"
      fi
      ;;
    esac
  done
}

# The user entries' texts of $THREAD, as a compact JSON list.
user_prompts() { cairn --json thread log "$THREAD" | jq -c '[.entries[] | select(.kind == "user") | .text]'; }

# check_prompts_recorded PROMPT...: each is once a user entry of $THREAD with a checkpoint.
check_prompts_recorded() {
  local p
  cairn --json thread log "$THREAD" >"$D/thread-log.json" || fail "cairn thread log $THREAD"
  for p in "$@"; do
    holds --arg p "$p" '[.entries[] | select(.kind == "user" and .text == $p)
        | select((.checkpoint.snapshot_id // "") != "")] | length == 1' "$D/thread-log.json" >/dev/null ||
      fail "prompt '$p' is not once a user entry with a checkpoint in $THREAD: $(cat "$D/thread-log.json")"
  done
}

# The id of the user entry of $THREAD whose text is PROMPT (after check_prompts_recorded).
user_entry() {
  jq -r --arg p "$1" '[.entries[] | select(.kind == "user" and .text == $p)][0].id' "$D/thread-log.json"
}

# check_checkpoints LABEL...: one checkpoint of each label, and one end-of-turn per turn
# ($TURNS of them).
check_checkpoints() {
  local label
  cairn --json list >"$D/snapshots.json" || fail "cairn list"
  for label in "$@"; do
    holds --arg l "$label" '[.snapshots[] | select(.label == $l)] | length == 1' "$D/snapshots.json" >/dev/null ||
      fail "no checkpoint labelled $label: $(jq -c '[.snapshots[].label]' "$D/snapshots.json")"
  done
  holds --argjson n "$TURNS" '[.snapshots[] | select(.label == "end-of-turn")] | length == $n' "$D/snapshots.json" >/dev/null ||
    fail "the end of each turn was not checkpointed ($TURNS): $(jq -c '[.snapshots[].label]' "$D/snapshots.json")"
}

# new_project: $D (=$WORK/run) and its project $P (README.md, hello.txt, keep.txt in a git
# repository with nothing committed), CAIRN_HOME under $D, $D/empty for stdin.
new_project() {
  D="$WORK/run"
  P="$D/project"
  mkdir -p "$P" "$D/cairn-home"
  : >"$D/empty"
  export CAIRN_HOME="$D/cairn-home"
  echo "# test project" >"$P/README.md"
  echo hello >"$P/hello.txt"
  echo keep >"$P/keep.txt"
  git -C "$P" init -q
}
