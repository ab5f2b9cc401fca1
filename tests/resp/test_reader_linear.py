"""Reading a request is linear in its bytes however it is cut into reads: an unfinished request
is not parsed again from its start on every read (issue 49). On the fast path (hiredis, the
exact parser's check resumed) and off it (a count of 1,000,000 or more: the exact parser alone,
resumed)."""

import time

import hiredis
import pytest

from proxy.resp.reader import RequestReader


def request(n: int) -> bytes:
    return hiredis.pack_command((b"MGET", *(b"k%d" % i for i in range(n - 1))))


def cpu_seconds(data: bytes, cut: int, tries: int = 3) -> float:
    """The least of `tries` CPU times of reading `data` in reads of `cut` bytes (CPU is shared)."""
    pieces = [data[at:at + cut] for at in range(0, len(data), cut)]
    best = float("inf")
    for _ in range(tries):
        reader = RequestReader()
        started = time.process_time()
        batches = [batch for piece in pieces if (batch := reader.feed_read(piece)) is not None]
        best = min(best, time.process_time() - started)
        assert len(batches) == 1 and batches[0].error is None and batches[0].raw == data
        assert not reader.buffered
    return best


@pytest.mark.serial  # measures time
@pytest.mark.parametrize("cut", [65536, 1500])
def test_ten_times_the_arguments_cost_far_less_than_a_hundred_times_the_time(cut):
    small, large = cpu_seconds(request(10_000), cut), cpu_seconds(request(100_000), cut)
    assert large < 30 * max(small, 0.002), (small, large)  # quadratic: 100x


@pytest.mark.serial  # measures time
def test_a_million_arguments_off_the_fast_path_are_read_in_linear_time():
    # A count of 7 digits never reaches hiredis: the exact parser reads it, resuming at each read.
    small, large = cpu_seconds(request(100_000), 65536), cpu_seconds(request(1_000_000), 65536, tries=1)
    assert large < 30 * max(small, 0.002), (small, large)


def test_one_byte_reads_keep_few_chunks_and_read_the_request_whole():
    data = request(2_000)
    reader = RequestReader()
    got = [batch for at in range(len(data)) if (batch := reader.feed_read(data[at:at + 1])) is not None]
    assert len(got) == 1 and got[0].raw == data and len(got[0].commands[0]) == 2_000
    reader.feed_read(data[:-1])
    assert len(reader._chunks) < 40  # merged as they pile up, not one per read
