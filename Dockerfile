# Redis Guard: a Redis proxy that enforces a team's Redis usage rules.
#
#   docker build -t redis-guard .
#   docker run --rm -p 6380:6380 -p 9121:9121 redis-guard --upstream redis://my-redis:6379
#
# The image listens on 0.0.0.0:6380, serves /metrics, /healthz and /ready on 0.0.0.0:9121, and
# uses /etc/redis-guard/config.yaml (configs/passthrough.yaml without its `policy: none`: the
# built-in baseline policy; `--policy none` for no rules at all). The presets are in
# /etc/redis-guard/policies/:
#   docker run --rm -p 6380:6380 redis-guard --upstream redis://my-redis:6379 \
#       --policy /etc/redis-guard/policies/strict-dotted.yaml
# To use your own policy, mount its directory and name the file with --policy (it reloads when
# the file changes, also through a Kubernetes ConfigMap's symlink swap: deploy/kubernetes/).
# Arguments after the image name are appended to `redis-guard serve ...` (a later flag wins).

# -- build: the package and its dependencies installed into a virtual environment -------------
# gcc builds the compiled hot path (setup.py; without it the image would run pure Python).
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY proxy ./proxy
RUN python -m venv /opt/redis-guard && /opt/redis-guard/bin/pip install . \
    && /opt/redis-guard/bin/python -c "from proxy import compiled; print('hot path:', compiled.status())"

# -- run: the environment and the configuration files only; no source, no build tools ---------
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/redis-guard/bin:$PATH

COPY --from=build /opt/redis-guard /opt/redis-guard
COPY configs/ /etc/redis-guard/
RUN grep -v '^policy: none' /etc/redis-guard/passthrough.yaml > /etc/redis-guard/config.yaml \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin redis-guard

USER 10001
WORKDIR /
EXPOSE 6380 9121

# /healthz answers while the process serves; python is in the image, curl is not.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9121/healthz', timeout=2).status != 200)"]

# The config file's addresses are 127.0.0.1, unreachable from outside a container: listen on all
# interfaces. Docker's SIGTERM goes straight to redis-guard (exec form), which stops gracefully.
ENTRYPOINT ["redis-guard", "serve", "--config", "/etc/redis-guard/config.yaml", "--listen", "0.0.0.0:6380", "--metrics", "0.0.0.0:9121"]
CMD []
