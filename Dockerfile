# Redis Guard: a Redis proxy that enforces a team's Redis usage rules.
#
#   docker build -t redis-guard .
#   docker run --rm -p 6380:6380 redis-guard --upstream redis://my-redis:6379
#
# The image listens on 0.0.0.0:6380 and uses /etc/redis-guard/config.yaml (configs/passthrough.yaml
# without its `policy: none`: the built-in baseline policy; `--policy none` for no rules at all).
# The presets are in /etc/redis-guard/policies/:
#   docker run --rm -p 6380:6380 redis-guard --upstream redis://my-redis:6379 \
#       --policy /etc/redis-guard/policies/strict-dotted.yaml --metrics 0.0.0.0:9121
# To use your own policy, mount it and name it with --policy (it reloads when the file changes).
# Arguments after the image name are appended to `redis-guard serve ...` (a later --listen wins).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
RUN pip install . \
    && mkdir -p /etc/redis-guard \
    && cp -r configs/. /etc/redis-guard/ \
    && grep -v '^policy: none' configs/passthrough.yaml > /etc/redis-guard/config.yaml \
    && rm -rf /src \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin redis-guard

WORKDIR /
USER redis-guard
EXPOSE 6380

# The config file's listen address is 127.0.0.1, unreachable from outside a container: listen
# on all interfaces. Docker's SIGTERM goes straight to redis-guard (exec form), which stops
# gracefully.
ENTRYPOINT ["redis-guard", "serve", "--config", "/etc/redis-guard/config.yaml", "--listen", "0.0.0.0:6380"]
CMD []
