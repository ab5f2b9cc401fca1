"""The policy engine: YAML policy files, one module per rule, and the per-command decision.

The package imports nothing itself: the compiled session core cimports `policy.memo`, and loading
it must not load the engine and its rules, which import the session's command table in turn."""
