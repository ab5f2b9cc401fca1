"""What `serve` (and `audit`, `policy infer`) resolve about the upstream before accepting a
connection: the server itself (the configured one, else a Redis on 127.0.0.1:6379, else a local
redis-server started for the quick start; a Sentinel's master as the sentinels name it), TLS on
the upstream connections, and the command table (asked of the upstream, else the snapshot of
its release in the package)."""

from __future__ import annotations

import logging

import hiredis

from .. import tls
from ..backends.sentinel import find_master
from ..commands.table import CommandTable, snapshot_for
from ..config import Address, ConfigError, Upstream
from ..localredis import LocalRedis
from ..upstream.probe import answers, ask
from .loop import run

log = logging.getLogger("redis_guard")

DEFAULT_UPSTREAM = Upstream(Address("127.0.0.1", 6379))


async def load_command_table(upstream):
    """(table, databases, source) from the upstream's COMMAND INFO/DOCS, else the snapshot."""

    version = None
    try:
        info, docs, databases, server = await ask(
            upstream, [("COMMAND", "INFO"), ("COMMAND", "DOCS"), ("CONFIG", "GET", "databases"), ("INFO", "server")]
        )
        version = redis_version(server)
        if isinstance(info, hiredis.ReplyError) or isinstance(docs, hiredis.ReplyError):
            raise RuntimeError(f"COMMAND INFO/DOCS refused: {info if isinstance(info, Exception) else docs}")
        table = CommandTable.from_replies(info, docs, version)
        table.from_server = True
        source = "upstream"
    except Exception as exc:  # any failure: the snapshot is a complete table too
        # the snapshot of the upstream's release when INFO told it (8.x's commands on an 8.x)
        path = snapshot_for(version)
        log.warning("command table from snapshot %s (upstream could not be asked: %s)", path.name, exc)
        return CommandTable.from_snapshot(path), 16, "snapshot"
    count = 16
    if isinstance(databases, list) and len(databases) == 2:
        try:
            count = int(databases[1])
        except ValueError:
            pass
    return table, count, source


def redis_version(reply) -> str | None:
    """redis_version of an INFO server reply (None: not one)."""
    if isinstance(reply, bytes):
        for line in reply.decode("utf-8", "replace").splitlines():
            if line.startswith("redis_version:"):
                return line.partition(":")[2].strip()
    return None


def resolve_upstream(config):
    """(config, the LocalRedis started or None): the configured upstream, else a Redis on
    127.0.0.1:6379, else a local one we start."""
    if config.upstream is not None:
        return config, None
    if run(answers(DEFAULT_UPSTREAM)):
        log.info("no upstream configured: using the Redis answering on %s", DEFAULT_UPSTREAM.address)
        return config.replace(upstream=DEFAULT_UPSTREAM), None
    local = LocalRedis()
    log.warning(
        "no upstream configured and none answers on %s: started redis-server on 127.0.0.1:%d "
        "(pid %d, no persistence); it stops with the proxy",
        DEFAULT_UPSTREAM.address, local.port, local.pid,
    )
    return config.replace(upstream=Upstream(Address("127.0.0.1", local.port))), local


def configure_upstream_tls(config) -> None:
    """Every upstream connection of this process (and its workers) uses TLS when the upstream's
    URL says rediss:// (proxy/tls.py)."""

    sentinel = config.upstream_sentinel
    if sentinel is not None:  # the sentinels and the master each with TLS or not
        tls.configure_upstream(config.upstream_tls, sentinel.tls or sentinel.sentinel_tls,
                               plain=() if sentinel.sentinel_tls else sentinel.sentinels,
                               only=sentinel.sentinels if not sentinel.tls else None)
        return
    seeds = (config.upstream,) + tuple(config.upstream_cluster)
    tls.configure_upstream(config.upstream_tls, any(seed is not None and seed.tls for seed in seeds))


def upstream_text(config) -> str:
    """The upstream as the ready line names it."""
    if config.upstream_cluster:
        return "cluster " + ",".join(str(seed.address) for seed in config.upstream_cluster)
    if config.upstream_sentinel is not None:
        sentinel = config.upstream_sentinel
        return (f"sentinel master '{sentinel.master}' at {config.upstream.url()} (sentinels "
                f"{','.join(map(str, sentinel.sentinels))})")
    return config.upstream.url()


def find_sentinel_master(config):
    """The master the sentinels name and ROLE confirms, as the upstream (ConfigError if none)."""
    sentinel = config.upstream_sentinel
    try:
        address = run(find_master(sentinel, config.connect_timeout))
    except ConnectionError as exc:
        raise ConfigError(str(exc)) from None
    return config.replace(upstream=Upstream(address, sentinel.username, sentinel.password, sentinel.db, sentinel.tls))

