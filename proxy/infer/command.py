"""`redis-guard policy infer`: its flags, and one run from the scan to the written draft.

The keyspace is read by the audit's scanner (`audit.scanner.ServerScan`: pipelined SCAN, TYPE,
PTTL, MEMORY USAGE and the size command per key, every master of a cluster, a rate limit, the
progress line on stderr) into a `KeyspaceModel`; `--sample N` stops after N keys (SCAN walks the
hash table, so the first keys are an unbiased part). The server comes from `--upstream`,
`--upstream-cluster`, `--upstream-sentinel` (the master the sentinels name) or the `upstream:` of
`--config`. The draft goes to `-o FILE` (else stdout), its fixtures to `--fixtures FILE` (by
default next to `-o`: `NAME.test.yaml`), and the summary with the outliers to stdout (stderr when
the draft takes stdout). `--from-traffic FILE` adds what `serve --learn FILE` recorded.
Exit status: 0 written, 2 a usage or connection error, 130 interrupted (the draft of the keys
read so far is still written, and says so).
"""

from __future__ import annotations

import os
import sys

from .. import tls
from ..audit.command import _positive, _show, scan_all
from ..audit.progress import Progress
from ..audit.scanner import Scanning, ScanOptions
from ..config import ConfigError, load_config, parse_sentinel, parse_upstream
from ..serve.upstream import find_sentinel_master
from .draft import MIN_KEYS, build, fixtures, render, report
from .model import NODES_MAX, KeyspaceModel
from .traffic import TrafficError, load


def add_parser(policy_commands) -> None:
    infer = policy_commands.add_parser(
        "infer", help="draft a policy (key schema, naming rules, TTLs, sizes) from the keys of a live Redis")
    infer.add_argument("--config", help="YAML configuration file: its upstream")
    target = infer.add_mutually_exclusive_group()
    target.add_argument("--upstream", help="redis://[user:pass@]HOST:PORT[/DB] of the server to scan")
    target.add_argument("--upstream-cluster", metavar="HOST:PORT[,...]",
                        help="seed nodes of a Redis Cluster (every master is scanned)")
    target.add_argument("--upstream-sentinel", metavar="MASTER@HOST:PORT[,...]",
                        help="the master Redis Sentinel names, and the sentinels to ask")
    infer.add_argument("-o", "--output", metavar="FILE", help="write the draft policy to FILE (default stdout)")
    infer.add_argument("--fixtures", metavar="FILE",
                       help="write `policy test` fixtures to FILE (default with -o: NAME.test.yaml beside it)")
    infer.add_argument("--sample", type=_positive, metavar="N", help="read only the first N keys SCAN returns")
    infer.add_argument("--min-keys", type=_positive, default=MIN_KEYS, metavar="N",
                       help=f"a pattern with fewer keys is an outlier, not a rule (default {MIN_KEYS})")
    infer.add_argument("--max-patterns", type=_positive, default=NODES_MAX, metavar="N",
                       help=f"bound on the segment trie (memory): past it variable positions are merged "
                            f"(default {NODES_MAX})")
    infer.add_argument("--from-traffic", metavar="FILE", action="append",
                       help="what `serve --learn FILE` recorded: commands to deny, O(N) reads, scripts, TTLs "
                            "(repeat it for the files of several workers)")
    infer.add_argument("--name", default="inferred", help="the draft's policy name")
    infer.add_argument("--rate", type=float, metavar="KEYS_PER_SEC",
                       help="read at most this many keys a second from each server")
    infer.add_argument("--count", type=_positive, default=1000, help="SCAN COUNT (default 1000)")
    infer.add_argument("--match", help="only keys matching this SCAN MATCH glob")
    infer.add_argument("--quiet", action="store_true", help="no progress on stderr")
    infer.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"redis-guard policy infer: {message}", file=sys.stderr)
    return 2


