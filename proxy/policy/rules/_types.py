"""Redis's value types as the policy names them: `TYPES` (TYPE's answers), and `GROUP_TYPES`, the
type each COMMAND DOCS group's write commands create. K6 (type words), K10 (the schema's types),
T1 (string writes), the writers table and the policy's schemas read them.
"""

# COMMAND DOCS group -> the value type (TYPE's answer) that the group's write commands create.
# Bitmaps and HyperLogLogs are strings, geo sets are sorted sets.
GROUP_TYPES = {
    "string": "string", "bitmap": "string", "hyperloglog": "string",
    "list": "list", "hash": "hash", "set": "set",
    "sorted-set": "zset", "geo": "zset", "stream": "stream",
    "vectorset": "vectorset",  # Redis 8's vector sets (the command table names a module's commands by it)
}
TYPES = ("string", "list", "hash", "set", "zset", "stream", "vectorset")
