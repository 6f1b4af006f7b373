"""The container tests' image: the CPU image of the current build inputs, built once per
set of inputs (whichever test asks first, under a lock that xdist's workers share)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import missing_binary
from tests.container.engine import DOCKER_DIR, ROOT, Engine, find_engine

TAG_PREFIX = "trader-test:cpu-"
# An option pip ignores, set while the fixture builds: it reaches the build only through the
# host's pip configuration (the pip.conf secret), so test_image_build can look for it.
CANARY_VARIABLE = "PIP_TRADER_IMAGE_CANARY"
CANARY = "trader-image-canary-c0ffee5ecre7"
# A cold build (local base, torch, the lock) takes minutes: whichever test builds gets this
# much on top of its own timeout.
BUILD_SECONDS = 1500
LOCAL_BASE = "trader-base:bookworm"
BUILD_LOCK = Path(tempfile.gettempdir()) / "trader-test-image.lock"
BACKGROUND_BUILD = "from tests.container.conftest import background_build; background_build()"


@dataclass(frozen=True)
class BuiltImage:
    engine: Engine
    tag: str


def build_inputs() -> list[Path]:
    """The Dockerfile, the build scripts and every file .dockerignore's allow-list sends."""
    files = [ROOT / "Dockerfile", ROOT / ".dockerignore", *sorted(DOCKER_DIR.glob("*"))]
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        if not line.startswith("!"):
            continue
        path = ROOT / line[1:].rstrip("/")
        found = sorted(path.rglob("*")) if path.is_dir() else [path]
        files += [f for f in found if f.is_file() and "__pycache__" not in f.parts]
    return files


def inputs_tag() -> str:
    digest = hashlib.sha256()
    for path in build_inputs():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return TAG_PREFIX + digest.hexdigest()[:16]


