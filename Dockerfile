# syntax=docker/dockerfile:1
# cronwire image: a wheel built in one stage, installed into a slim runtime in the next.
# The wheel carries the migrations (cronwire/migrations), so `cronwire migrate` and the
# start-up auto-migration work from the installed package alone.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
# Build dependencies only; the wheel itself is pure Python.
RUN pip install --no-cache-dir setuptools==84.2.1 wheel==0.48.0
COPY pyproject.toml README.md ./
COPY migrations ./migrations
COPY src ./src
RUN pip wheel --no-cache-dir --no-build-isolation --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SCHEDULER_HTTP_HOST=0.0.0.0 \
    SCHEDULER_HTTP_PORT=8080 \
    SCHEDULER_LOG_FORMAT=json \
    SCHEDULER_HOME=/var/lib/cronwire
RUN groupadd --system --gid 10001 cronwire \
    && useradd --system --uid 10001 --gid cronwire --home-dir /var/lib/cronwire \
       --create-home --shell /usr/sbin/nologin cronwire
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 10001:10001
WORKDIR /var/lib/cronwire
EXPOSE 8080
# Liveness only: /readyz is for the orchestrator's traffic decisions (it turns 503 while
# Postgres is away, which must not get the container restarted).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SCHEDULER_HTTP_PORT', '8080'), timeout=2)"]
ENTRYPOINT ["cronwire"]
CMD ["serve"]
