"""`redis-guard audit`: what in a live keyspace already breaks the policy (rule O2).

Sans-IO core: `facts` (the commands that learn a key's type, TTL, memory, length and string
sample, and reading their replies), `classify` (one key's facts against the policy: findings per
rule), `report` (the counts, namespaces, biggest keys and size distribution), `progress` (the
progress line and the rate limit). The I/O is thin: `pipe` (one pipelined connection) and
`scanner` (SCAN per master, batches, SIGINT). `render_text` and `render_html` write the
terminal and HTML reports (JSON is `Report.to_dict` as it is); `command` is the CLI entry point.
"""
