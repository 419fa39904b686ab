"""An instant OpenAI-compatible chat endpoint for bench/step_path.py, run as its own process so its CPU is in
no harness's figures. Episodes are scripted by the URL: under `/s/N/v1` an episode is N model calls. The first
N-1 answers are one tool call running `echo hi` (to the `Bash` tool when offered, Leaf's name, else to `bash`,
mini-swe-agent's); the N-th ends the episode the harness's own way (no tool call for leafcost, mini's submit
command for mini-swe-agent). The turn is 1 + the assistant messages of the request, so any number of episodes
run concurrently. Every answer carries usage.

Each episode's calls are keyed to it without the harness's help: a request with no assistant message starts an
episode and gets a new episode number, which every tool call id of its answers carries (`call_E_T`); a later
request is the episode of its first assistant message's tool call id (both harnesses send those back, as the
API requires). `GET /windows` returns, and forgets, every episode's first request's arrival and last answer's
sending time (CLOCK_MONOTONIC, the clock of every process on the machine) and its number of calls, and the
requests it could not key.

    python bench/step_server.py --port-file PATH   (writes its port there once listening; stops on SIGTERM)
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_PATH = re.compile(r"^/s/(\d+)/v1(/.*)$")


class _Counter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.chat_requests = 0
        self.next_episode = 0
        self.windows: dict[int, list[float]] = {}  # episode -> [first arrival, last answer sent, calls]
        self.unkeyed = 0

    def add(self) -> None:
        with self.lock:
            self.chat_requests += 1

    def new_episode(self) -> int:
        with self.lock:
            self.next_episode += 1
            return self.next_episode

    def record(self, episode: int | None, arrived: float, sent: float) -> None:
        with self.lock:
            if episode is None:
                self.unkeyed += 1
                return
            window = self.windows.setdefault(episode, [arrived, sent, 0])
            window[0], window[1], window[2] = min(window[0], arrived), max(window[1], sent), window[2] + 1

    def take_windows(self) -> dict:
        with self.lock:
            windows, unkeyed = self.windows, self.unkeyed
            self.windows, self.unkeyed = {}, 0
        return {"windows": [[first, last, calls] for first, last, calls in windows.values()], "unkeyed": unkeyed}


COUNTER = _Counter()


_CALL_ID = re.compile(r"^call_(\d+)_\d+$")


def episode_of(messages: list[dict]) -> int | None:
    """The episode number of a request (None: a first request, or one whose episode the ids do not say)."""
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                match = _CALL_ID.match(str(call.get("id") or ""))
                if match:
                    return int(match.group(1))
            return None
    return None


def answer(body: dict, steps: int, episode: int = 0) -> dict:
    """The chat completion for this request of an N-step episode (`episode`: the number its tool call ids carry)."""
    messages = body.get("messages") or []
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    tool = "Bash" if "Bash" in offered else "bash"
    if turn < steps:
        message, finish = _tool_message(tool, "echo hi", episode, turn), "tool_calls"
    elif tool == "Bash":
        message, finish = {"role": "assistant", "content": "Done."}, "stop"
    else:
        message, finish = _tool_message(tool, MINI_SUBMIT, episode, turn), "tool_calls"
    prompt = 200 + 40 * len(messages)
    return {"id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 12, "total_tokens": prompt + 12}}


def _tool_message(tool: str, command: str, episode: int, turn: int) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{
        "id": f"call_{episode}_{turn}", "type": "function",
        "function": {"name": tool, "arguments": json.dumps({"command": command})}}]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as both harnesses' clients expect

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/stats":
            return self._send(200, {"chat_requests": COUNTER.chat_requests})
        if self.path == "/windows":
            return self._send(200, COUNTER.take_windows())
        match = _PATH.match(self.path)
        if match and match.group(2) == "/models":
            return self._send(200, {"object": "list", "data": [{"id": "bench-model", "object": "model"}]})
        self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        arrived = time.monotonic()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        match = _PATH.match(self.path)
        if not match or match.group(2) != "/chat/completions":
            return self._send(404, {"error": {"message": "not found"}})
        COUNTER.add()
        body = json.loads(raw)
        messages = body.get("messages") or []
        first = not any(m.get("role") == "assistant" for m in messages)
        episode = COUNTER.new_episode() if first else episode_of(messages)
        self._send(200, answer(body, int(match.group(1)), episode or 0))
        COUNTER.record(episode, arrived, time.monotonic())

    def _send(self, status: int, document: dict) -> None:
        payload = json.dumps(document).encode()
        head = (f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode()
        self.wfile.write(head + payload)  # one write: no small-packet delays

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    temporary = args.port_file.with_suffix(".tmp")
    temporary.write_text(str(server.server_address[1]))
    temporary.rename(args.port_file)  # atomic: the bench never reads half a port
    server.serve_forever()


if __name__ == "__main__":
    main()
