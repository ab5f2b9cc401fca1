"""Redis Guard: a Redis proxy that enforces a team's Redis usage rules on live traffic."""

__version__ = "0.1.0"
