#!/usr/bin/env python3
"""A tiny MCP server over stdio for the fault tests of tests/mcp_faults.rs.

Tools: `echo` answers {"content": [{"type": "text", "text": "echo: MESSAGE"}]};
`die` exits the process without answering; `hang` never answers; `garbage`
writes a line that is not JSON, then a reply of the wrong shape.
With `--garbage-init` the answer to `initialize` is not JSON-RPC; with `--linger`
the server keeps running after its stdin closes (as some servers do).
Every line on stdout is protocol; nothing is logged.
"""
import json
import sys
import time

TOOLS = [
    {"name": n, "description": d, "inputSchema": {"type": "object", "properties": s}}
    for n, d, s in [
        ("echo", "Echoes a message.", {"message": {"type": "string"}}),
        ("die", "Exits without answering.", {}),
        ("hang", "Never answers.", {}),
        ("garbage", "Answers garbage.", {}),
    ]
]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    garbage_init = "--garbage-init" in sys.argv
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        mid = msg.get("id")
        method = msg.get("method")
        if mid is None:
            continue  # a notification
        if method == "initialize":
            if garbage_init:
                sys.stdout.write("hello, I am not MCP\n")
                send({"jsonrpc": "2.0", "id": mid, "result": {"nonsense": True}})
                continue
            version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "0.0.1"},
            }})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = msg["params"]["name"]
            args = msg["params"].get("arguments") or {}
            if name == "echo":
                text = "echo: " + str(args.get("message", ""))
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
            elif name == "die":
                sys.exit(3)
            elif name == "hang":
                pass
            elif name == "garbage":
                sys.stdout.write("{this is not json\n")
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": "not a list", "isError": "maybe"}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "unknown tool: " + name}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
    if "--linger" in sys.argv:
        time.sleep(3600)
