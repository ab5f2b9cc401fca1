"""The upstream side of the proxy, every backend: where a session's commands go (`base.py`: the
`Backend` protocol and what every backend shares; `route.py`: the `Route` interface the session
calls), for one server (`standalone.py`), a Sentinel-managed master (`sentinel.py`), both with
the standalone column of handlers (`handlers.py`), and a Redis Cluster (`cluster/`, its column of
handlers included, on the sans-IO `cluster/routing/`)."""
