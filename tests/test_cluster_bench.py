"""benchmarks/cluster.py's arithmetic, without starting anything: CSV parsing, medians, the CPU ratio
cluster proxy / standalone proxy and its goal mark."""

from benchmarks.cluster import (
    BOTH,
    CLUSTER,
    DIRECT,
    GOAL_CPU_RATIO,
    STANDALONE,
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
