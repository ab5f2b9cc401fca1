"""Helpers shared by the policy tests."""

import pytest

from proxy.policy import PolicyError, load_policy_text


def load_error(text: str, source: str | None = None) -> PolicyError:
    """The PolicyError a policy text raises (the test fails if it loads)."""
    with pytest.raises(PolicyError) as caught:
        load_policy_text(text, source)
    return caught.value
