#!/usr/bin/env python3
"""A CloudEvents peer built on the Python `cloudevents` SDK, for tests/cloudevents_http.rs.

    ce_peer.py receive
        Serves HTTP on 127.0.0.1 (a free port), prints "PORT <n>", then for each
        request parses it with cloudevents.http.from_http and prints one JSON line:
        {"ok": true, "attributes": {...}, "data": ...} (answer 200) or
        {"ok": false, "error": "..."} (answer 400). Bytes data is printed as
        {"base64": "..."}.

    ce_peer.py send URL
        Builds events with cloudevents.http.CloudEvent and POSTs each one to URL
        in structured mode (to_structured) and binary mode (to_binary). Prints
        "SENT <mode> <id> <status>" per request; exits 1 if any answer is not 2xx.
"""

import base64
import json
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

from cloudevents.conversion import to_binary, to_structured
from cloudevents.http import CloudEvent, from_http


def emit(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def plain(value):
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        try:
            event = from_http(dict(self.headers.items()), body)
            attributes = {k: str(v) for k, v in event.get_attributes().items()}
            emit({"ok": True, "attributes": attributes, "data": plain(event.get_data())})
            status = 200
        except Exception as exc:  # report every refusal to the test
            emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            status = 400
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    do_PUT = do_POST

    def log_message(self, *args):
        pass


def receive():
    server = HTTPServer(("127.0.0.1", 0), Handler)
    emit({"port": server.server_address[1]})
    server.serve_forever()


def events():
    """(event, data marshaller for binary mode) pairs."""
    yield CloudEvent(
        {
            "type": "com.example.json",
            "source": "/py",
            "id": "py-json",
            "subject": "order-42",
            "time": "2026-01-02T03:04:05Z",
            "dataschema": "https://example.com/schema",
            "datacontenttype": "application/json",
            "tenant": "acme inc",
        },
        {"total": 99, "items": ["a", "b"], "note": "caf\u00e9"},
    ), None
    yield CloudEvent(
        {
            "type": "com.example.text",
            "source": "/py",
            "id": "py-text",
            "datacontenttype": "text/plain",
        },
        "hello world",
        # The SDK's default binary marshaller JSON-encodes every value, so a
        # text/plain body would read '"hello world"'; text goes out as is.
    ), lambda data: data
    yield CloudEvent({"type": "com.example.empty", "source": "/py", "id": "py-empty"}, None), None


def send(url):
    failed = False
    for event, marshaller in events():
        for mode, convert in (("structured", to_structured), ("binary", to_binary)):
            if mode == "binary" and marshaller is not None:
                headers, body = convert(event, data_marshaller=marshaller)
            else:
                headers, body = convert(event)
            if isinstance(body, str):
                body = body.encode("utf-8")
            request = urllib.request.Request(url, data=body or b"", headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    status = response.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            emit({"sent": mode, "id": event["id"], "status": status})
            failed = failed or not 200 <= status < 300
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["receive"]:
        receive()
    elif sys.argv[1:2] == ["send"] and len(sys.argv) == 3:
        send(sys.argv[2])
    else:
        sys.exit(__doc__)
