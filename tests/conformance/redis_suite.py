"""Redis's own test suite (tests/ of the Redis source) in external-server mode, run directly against a
fresh redis-server and through the passthrough proxy in front of another, compared test by test.

    python -m tests.conformance.redis_suite                       # every unit, prints the differences
    python -m tests.conformance.redis_suite --units unit/pause,unit/multi --json out.json
    python -m tests.conformance.redis_suite --source ~/src/redis  # a Redis checkout (or a git dir)

Not part of `./dev test` (it takes tens of minutes). The source is that of the local
redis-server's version: `--source DIR` (a source tree with `runtest` and `tests/`, or a git
repository with the version's tag, read with `git archive`), else a shallow `git clone` of
https://github.com/redis/redis at the tag, else the tag's tarball from GitHub; unpacked once
into the cache dir ($REDIS_GUARD_CACHE, default ~/.cache/redis-guard).

Each unit runs once per target (`tclsh tests/test_helper.tcl --host 127.0.0.1 --port P --single
UNIT`, what `./runtest --external` runs) against its own fresh redis-server, started as Redis's
own external CI starts it (`--enable-debug-command yes ...`); the proxied target puts a
`redis-guard serve --config configs/passthrough.yaml` in front of it. Both targets go at once,
one unit after another. A test that makes no progress for `--hang-timeout` seconds is a hang: the
suite's own no-progress timer ends the run, the test in progress (the last `### Starting test`
line the suite logs through DEBUG LOG) is recorded as `hung`, and the unit starts again on fresh
servers with the hung tests skipped (`--skiptest`), keeping the results already seen. A Tcl
exception does the same with `error`. Outcomes: ok, err, error, hung, skip, ignore, missing.
Units with differences run again on both targets (`--confirm`, default 1 time): a difference
that does not come back is reported as flaky.

The differences a pooling proxy is expected to show are in `redis_suite_expected.EXPECTED` (test
name -> reason); the report sorts what it finds into those and the rest, and the exit status is 1
when anything outside the table differs (0 when all that differs is expected, 2 when the source
cannot be had).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

from tests.conformance.redis_suite_expected import EXPECTED, classify, not_seen
from tests.servers import PASSTHROUGH, ProxyProcess, RedisServer

CACHE = os.environ.get("REDIS_GUARD_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "redis-guard")
REPOSITORY = "https://github.com/redis/redis"
# How Redis's own CI starts the server its external tests run against (.github/workflows/external.yml).
SERVER_FLAGS = ("--enable-protected-configs", "yes", "--enable-debug-command", "yes",
                "--enable-module-command", "yes")
TARGETS = ("direct", "proxy")
RESULT = re.compile(r"^\[(ok|err|skip|ignore)\]: (.*?)(?: \((\d+) ms\))?$")
STARTING = re.compile(r"### Starting test (.*) in (tests/\S+)$")
IN_PROGRESS = re.compile(r"=> \(IN PROGRESS\) (.*)$")
ATTEMPTS = 6  # runs of one unit on one target (each hang or exception costs one)


class SourceUnavailable(RuntimeError):
    """The Redis source of the wanted version could not be had."""


def server_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"v=(\d+\.\d+\.\d+)", out).group(1)


def ensure_source(version: str, source: str | None = None, cache: str = CACHE) -> str:
    """A directory holding `runtest` and `tests/` of Redis `version`; fetched once into `cache`."""
    if source and os.path.isfile(os.path.join(source, "runtest")) and not _is_git(source):
        return source
    target = os.path.join(cache, f"redis-{version}")
    if os.path.isfile(os.path.join(target, "tests", "test_helper.tcl")):
        return target
    os.makedirs(cache, exist_ok=True)
    errors = []
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        unpacked = os.path.join(tmp, "src")
        for attempt in (_from_git_dir, _from_clone, _from_tarball):
            try:
                attempt(version, unpacked, source)
                break
            except (OSError, subprocess.SubprocessError, tarfile.TarError, SourceUnavailable) as exc:
                errors.append(f"{attempt.__name__}: {exc}")
                shutil.rmtree(unpacked, ignore_errors=True)
        else:
            raise SourceUnavailable("; ".join(errors))
        os.makedirs(os.path.join(unpacked, "tests", "tmp"), exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(unpacked, target)
    return target


# The suite runs the tools of a build tree (tests/support/cli.tcl: `src/redis-cli`); the installed
# ones of the same version stand in for them (integration/redis-cli cannot run otherwise).
TOOLS = ("redis-cli", "redis-benchmark")


def link_tools(source: str, version: str) -> list[str]:
    """Link the installed TOOLS of `version` into `source`/src where it has none; the ones missing."""
    missing = []
    for tool in TOOLS:
        target = os.path.join(source, "src", tool)
        if os.path.exists(target):
            continue
        found = shutil.which(tool)
        out = subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout \
            if found else ""
        if not found or version not in out.split():
            missing.append(tool)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(found, target)
    return missing


def _is_git(path: str) -> bool:
    return subprocess.run(["git", "-C", path, "rev-parse", "--git-dir"], capture_output=True,
                          check=False).returncode == 0


def _from_git_dir(version: str, dest: str, source: str | None) -> None:
    if not source or not _is_git(source):
        raise SourceUnavailable("no git repository given")
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", source, "archive", "--format=tar", version, "runtest", "tests"],
                             capture_output=True, timeout=300, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True, timeout=300)


def _from_clone(version: str, dest: str, source: str | None) -> None:
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", version, REPOSITORY, dest],
                   capture_output=True, timeout=600, check=True)


def _from_tarball(version: str, dest: str, source: str | None) -> None:
    url = f"{REPOSITORY}/archive/refs/tags/{version}.tar.gz"
    tarball = dest + ".tar.gz"
    with urllib.request.urlopen(url, timeout=60) as response, open(tarball, "wb") as out:
        shutil.copyfileobj(response, out)
    with tarfile.open(tarball) as tar:
        tar.extractall(os.path.dirname(dest), filter="data")
    os.replace(os.path.join(os.path.dirname(dest), f"redis-{version}"), dest)


def units_of(source: str) -> list[str]:
    """The suite's own list of units (`set ::all_tests {...}` in test_helper.tcl)."""
    with open(os.path.join(source, "tests", "test_helper.tcl"), encoding="utf-8") as f:
        text = f.read()
    return re.search(r"set ::all_tests \{([^}]*)\}", text).group(1).split()


