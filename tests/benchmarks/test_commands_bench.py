"""benchmarks/commands.py's arithmetic, without starting anything: per-test medians and the median of
the per-round ratios proxy / twemproxy."""

import pytest

from benchmarks.commands import TESTS, parse_args, print_summary, summarize


def test_the_ratio_is_the_median_of_the_rounds_ratios_not_of_the_medians():
    rounds = [{"get": {"proxy": 10.0, "twemproxy": 10.0}}, {"get": {"proxy": 30.0, "twemproxy": 10.0}},
              {"get": {"proxy": 12.0, "twemproxy": 20.0}}]
    row = summarize(rounds)["get"]
    assert row["proxy"] == 12.0 and row["twemproxy"] == 10.0
    assert row["ratio"] == pytest.approx(1.0)  # ratios 1.0, 3.0, 0.6 (the medians' ratio would be 1.2)


def test_a_round_where_twemproxy_spent_nothing_is_left_out():
    rounds = [{"ping_mbulk": {"proxy": 9.0, "twemproxy": 0.0}}, {"ping_mbulk": {"proxy": 9.0, "twemproxy": 6.0}}]
    assert summarize(rounds)["ping_mbulk"]["ratio"] == pytest.approx(1.5)
    assert summarize(rounds[:1])["ping_mbulk"]["ratio"] is None


def test_the_summary_prints_every_test_in_order(capsys):
    rounds = [{"set": {"proxy": 11.0, "twemproxy": 12.0}, "get": {"proxy": 0.8, "twemproxy": 0.0}}]
    print_summary(summarize(rounds), 16)
    out = capsys.readouterr().out
    assert "-P 16" in out and out.index("set ") < out.index("get ")
    assert "0.917" in out and out.splitlines()[-1].split()[-1] == "-"


def test_the_defaults_leave_out_what_twemproxy_refuses():
    args = parse_args([])
    assert args.tests == list(TESTS) and "ping_inline" not in args.tests
    assert args.rounds == 3 and args.requests == 100000 and args.config.exists()
    quick = parse_args(["--quick", "--tests", "PING_MBULK, get"])
    assert quick.rounds == 1 and quick.tests == ["ping_mbulk", "get"]
