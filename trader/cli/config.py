"""`trader config show|check|template`: the settings as the daemon would load them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trader.cli.options import Verbs
from trader.exit_codes import EX_CONFIG


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    config = verbs.add_parser("config", help="show or check the settings")
    actions = config.add_subparsers(dest="config_verb", required=True, metavar="ACTION")
    show_ = actions.add_parser(
        "show", parents=[common], help="effective settings, secrets masked, with their sources"
    )
    show_.add_argument("--json", action="store_true", help="print JSON")
    show_.set_defaults(handler=show)
    check_ = actions.add_parser(
        "check", parents=[common], help="validate the settings; exit non-zero with the errors"
    )
    check_.add_argument("file", nargs="?", type=Path, help="TOML file to check")
    check_.set_defaults(handler=check)
    template_ = actions.add_parser(
        "template", help="every setting with its default, as commented TOML"
    )
    template_.set_defaults(handler=template)


def show(args: argparse.Namespace) -> int:
    from trader.config import load_from_environment  # noqa: PLC0415 - pydantic
    from trader.config.render import show_json, show_text  # noqa: PLC0415

    loaded = load_from_environment(args.config)
    sys.stdout.write(show_json(loaded) if args.json else show_text(loaded))
    return 0


def check(args: argparse.Namespace) -> int:
    from trader.config import load_from_environment  # noqa: PLC0415 - pydantic
    from trader.config.strict import (  # noqa: PLC0415
        config_refusal,
        secrets_in_files_warning,
    )

    # Checks what `trader run` would load: the file with the secrets directory, .env and env.
    loaded = load_from_environment(args.file or args.config)
    sys.stderr.writelines(f"{line}\n" for line in secrets_in_files_warning(loaded.secrets_in_files))
    refusal = config_refusal(loaded.settings, loaded.origins, loaded.secrets_in_files)
    if refusal is not None:
        sys.stderr.write(f"trader config check: live trading would be refused: {refusal}\n")
        return EX_CONFIG
    checked = loaded.config_file or "defaults (no config file)"
    sys.stdout.write(f"ok: {checked} with secrets directory, .env and environment\n")
    return 0


def template(args: argparse.Namespace) -> int:
    from trader.config.render import template as render_template  # noqa: PLC0415 - pydantic

    sys.stdout.write(render_template())
    return 0