# -- one unit on one target -----------------------------------------------------------------


@dataclass
class UnitRun:
    unit: str
    target: str
    # (test name, occurrence) -> outcome; the occurrence tells apart tests of one name in one unit
    outcomes: dict[tuple[str, int], str] = field(default_factory=dict)
    attempts: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


class Target:
    """A fresh redis-server (and for `proxy`, the passthrough proxy in front of it) for one run."""

    def __init__(self, kind: str, workdir: str):
        self.kind = kind
        self.logfile = os.path.join(workdir, f"redis-{kind}-{time.monotonic_ns()}.log")
        self.server = RedisServer(None, *SERVER_FLAGS, "--logfile", self.logfile)
        try:
            self.proxy = ProxyProcess(self.server.url, PASSTHROUGH) if kind == "proxy" else None
        except BaseException:
            self.server.close()
            raise

    @property
    def port(self) -> int:
        return self.proxy.port if self.proxy else self.server.port

    def last_started_test(self) -> str | None:
        """The test the suite said it started last (it logs `### Starting test` via DEBUG LOG)."""
        try:
            with open(self.logfile, encoding="utf-8", errors="replace") as f:
                names = [m.group(1) for line in f if (m := STARTING.search(line.rstrip("\n")))]
        except OSError:
            return None
        return names[-1] if names else None

    def close(self) -> None:
        if self.proxy:
            self.proxy.stop()
        self.server.close()


