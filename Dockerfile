# syntax=docker/dockerfile:1
# One production image for both components: `queuetree operator ...` and `queuetree webhook ...`
# (the Deployments in manifests/ choose the subcommand). Build with `make image`, which runs
#   docker build --build-arg VERSION=<pyproject.toml's version> -t queuetree:<version> .
# kubesim, the API emulator of the tests and the sandbox, is not in it: only queuetree/ is
# copied, so the wheel has no kubesim package (`queuetree sandbox` says so and exits 2).
#
# The base is pinned by digest, so a rebuild gets the same Python and Debian packages; the tag
# is kept for readers. To move to a newer base, on a machine with Docker:
#   docker buildx imagetools inspect python:3.11-slim-bookworm   # the index digest
# and replace the digest below (or pass --build-arg PYTHON_IMAGE=... for one build).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b
# The release this image is; `make image` passes pyproject.toml's version.
ARG VERSION=0.1.0

# --- build: install queuetree and its exactly pinned dependencies into a virtualenv -----------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/queuetree
WORKDIR /src
# Dependencies change less often than the code: a separate layer keeps rebuilds fast.
COPY pyproject.toml README.md LICENSE ./
RUN mkdir -p queuetree \
    && touch queuetree/__init__.py \
    && /opt/queuetree/bin/pip install . \
    && /opt/queuetree/bin/pip uninstall --yes queuetree
COPY queuetree ./queuetree
# --no-deps: the dependencies are already installed, exactly as pinned in pyproject.toml.
# Byte-code is compiled here because the root filesystem is read-only at run time.
RUN /opt/queuetree/bin/pip install --no-deps . \
    && /opt/queuetree/bin/python -m compileall -q /opt/queuetree \
    && /opt/queuetree/bin/queuetree --version

# --- run: the slim base, the virtualenv, an unprivileged user ---------------------------------
FROM ${PYTHON_IMAGE}
ARG VERSION
LABEL org.opencontainers.image.title="queuetree" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.description="Hierarchical queue admission for Kubernetes (Volcano-compatible queues): operator and admission webhook" \
      org.opencontainers.image.licenses="Apache-2.0"
# 65532 is the conventional "nonroot" id; the manifests run as it too (runAsUser: 65532).
RUN groupadd --system --gid 65532 queuetree \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin queuetree
COPY --from=build /opt/queuetree /opt/queuetree
ENV PATH=/opt/queuetree/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# The webhook's TLS port and the metrics/health ports (documentation only: the Deployments
# declare their own ports).
EXPOSE 9443 8080 8081
ENTRYPOINT ["queuetree"]
CMD ["--help"]
