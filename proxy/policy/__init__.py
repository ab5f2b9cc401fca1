"""The policy engine: YAML policy files, one module per rule, and the per-command decision."""

from .base import AUDIT, ENFORCE, OFF, Finding, PolicyError
from .decision import SessionState
from .engine import Engine, Verdict
from .loader import BUILTIN, PASSTHROUGH, Policy, load_builtin, load_policy, load_policy_text

__all__ = ["AUDIT", "BUILTIN", "ENFORCE", "OFF", "Engine", "Finding", "PASSTHROUGH", "Policy", "PolicyError",
           "SessionState", "Verdict", "load_builtin", "load_policy", "load_policy_text"]
