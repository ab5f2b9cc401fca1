"""C5: do not use Redis as a message queue: blocking pops, streams and pub/sub, denied.

`deny` mixes command names and Redis ACL categories like C2's (`@blocking`, `@pubsub`, `@stream`,
`BLPOP`, `XGROUP|CREATE`); the categories are Redis's own, from the command table.
"""

from __future__ import annotations

from ..base import CommandRule, register
from ._commands import CommandMatcher, command_words

DEFAULT_DENY = ("@blocking", "@pubsub", "@stream")
ADVICE = "use a message broker (Kafka, RocketMQ) for queues"


@register
class NoQueues(CommandRule):
    id = "C5"
    order = 103
    title = "Redis is not a message queue"

    def __init__(self, settings):
        super().__init__(settings)
        self.deny = CommandMatcher(settings, "deny", DEFAULT_DENY)

    def applies_to(self, spec) -> bool:
        return self.deny.level(spec) > 0

    def denies(self, spec) -> bool:
        return self.deny.level(spec) > 0

    def check(self, call):
        return self.finding(f"command {command_words(call.name)}",
                            f"{ADVICE}; this policy denies {self.deny.why(call.spec)}")

    def describe(self) -> str:
        return f"deny queue commands: {', '.join(self.deny.spelled())}"
