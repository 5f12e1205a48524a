# karpy's controller image: `karpy controller --cloud-provider aws|azure|kwok` (the chart's args).
# Runs as a non-root user on a read-only root file system: nothing is written outside /tmp (the
# chart mounts an emptyDir there), byte code is compiled at build time.
#
#   docker build -t <registry>/karpy:0.1.0 .
#
# Not built on karpy's CI (no Docker there); see README "Install in a cluster".
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# kube: the Kubernetes client; aws / azure: the cloud SDKs (an extra a version lacks is skipped by pip)
RUN python -m venv /opt/karpy \
 && /opt/karpy/bin/pip install ".[kube,aws,azure]" \
 && /opt/karpy/bin/python -m compileall -q /opt/karpy

FROM ${PYTHON_IMAGE}
COPY --from=build /opt/karpy /opt/karpy
ENV PATH=/opt/karpy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["karpy"]
CMD ["controller", "--cloud-provider", "aws"]
