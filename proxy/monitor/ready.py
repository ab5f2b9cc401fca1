"""Readiness: the proxy takes clients with every worker configured, its policy is loaded, its
upstream answers, no drain.

`/ready` asks the upstream itself rather than trusting the last connection's fate: an idle
proxy has no connection that could have noticed Redis come back. The probe is a blocking
PING on a new connection, after the proxy's own AUTH/HELLO/SELECT (the credentials of the
upstream URL), from the HTTP server's thread, at most once a second (answers in between reuse
the last result), never from the event loop. A cluster is ready when any seed answers.

The clients' connections run as the policy's ACL users (`upstream_acl.py`) when they are
applied: the probe then logs in as each of them too, since a server restarted without them
answers PING yet refuses every client. Users that do not log in are applied again from here
(`reapply`), so an idle proxy that no client touched is ready again after the restart; /ready
says 503, naming them, while they are missing. In front of a Sentinel the probe asks the
sentinels where the master is now (`locate`): a failover moves it away from the start-up address.
After a reload that renamed the policy (its old users deleted, `upstream_acl.retire`), the probe
takes the current policy's users (`current_users`, by the policy names the workers report), so
that it never applies the old ones again.
"""

from __future__ import annotations

import threading
import time

import hiredis

from ..upstream.probe import ask_blocking

PROBE_TIMEOUT = 1.0
PROBE_EVERY = 1.0


def ping(upstream, timeout: float = PROBE_TIMEOUT) -> str | None:
    """None when the upstream answers PING (after the proxy's own start-up commands), else why not."""
    try:
        setup, replies = ask_blocking(upstream, [("PING",)], timeout, upstream.db)
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    for reply in [*setup, *replies]:
        if isinstance(reply, hiredis.ReplyError):
            return str(reply)
    return None


class Readiness:
    """`check(state)` -> (ready, reason); state is the merged snapshot's started/draining."""

    def __init__(self, upstreams, policy_required: bool, probe=ping, clock=time.monotonic, workers: int = 1,
                 users=None, missing=None, reapply=None, locate=None, current_users=None):
        self.upstreams = list(upstreams)
        self.users = users  # the policy's ACL users the clients' connections run as, or None
        self.missing = missing  # (users, upstream) -> names of those that do not log in
        self.reapply = reapply  # (users, upstream) -> None: apply them again (None: upstream_acl off)
        self.locate = locate  # () -> the upstreams to probe now (a Sentinel's master); raises ConnectionError
        self.current_users = current_users  # (policy names running) -> their users, or None when unknown
        self.follows = users is not None  # the clients' connections run as the policy's users
        self.tried = frozenset()  # the policy names `current_users` was last asked for
        self.policy_required = policy_required
        self.workers = workers  # configured: fewer answering (dead, being restarted, stopped) is not ready
        self.probe = probe
        self.clock = clock
        self.lock = threading.Lock()
        self.checked_at = float("-inf")
        self.problem = "not probed yet"

    def follow_reloads(self, names: set) -> None:
        """The workers run policies `names`: users of another (renamed) policy are not probed;
        those of the policy file as it is now are, when the workers run it (tried again when the
        names change)."""
        if not self.follows or self.current_users is None or not names:
            return
        if getattr(self.users, "policy_name", None) in names or frozenset(names) == self.tried:
            return
        self.tried = frozenset(names)
        self.users = self.current_users(names)

    def upstream_problem(self) -> str | None:
        with self.lock:
            if self.clock() - self.checked_at >= PROBE_EVERY:
                problems = []
                answered = None
                try:
                    upstreams = self.locate() if self.locate is not None else self.upstreams
                except ConnectionError as exc:
                    upstreams, problems = [], [str(exc)]
                for upstream in upstreams:
                    problem = self.probe(upstream)
                    if problem is None:
                        problems = []
                        answered = upstream
                        break
                    problems.append(f"{upstream.address}: {problem}")
                self.problem = "upstream unreachable (" + "; ".join(problems) + ")" if problems else None
                if answered is not None and self.users is not None and self.missing is not None:
                    self.problem = self.users_problem(answered)
                self.checked_at = self.clock()
            return self.problem

    def users_problem(self, upstream) -> str | None:
        gone = self.missing(self.users, upstream)
        if gone and self.reapply is not None:
            self.reapply(self.users, upstream)
            gone = self.missing(self.users, upstream)
        if not gone:
            return None
        return (f"the policy's ACL users do not log in on {upstream.address} ({', '.join(gone)}): "
                "clients would be refused")

    def check(self, merged: dict) -> tuple[bool, str]:
        if merged.get("draining"):
            return False, "draining: shutting down"
        if merged.get("workers", 1) < self.workers:
            return False, f"{merged.get('workers', 1)} of {self.workers} workers answering"
        if not merged.get("started"):
            return False, "starting"
        if self.policy_required and not merged.get("policies"):
            return False, "no policy loaded"
        self.follow_reloads({policy.get("name") for policy in merged.get("policies") or ()})
        problem = self.upstream_problem()
        if problem is not None:
            return False, problem
        return True, "ready"