def run_unit(source: str, unit: str, kind: str, workdir: str, hang_timeout: int, baseport: int,
             tags: str | None = None) -> UnitRun:
    """Run `unit` against a fresh target; on a hang or an exception, again with those tests skipped."""
    run = UnitRun(unit, kind)
    skipped: list[str] = []
    seen_names: set[str] = set()
    start = time.monotonic()
    while run.attempts < ATTEMPTS:
        run.attempts += 1
        try:
            target = Target(kind, workdir)
        except (OSError, RuntimeError, TimeoutError) as exc:
            # Its tests then show as missing: a difference, never a lost run.
            run.notes.append(f"attempt {run.attempts}: the target did not start: {str(exc).splitlines()[-1:]}")
            break
        try:
            lines, stopped = _tclsh(source, unit, target.port, hang_timeout, baseport, skipped, tags)
            culprit = target.last_started_test()
            proxy_log = target.proxy.log if target.proxy else ""
        finally:
            target.close()
        counts: Counter = Counter()
        last_result = None
        for name, outcome in _results(lines):
            counts[name] += 1
            key = (name, counts[name])
            if outcome == "skip" and name in skipped:
                continue  # the test that hung or raised last time: its outcome is recorded
            if key not in run.outcomes:
                run.outcomes[key] = outcome
            seen_names.add(name)
            last_result = name
        if stopped is None:
            break
        hung = _in_progress(lines) if stopped == "hung" else None
        name = hung or culprit
        if name is None or name == last_result or name in skipped:
            run.notes.append(f"attempt {run.attempts}: {stopped} outside a test (after {last_result!r})")
            break
        counts[name] += 1
        run.outcomes.setdefault((name, counts[name]), stopped)
        run.notes.append(f"attempt {run.attempts}: {stopped} in {name!r}")
        if stopped == "error":
            run.notes.append(_exception_text(lines))
        logged = [line for line in proxy_log.splitlines() if "ready: listening" not in line]
        if logged:
            run.notes.append("proxy log: " + " | ".join(logged[-5:]))
        skipped.append(name)
    run.seconds = time.monotonic() - start
    return run


