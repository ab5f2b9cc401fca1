import json
import socket
import threading

import hiredis
import pytest

from proxy.commands import CommandTable, snapshot

from .cases import as_bytes


def _serve(sock: socket.socket, replies: bytes, received: list[bytes]) -> None:
    data = b""
    while data.count(b"*2\r\n") < 2:
        data += sock.recv(4096)
    received.append(data)
    for i in range(0, len(replies), 7):  # in small pieces
        sock.sendall(replies[i:i + 7])


def test_fetch_replies_over_a_socket() -> None:
    client, server = socket.socketpair()
    info = b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*1\r\n+readonly\r\n:1\r\n:1\r\n:1\r\n*1\r\n+@read\r\n*0\r\n*0\r\n*0\r\n"
    docs = b"*2\r\n$3\r\nget\r\n*2\r\n$5\r\ngroup\r\n$6\r\nstring\r\n"
    received: list[bytes] = []
    t = threading.Thread(target=_serve, args=(server, info + docs, received))
    t.start()
    info_reply, docs_reply = snapshot.fetch_replies(client)
    t.join()
    client.close()
    server.close()
    assert received == [snapshot.COMMAND_INFO_REQUEST + snapshot.COMMAND_DOCS_REQUEST]
    assert snapshot.COMMAND_INFO_REQUEST == hiredis.pack_command(("COMMAND", "INFO"))
    assert info_reply[0][0] == b"get" and docs_reply == [b"get", [b"group", b"string"]]
    table = CommandTable.from_replies(info_reply, docs_reply)
    assert table["get"].group == "string" and table["get"].flags == {"readonly"}


def test_docs_error_means_no_docs() -> None:
    client, server = socket.socketpair()
    t = threading.Thread(target=_serve, args=(server, b"*0\r\n-ERR unknown subcommand 'DOCS'\r\n", []))
    t.start()
    assert snapshot.fetch_replies(client) == ([], None)
    t.join()
    client.close()
    server.close()


def test_render_is_stable_and_round_trips(table: CommandTable) -> None:
    data = json.loads(snapshot.DEFAULT_SNAPSHOT.read_text())
    info, docs = as_bytes(data["command_info"]), as_bytes(data["command_docs"])
    text = snapshot.render(list(reversed(info)), docs, data["redis_version"])
    assert text == snapshot.DEFAULT_SNAPSHOT.read_text()
    again = json.loads(text)
    assert list(CommandTable.from_replies(again["command_info"], again["command_docs"]).walk()) == list(table.walk())


def test_the_8_2_snapshot_is_rendered_as_written_and_read_with_its_module_commands() -> None:
    from proxy.commands.table import SNAPSHOTS

    path = SNAPSHOTS[(8, 2)]
    data = json.loads(path.read_text())
    assert data["redis_version"] == "8.2.3"
    info, docs = as_bytes(data["command_info"]), as_bytes(data["command_docs"])
    assert snapshot.render(list(reversed(info)), docs, data["redis_version"]) == path.read_text()
    table = CommandTable.from_snapshot(path)
    assert table.redis_version == "8.2.3" and table["vadd"].group == "vectorset" and table["hsetex"].group == "hash"


@pytest.mark.parametrize("version, release", [
    ("7.0.15", (7, 0)), ("7.2.4", (8, 2)), ("7.4.1", (8, 2)), ("8.0.2", (8, 2)), ("8.2.3", (8, 2)),
    ("8.4.0", (8, 2)), ("9.0.0", (8, 2)), ("6.2.14", (7, 0)), (None, (7, 0)), ("garbage", (7, 0)), ("8", (7, 0)),
])
def test_snapshot_for_picks_one_that_knows_every_command_of_the_server(version, release) -> None:
    from proxy.commands.table import SNAPSHOTS, snapshot_for

    assert snapshot_for(version) == SNAPSHOTS[release]
