"""benchmarks/cluster.py's arithmetic, without starting anything: CSV parsing, medians, the CPU ratio
cluster proxy / standalone proxy and its goal mark, and the twemproxy reference pair's ratio."""

from benchmarks.cluster import (
    BOTH,
    CLUSTER,
    DIRECT,
    GOAL_CPU_RATIO,
    STANDALONE,
    TW_SHARDED,
    TW_SINGLE,
    parse_csv,
    print_summary,
    summarize,
)


def one_round(direct: float, cluster: float, standalone: float, cpu_cluster: float, cpu_standalone: float) -> dict:
    return {
        DIRECT: {t: {"rps": direct} for t in ("SET", "GET")},
        CLUSTER: {t: {"rps": cluster, "cpu_us": cpu_cluster} for t in ("SET", "GET")},
        STANDALONE: {t: {"rps": standalone, "cpu_us": cpu_standalone} for t in ("SET", "GET")},
    }


def test_parse_csv_reads_set_and_get_rows():
    out = ('"test","rps","avg_latency_ms"\n"SET","81234.50","0.3"\n"GET","90000.00","0.2"\n')
    assert parse_csv(out) == {"SET": 81234.5, "GET": 90000.0}
    assert parse_csv("") == {}


def test_summary_medians_and_per_round_ratio():
    rounds = [one_round(100, 60, 80, 11.0, 10.0), one_round(120, 60, 90, 13.0, 10.0), one_round(80, 50, 70, 30.0, 20.0)]
    s = summarize(rounds)
    assert s["rps"]["SET"][DIRECT] == 100
    assert s["rps"]["SET"]["ratio"] == 60 / 100
    assert s["cpu_us"]["GET"] == {CLUSTER: 13.0, STANDALONE: 10.0}
    # per-round ratios 1.1, 1.3, 1.5: the median of those, not the ratio of the medians (1.3 too here)
    assert abs(s["cpu_ratio"]["SET"]["ratio"] - 1.3) < 1e-9
    assert s["cpu_ratio"]["SET"]["ok"] is False
    assert s["cpu_ratio"][BOTH]["ratio"] == s["cpu_ratio"]["SET"]["ratio"]


def test_goal_mark(capsys):
    s = summarize([one_round(100, 90, 95, GOAL_CPU_RATIO * 10, 10.0)])
    assert s["cpu_ratio"]["GET"]["ok"] is True
    print_summary(s, 50, 16)
    out = capsys.readouterr().out
    assert "[OK]" in out and "[MISS]" not in out
    assert "ratio 0.90 (goal 0.80)" in out


def test_twemproxy_reference_pair():
    """With the twemproxy targets in the rounds: their CPU medians and their own ratio, per round
    first, printed beside ours; without them, neither."""
    rounds = []
    for sharded, single in ((12.0, 10.0), (13.0, 10.0), (30.0, 20.0)):
        this = one_round(100, 60, 80, 11.0, 10.0)
        this[TW_SHARDED] = {t: {"rps": 90, "cpu_us": sharded} for t in ("SET", "GET")}
        this[TW_SINGLE] = {t: {"rps": 95, "cpu_us": single} for t in ("SET", "GET")}
        rounds.append(this)
    s = summarize(rounds)
    assert s["cpu_us"]["GET"][TW_SHARDED] == 13.0 and s["cpu_us"]["GET"][TW_SINGLE] == 10.0
    assert abs(s["reference_ratio"][BOTH] - 1.3) < 1e-9  # per round 1.2, 1.3, 1.5
    assert "reference_ratio" not in summarize([one_round(100, 60, 80, 11.0, 10.0)])


def test_twemproxy_reference_printed(capsys):
    this = one_round(100, 90, 95, 11.0, 10.0)
    this[TW_SHARDED] = {t: {"rps": 90, "cpu_us": 12.5} for t in ("SET", "GET")}
    this[TW_SINGLE] = {t: {"rps": 95, "cpu_us": 10.0} for t in ("SET", "GET")}
    print_summary(summarize([this]), 50, 1)
    out = capsys.readouterr().out
    assert "twemproxy CPU µs/req: 3 shards  12.50  1 server  10.00  ratio 1.25" in out
    print_summary(summarize([one_round(100, 90, 95, 11.0, 10.0)]), 50, 1)
    assert "twemproxy" not in capsys.readouterr().out


def test_user_and_system_parts(capsys):
    """Rounds that measured the user and system parts of the proxies' CPU: their medians, SET+GET
    as the mean of the two, printed on the CPU line; rounds without them print none."""
    rounds = []
    for user, system in ((3.0, 8.0), (4.0, 9.0), (3.5, 20.0)):
        this = one_round(100, 60, 80, user + system, 10.0)
        for target, (u, s) in ((CLUSTER, (user, system)), (STANDALONE, (2.0, 8.0))):
            for test in ("SET", "GET"):
                this[target][test].update(user_us=u, sys_us=s)
        this[CLUSTER]["GET"].update(user_us=user + 1, sys_us=system + 1)
        rounds.append(this)
    s = summarize(rounds)
    assert s["user_us"]["SET"] == {CLUSTER: 3.5, STANDALONE: 2.0}
    assert s["sys_us"]["GET"] == {CLUSTER: 10.0, STANDALONE: 8.0}
    assert s["user_us"][BOTH] == {CLUSTER: 4.0, STANDALONE: 2.0}  # per round 3.5, 4.5, 4.0
    print_summary(s, 50, 1)
    out = capsys.readouterr().out
    assert "GET     proxy CPU" in out and "user/system: cluster proxy 4.50/10.00  standalone proxy 2.00/8.00" in out
    print_summary(summarize([one_round(100, 90, 95, 11.0, 10.0)]), 50, 1)
    assert "user/system" not in capsys.readouterr().out
