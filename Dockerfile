# Minimal image for now: a CPU/CUDA-agnostic Python base running the daemon as a non-root user.
# The deployment work replaces it with a multi-stage CUDA 12.8+ image (Blackwell sm_120).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --system --create-home --home-dir /var/lib/trader trader
WORKDIR /opt/trader
COPY pyproject.toml README.md ./
COPY trader ./trader
COPY config ./config
RUN pip install --no-cache-dir .

USER trader
ENV TRADER_LEDGER__PATH=/var/lib/trader/trader.sqlite3
VOLUME ["/var/lib/trader"]
CMD ["trader", "run"]
