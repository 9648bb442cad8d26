# syntax=docker/dockerfile:1
# berth: one image for every service and the CLI. The chart runs it as
#   python -m services.queue | services.scheduler | services.binder | services.adapter |
#   services.dashboard
# Build:  docker build -t <registry>/berth:0.1.0 .
# Pin the base by digest for reproducible builds:
#   docker build --build-arg PYTHON_IMAGE=python:3.11.7-slim-bookworm@sha256:<digest> .

ARG PYTHON_IMAGE=python:3.11.7-slim-bookworm

# ---------------------------------------------------------------- wheels of berth and its deps
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY cli ./cli
COPY scheduling ./scheduling
COPY services ./services
COPY shared ./shared
COPY deploy/docker/build-wheels.sh /usr/local/bin/
RUN build-wheels.sh /src /wheels

# ----------------------------------------------------------------------------- runtime image
FROM ${PYTHON_IMAGE}
ARG BERTH_VERSION=0.1.0
LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.version="${BERTH_VERSION}" \
      org.opencontainers.image.description="A distributed, Kubernetes-compatible pod scheduler"
COPY deploy/docker/install.sh /usr/local/bin/
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    install.sh /wheels /opt/berth "${BERTH_VERSION}"
RUN groupadd --gid 10001 berth \
    && useradd --no-log-init -l --uid 10001 --gid 10001 --home-dir /tmp --shell /usr/sbin/nologin berth
ENV PATH=/opt/berth/bin:$PATH \
    HOME=/tmp \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /tmp
EXPOSE 9090
CMD ["python", "-m", "services.queue"]
