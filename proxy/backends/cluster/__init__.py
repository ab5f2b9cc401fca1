"""Redis Cluster upstream: the router (topology, per-master pools, redirections, parking during
failover), the connection that intercepts redirections, the client session that routes every
command to its slot's owner, and the sans-IO merges for commands that span the whole keyspace."""
