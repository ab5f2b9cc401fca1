"""The policy engine: YAML policy files, one module per rule, and the per-command decision."""

from .base import AUDIT, ENFORCE, OFF, Finding, PolicyError
from .engine import Engine, SessionState, Verdict
from .loader import PASSTHROUGH, Policy, load_policy, load_policy_text

__all__ = ["AUDIT", "ENFORCE", "OFF", "Engine", "Finding", "PASSTHROUGH", "Policy", "PolicyError",
           "SessionState", "Verdict", "load_policy", "load_policy_text"]
