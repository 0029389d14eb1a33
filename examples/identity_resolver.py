"""An identity resolver for chatgate, standard library only: it answers who writes from an address
out of a CSV file, the way a shop's own customer system would.

chatgate asks it about a sender its directory does not know (`[tenants.ID.resolver]` in
`config/directory.toml`): a POST signed as Standard Webhooks are (`webhook-id`,
`webhook-timestamp`, `webhook-signature`) whose body is

    {"type": "identity.lookup", "tenant": "demo", "channel": "whatsapp",
     "address": "5511999990000", "profile_name": "Ana"}

and it answers 200 with the person or with "unknown":

    {"known": true, "id": "c-1042", "name": "Ana", "roles": ["customer"], "locale": "pt-BR"}
    {"known": false}

Anything else (a 4xx or 5xx, a timeout, a body that is not an answer) is asked again later: the
message waits, stored, and nobody is told anything meanwhile. So answer "unknown" only when the
person is not yours; when your own database is down, answer 503.

The CSV has a header line and the columns `tenant,address,id,name,roles,locale` (roles separated
by spaces); it is read again on every request, so an edit counts at once.

    python3 examples/identity_resolver.py --port 9002 --secret whsec_... --people people.csv
"""

import argparse
import base64
import csv
import hashlib
import hmac
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# How far a request's timestamp may be from now (Standard Webhooks' replay window).
TOLERANCE_SECONDS = 300


def signed(secret, headers, body, now):
    """Standard Webhooks: HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`, recent."""
    try:
        timestamp = int(headers.get("webhook-timestamp") or "")
    except ValueError:
        return False
    if abs(now - timestamp) > TOLERANCE_SECONDS:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    content = f"{headers.get('webhook-id')}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    offered = [s.split(",", 1)[1] for s in (headers.get("webhook-signature") or "").split() if "," in s]
    return any(hmac.compare_digest(expected, s) for s in offered)


def person(path, tenant, address):
    """The CSV's row for `address` in `tenant`, as an answer; `None` when there is none."""
    with open(path, newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            if row.get("tenant") == tenant and row.get("address") == address:
                answer = {"known": True, "id": row["id"], "name": row.get("name") or row["id"]}
                answer["roles"] = (row.get("roles") or "").split()
                if row.get("locale"):
                    answer["locale"] = row["locale"]
                return answer
    return None


def handler(secret, people):
    class Resolver(BaseHTTPRequestHandler):
        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if not signed(secret, self.headers, body, int(time.time())):
                return self.answer(401, {"error": "bad signature"})
            try:
                lookup = json.loads(body)
                tenant, address = lookup["tenant"], lookup["address"]
            except (ValueError, KeyError, TypeError):
                return self.answer(400, {"error": "not a lookup"})
            try:
                found = person(people, tenant, address)
            except OSError as error:  # our own store is down: chatgate asks again later
                return self.answer(503, {"error": str(error)})
            self.answer(200, found or {"known": False})

        def log_message(self, *args):
            pass

    return Resolver


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=9002, help="0 picks a free port")
    parser.add_argument("--secret", required=True, help="the resolver's whsec_ secret")
    parser.add_argument("--people", required=True, help="the CSV of people")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.secret, args.people))
    host, port = server.server_address[:2]
    # The first line says where it listens (a test starts it on port 0 and reads it).
    print(f"identity resolver listening on {host}:{port}", flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
