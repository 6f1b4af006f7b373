"""Start `trader run --replay` on the packaged excerpt in a folder of its own, show where its
ledger, logs and /metrics are and how far it has got, then summarise its ledger.

The daemon runs as a child process with its own settings file: no `TRADER_*` variable, `.env` or
secrets directory of the person's own setup reaches it, so a demo never writes to their ledger.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TextIO

from trader.exit_codes import EX_ARGUMENTS, EX_CANTCREAT, EX_FAILED
from trader.ledger.database import reading
from trader.private_files import UnsafePath, open_private, owned_folder, write_file

SYMBOL = "SOL/USDT"
EXCERPT = "SOLUSDT_1h.csv.gz"  # the first 1,000 hours of the recording (see __init__)
BARS = 1000
CONTEXT = 512  # market.context_bars' default: the bars before the first tick
MAX_TICKS = BARS - CONTEXT
POLL_S = 0.5
PROGRESS_S = 2.0


@dataclass(frozen=True)
class DemoOptions:
    folder: Path
    model: str = "baseline"
    ticks: int = 240
    speed: float = 86_400.0  # a simulated day a second
    allow_skips: bool = False  # exit 0 even when the symbol skipped too many ticks
    recording: Path | None = None  # the bars replayed, when not the packaged excerpt's


@dataclass(frozen=True)
class DemoFiles:
    folder: Path

    @property
    def config(self) -> Path:
        return self.folder / "demo.toml"

    @property
    def ledger(self) -> Path:
        return self.folder / "ledger.sqlite3"

    @property
    def log(self) -> Path:
        return self.folder / "trader.log"

    @property
    def metrics(self) -> Path:
        return self.folder / "metrics.txt"

    @property
    def summary(self) -> Path:
        return self.folder / "summary.json"

    def clear(self) -> None:
        """Each demo starts afresh: the daemon would otherwise resume the last one's ledger."""
        for path in (self.config, self.log, self.metrics, self.summary):
            path.unlink(missing_ok=True)
        for path in self.folder.glob(f"{self.ledger.name}*"):
            path.unlink()


def run_demo(options: DemoOptions, out: TextIO = sys.stdout) -> int:
    if not 1 <= options.ticks <= MAX_TICKS:
        out.write(f"trader demo: --ticks must be 1 to {MAX_TICKS} (the excerpt's bars)\n")
        return EX_ARGUMENTS
    files = DemoFiles(options.folder.resolve())
    try:  # 0700: its ledger and settings are private
        owned_folder(files.folder, "the demo's folder")
    except (UnsafePath, OSError) as error:
        out.write(f"trader demo: {error}\n")
        return EX_CANTCREAT
    files.clear()
    write_file(files.config, _settings(files, options.model))
    with resources.as_file(resources.files("trader.demo") / EXCERPT) as excerpt:
        data = options.recording or excerpt
        # The daemon is told to accept skips: the demo judges them itself, from the ledger,
        # and shows its summary whatever they were.
        command = [
            sys.executable, "-m", "trader", "run", "--config", str(files.config),
            "--replay", str(data), "--symbol", SYMBOL, "--speed", f"{options.speed:g}",
            "--max-ticks", str(options.ticks), "--log-format", "json", "--allow-skips",
        ]  # fmt: skip
        _introduce(options, files, command, out)
        began = time.monotonic()
        code = _supervise(command, files, options.ticks, out)
    seconds = time.monotonic() - began
    if code != 0:
        out.write(f"\ntrader demo: the daemon exited {code} after {seconds:.1f} s; its log ends:\n")
        out.writelines(f"  {line}\n" for line in _last_events(files.log, 8))
        return code
    return _report(options, files, seconds, out)


def _settings(files: DemoFiles, model: str) -> str:
    return (
        "# Written by `trader demo`: a paper run over a recorded excerpt, nothing downloaded.\n"
        "# Every other setting keeps its default (`trader config template` lists them).\n"
        f'[ledger]\npath = "{files.ledger}"\n\n'
        "[metrics]\nport = 0  # any free port; the log and the demo say which\n\n"
        f'[forecast]\nmodel = "{model}"\n\n'
        "[strategy]\n"
        'name = "maxdiff"  # limit orders at the forecast\'s expected high and low: it trades\n'
    )


def _introduce(options: DemoOptions, files: DemoFiles, command: list[str], out: TextIO) -> None:
    here = _shown(files.folder)
    out.write(
        f"trader demo: the daemon (`trader run --replay`) over the first {BARS:,} recorded hours "
        f"of {SYMBOL} (2020-08-11 to 2020-09-21), paper broker, {options.model} forecaster, "
        f"{options.ticks} hourly ticks at {options.speed:,.0f}x real time.\n"
        f"  settings  {here}/{files.config.name}\n"
        f"  ledger    {here}/{files.ledger.name}  (SQLite; tables ticks, orders, fills, equity)\n"
        f"  logs      {here}/{files.log.name}  (JSON lines)\n"
        f"  command   {' '.join(_shown_arg(a) for a in command)}\n"
    )


def _supervise(command: list[str], files: DemoFiles, ticks: int, out: TextIO) -> int:
    """Run the daemon to its end; meanwhile tell its /metrics address, keep the last scrape and
    say how far it has got. Ctrl-C reaches the daemon too (same process group): it stops after
    the running tick, and the summary covers what it did."""
    watch = _Watch(files)
    with os.fdopen(open_private(files.log), "w") as log:  # 0600, never through a link
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            command, stdout=log, stderr=subprocess.STDOUT, env=_clean_environment(),
            cwd=files.folder,
        )  # fmt: skip
        try:
            while process.poll() is None:
                time.sleep(POLL_S)
                watch.poll(ticks, out)
        except KeyboardInterrupt:
            process.wait()
    watch.poll(ticks, out, final=True)
    return process.returncode


