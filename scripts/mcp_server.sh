#!/usr/bin/env bash
# The third-party MCP server of tests/mcp_everything.rs and examples/mcp_tools.rs:
# @modelcontextprotocol/server-everything from npm, installed into target/mcp.
#
#   scripts/mcp_server.sh install   installs it (idempotent) and prints the path of its
#                                   `mcp-server-everything` program, for JIDO_MCP_EVERYTHING
#
# Needs node and npm (Debian's `nodejs` and `npm` packages: installed with apt-get when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

PKG="@modelcontextprotocol/server-everything"
VERSION="2026.8.31"
DIR="$PWD/target/mcp"
BIN="$DIR/node_modules/.bin/mcp-server-everything"

case "${1:-}" in
  install)
    if ! command -v npm >/dev/null 2>&1; then
      apt-get update -qq >&2 && apt-get install -y -qq nodejs npm >&2
    fi
    if [ ! -x "$BIN" ] || ! grep -q "\"version\": \"$VERSION\"" "$DIR/node_modules/$PKG/package.json" 2>/dev/null; then
      mkdir -p "$DIR"
      npm install --silent --no-audit --no-fund --prefix "$DIR" "$PKG@$VERSION" >&2
    fi
    echo "$BIN"
    ;;
  *)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
