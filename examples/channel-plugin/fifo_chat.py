#!/usr/bin/env python3
"""A channel plugin for agent (protocol agent.channel.v1): the smallest real
one, to copy and adapt to a chat platform.

People "write" by putting lines into a FIFO (a named pipe):

    mkfifo /tmp/agent-chat
    echo 'alice: what is on my calendar today?' > /tmp/agent-chat
    echo '{"sender":"bob","chat":"ops","group":true,"mentioned":true,"text":"status?"}' > /tmp/agent-chat

and what the assistant sends back is appended, one JSON object a line, to
an outbox file (and logged on stderr, which the daemon puts in its log).

config.toml:

    [channels.fifo]
    command = "examples/channel-plugin/fifo_chat.py"
    args = ["--fifo", "/tmp/agent-chat", "--outbox", "sent.jsonl"]

The protocol (README, "Channel plugins"): newline-delimited JSON on stdin
(from the daemon) and stdout (to it). The daemon writes hello first, ack for
each message once it is stored, and send for each message to deliver; the
plugin answers each send with sent or error. To lose nothing, a real plugin
(1) keeps a message until it is acked and writes it again after a restart
(the daemon acks a repeated id without answering it twice), and (2)
remembers the send ids it delivered, answering sent again without
delivering twice when the daemon repeats one (it does when an answer was
lost). This one keeps both in its working directory (the daemon's
state_dir/channels/NAME).
"""

import argparse
import json
import os
import sys
import threading
import time

out_lock = threading.Lock()


def emit(obj):
    """Write one protocol line to the daemon."""
    line = json.dumps(obj, ensure_ascii=False) + "\n"
    with out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def log(*args):
    print(*args, file=sys.stderr, flush=True)


class Journal:
    """Messages written but not yet acked (resent after a restart), and the
    send ids already delivered; both in small files of the working dir."""

    def __init__(self):
        self.lock = threading.Lock()
        self.unacked = {}
        if os.path.exists("unacked.json"):
            with open("unacked.json") as f:
                self.unacked = json.load(f)
        self.delivered = set()
        if os.path.exists("delivered.txt"):
            with open("delivered.txt") as f:
                self.delivered = {line.strip() for line in f if line.strip()}

    def _save(self):
        with open("unacked.json.tmp", "w") as f:
            json.dump(self.unacked, f)
        os.replace("unacked.json.tmp", "unacked.json")

    def add(self, msg):
        with self.lock:
            self.unacked[msg["id"]] = msg
            self._save()

    def acked(self, msg_id):
        with self.lock:
            if self.unacked.pop(msg_id, None) is not None:
                self._save()

    def pending(self):
        with self.lock:
            return list(self.unacked.values())

    def was_delivered(self, send_id):
        with self.lock:
            return send_id in self.delivered

    def mark_delivered(self, send_id):
        with self.lock:
            self.delivered.add(send_id)
            with open("delivered.txt", "a") as f:
                f.write(send_id + "\n")


def parse(line, seq):
    """A FIFO line as a message: JSON with sender/chat/text/group/mentioned,
    or 'sender: text' for a direct message."""
    line = line.strip()
    if not line:
        return None
    if line.startswith("{"):
        m = json.loads(line)
    else:
        sender, sep, text = line.partition(":")
        if not sep:
            return None
        m = {"sender": sender.strip(), "text": text.strip()}
    sender = str(m.get("sender", "")).strip()
    if not sender:
        return None
    return {
        "type": "message",
        "id": m.get("id") or "%d-%d" % (time.time_ns(), seq),
        "chat": m.get("chat") or sender,
        "sender": sender,
        "display": m.get("display", ""),
        "text": m.get("text", ""),
        "group": bool(m.get("group", False)),
        "mentioned": bool(m.get("mentioned", False)),
        "thread": m.get("thread", ""),
    }


def read_fifo(path, journal):
    # O_RDWR keeps the FIFO open between writers (no end-of-file each time
    # a writer closes it).
    fd = os.open(path, os.O_RDWR)
    seq = 0
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as f:
        for line in f:
            seq += 1
            try:
                msg = parse(line, seq)
            except ValueError as e:
                log("fifo: line ignored:", e)
                continue
            if msg is None:
                continue
            journal.add(msg)  # kept until the daemon acks it
            emit(msg)


def deliver(send, outbox):
    """Where a real plugin calls its platform's API."""
    with open(outbox, "a", encoding="utf-8") as f:
        f.write(json.dumps({"chat": send["chat"], "text": send["text"],
                            "reply_to": send.get("reply_to", "")}, ensure_ascii=False) + "\n")
    log("-> %s: %s" % (send["chat"], send["text"][:200]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fifo", required=True, help="named pipe people write into")
    ap.add_argument("--outbox", default="sent.jsonl", help="file the sends are appended to")
    args = ap.parse_args()

    hello = json.loads(sys.stdin.readline() or "{}")
    if hello.get("type") != "hello" or hello.get("protocol") != "agent.channel.v1":
        log("not started by agent (no agent.channel.v1 hello):", hello)
        return 2
    log("channel %s: reading %s" % (hello.get("channel"), args.fifo))

    journal = Journal()
    for msg in journal.pending():  # not acked before the last stop
        emit(msg)
    threading.Thread(target=read_fifo, args=(args.fifo, journal), daemon=True).start()

    for line in sys.stdin:  # the daemon's lines; end-of-file: stop
        try:
            m = json.loads(line)
        except ValueError:
            continue
        kind = m.get("type")
        if kind == "ack":
            journal.acked(m.get("id", ""))
        elif kind == "send":
            sid = m.get("id", "")
            try:
                if not journal.was_delivered(sid):
                    deliver(m, args.outbox)
                    journal.mark_delivered(sid)
                emit({"type": "sent", "id": sid})
            except OSError as e:
                emit({"type": "error", "id": sid, "error": str(e)})
        # other types: newer protocol versions; ignored
    return 0


if __name__ == "__main__":
    sys.exit(main())