class Inference(Scanning):
    """Scans servers into one KeyspaceModel: the glue between ServerScan and the model."""

    def __init__(self, model: KeyspaceModel, options: ScanOptions, sample: int | None = None, show=None,
                 tty: bool = False):
        super().__init__(options, show, tty)
        self.model = model
        self.sample = sample
        self.sampled = False
        self.read = 0  # keys given to the model

    def on_batch(self, query) -> None:
        add = self.model.add
        sample = self.sample
        for facts in query.facts:
            if sample is not None and self.read >= sample:
                self.sampled = True
                self.stop.set()
                return
            self.read += 1
            add(facts.key, facts.type, facts.ttl_ms, facts.length, facts.memory)

    def _stopped_itself(self) -> bool:
        return self.sampled

    def _total(self, scans) -> int:
        total = super()._total(scans)
        return min(total, self.sample) if self.sample else total

    def _line(self, progress: Progress, now: float) -> str:
        return "policy infer:" + progress.line(self.read, now)[len("audit:"):]

    def _done(self, seconds: float) -> None:
        self.seconds = seconds

    @property
    def complete(self) -> bool:
        return self.sampled or (bool(self.scans) and all(scan.complete for scan in self.scans))


def _target(args):
    """(upstream, cluster seeds or None, text) from the flags; raises ConfigError."""
    config = load_config(args.config)
    seeds = None
    if args.upstream_cluster:
        seeds = [parse_upstream(seed) for seed in args.upstream_cluster.split(",") if seed.strip()]
        if not seeds:
            raise ConfigError("--upstream-cluster needs at least one HOST:PORT")
        return config, seeds[0], seeds, ",".join(str(seed.address) for seed in seeds) + " (cluster)"
    if args.upstream_sentinel or (not args.upstream and config.upstream_sentinel is not None):
        if args.upstream_sentinel:
            config = config.replace(upstream_sentinel=parse_sentinel(args.upstream_sentinel, "--upstream-sentinel"))
        config = find_sentinel_master(config)
        return config, config.upstream, None, f"{config.upstream.url()} (master {config.upstream_sentinel.master})"
    upstream = parse_upstream(args.upstream) if args.upstream else config.upstream
    if upstream is None:
        raise ConfigError("no server to scan: give --upstream URL, --upstream-cluster HOST:PORT,..., "
                          "--upstream-sentinel MASTER@HOST:PORT or a --config with an upstream")
    return config, upstream, None, upstream.url()


def _fixtures_path(args) -> str | None:
    if args.fixtures:
        return args.fixtures
    if args.output:
        stem = args.output[:-5] if args.output.endswith(".yaml") else args.output
        return stem + ".test.yaml"
    return None


def run(args) -> int:
    try:
        config, upstream, seeds, target = _target(args)
        tls.configure_upstream(config.upstream_tls, upstream.tls)
    except (ConfigError, ValueError) as exc:
        return _fail(str(exc))
    if args.rate is not None and args.rate <= 0:
        return _fail("--rate must be positive")
    learned = None
    if args.from_traffic:
        try:
            learned = load(args.from_traffic)
        except TrafficError as exc:
            return _fail(str(exc))
    model = KeyspaceModel(nodes_max=args.max_patterns)
    options = ScanOptions(count=args.count, match=args.match.encode() if args.match else None, rate=args.rate)
    tty = sys.stderr.isatty()
    inference = Inference(model, options, args.sample,
                          show=None if args.quiet else (lambda line, final: _show(line, final, tty)), tty=tty)

    failure = scan_all(inference, upstream, seeds)
    if failure is not None and not inference.scans:
        return _fail(f"cannot scan {target}: {failure}")
    errors = [scan.error for scan in inference.scans if scan.error] + ([failure] if failure else [])
    draft = build(model, args.min_keys, target, learned)
    text = render(draft, args.name)
    if not inference.complete:
        text = ("# PARTIAL: the scan did not finish (" + ("; ".join(errors) or "interrupted")
                + "): the draft covers the keys read\n" + text)
    summary = report(draft)
    fixtures_path = _fixtures_path(args)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    if fixtures_path:
        policy = os.path.relpath(os.path.abspath(args.output), os.path.dirname(os.path.abspath(fixtures_path))) \
            if args.output else "draft.yaml"
        with open(fixtures_path, "w", encoding="utf-8") as handle:
            handle.write(fixtures(draft, policy))
    out = sys.stdout if args.output else sys.stderr
    out.write(summary)
    if args.output:
        out.write(f"draft written to {args.output}" + (f", fixtures to {fixtures_path}" if fixtures_path else "")
                  + (f" ({inference.seconds:.1f} s)" if hasattr(inference, "seconds") else "") + "\n")
    out.flush()
    if inference.interrupted:
        return 130
    return 2 if errors else 0
