"""Operating the proxy: what it counts on live traffic, how that reaches Prometheus, health.

`live` counts on the hot path in plain Python (dicts and lists updated in place); `keys` keeps
the sampled hot keys, big keys and the slow log; `health` follows each upstream's state;
`snapshot` turns one process's counts into a plain dict and merges the dicts of several
workers; `exporter` turns a merged snapshot into Prometheus metric families at scrape time;
`workers` carries snapshots from forked workers to the process serving HTTP; `http` is that
server (/metrics, /healthz, /ready, /debug/...); `liveness` proves an event loop turns (/healthz);
`logs` formats log lines (text or JSON) and rate-limits the policy's finding lines.
"""
