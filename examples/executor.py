"""A minimal HTTP executor for chatgate, standard library only: it verifies the Standard Webhooks
signature of each dispatch and does each command's work once per `Idempotency-Key`, even when two
calls with the same key arrive at the same time.

Why the same key can arrive twice at once: chatgate hands a command over at least once. If the
gateway is killed (or its lease on the dispatch ends) while a call is still running here, another
worker calls again with the same key — possibly while the first call is still working. So:

- the key is reserved *before* the work, atomically (here a lock and a dict; in a real service a
  unique row, `INSERT ... ON CONFLICT DO NOTHING`, in the same database as the work);
- a call whose key is still being worked on is answered `503` with `Retry-After: 1`: chatgate
  retries it with the same key (until the delivery timeout), and by then it gets the stored answer;
- a call whose key is done gets the first answer again, and nothing is done twice.

    python3 examples/executor.py --port 9001 --secret whsec_...     # then set the executor's url
"""

import argparse
import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RUNNING = object()


class Keys:
    """Each idempotency key: RUNNING while its work runs, then the answer it got."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers = {}
        self.effects = 0

    def reserve(self, key):
        """(True, None) for the caller that must do the work; (False, answer or RUNNING) otherwise."""
        with self.lock:
            if key in self.answers:
                return False, self.answers[key]
            self.answers[key] = RUNNING
            return True, None

    def finish(self, key, answer):
        with self.lock:
            self.answers[key] = answer
            self.effects += 1


def signed(secret, headers, body):
    """Standard Webhooks: HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`."""
    if not secret:
        return True
    key = base64.b64decode(secret.removeprefix("whsec_"))
    content = f"{headers.get('webhook-id')}.{headers.get('webhook-timestamp')}.".encode() + body
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    offered = [s.split(",", 1)[1] for s in (headers.get("webhook-signature") or "").split() if "," in s]
    return any(hmac.compare_digest(expected, s) for s in offered)


def handler(keys, secret, work_seconds):
    class Executor(BaseHTTPRequestHandler):
        def answer(self, status, body, retry_after=None):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if retry_after:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # what the work did, for a look (and for the test)
            self.answer(200, {"effects": keys.effects})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if not signed(secret, self.headers, body):
                return self.answer(401, {"error": {"code": "bad_signature"}})
            key = self.headers.get("Idempotency-Key")
            if not key:
                return self.answer(400, {"error": {"code": "no_idempotency_key"}})
            mine, earlier = keys.reserve(key)
            if not mine:
                if earlier is RUNNING:  # the first call with this key is still working
                    return self.answer(503, {"error": {"code": "in_progress"}}, retry_after="1")
                return self.answer(200, earlier)
            envelope = json.loads(body)
            time.sleep(work_seconds)  # the work itself
            result = {"status": "succeeded", "result": {"did": envelope.get("intent"), "args": envelope.get("args")}}
            keys.finish(key, result)
            self.answer(200, result)

        def log_message(self, *args):
            pass

    return Executor


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--secret", default="")
    parser.add_argument("--work-ms", type=int, default=0)
    options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", options.port), handler(Keys(), options.secret, options.work_ms / 1000))
    # The port it really has (`--port 0` lets the system choose one).
    print(f"executor listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
