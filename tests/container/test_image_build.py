"""The built image holds none of the build's pip configuration (the secrets and read-only
mounts of deploy/docker/build-image.sh): not in any layer's file names or contents, not in its
history, environment or labels; and it runs as the unprivileged user it declares."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.container.conftest import CANARY, BuiltImage
from tests.container.engine import DOCKER_DIR

UID_GID = "10001:10001"
DEBIAN_BUNDLE = "etc/ssl/certs/ca-certificates.crt"  # the image's own, from ca-certificates
PUBLIC = ("https://pypi.org/", "https://files.pythonhosted.org/")
PEM = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def host_pip() -> dict[str, dict[str, str]]:
    spec = importlib.util.spec_from_file_location("pip_secrets", DOCKER_DIR / "pip_secrets.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.host_configuration()


HOST_PIP = host_pip()
HOST_BUNDLE = Path(
    next(
        (o["cert"] for o in HOST_PIP.values() if "cert" in o), "/etc/ssl/certs/ca-certificates.crt"
    )
)


def host_locations() -> list[str]:
    """The host's own index and find-links locations, as written and as folders."""
    found = set()
    for options in HOST_PIP.values():
        for key in ("index-url", "extra-index-url", "find-links"):
            for token in options.get(key, "").split():
                if not token.startswith(PUBLIC):
                    found |= {token, token.removeprefix("file://")}
    return sorted(found)


@dataclass
class Scan:
    """What reading every layer's files found."""

    names: list[str] = field(default_factory=list)
    hits: dict[str, list[str]] = field(default_factory=dict)  # "layer/path": needles in it
    certificates: dict[str, set[bytes]] = field(default_factory=dict)  # host certs in a file
    bundle_copies: list[str] = field(default_factory=list)  # files equal to the host's bundle
    own_bundle: bytes = b""


def scan_file(scan: Scan, path: str, data: bytes, needles: list[bytes], host: bytes) -> None:
    if found := [needle.decode() for needle in needles if needle in data]:
        scan.hits[path] = found
    if b"-----BEGIN CERTIFICATE-----" in data:
        scan.certificates[path] = set(PEM.findall(data)) & set(PEM.findall(host))
    if data == host:
        scan.bundle_copies.append(path)
    if path.endswith(DEBIAN_BUNDLE):
        scan.own_bundle = data  # the last layer's is the image's


def scan_archive(archive: Path) -> Scan:
    """Every file of every layer of a saved image (`docker|podman save`)."""
    needles = [CANARY.encode(), *(location.encode() for location in host_locations())]
    host, found = HOST_BUNDLE.read_bytes(), Scan()
    with tarfile.open(archive) as saved:
        [manifest] = json.load(saved.extractfile("manifest.json"))  # type: ignore[arg-type]
        for number, layer in enumerate(manifest["Layers"]):
            with tarfile.open(fileobj=saved.extractfile(layer), mode="r:*") as files:
                for member in files:
                    found.names.append(member.name)
                    if member.isfile():
                        data = files.extractfile(member).read()  # type: ignore[union-attr]
                        path = f"{number}/{member.name.removeprefix('./')}"
                        scan_file(found, path, data, needles, host)
    return found


@pytest.fixture(scope="module")
def scan(image: BuiltImage, tmp_path_factory: pytest.TempPathFactory) -> Scan:
    archive = tmp_path_factory.mktemp("saved") / "image.tar"
    image.engine.run(["save", "-o", str(archive), image.tag])
    try:
        return scan_archive(archive)
    finally:
        archive.unlink()


def add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.size = len(data)
    archive.addfile(member, io.BytesIO(data))