class _Watch:
    def __init__(self, files: DemoFiles) -> None:
        self.files = files
        self.port: int | None = None
        self.read_to = 0
        self.shown_at = 0.0
        self.shown_ticks = 0

    def poll(self, ticks: int, out: TextIO, final: bool = False) -> None:
        if self.port is None:
            self.port = self._metrics_port()
            if self.port is not None:
                out.write(
                    f"  metrics   http://127.0.0.1:{self.port}/metrics while it runs "
                    f"(the last scrape is kept in {_shown(self.files.metrics)})\n"
                )
        if self.port is not None and not final:
            self._scrape()
        if final or time.monotonic() - self.shown_at >= PROGRESS_S:
            self.shown_at = time.monotonic()
            done, at, equity = _progress(self.files.ledger)
            if done > self.shown_ticks:
                self.shown_ticks = done
                out.write(f"  tick {done:>4} of {ticks}  {at[:16]}  equity {equity}\n")

    def _metrics_port(self) -> int | None:
        with self.files.log.open() as log:
            log.seek(self.read_to)
            lines = log.readlines()
        if lines and not lines[-1].endswith("\n"):  # a line still being written
            lines.pop()
        self.read_to += sum(len(line.encode()) for line in lines)
        for event in map(_event, lines):
            port = event.get("port")
            if event.get("event") == "serving metrics" and isinstance(port, int):
                return port
        return None

    def _scrape(self) -> None:
        url = f"http://127.0.0.1:{self.port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                write_file(self.files.metrics, answer.read())
        except OSError:
            pass  # not serving yet, or already stopping: the last good scrape stays


def _progress(ledger: Path) -> tuple[int, str, str]:
    """Ticks booked, the last tick's time, the last equity: read-only, beside the writer."""
    if not ledger.exists():
        return 0, "", ""
    try:
        with reading(ledger, timeout_s=1) as c:
            done, at = c.execute("SELECT count(*), max(at) FROM ticks").fetchone()
            row = c.execute("SELECT equity FROM equity ORDER BY at DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return 0, "", ""
    return done, at or "", f"{float(row[0]):,.2f}" if row else "-"


def _report(options: DemoOptions, files: DemoFiles, seconds: float, out: TextIO) -> int:
    from trader.backtest.skip_verdict import ACCEPT, SkipVerdict  # noqa: PLC0415
    from trader.config.backtest_settings import BacktestSettings  # noqa: PLC0415
    from trader.demo.summary import read_summary  # noqa: PLC0415 - numpy

    summary = read_summary(files.ledger, [SYMBOL])
    write_file(files.summary, json.dumps(summary.as_json(), indent=2) + "\n")
    # As `trader run --replay` ends, on the settings' default threshold (the demo's own
    # settings file is the only one its daemon reads).
    skips = SkipVerdict(
        summary.ticks, {SYMBOL: summary.skipped}, BacktestSettings().max_skipped_share
    )
    out.write("\n" + skips.text("trader demo", ACCEPT, options.allow_skips))
    problems = []
    if summary.ticks < options.ticks:
        problems.append(f"the daemon booked {summary.ticks} of the {options.ticks} ticks asked for")
    if summary.outcomes.get("failed"):
        problems.append(f"{summary.outcomes['failed']} ticks failed (see the log)")
    if problems:
        out.write("\ntrader demo: the run did not do what was asked:\n")
        out.writelines(f"  {problem}\n" for problem in problems)
    elif not skips.fails or options.allow_skips:
        out.write(
            f"\ndone in {seconds:.1f} s: the daemon ran {summary.ticks} ticks and exited 0.\n"
        )
    out.write(f"\nwhat happened (from the ledger; {_shown(files.summary)} has it as JSON):\n")
    out.writelines(f"  {line}\n" for line in summary.lines("USDT"))
    out.write(
        "\nnext:\n"
        "  make demo MODEL=toto   the same with Toto (or MODEL=kronos), once its weights are in "
        "the Hugging Face cache\n"
        "                         (`.venv/bin/trader forecast --model toto --download --data "
        "FILE` fetches them; network)\n"
        "  make run               the daemon on live market data (network; paper trading)\n"
    )
    return EX_FAILED if problems or (skips.fails and not options.allow_skips) else 0


def _clean_environment() -> dict[str, str]:
    drop = ("TRADER_", "CREDENTIALS_DIRECTORY")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _event(line: str) -> dict[str, object]:
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def _last_events(log: Path, count: int) -> list[str]:
    lines = log.read_text(errors="replace").splitlines()[-count:] if log.exists() else []
    shown = []
    for line in lines:
        event = _event(line)
        if event:
            detail = {k: v for k, v in event.items() if k not in {"event", "timestamp", "level"}}
            shown.append(f"{event.get('level', '')} {event.get('event', '')} {detail}"[:300])
        else:
            shown.append(line[:300])
    return shown


def _shown(path: Path) -> str:
    """A path as short as it reads: relative to the working directory where it is inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _shown_arg(arg: str) -> str:
    return _shown(Path(arg)) if arg.startswith("/") else arg
