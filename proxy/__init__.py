"""Redis Guard: a Redis proxy that enforces a team's Redis usage rules on live traffic."""

from . import compiled

compiled.use_pure_core()  # REDIS_GUARD_PURE_PYTHON: before any of the session core is imported

__version__ = "0.1.0"