def test_the_scan_finds_what_a_careless_build_leaves(tmp_path: Path) -> None:
    """The scan itself, on a saved image made here: a layer with a pip.conf (the canary and
    the host's locations) and a copy of the host's CA bundle where Debian keeps none."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as files:
        config = f"[global]\ntrader-image-canary = {CANARY}\n"
        config += "".join(f"find-links = {location}\n" for location in host_locations())
        add(files, "etc/pip.conf", config.encode())
        add(files, "usr/local/share/ca-certificates/host.crt", HOST_BUNDLE.read_bytes())
    archive = tmp_path / "image.tar"
    with tarfile.open(archive, mode="w") as saved:
        add(saved, "manifest.json", json.dumps([{"Layers": ["layer.tar"]}]).encode())
        add(saved, "layer.tar", layer.getvalue())
    found = scan_archive(archive)
    assert "etc/pip.conf" in found.names
    assert set(found.hits["0/etc/pip.conf"]) == {CANARY, *host_locations()}
    assert found.bundle_copies == ["0/usr/local/share/ca-certificates/host.crt"]


def test_no_layer_holds_the_hosts_pip_configuration(scan: Scan) -> None:
    # The scan read the image itself: the daemon and torch.
    assert any(name.endswith("opt/trader/venv/bin/trader") for name in scan.names)
    assert any(name.endswith("site-packages/torch/__init__.py") for name in scan.names)
    named = [n for n in scan.names if Path(n).name in {"pip.conf", "pip.ini", "pip-cert"}]
    assert named == []
    assert scan.hits == {}


def test_no_layer_holds_the_hosts_ca_bundle(scan: Scan) -> None:
    assert scan.own_bundle, "the image has Debian's ca-certificates"
    # The host's bundle is allowed only as Debian's own (the same package on both).
    assert [p for p in scan.bundle_copies if not p.endswith(DEBIAN_BUNDLE)] == []
    # Certificates of the host's bundle that Debian's does not carry: a proxy's, a company's.
    host_only = set(PEM.findall(HOST_BUNDLE.read_bytes())) - set(PEM.findall(scan.own_bundle))
    assert {path for path, certs in scan.certificates.items() if certs & host_only} == set()


def test_history_environment_and_labels_hold_no_pip_configuration(image: BuiltImage) -> None:
    history = image.engine.run(["history", "--no-trunc", "--format", "{{.CreatedBy}}", image.tag])
    assert "useradd" in history.stdout  # the image's own steps are there to read
    [inspected] = json.loads(image.engine.run(["inspect", image.tag]).stdout)
    config = inspected["Config"]
    # podman keeps the HEALTHCHECK only in docker's format (at the top level of its inspect).
    healthcheck = inspected.get("Healthcheck") or config.get("Healthcheck") or {}
    assert "/opt/trader/healthcheck.py" in " ".join(healthcheck.get("Test", []))
    text = "\n".join(
        [
            history.stdout,
            *config["Env"],
            json.dumps([config.get("Labels"), inspected.get("Labels")]),
        ]
    )
    words = [
        CANARY,
        *host_locations(),
        "file://",
        "index-url",
        "find-links",
        "pip.conf",
        "PIP_CERT",
    ]
    assert [word for word in words if word.lower() in text.lower()] == []


def in_image(image: BuiltImage, script: str) -> str:
    args = ["run", "--rm", "--network=none", "--no-healthcheck", image.tag, "sh", "-c", script]
    return image.engine.run(args).stdout


def test_trader_runs_as_uid_and_gid_10001(image: BuiltImage) -> None:
    out = in_image(image, "id -u; id -g; getent group trader; trader --help")
    uid, gid, group, *help_ = out.splitlines()
    assert f"{uid}:{gid}" == UID_GID
    assert group.startswith("trader:x:10001:")
    assert "usage: trader" in "\n".join(help_)


def test_its_folders_belong_to_the_trader_user_and_group(image: BuiltImage) -> None:
    folders = "/var/lib/trader /var/cache/trader /var/cache/trader/huggingface "
    folders += "/var/cache/trader/inductor /run/trader"
    owners = in_image(image, f"stat -c '%u:%g %n' {folders}").splitlines()
    assert owners == [f"{UID_GID} {folder}" for folder in folders.split()]


def test_pip_check_is_clean_and_torch_is_the_cpu_build(image: BuiltImage) -> None:
    out = in_image(image, "pip check && python -c 'import torch; print(torch.version.cuda)'")
    assert out.splitlines() == ["No broken requirements found.", "None"]
