"""The compiled twins of `proxy.resp.replies`' functions, for tests that run both: skipped where
the compiled module is not built, a failure where the run expects it (REDIS_GUARD_EXPECT_COMPILED=1)."""

from __future__ import annotations

import os

import pytest

from proxy.resp import replies


def compiled_replies(name: str):
    """The compiled `name` of resp/_compiled_replies.pyx."""
    if replies._compiled is None:
        if os.environ.get("REDIS_GUARD_EXPECT_COMPILED") == "1" and not replies.compiled.PURE:
            pytest.fail(f"compiled {name} expected (REDIS_GUARD_EXPECT_COMPILED=1) but missing")
        pytest.skip(f"compiled {name} unavailable")
    return getattr(replies._compiled, name)
