"""The host's pip configuration, made ready for the image build: one merged pip.conf and the
CA bundle it names, handed to the build as secrets, and the local folders its indexes and
find-links name, bind-mounted read-only. Nothing here goes into the image.

    python3 deploy/docker/pip_secrets.py OUT_DIR

writes OUT_DIR/pip.conf and OUT_DIR/pip-cert (empty where the host has none: the build then
uses PyPI) and prints one local folder a line. Notes on what it leaves out go to stderr.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

# Where the Dockerfile's RUN --mount=type=secret puts the bundle (the default secret path).
CERT_IN_BUILD = "/run/secrets/pip-cert"
# Options whose values are lists of indexes or find-links locations.
LOCATIONS = {"index-url", "extra-index-url", "find-links"}
# Host files the build cannot read; pip would fail on a path that is not there.
HOST_FILES = {"client-cert", "constraint", "requirement", "log", "log-file", "src", "target"}


def host_configuration() -> dict[str, dict[str, str]]:
    """pip's merged configuration, files and PIP_* variables, as pip itself reads it."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:  # no pip here: nothing to pass on
        return {}
    sections: dict[str, dict[str, str]] = {}
    variables: dict[str, str] = {}
    for line in listed.stdout.splitlines():
        name, _, literal = line.partition("=")
        section, _, key = name.rpartition(".")
        value = str(ast.literal_eval(literal))
        if key == "config-file":  # PIP_CONFIG_FILE: which file, already read above
            continue
        if section == ":env:":
            variables[key] = value
        else:
            sections.setdefault(section, {})[key] = value
    # PIP_* variables override every section (pip applies them last).
    for key, value in variables.items():
        sections.setdefault("global", {})[key] = value
        for options in sections.values():
            if key in options:
                options[key] = value
    return sections


def local_folder(location: str) -> Path | None:
    """The folder to mount for an index or find-links location on this host's disk."""
    path = Path(unquote(urlparse(location).path)) if location.startswith("file:") else None
    if path is None and location.startswith("/"):
        path = Path(location)
    if path is None:
        return None
    # A simple index links its files relative to its root (../../files/...).
    return path.parent if path.name == "simple" else path


def main(out: Path) -> None:
    sections = host_configuration()
    folders: list[Path] = []
    cert = b""
    lines: list[str] = []
    for section, options in sections.items():
        lines.append(f"[{section}]")
        for key, value in options.items():
            if key in HOST_FILES:
                print(f"pip_secrets: left out {section}.{key} (a host file)", file=sys.stderr)
                continue
            if key == "cert":
                cert = Path(value).read_bytes()
            elif key in LOCATIONS:
                folders += [f for f in map(local_folder, value.split()) if f is not None]
            written = CERT_IN_BUILD if key == "cert" else value.replace("\n", "\n    ")
            lines.append(f"{key} = {written}")  # a value over lines: continuation lines
    out.joinpath("pip.conf").write_text("\n".join(lines) + "\n" if sections else "")
    out.joinpath("pip-cert").write_bytes(cert)
    for folder in dict.fromkeys(folders):
        print(folder)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
