# The registry service image: the client library, the service, PostgreSQL/S3/GCS drivers.
# No TensorFlow (the service never imports it; the `tf` extra is for training machines).
#
# Stage 1 builds wheels (the C fast paths need a compiler); stage 2 installs only wheels into a
# slim image and runs as an unprivileged user.

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md constraints.txt ./
COPY client ./client
COPY service ./service
COPY migrations ./migrations
# constraints.txt: the known-good versions, so two builds install the same thing
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt ".[server,s3,gcs]"

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels "recordkeeper[server,s3,gcs]"
# An unprivileged user; /run/recordkeeper holds the bootstrap admin token (docker-compose.yml).
RUN groupadd --system --gid 10001 recordkeeper \
    && useradd --system --uid 10001 --gid recordkeeper --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin recordkeeper \
    && install -d -o recordkeeper -g recordkeeper -m 700 /run/recordkeeper
USER recordkeeper:recordkeeper
WORKDIR /tmp
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2)"]
# Migrations are a deploy step: run `recordkeeper db upgrade` (the compose file does) before serving.
CMD ["recordkeeper", "serve", "--host", "0.0.0.0", "--port", "8080", "--workers", "2"]
