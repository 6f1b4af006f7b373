"""Brokers: the paper broker now, the live ccxt broker later; one protocol."""

from trader.broker.paper import PaperBroker
from trader.broker.protocol import Broker
from trader.domain.execution import Execution

__all__ = ["Broker", "Execution", "PaperBroker"]
