"""A minimal Bloodbank agent for chatgate's bus executor: it takes `command.orders.*` from the
`bloodbank.events.v1` exchange and answers as Bloodbank's command adapter does — an `.ack`, then a
`.result` — in Bloodbank's event envelope, the fields in `payload`.

    pip install pika
    CHATGATE_ORDERS_EXECUTOR_URL=amqp://guest:guest@127.0.0.1:5672/%2f cargo run --release -- serve
    python3 examples/bloodbank_agent.py          # then: simulate whatsapp --text "order status 1234"
"""

import json
import socket
import sys
import uuid
from datetime import datetime, timezone

import pika

URL = sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/%2f"
EXCHANGE, AGENT = "bloodbank.events.v1", "orders"


def envelope(event_type: str, payload: dict, correlation_id: str, causation_id: str) -> bytes:
    return json.dumps({
        "event_id": str(uuid.uuid4()), "event_type": event_type, "version": "1.0.0",
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "source": {"host": socket.gethostname(), "type": "agent", "app": "example-agent"},
        "correlation_id": correlation_id, "causation_id": causation_id, "payload": payload,
    }).encode()


def on_command(channel, method, properties, body) -> None:
    if method.routing_key.count(".") != 2:  # `.ack`, `.result`, `.error`, `.cancel` are not commands
        channel.basic_ack(method.delivery_tag)
        return
    command = json.loads(body)
    fields = command["payload"]
    answer = {"command_id": fields["command_id"], "target_agent": AGENT, "action": fields["action"]}
    correlation, causation = command.get("correlation_id"), command["event_id"]
    publish = lambda suffix, extra: channel.basic_publish(  # noqa: E731
        EXCHANGE, f"{method.routing_key}.{suffix}",
        envelope(f"command.{suffix}", {**answer, **extra}, correlation, causation),
        pika.BasicProperties(content_type="application/json", delivery_mode=2))
    publish("ack", {})
    print(f"{method.routing_key}: {fields['command_payload']}")
    publish("result", {"outcome": "success", "result_payload": {"done": fields["command_payload"]}})
    channel.basic_ack(method.delivery_tag)


connection = pika.BlockingConnection(pika.URLParameters(URL))
channel = connection.channel()
channel.exchange_declare(EXCHANGE, "topic", durable=True)
channel.queue_declare(f"agent.{AGENT}.commands", durable=True)
channel.queue_bind(f"agent.{AGENT}.commands", EXCHANGE, f"command.{AGENT}.#")
channel.basic_consume(f"agent.{AGENT}.commands", on_command)
print(f"agent {AGENT} listening on {EXCHANGE}")
channel.start_consuming()
