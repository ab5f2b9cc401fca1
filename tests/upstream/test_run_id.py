"""The run_id read off INFO server's reply (upstream_acl.run_id_of), and the Keeper's answer to a
connection refused just after the users were applied again (no second apply)."""

import asyncio

from proxy.upstream_acl import Keeper, run_id_of


def test_run_id_is_read_from_info_server():
    info = b"# Server\r\nredis_version:7.2.4\r\nrun_id:4f1c0de\r\ntcp_port:6380\r\n"
    assert run_id_of(info) == "4f1c0de"
    assert run_id_of(info.decode()) == "4f1c0de"
    assert run_id_of(b"# Server\r\nredis_version:7\r\n") is None
    assert run_id_of(None) is None and run_id_of([b"x"]) is None


def test_a_reapply_just_done_is_not_repeated():
    clock = {"t": 100.0}
    keeper = Keeper(config=None, users=None, clock=lambda: clock["t"])
    keeper.applied_at = 99.5  # applied again half a second ago

    async def ask_again():
        return await keeper.reapply("label")

    assert asyncio.run(ask_again()) is True and keeper.running is None  # the start-up runs again
    keeper.failed_at = 99.8
    assert asyncio.run(ask_again()) is False  # a failed attempt is not repeated either