def no_engine(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must build and run the image: {reason}")
    pytest.skip(reason)


def container_starts(engine: Engine, image: str) -> str | None:
    """None where a container of `image` starts here, else the engine's error."""
    started = engine.run(
        ["run", "--rm", "--network=none", "--no-healthcheck", image, "true"], check=False
    )
    if started.returncode == 0:
        return None
    lines = started.stderr.strip().splitlines() or [f"exit {started.returncode}"]
    return " ".join(line for line in lines if line.startswith("Error")) or lines[-1]


def build_env(engine: Engine, tag: str) -> dict[str, str]:
    return engine.env | {
        "IMAGE_ENGINE": engine.name,
        "TORCH": "cpu",
        "BASE": "auto",
        "IMAGE": tag,
        CANARY_VARIABLE: CANARY,
    }


def build_under_lock(engine: Engine, tag: str) -> subprocess.CompletedProcess[str] | None:
    """Build `tag` unless it is there, holding the lock the workers (and a background build)
    share; the build's outcome, or None where nothing needed building."""
    with BUILD_LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another may be building it right now
        if engine.run(["image", "inspect", tag], check=False).returncode == 0:
            return None
        built = subprocess.run(
            [str(DOCKER_DIR / "build-image.sh")],
            env=build_env(engine, tag),
            capture_output=True,
            text=True,
            timeout=BUILD_SECONDS,
            check=False,
        )
    if built.returncode == 0:
        # Builds of other inputs older than a day: each holds its own copy of the virtualenv
        # (1.6 GB). Younger ones may be in use by another checkout's tests.
        listed = engine.run(
            ["images", "--filter", "until=24h", "--format", "{{.Repository}}:{{.Tag}}"],
            check=False,
        )
        for old in set(listed.stdout.split()) - {tag, f"localhost/{tag}"}:
            if old.removeprefix("localhost/").startswith(TAG_PREFIX):
                engine.run(["rmi", old], check=False)
    return built


def background_build() -> None:
    """`python -c` entry of the build `build_in_background` starts."""
    engine = find_engine()
    if engine is not None:
        build_under_lock(engine, inputs_tag())


def refused(engine: Engine, built: subprocess.CompletedProcess[str]) -> None:
    """Why the image did not build: a missing tool or an engine that cannot start a container
    (skips outside CI), else a failure with the build's output."""
    if "debootstrap is not installed" in built.stderr:
        missing_binary("debootstrap")  # the local base needs it where no registry answers
    for base in (LOCAL_BASE, "python:3.11-slim-bookworm"):
        if engine.run(["image", "inspect", base], check=False).returncode == 0:
            error = container_starts(engine, base)
            if error is not None:
                no_engine(f"{engine.name} cannot start a container here: {error}")
    pytest.fail(f"the image did not build:\n{built.stdout[-3000:]}\n{built.stderr[-6000:]}")


def present_engine() -> Engine:
    engine = find_engine()
    if engine is None:
        missing_binary("podman")  # nor does a docker daemon answer
    assert engine is not None
    return engine


@pytest.fixture(scope="session")
def container_engine() -> Engine:
    """The engine alone, no image built: `container_engine.run(args, ...)` as in `image`."""
    return present_engine()


@pytest.fixture(scope="session")
def image() -> BuiltImage:
    """The trader image with torch's CPU build, as `make image TORCH=cpu` builds it (on the
    local Debian base where no registry answers), tagged by the hash of its build inputs and
    built only when that tag is missing. `image.tag` is the tag; `image.engine.run(args,
    check=True, timeout=600, input=None, text=True)` runs `docker|podman *args` with the
    settings this host needs (CONTAINERS_CONF for podman) and returns the CompletedProcess
    (check: AssertionError on a non-zero exit). `image.engine.name` is "docker" or "podman";
    `image.engine.env` is the environment to run the engine with yourself.
    A cold build takes minutes: it starts in the background at collection (the container
    tests run last), and a test that asks before it is done waits for it (every test using
    this fixture gets BUILD_SECONDS on top of its timeout). Skips (fails in CI) where there is
    no engine or no container can start."""
    engine = present_engine()
    tag = inputs_tag()
    built = build_under_lock(engine, tag)
    if built is not None and built.returncode != 0:
        refused(engine, built)
    error = container_starts(engine, tag)
    if error is not None:
        no_engine(f"{engine.name} cannot start a container here: {error}")
    return BuiltImage(engine, tag)


def build_in_background() -> None:
    """Start the build of the image now unless an image of these inputs is there. `make test`'s
    workers then run the other tests while it builds (minutes, mostly downloads and
    unpacking), instead of one worker building in a test's setup and the other waiting for it
    at the lock. Its output goes to a log in the temporary folder; a build that fails there
    fails again, with its output, in the fixture."""
    engine = find_engine()
    if (
        engine is None
        or engine.run(["image", "inspect", inputs_tag()], check=False).returncode == 0
    ):
        return  # the fixture says why, or there is nothing to build
    log = Path(tempfile.gettempdir()) / f"trader-test-image-{os.getpid()}.log"
    with log.open("w") as output:
        subprocess.Popen(
            # Niced: the tests running beside it come first (some wait on real servers).
            ["nice", "-n", "19", sys.executable, "-c", BACKGROUND_BUILD],
            cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they will
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The container tests last, with their image building in the background from the start
    (xdist hands out modules in this order); and the build's time on top of the timeout of
    every test that asks for the image, as it may build in that test's setup."""
    here = Path(__file__).parent
    ours = [item for item in items if here in item.path.parents]
    if not ours:
        return
    items[:] = [item for item in items if here not in item.path.parents] + ours
    if any("image" in getattr(item, "fixturenames", ()) for item in ours):
        build_in_background()
    default = float(config.getini("timeout") or 0)
    for item in ours:
        if "image" not in getattr(item, "fixturenames", ()):
            continue
        own = item.get_closest_marker("timeout")
        seconds = float(own.args[0]) if own and own.args else default
        if seconds:
            item.add_marker(pytest.mark.timeout(seconds + BUILD_SECONDS), append=False)
