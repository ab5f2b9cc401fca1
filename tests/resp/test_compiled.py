"""Which RESP modules run: the compiled ones where built (required where CI says so), the pure
ones with REDIS_GUARD_PURE_PYTHON=1 even when built."""

import os
import subprocess
import sys

from proxy.resp import compiled, replies
from proxy.resp.reader import RequestReader

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_compiled_modules_are_used_where_built():
    built = [name for name in compiled.MODULES if compiled.load(name) is not None]
    if os.environ.get("REDIS_GUARD_EXPECT_COMPILED"):
        assert compiled.status() == "compiled"
    assert (RequestReader._split is not None) == ("_compiled_requests" in built)
    assert (replies.ReplySplitter is not replies.PureReplySplitter) == ("_compiled_replies" in built)


def test_pure_python_on_request():
    code = ("from proxy.resp import compiled, replies; from proxy.resp.reader import RequestReader; "
            "print(compiled.status(), RequestReader._split is None, replies.ReplySplitter is replies.PureReplySplitter, "
            "RequestReader.feed_read is RequestReader._feed_read)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "REDIS_GUARD_PURE_PYTHON": "1"}).stdout
    assert out.strip() == "pure Python (REDIS_GUARD_PURE_PYTHON) True True True"
