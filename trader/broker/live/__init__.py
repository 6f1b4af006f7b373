"""The live broker: `broker.LiveBroker` over a ccxt exchange, one part a module (the venue
client, open orders, placement, unknown outcomes, fills, cancels, polling, reconciliation)."""
