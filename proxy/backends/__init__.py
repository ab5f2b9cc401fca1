"""The upstream side of the proxy: where a session's commands go (`base.py`: the interfaces),
for one server (`standalone.py`), a Sentinel-managed master (`sentinel.py`); a Redis Cluster's
backend is in `proxy/backends/cluster/backend.py`."""
