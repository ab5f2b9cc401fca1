"""The proxy in front of a Redis Cluster: the standalone `Proxy` with a `ClusterRouter` in place
of the per-database pools, and `ClusterSession` for every client."""

from __future__ import annotations

import itertools

from ..routing.multikey import Planner
from ..server import Proxy
from .router import ClusterRouter
from .session import ClusterSession, RouteTable, cluster_actions


class ClusterProxy(Proxy):
    session_class = ClusterSession

    def __init__(self, loop, config, command_table, engine=None):
        super().__init__(loop, config, command_table, databases=1, engine=engine)
        self.upstream_label = "cluster " + ",".join(str(seed.address) for seed in config.upstream_cluster)
        self.router = ClusterRouter(
            loop, [seed.address for seed in config.upstream_cluster], config.upstream_cluster[0],
            config.shared_connections, config.connect_timeout, config.failover_timeout,
            read_from_replicas=config.read_from_replicas,
        )
        self.routes = RouteTable(command_table, Planner(command_table))
        actions = cluster_actions(command_table, self.shared_actions)
        login = dict(actions)
        for name in (b"auth", b"hello", b"reset"):
            login[name] = login[name.upper()] = self.login_actions[0][name]
        self.cluster_actions = (actions, login)  # without, with applications
        self._client_ids = itertools.count(1)

    def next_client_id(self) -> int:
        return next(self._client_ids)

    async def start(self, sock=None, reuse_port: bool = False):
        await self.router.start()
        return await super().start(sock=sock, reuse_port=reuse_port)

    def log_state(self) -> None:
        super().log_state()
        self.router_state()

    def router_state(self) -> None:
        from .router import log

        log.info("cluster: %s; %d parked requests; %d topology refreshes", self.router.slotmap.describe(),
                 len(self.router.parked), self.router.refreshes)
        for (node, protocol, readonly), pool in self.router.pools.items():
            for index, conn in enumerate(pool.connections):
                if conn is not None:
                    log.info("node %s%s resp=%d #%d: %s, %d runs in flight", node, " (replica reads)" if readonly else "",
                             protocol, index, conn.state, len(conn.pending))

    async def shutdown(self, timeout: float) -> None:
        await super().shutdown(timeout)
        self.router.close()
