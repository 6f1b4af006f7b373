"""config/default.toml documents every setting and cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from trader.config import Settings, load_settings
from trader.config.fields import leaves
from trader.config.render import template

DEFAULT_TOML = Path(__file__).resolve().parents[3] / "config" / "default.toml"


def test_the_shipped_default_toml_is_the_generated_template():
    assert DEFAULT_TOML.read_text() == template(), (
        "run: trader config template > config/default.toml"
    )


def test_the_shipped_default_toml_sets_nothing():
    loaded = load_settings(DEFAULT_TOML, environ={}, dotenv_file=None, secrets_dir=None)
    assert loaded.settings == Settings()
    assert all(origin.kind == "default" for origin in loaded.origins.values())


def test_uncommenting_every_example_reproduces_the_defaults(tmp_path):
    names = {leaf.path[-1] for leaf in leaves().values()}

    def uncomment(match: re.Match[str]) -> str:
        known = match.group(1) in names and match.group(2) != "<unset>"
        return f"{match.group(1)} = {match.group(2)}" if known else match.group(0)

    uncommented = re.sub(r"^# (\w+) = (.*)$", uncomment, template(), flags=re.MULTILINE)
    path = tmp_path / "all.toml"
    path.write_text(uncommented)
    loaded = load_settings(path, environ={}, dotenv_file=None, secrets_dir=None)
    assert loaded.settings == Settings()
    unset = {leaf.key for leaf in leaves().values() if leaf.info.default is None}
    for key, origin in loaded.origins.items():
        assert origin.kind == ("default" if key in unset else "file"), key
