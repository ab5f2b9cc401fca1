"""`redis-guard policy infer`: a first policy drafted from the keys (and traffic) already there.

`segments` classifies one key segment (digits, UUID, hash, date, e-mail...), `model` aggregates
a keyspace into a bounded trie of segments with per-pattern facts, `draft` turns the model into
key patterns, naming rules, outliers, the commented YAML and `policy test` fixtures, `traffic`
records what clients send (`serve --learn`) and reads it back; `command` is the CLI and the only
module here doing I/O.
"""
