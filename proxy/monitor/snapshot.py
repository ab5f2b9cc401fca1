"""One process's counts as a plain dict, and the merge of several processes' dicts.

`build()` runs at scrape time on a thread that is not the event loop's: it copies the hot-path
tables of `live` and `keys` (each copy one C call under the GIL), folds command spellings into
the command table's names (lower case; anything else is "unknown"), reads the connection
counts off the running proxy, and adds the samples of the process's prometheus-client registry
(`proxy.metrics`: findings, reloads, ...). The result is JSON-safe, so a worker can send it
to the process that serves HTTP; `merge()` adds up the snapshots of every worker, and
`counters_only`/`fold` keep the counters of workers that did not answer or have exited.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

from .. import __version__
from ..metrics import REGISTRY
from ..session.verdicts import flush_refusals
from . import counts, health, keys, live

_attached = {"proxy": None, "draining": False}
POLICY: dict = {}


def attach(proxy) -> None:
    """The running proxy whose connections the snapshot counts."""
    _attached["proxy"] = proxy


def set_draining() -> None:
    _attached["draining"] = True


def policy_loaded(path: str | None, engine) -> None:
    """A policy was loaded (at start-up or by a reload): its name, mode and file hash."""
    if engine is None:
        POLICY.clear()
        return
    try:
        with open(path, "rb") as handle:
            sha = hashlib.sha256(handle.read()).hexdigest()[:12]
    except (OSError, TypeError):
        sha = ""
    POLICY.update(name=engine.policy.name, mode=engine.policy.mode, sha=sha, loaded_at=time.time())


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "backslashreplace")


def _names(table: dict) -> dict[str, int]:
    table = dict(table)
    live.fold(table)
    out: dict[str, int] = {}
    for name, count in table.items():
        label = name.decode("ascii").lower() if name else "unknown"
        out[label] = out.get(label, 0) + count
    return out


def _command_names() -> dict[str, int]:
    """Commands by name: those counted by name, and those passed on as they are (the Tallies)."""
    names = _names(live.NAMES)
    for name, counter in list(live.TALLIES.items()):
        if counter.n:
            label = name.decode("ascii", "replace") if name else "unknown"
            names[label] = names.get(label, 0) + counter.n
    return names


def _empty_histogram() -> list:
    return _copied(counts.empty_histogram())


def _copied(histogram) -> list:
    """A live histogram (an array of doubles, counts.py) as the snapshot's list: int counts, then
    the float sum. `list()` copies it in one C call, so the copy is consistent."""
    values = list(histogram)
    return [int(count) for count in values[:-1]] + [values[-1]]


def _round_trips() -> list:
    """Every timing sample, whatever its command: the round-trip histogram."""
    total = _empty_histogram()
    for histogram in list(live.DURATIONS.values()):
        total = [a + b for a, b in zip(total, _copied(histogram))]
    return total


def _durations() -> dict[str, list]:
    out: dict[str, list] = {}
    for name, histogram in list(live.DURATIONS.items()):
        name = name.lower()
        label = name.decode("ascii") if name in live._known else "unknown"
        merged = out.setdefault(label, [0] * len(histogram))
        for index, value in enumerate(_copied(histogram)):
            merged[index] += value
    return out


def _connections(proxy) -> dict[str, int]:
    """Open upstream connections by kind: shared, a client's own (lent or pinned), the
    control connection, warm spares."""
    counts = {"shared": 0, "own": 0, "control": 0, "spare": 0}
    for role, _conn in list(proxy.backend.connections()):
        counts[role] = counts.get(role, 0) + 1
    for session in list(proxy.sessions):
        own = session.own
        if own is not None and not own.closed:
            counts["own"] += 1
    return counts


def _registry() -> list:
    flush_refusals()  # the refusals counted in bulk this turn of the loop, counted now
    families = []
    for family in REGISTRY.collect():
        samples = [[sample.name, sample.labels, sample.value] for sample in family.samples
                   if not sample.name.endswith("_created")]
        families.append([family.name, family.type, family.documentation, samples])
    return families


def build() -> dict:
    proxy = _attached["proxy"]
    hot = {_text(key): list(entry) for key, entry in list(keys.HOT.items())}
    return {
        "pid": os.getpid(),
        "version": __version__,
        "started": proxy is not None,
        "draining": _attached["draining"],
        "names": _command_names(),
        "errors": _names(live.ERRORS),
        "rejected": _names(live.REJECTED),
        "durations": _durations(),
        "rtt": _round_trips(),
        "totals": dict(zip(live.TOTAL_NAMES, list(live.TOTALS))),
        "clients": len(proxy.sessions) if proxy is not None else 0,
        "upstream_connections": _connections(proxy) if proxy is not None else {},
        "upstreams": {label: {"up": state.up, "failed": state.failed_total}
                      for label, state in list(health.UPSTREAMS.items())},
        "policy": dict(POLICY),
        "registry": _registry(),
        "hot": hot,
        "counts": dict(keys.COUNTS),
        "big": [[kind, _text(name), _text(key), size] for (kind, name, key), size in keys.big_now().items()],
        "slow": [[at, seconds, _text(name), _text(key), args, count]
                 for at, seconds, name, key, args, count in keys.slow_log()],
        "slow_by_name": {_text(name): count for name, count in list(keys.SLOW_BY_NAME.items())},
    }


# -- several workers ----------------------------------------------------------------------------


def _add(into: dict, other: dict) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _add_lists(into: dict, other: dict) -> None:
    for name, values in other.items():
        mine = into.get(name)
        if mine is None:
            into[name] = list(values)
        else:
            for index, value in enumerate(values):
                mine[index] += value


def _add_policy(policies: list, policy: dict) -> None:
    """One entry per (name, mode, sha): workers that loaded the same file at different times (a
    reload, a restarted worker) run the same policy; the latest load time stands for them."""
    for known in policies:
        if (known["name"], known["mode"], known["sha"]) == (policy["name"], policy["mode"], policy["sha"]):
            known["loaded_at"] = max(known["loaded_at"], policy["loaded_at"])
            return
    policies.append(dict(policy))


def counters_only(snap: dict) -> dict:
    """The counters of a worker that did not answer or has exited, as a snapshot that adds only
    them: its gauges (connections, upstream up, the policy it ran, gauges of the registry) and
    its recent lists (big keys, slow log) are left out; hot-key counts stay, as their samples do."""
    return {
        **snap, "started": True, "draining": False, "clients": 0, "upstream_connections": {}, "policy": {},
        "upstreams": {label: {"up": None, "failed": state["failed"]} for label, state in snap["upstreams"].items()},
        "registry": [family for family in snap["registry"] if family[1] == "counter"],
        "big": [], "slow": [],
    }


def fold(base: dict | None, snap: dict) -> dict:
    """`counters_only` snapshots added into one (the dead workers'), as bounded as one of them:
    the hot-key table keeps its HOT_CAPACITY biggest counts."""
    if base is None:
        return json.loads(json.dumps(snap))  # a copy of its own
    for name in ("names", "errors", "rejected", "totals", "counts", "slow_by_name"):
        _add(base[name], snap[name])
    _add_lists(base["durations"], snap["durations"])
    base["rtt"] = [a + b for a, b in zip(base["rtt"], snap["rtt"])]
    for label, state in snap["upstreams"].items():
        base["upstreams"].setdefault(label, {"up": None, "failed": 0})["failed"] += state["failed"]
    families = {name: [name, kind, doc, {(sample, tuple(sorted(labels.items()))): value
                                         for sample, labels, value in samples}]
                for name, kind, doc, samples in base["registry"]}
    for name, kind, doc, samples in snap["registry"]:
        family = families.setdefault(name, [name, kind, doc, {}])[3]
        for sample, labels, value in samples:
            key = (sample, tuple(sorted(labels.items())))
            family[key] = family.get(key, 0) + value
    base["registry"] = [[name, kind, doc, [[sample, dict(labels), value]
                                           for (sample, labels), value in samples.items()]]
                        for name, kind, doc, samples in families.values()]
    for key, (count, error) in snap["hot"].items():
        mine = base["hot"].setdefault(key, [0, 0])
        mine[0] += count
        mine[1] += error
    if len(base["hot"]) > keys.HOT_CAPACITY:
        kept = sorted(base["hot"].items(), key=lambda item: item[1][0], reverse=True)[:keys.HOT_CAPACITY]
        base["hot"] = dict(kept)
    return base


def merge(snapshots: list[dict]) -> dict:
    """One snapshot for all workers: counts added, policies listed, keys re-ranked."""
    merged = {
        "workers": len(snapshots), "worker_exits": 0, "started": bool(snapshots), "draining": False,
        "names": {}, "errors": {}, "rejected": {}, "durations": {}, "rtt": _empty_histogram(),
        "totals": {}, "clients": 0, "upstream_connections": {}, "upstreams": {}, "policies": [],
        "registry": {}, "hot": {}, "counts": {}, "big": {}, "slow": [], "slow_by_name": {},
    }
    for snap in snapshots:
        merged["started"] = merged["started"] and snap["started"]
        merged["draining"] = merged["draining"] or snap["draining"]
        for name in ("names", "errors", "rejected", "totals", "upstream_connections", "counts", "slow_by_name"):
            _add(merged[name], snap[name])
        _add_lists(merged["durations"], snap["durations"])
        merged["rtt"] = [a + b for a, b in zip(merged["rtt"], snap["rtt"])]
        merged["clients"] += snap["clients"]
        for label, state in snap["upstreams"].items():
            mine = merged["upstreams"].setdefault(label, {"up": None, "failed": 0})
            if state["up"] is not None:  # None: a worker that did not answer (counters_only)
                mine["up"] = state["up"] if mine["up"] is None else mine["up"] and state["up"]
            mine["failed"] += state["failed"]
        if snap["policy"]:
            _add_policy(merged["policies"], snap["policy"])
        for name, kind, doc, samples in snap["registry"]:
            family = merged["registry"].setdefault(name, (kind, doc, {}))
            for sample_name, labels, value in samples:
                sample_key = (sample_name, tuple(sorted(labels.items())))
                if name.endswith("_expiry_seconds"):  # a time, the same in every worker: not a sum
                    family[2][sample_key] = min(family[2].get(sample_key, value), value)
                else:
                    family[2][sample_key] = family[2].get(sample_key, 0) + value
        for key, (count, error) in snap["hot"].items():
            mine = merged["hot"].setdefault(key, [0, 0])
            mine[0] += count
            mine[1] += error
        for kind, name, key, size in snap["big"]:
            entry = (kind, name, key)
            merged["big"][entry] = max(merged["big"].get(entry, 0), size)
        # newest first: the runs of one slow read share its time, so a worker's later entry first
        merged["slow"] += reversed(snap["slow"])
    merged["slow"].sort(key=lambda entry: entry[0], reverse=True)
    del merged["slow"][keys.SLOW_CAPACITY:]
    return merged


# -- what /debug serves ---------------------------------------------------------------------------


def hot_keys(merged: dict, top: int = 20) -> dict:
    samples = merged["counts"].get("hot_samples", 0)
    ranked = sorted(merged["hot"].items(), key=lambda item: item[1][0], reverse=True)[:top]
    return {
        "sampling": f"the first key of the oldest run answered in one upstream read in every "
                    f"{live.KEY_SAMPLE_EVERY}",
        "samples": samples,
        "keys": [{"key": key, "sampled": count, "error_bound": error,
                  "share": round(count / samples, 4) if samples else 0.0} for key, (count, error) in ranked],
    }


def big_keys(merged: dict) -> dict:
    ranked = sorted(merged["big"].items(), key=lambda item: item[1], reverse=True)[:keys.BIG_CAPACITY]
    return {
        "threshold_bytes": keys.BIG_BYTES,
        "requests": merged["counts"].get("big_requests", 0),
        "replies": merged["counts"].get("big_replies", 0),
        "keys": [{"kind": kind, "command": name, "key": key, "bytes": size} for (kind, name, key), size in ranked],
    }


def slow_log(merged: dict) -> dict:
    return {
        "threshold_seconds": keys.SLOW_SECONDS,
        "entries": [{"time": round(at, 3), "seconds": round(seconds, 6), "command": name, "key": key,
                     "args": args, "pipelined": count} for at, seconds, name, key, args, count in merged["slow"]],
    }
