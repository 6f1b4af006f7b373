"""Docker HEALTHCHECK: exit 0 when the daemon answers GET /healthz with 200, else 1.

It reads the same settings as the daemon (TOML file, secrets directory, .env, environment), so
a port set anywhere is the port it checks; a listener on all addresses is checked on loopback.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from trader.config import ConfigError, load_from_environment

TIMEOUT_S = 5.0
ANY_ADDRESS = {"0.0.0.0", "::", ""}  # noqa: S104 - compared against, never bound


def healthz_url() -> str:
    metrics = load_from_environment().settings.metrics
    if not metrics.enabled:
        raise ConfigError(["metrics.enabled is false: /healthz is not served"])
    host = "127.0.0.1" if metrics.host in ANY_ADDRESS else metrics.host
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{metrics.port}/healthz"


def main() -> int:
    try:
        url = healthz_url()
    except ConfigError as error:
        sys.stdout.write(f"unhealthy: {error}\n")
        return 1
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # noqa: S310 - http only
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except (OSError, ValueError) as error:
        sys.stdout.write(f"unhealthy: {url}: {error}\n")
        return 1
    sys.stdout.write(f"{'healthy' if status == 200 else 'unhealthy'}: {url} answered {status}\n")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
