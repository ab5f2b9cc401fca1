"""`redis-guard audit`: its flags, and one run from the command line to the written reports.

The policy comes from `--policy`, else the `policy:` of `--config`; the server from `--upstream`
(or `--upstream-cluster`), else the `upstream:` of `--config`. `--compare PREVIOUS.json` adds
what changed since the run that wrote that JSON report (`compare.py`). The terminal summary goes to
stdout (unless `--json -` takes stdout), progress to stderr. Exit status: 0 when every key
passes, 1 when some key has a finding, 2 on a usage, policy or connection error (or a server
failing mid-scan: the report is then partial), 130 when interrupted (the partial report is
still written).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys

from .. import tls
from ..commands.table import CommandTable
from ..config import ConfigError, load_config, parse_upstream
from ..policy.base import PolicyError
from ..policy.engine import Engine
from ..policy.loader import load_policy
from ..serve.loop import new_loop
from .classify import DEFAULT_ELEMENTS, DEFAULT_STRING_BYTES, Auditor, Thresholds
from .compare import CompareError, compare, load_previous
from .render_html import render as render_html
from .render_text import render
from .report import Report
from .scanner import Audit, ScanOptions, cluster_masters


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_parser(commands) -> None:
    audit = commands.add_parser(
        "audit", help="walk a live keyspace with SCAN and report the keys that break the policy")
    audit.add_argument("--config", help="YAML configuration file: its policy and upstream")
    audit.add_argument("--policy", help="policy file (overrides the configuration's)")
    target = audit.add_mutually_exclusive_group()
    target.add_argument("--upstream", help="redis://[user:pass@]HOST:PORT[/DB] of the server to scan")
    target.add_argument("--upstream-cluster", metavar="HOST:PORT[,...]",
                        help="seed nodes of a Redis Cluster (every master is scanned); "
                             "redis://user:pass@HOST:PORT for credentials")
    audit.add_argument("--rate", type=float, metavar="KEYS_PER_SEC",
                       help="read at most this many keys a second from each server")
    audit.add_argument("--count", type=_positive, default=1000, help="SCAN COUNT (default 1000)")
    audit.add_argument("--match", help="only keys matching this SCAN MATCH glob")
    audit.add_argument("--json", nargs="?", const="-", metavar="FILE",
                       help="write the report as JSON to FILE (or stdout: '-' or no FILE)")
    audit.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    audit.add_argument("--compare", metavar="PREVIOUS.json",
                       help="the JSON report of an earlier run (--json): show what got better or worse since")
    audit.add_argument("--top", type=_positive, default=10, help="offenders listed per rule and namespace")
    audit.add_argument("--max-string-bytes", type=_positive, metavar="N",
                       help=f"a string over N bytes is big (V1; default: the policy's, else {DEFAULT_STRING_BYTES})")
    audit.add_argument("--max-elements", type=_positive, metavar="N",
                       help=f"a collection over N elements is big (V2; default: the policy's, else {DEFAULT_ELEMENTS})")
    audit.add_argument("--memory-samples", type=int, default=5, metavar="N",
                       help="MEMORY USAGE ... SAMPLES N (default 5; 0 reads every element: slow)")
    audit.add_argument("--quiet", action="store_true", help="no progress on stderr")
    audit.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"redis-guard audit: {message}", file=sys.stderr)
    return 2


def scan_all(scanning, upstream, seeds) -> str | None:
    """`scanning.run` (an Audit, an Inference) over the upstream's server, or every master of the
    cluster its `seeds` name, on a loop of its own: what stopped it, or None."""
    async def main() -> None:
        addresses = await cluster_masters(seeds) if seeds is not None else [upstream.address]
        await scanning.run(upstream, addresses)

    with asyncio.Runner(loop_factory=new_loop) as runner:
        try:
            runner.run(main())
        except (TimeoutError, OSError, ConnectionError, PermissionError) as exc:
            return str(exc) or type(exc).__name__
    return None


def _show(line: str, final: bool, tty: bool) -> None:
    if tty:
        sys.stderr.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run(args) -> int:
    try:
        config = load_config(args.config)
        seeds = ([parse_upstream(seed) for seed in args.upstream_cluster.split(",") if seed.strip()]
                 if args.upstream_cluster else None)
        upstream = parse_upstream(args.upstream) if args.upstream else config.upstream
    except ConfigError as exc:
        return _fail(str(exc))
    if seeds is not None:
        if not seeds:
            return _fail("--upstream-cluster needs at least one HOST:PORT")
        upstream = seeds[0]
    if upstream is None:
        return _fail("no server to scan: give --upstream URL, --upstream-cluster HOST:PORT,... "
                     "or a --config with an upstream")

    try:  # rediss://: the configuration's upstream_tls, as the proxy uses it
        tls.configure_upstream(config.upstream_tls, upstream.tls)
    except ValueError as exc:
        return _fail(str(exc))
    if args.memory_samples < 0 or (args.rate is not None and args.rate <= 0):
        return _fail("--memory-samples must be 0 or more and --rate positive")
    previous = None
    if args.compare:
        try:
            previous = load_previous(args.compare)
        except CompareError as exc:
            return _fail(str(exc))
    policy_path = os.path.abspath(args.policy) if args.policy else config.policy
    policy = engine = None
    if policy_path:
        try:
            policy = load_policy(policy_path)
        except PolicyError as exc:
            return _fail(str(exc))
        engine = Engine(policy, CommandTable.from_snapshot())
    auditor = Auditor(policy, engine, Thresholds(args.max_string_bytes, args.max_elements))
    k1 = policy.rule("K1") if policy is not None else None
    delimiter = (k1.delimiter if k1 is not None and hasattr(k1, "delimiter") else ":").encode()
    target = (",".join(str(seed.address) for seed in seeds) + " (cluster)" if seeds is not None
              else upstream.url())
    report = Report(args.top, delimiter, meta={
        "target": target,
        "policy": policy.name if policy is not None else None,
        "policy_file": policy_path,
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "options": {"count": args.count, "match": args.match, "rate": args.rate,
                    "memory_samples": args.memory_samples},
        "checked": [vars(item) for item in auditor.checked],
        "not_checked": auditor.not_checked,
    })
    tty = sys.stderr.isatty()
    options = ScanOptions(count=args.count, match=args.match.encode() if args.match else None,
                          rate=args.rate, memory_samples=args.memory_samples)
    audit = Audit(auditor, report, options,
                  show=None if args.quiet else (lambda line, final: _show(line, final, tty)), tty=tty)

    failure = scan_all(audit, upstream, seeds)
    if failure is not None and not audit.scans:
        return _fail(f"cannot scan {target}: {failure}")
    data = report.to_dict()
    data.update(complete=audit.complete and failure is None, interrupted=audit.interrupted,
                servers=[scan.summary() for scan in audit.scans])
    if failure is not None:
        data["errors"].append(failure)
    if previous is not None:
        data["comparison"] = compare(previous, data)
    if args.json == "-":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(data, args.top))
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as handle:
            handle.write(render_html(data, args.top))
    sys.stdout.flush()
    if audit.interrupted:
        return 130
    if not data["complete"]:
        return 2
    return 1 if data["keys"]["with_findings"] else 0