def _tclsh(source: str, unit: str, port: int, hang_timeout: int, baseport: int, skipped: list[str],
           tags: str | None) -> tuple[list[str], str | None]:
    """The suite's output lines, and None, 'hung' (its no-progress timer fired) or 'error'."""
    args = ["tclsh", "tests/test_helper.tcl", "--host", "127.0.0.1", "--port", str(port), "--single", unit,
            "--timeout", str(hang_timeout), "--baseport", str(baseport), "--clients", "1"]
    for name in skipped:
        args += ["--skiptest", name]
    if tags:
        args += ["--tags", tags]
    env = {**os.environ, "TERM": "dumb"}
    proc = subprocess.Popen(args, cwd=source, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
    lines: list[str] = []
    # The suite's own timer ends a hung run; this bound is only for a suite that itself hangs.
    watchdog = threading.Timer(hang_timeout * 40 + 600, _end_group, (proc,))
    watchdog.start()
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
        proc.wait()
    finally:
        watchdog.cancel()
        _end_group(proc)
    text = "\n".join(lines)
    if "[TIMEOUT]" in text:
        return lines, "hung"
    if "[exception]" in text or (proc.returncode != 0 and "[ok]" not in text and "[err]" not in text):
        return lines, "error"
    return lines, None


def _end_group(proc: subprocess.Popen) -> None:
    """End the suite and the test client it started (its own process group, made for it)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the client it started, if still there
        except (ProcessLookupError, PermissionError):
            pass


def _results(lines: list[str]):
    for line in lines:
        match = RESULT.match(line)
        if not match:
            continue
        status, rest = match.group(1), match.group(2)
        if status == "err":
            rest = rest.rsplit(" in tests/", 1)[0]
        elif status == "ignore":
            rest = rest.rsplit(": ", 1)[0]
        yield rest, status


def _in_progress(lines: list[str]) -> str | None:
    for line in lines:
        match = IN_PROGRESS.search(line)
        if match:
            return match.group(1)
    return None


def _exception_text(lines: list[str]) -> str:
    for i, line in enumerate(lines):
        if line.startswith("[exception]"):
            return "\n".join(lines[i:i + 6])
    return "\n".join(lines[-6:])


# -- both targets, every unit ---------------------------------------------------------------


def run_targets(source: str, units: list[str], workdir: str, hang_timeout: int, tags: str | None,
                progress=print) -> dict[str, dict[str, UnitRun]]:
    """{target: {unit: UnitRun}}; the two targets run at once, each unit after unit."""
    results: dict[str, dict[str, UnitRun]] = {kind: {} for kind in TARGETS}

    def worker(kind: str, baseport: int) -> None:
        for unit in units:
            run = run_unit(source, unit, kind, workdir, hang_timeout, baseport, tags)
            results[kind][unit] = run
            progress(f"{kind:6} {unit}: {dict(Counter(run.outcomes.values()))} {run.seconds:.0f}s"
                     + (f" ({'; '.join(n.splitlines()[0] for n in run.notes)})" if run.notes else ""))

    threads = [threading.Thread(target=worker, args=(kind, 21111 + 1000 * i)) for i, kind in enumerate(TARGETS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def differences(direct: UnitRun, proxy: UnitRun) -> dict[tuple[str, int], tuple[str, str]]:
    keys = list(direct.outcomes) + [k for k in proxy.outcomes if k not in direct.outcomes]
    return {k: (direct.outcomes.get(k, "missing"), proxy.outcomes.get(k, "missing"))
            for k in keys if direct.outcomes.get(k, "missing") != proxy.outcomes.get(k, "missing")}


def compare(units: list[str] | None = None, *, source: str | None = None, workdir: str | None = None,
            hang_timeout: int = 60, confirm: int = 1, tags: str | None = None, progress=print) -> dict:
    version = server_version()
    source = ensure_source(version, source)
    for tool in link_tools(source, version):
        progress(f"no {tool} {version} installed: the units that run it fail on both targets")
    units = units or units_of(source)
    workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="rg-redis-suite-"))
    os.makedirs(workdir, exist_ok=True)
    started = time.monotonic()
    results = run_targets(source, units, workdir, hang_timeout, tags, progress)
    diffs = {unit: differences(results["direct"][unit], results["proxy"][unit]) for unit in units}
    flaky: dict[str, dict] = {}
    for round_ in range(confirm):
        again = [unit for unit, found in diffs.items() if found]
        if not again:
            break
        progress(f"confirming {len(again)} units with differences (round {round_ + 1})")
        rerun = run_targets(source, again, workdir, hang_timeout, tags, progress)
        for unit in again:
            seen = differences(rerun["direct"][unit], rerun["proxy"][unit])
            for key in list(diffs[unit]):
                if key not in seen:
                    flaky.setdefault(unit, {})[key] = diffs[unit].pop(key)
            results["direct"][unit].notes += rerun["direct"][unit].notes
            results["proxy"][unit].notes += rerun["proxy"][unit].notes
    return {"version": version, "units": units, "results": results, "differences": diffs, "flaky": flaky,
            "seconds": time.monotonic() - started, "workdir": workdir}


def unexpected(result: dict) -> dict[str, dict]:
    """{unit: {(name, occurrence): (direct, proxy)}} of the differences outside EXPECTED."""
    return {unit: classify(unit, found)[1] for unit, found in result["differences"].items()}


def report(result: dict) -> str:
    out = []
    direct, proxy = result["results"]["direct"], result["results"]["proxy"]
    total = Counter(o for run in direct.values() for o in run.outcomes.values())
    through = Counter(o for run in proxy.values() for o in run.outcomes.values())
    out.append(f"Redis {result['version']} test suite, {len(result['units'])} units, {result['seconds']:.0f}s")
    out.append(f"  direct: {sum(total.values())} tests {dict(total)}")
    out.append(f"  proxy:  {sum(through.values())} tests {dict(through)}")

    def line(unit, name, occurrence, was, now):
        suffix = f" #{occurrence}" if occurrence > 1 else ""
        return f"  {unit}: {name}{suffix}: {was} -> {now}"

    split = {unit: classify(unit, found) for unit, found in result["differences"].items()}
    known = [(unit, k, v) for unit, (exp, _) in split.items() for k, v in exp.items()]
    other = [(unit, k, v) for unit, (_, unexp) in split.items() for k, v in unexp.items()]
    out.append(f"{len(other)} unexpected differences (direct -> proxy):")
    out += [line(unit, name, occurrence, was, now) for unit, (name, occurrence), (was, now) in other]
    out.append(f"{len(known)} expected differences (redis_suite_expected.py):")
    for unit, (name, occurrence), (was, now) in known:
        out.append(line(unit, name, occurrence, was, now))
        out.append(f"      why: {EXPECTED[(unit, name)].reason}")
    missed = not_seen(result["units"], result["differences"])
    if missed:
        out.append("expected but not seen (fixed, renamed or flaky: check the table):")
        out += [f"  {unit}: {name}" for unit, name in missed]
    if result["flaky"]:
        out.append("not seen again when rerun (flaky):")
        for unit, found in result["flaky"].items():
            for (name, _), (was, now) in found.items():
                out.append(f"  {unit}: {name}: {was} -> {now}")
    notes = [(unit, run.target, note) for runs in (direct, proxy) for unit, run in runs.items() for note in run.notes]
    if notes:
        out.append("notes:")
        out += [f"  {target} {unit}: {note}" for unit, target, note in notes]
    out.append("RESULT: " + ("only the expected differences" if not other else
                             f"{len(other)} differences outside redis_suite_expected.py"))
    return "\n".join(out)


def to_json(result: dict) -> dict:
    def outcomes(run: UnitRun) -> list:
        return [[name, occurrence, outcome] for (name, occurrence), outcome in run.outcomes.items()]

    return {
        "version": result["version"], "seconds": result["seconds"],
        "units": {unit: {kind: {"outcomes": outcomes(result["results"][kind][unit]),
                                "notes": result["results"][kind][unit].notes,
                                "attempts": result["results"][kind][unit].attempts}
                         for kind in TARGETS} for unit in result["units"]},
        "differences": [[unit, name, occurrence, was, now] for unit, found in result["differences"].items()
                        for (name, occurrence), (was, now) in found.items()],
        "flaky": [[unit, name, occurrence, was, now] for unit, found in result["flaky"].items()
                  for (name, occurrence), (was, now) in found.items()],
        "unexpected": [[unit, name, occurrence, was, now] for unit, found in unexpected(result).items()
                       for (name, occurrence), (was, now) in found.items()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="a Redis source tree or git repository (default: fetched)")
    parser.add_argument("--units", help="comma-separated units (default: the suite's whole list)")
    parser.add_argument("--hang-timeout", type=int, default=60, help="seconds without progress that make a hang")
    parser.add_argument("--confirm", type=int, default=1, help="reruns of units with differences")
    parser.add_argument("--tags", help="the suite's --tags, e.g. '-slow'")
    parser.add_argument("--workdir", help="where server logs go (default: a new temporary dir)")
    parser.add_argument("--json", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    try:
        result = compare(args.units.split(",") if args.units else None, source=args.source, workdir=args.workdir,
                         hang_timeout=args.hang_timeout, confirm=args.confirm, tags=args.tags,
                         progress=lambda line: print(line, flush=True))
    except SourceUnavailable as exc:
        print(f"the Redis source is not available: {exc}", file=sys.stderr)
        return 2
    print(report(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(to_json(result), f, indent=1)
    return 1 if any(unexpected(result).values()) else 0


if __name__ == "__main__":
    sys.exit(main())
