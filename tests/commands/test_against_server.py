"""find_keys against a real server's own COMMAND GETKEYSANDFLAGS (skipped without one)."""

import json
import random
import socket

import hiredis
import pytest

from proxy.commands import CommandTable, find_keys, snapshot, snapshot_for

from .cases import GETKEYS_DIVERGES, INVALID_CASES, KEY_CASES, split

IGNORED_FLAGS = {"INCOMPLETE", "VARIABLE_FLAGS"}  # spec-level markers, not key flags


def _getkeys(port: int, commands: list[list[bytes]]) -> list:
    """COMMAND GETKEYSANDFLAGS for each command, pipelined."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"".join(hiredis.pack_command(("COMMAND", "GETKEYSANDFLAGS", *args)) for args in commands))
        return snapshot.read_replies(sock, len(commands))


def _ours(table: CommandTable, args: list[bytes]):
    return [(args[i], {f for f in ks.flags if f not in IGNORED_FLAGS}) for i, ks in table.key_positions(args)]


def _theirs(reply):
    if isinstance(reply, Exception):
        return []  # Redis: invalid arguments -> no keys for us either
    return [(key, {f.decode().upper() for f in flags}) for key, flags in reply]


def test_case_table_matches_getkeys(redis_port: int, server_table: CommandTable) -> None:
    lines = [line for line, expected in KEY_CASES if expected] + INVALID_CASES
    commands = [split(line) for line in lines]
    mismatches = [
        (line, ours, theirs)
        for line, args, reply in zip(lines, commands, _getkeys(redis_port, commands))
        if (ours := _ours(server_table, args)) != (theirs := _theirs(reply))
    ]
    assert mismatches == []
    assert len(lines) > 40


def test_known_differences_still_differ(redis_port: int, server_table: CommandTable) -> None:
    """If a Redis release changes these, GETKEYS_DIVERGES should be revisited."""
    commands = [split(line) for line, _, _ in GETKEYS_DIVERGES]
    for args, reply in zip(commands, _getkeys(redis_port, commands)):
        assert _ours(server_table, args) != _theirs(reply), args


def _known_difference(args: list[bytes]) -> bool:
    return args[0] == b"pfmerge" and len(args) == 2  # see GETKEYS_DIVERGES


def test_every_command_matches_getkeys_on_random_arguments(redis_port: int, server_table: CommandTable) -> None:
    words = [b"1", b"2", b"0", b"3", b"-1", b"", b"x", b"STORE", b"STOREDIST", b"STREAMS", b"KEYS",
             b"GET", b"SET", b"BY", b"LIMIT", b"COUNT", b"AUTH", b"COPY"]
    rng = random.Random(7)
    commands, specs = [], []
    for spec in server_table.walk():
        if not spec.has_keys:
            continue
        head = [part.encode() for part in spec.name.split("|")]
        for extra in range(9):
            n = len(head) + extra
            if (spec.arity > 0 and n != spec.arity) or n < -spec.arity:
                continue
            for _ in range(12):
                commands.append(head + [rng.choice(words) for _ in range(extra)])
                specs.append(spec)
    replies = _getkeys(redis_port, commands)
    mismatches = [
        (args, ours, theirs)
        for spec, args, reply in zip(specs, commands, replies)
        if (ours := [(args[i], set(ks.flags) - IGNORED_FLAGS) for i, ks in find_keys(spec, args)])
        != (theirs := _theirs(reply)) and not _known_difference(args)
    ]
    assert mismatches[:5] == []
    assert sum(1 for r in replies if isinstance(r, list) and r) > len(commands) // 2


def test_snapshot_matches_the_local_server(redis_port: int, server_table: CommandTable, tmp_path) -> None:
    out = tmp_path / "snap.json"
    assert snapshot.main(["--port", str(redis_port), "--out", str(out)]) == 0
    version = json.loads(out.read_text())["redis_version"]
    if version != server_table.redis_version:
        pytest.skip(f"local redis-server is {version}, the snapshot is {server_table.redis_version}")
    assert out.read_text() == snapshot_for(version).read_text()


REFUSED = [
    [b"NOSUCH"],
    [b"nosuch", b"a", b"b"],
    [b"nosuch", b"x" * 200, b"y"],  # an argument past 128 bytes: cut where Redis cuts it
    [b"nosuch", b"a" * 100, b"b" * 100, b"c"],
    [b"no\r\nsuch\xc0", b"\xff\n"],  # bytes as sent, line ends as spaces
    [b"CLIENT", b"NOSUCH"],
    [b"client", b"nosuch\xc0", b"x"],
    [b"CLIENT"],
    [b"GET"],
    [b"get", b"a", b"b"],
    [b"CLIENT", b"KILL"],
    [b"CONFIG", b"GET"],
]
ACCEPTED = [[b"GET", b"k"], [b"CLIENT", b"ID"], [b"SET", b"k", b"v", b"EX", b"1"], [b"PING"], [b"PING", b"x"]]


def test_refusal_is_what_redis_answers(redis_port: int) -> None:
    """CommandTable.refusal: Redis's own reply to a command it refuses before running or queueing
    it, byte for byte (inside MULTI, so that nothing runs); None for commands it queues."""
    with socket.create_connection(("127.0.0.1", redis_port), timeout=30) as sock:
        table = CommandTable.from_replies(*_ask(sock, [("COMMAND", "INFO"), ("COMMAND", "DOCS")]))
        requests = REFUSED + ACCEPTED
        sock.sendall(b"MULTI\r\n" + b"".join(hiredis.pack_command(tuple(args)) for args in requests) + b"DISCARD\r\n")
        raw = _read_lines(sock, len(requests) + 2)
    replies = raw[1:-1]
    assert [reply.startswith(b"-") for reply in replies] == [True] * len(REFUSED) + [False] * len(ACCEPTED)
    for args, reply in zip(requests, replies):
        assert table.refusal(args) == (None if reply == b"+QUEUED\r\n" else reply), args


def _ask(sock, commands):
    sock.sendall(b"".join(hiredis.pack_command(command) for command in commands))
    return snapshot.read_replies(sock, len(commands))


def _read_lines(sock, count: int) -> list[bytes]:
    """`count` replies that are each one line (status or error), as sent."""
    data = b""
    while data.count(b"\r\n") < count:
        chunk = sock.recv(65536)
        assert chunk, "closed"
        data += chunk
    return [line + b"\r\n" for line in data.split(b"\r\n")[:count]]
