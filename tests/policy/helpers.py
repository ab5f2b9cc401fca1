"""Helpers shared by the policy tests."""

import pytest

from proxy.policy.base import PolicyError
from proxy.policy.loader import load_policy_text


def load_error(text: str, source: str | None = None) -> PolicyError:
    """The PolicyError a policy text raises (the test fails if it loads)."""
    with pytest.raises(PolicyError) as caught:
        load_policy_text(text, source)
    return caught.value


def no_baseline(text: str) -> str:
    """A policy text with `C2: off` added to its `rules:` (flow or block style), unless it names C2:
    for tests of other rules on commands the baseline guard denies (RESTORE, MOVE, KEYS...), which
    every policy gets when it does not name C2."""
    if "C2" in text:
        return text
    if "rules: {}" in text:
        return text.replace("rules: {}", "rules: {C2: off}", 1)
    if "rules: {" in text:
        return text.replace("rules: {", "rules: {C2: off, ", 1)
    if "rules:\n" in text:
        return text.replace("rules:\n", "rules:\n  C2: off\n", 1)
    return text + "\nrules: {C2: off}\n"
