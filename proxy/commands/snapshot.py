"""Ask a Redis server for its command table and write the snapshot JSON.

    python -m proxy.commands.snapshot --host 127.0.0.1 --port 6380 [--out path]

The snapshot holds the raw ``COMMAND INFO`` and ``COMMAND DOCS`` replies (RESP2,
bytes decoded as UTF-8, nothing else changed except a stable order: commands,
subcommands and docs sorted by name, one command per line) plus ``redis_version``
from ``INFO server``. ``CommandTable.from_replies`` reads them back exactly as it
reads a live server's replies.

The proxy does its own asynchronous I/O at start-up but sends the same requests:
``COMMAND_INFO_REQUEST`` and ``COMMAND_DOCS_REQUEST``.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from typing import Any

import hiredis

from .table import DEFAULT_SNAPSHOT, CommandTable

COMMAND_INFO_REQUEST = hiredis.pack_command(("COMMAND", "INFO"))
COMMAND_DOCS_REQUEST = hiredis.pack_command(("COMMAND", "DOCS"))
INFO_SERVER_REQUEST = hiredis.pack_command(("INFO", "server"))


class SnapshotError(Exception):
    pass


def read_replies(sock: socket.socket, count: int) -> list[Any]:
    """Read ``count`` replies from a blocking socket (error replies are returned as
    ``hiredis.ReplyError`` values, not raised)."""
    reader = hiredis.Reader()
    replies: list[Any] = []
    while len(replies) < count:
        reply = reader.gets()
        if reply is False:
            data = sock.recv(1 << 16)
            if not data:
                raise SnapshotError("connection closed by the server")
            reader.feed(data)
            continue
        replies.append(reply)
    return replies


def fetch_replies(sock: socket.socket) -> tuple[list[Any], list[Any] | None]:
    """``COMMAND INFO`` and ``COMMAND DOCS`` replies from a connected blocking socket.
    DOCS is None on servers that do not have it (before 7.0)."""
    sock.sendall(COMMAND_INFO_REQUEST + COMMAND_DOCS_REQUEST)
    info, docs = read_replies(sock, 2)
    if not isinstance(info, list):
        raise SnapshotError(f"COMMAND INFO failed: {info!r}")
    return info, docs if isinstance(docs, list) else None


def fetch_version(sock: socket.socket) -> str | None:
    sock.sendall(INFO_SERVER_REQUEST)
    (reply,) = read_replies(sock, 1)
    if isinstance(reply, bytes):
        for line in reply.decode("utf-8", "replace").splitlines():
            if line.startswith("redis_version:"):
                return line.partition(":")[2].strip()
    return None


def to_json(reply: Any) -> Any:
    """A hiredis RESP2 reply with bytes as str (errors become None)."""
    if isinstance(reply, bytes):
        return reply.decode("utf-8")
    if isinstance(reply, list):
        return [to_json(r) for r in reply]
    if isinstance(reply, Exception):
        return None
    return reply


def _sorted_info(entries: list[Any]) -> list[Any]:
    out = []
    for entry in sorted((e for e in entries if isinstance(e, list)), key=lambda e: e[0]):
        if len(entry) > 9 and entry[9]:
            entry = [*entry[:9], _sorted_info(entry[9]), *entry[10:]]
        out.append(entry)
    return out


def _sorted_docs(flat: list[Any]) -> list[Any]:
    pairs = sorted(zip(flat[::2], flat[1::2]), key=lambda p: p[0])
    out: list[Any] = []
    for name, doc in pairs:
        if isinstance(doc, list) and "subcommands" in doc[::2]:
            at = doc[::2].index("subcommands") * 2 + 1
            doc = [*doc[:at], _sorted_docs(doc[at]), *doc[at + 1:]]
        out += [name, doc]
    return out


def render(info: list[Any], docs: list[Any] | None, redis_version: str | None) -> str:
    """The snapshot text: stable order, one command per line."""
    info_j = _sorted_info(to_json(info))
    docs_j = _sorted_docs(to_json(docs)) if docs is not None else None

    def dump(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    lines = ["{", f'"redis_version":{dump(redis_version)},',
             '"source":"COMMAND INFO and COMMAND DOCS (RESP2), written by python -m proxy.commands.snapshot",',
             '"command_info":[']
    lines += [dump(e) + ("," if i < len(info_j) - 1 else "") for i, e in enumerate(info_j)]
    if docs_j is None:
        lines += ["],", '"command_docs":null']
    else:
        lines += ["],", '"command_docs":[']
        pairs = [dump(docs_j[i]) + "," + dump(docs_j[i + 1]) for i in range(0, len(docs_j), 2)]
        lines += [p + ("," if i < len(pairs) - 1 else "") for i, p in enumerate(pairs)]
        lines += ["]"]
    lines += ["}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proxy.commands.snapshot", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", help="AUTH user (with --password)")
    parser.add_argument("--password", help="AUTH password")
    parser.add_argument("--out", type=Path, default=DEFAULT_SNAPSHOT)
    parser.add_argument("--timeout", type=float, default=10.0)
    opts = parser.parse_args(argv)

    with socket.create_connection((opts.host, opts.port), timeout=opts.timeout) as sock:
        if opts.password is not None:
            auth = ("AUTH", opts.user, opts.password) if opts.user else ("AUTH", opts.password)
            sock.sendall(hiredis.pack_command(auth))
            (reply,) = read_replies(sock, 1)
            if isinstance(reply, Exception):
                raise SnapshotError(f"AUTH failed: {reply}")
        info, docs = fetch_replies(sock)
        version = fetch_version(sock)

    text = render(info, docs, version)
    table = CommandTable.from_replies(json.loads(text)["command_info"], json.loads(text)["command_docs"])
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(text, encoding="utf-8")
    subs = sum(len(c.subcommands) for c in table)
    print(f"{opts.out}: redis {version}, {len(table)} commands, {subs} subcommands, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
