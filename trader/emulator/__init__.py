"""An exchange emulator on loopback that speaks Binance's spot REST API closely enough for the
real ccxt client, with faults injected on request. Tests point ccxt at it; `trader sandbox` will
serve it so the daemon can run end to end without an account."""

from trader.emulator.faults import Fault, FaultPlan
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.server import EmulatorServer

__all__ = ["EmulatedMarket", "EmulatorServer", "Fault", "FaultPlan", "Instrument"]
