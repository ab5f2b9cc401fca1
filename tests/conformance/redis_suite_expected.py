"""The differences Redis's own test suite is expected to show through the passthrough proxy, each
with its reason: what a pooling proxy is (docs/differences.md), not a bug. `redis_suite` sorts what
it finds into these and the rest; anything outside this table makes its exit status 1.

Keyed by (unit, test name) as the suite names them; `direct` and `proxy` are the outcomes expected
on each target (ok, err, error, hung, skip, ignore, missing). A test that raises or hangs is
skipped by name when its unit runs again, so a later test of the same name in that unit (the
suite runs some twice, as EVAL and as FUNCTION) shows as `missing`: expected too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Expected:
    direct: str
    proxy: str
    reason: str


EXPECTED: dict[tuple[str, str], Expected] = {
    ("unit/introspection", "CLIENT KILL SKIPME YES/NO will kill all clients"): Expected(
        "ok", "err",
        "counts INFO clients' connected_clients and expects CLIENT KILL SKIPME no to disconnect the caller "
        "too: through the proxy INFO clients shows the proxy's pooled connections, which CLIENT KILL never "
        "kills (a shared connection carries other clients)"),
    ("unit/introspection", "MONITOR supports redacting command arguments"): Expected(
        "ok", "hung",
        "waits for MONITOR to show AUTH and HELLO ... AUTH (redacted): the proxy answers those itself and "
        "credentials never reach Redis, so Redis's MONITOR never sees them and the test's read waits forever"),
    ("unit/other", "RESET clears authenticated state"): Expected(
        "ok", "error",
        "logs in as an ACL user it has just made (ACL SETUSER user1, AUTH user1 secret): the proxy answers "
        "AUTH itself and accepts only the upstream URL's credentials (or the policy's applications), "
        "so the login fails with WRONGPASS"),
    ("unit/scripting", "Script ACL check"): Expected(
        "ok", "error",
        "logs in as an ACL user it has just made (ACL SETUSER bob, AUTH bob 123): AUTH is answered by the "
        "proxy, which accepts only the upstream URL's credentials (WRONGPASS)"),
    ("unit/latency-monitor", "LATENCY of expire events are correctly collected"): Expected(
        "ok", "error",
        "an EVAL adding 1,000,000 members runs past the proxy's request_timeout (10 s) on a loaded machine "
        "(7.6 s direct at load average 13): the proxy closes the connection and answers 'upstream did not answer "
        "within request_timeout'; Redis has no such limit. Seen only under load"),
}


def classify(unit: str, found: dict) -> tuple[dict, dict]:
    """`found` ({(name, occurrence): (direct, proxy)}) split into (expected, unexpected)."""
    expected, unexpected = {}, {}
    for key, outcomes in found.items():
        entry = EXPECTED.get((unit, key[0]))
        skipped_namesake = key[1] > 1 and outcomes[1] == "missing" and entry is not None and \
            entry.proxy in ("error", "hung")
        if entry is not None and outcomes[0] == entry.direct and (outcomes[1] == entry.proxy or skipped_namesake):
            expected[key] = outcomes
        else:
            unexpected[key] = outcomes
    return expected, unexpected


def not_seen(units: list[str], found: dict[str, dict]) -> list[tuple[str, str]]:
    """Entries of the table for `units` whose difference did not show (fixed, renamed, or flaky)."""
    seen = {(unit, name) for unit, diffs in found.items() for (name, _) in diffs}
    return [key for key in EXPECTED if key[0] in units and key not in seen]
