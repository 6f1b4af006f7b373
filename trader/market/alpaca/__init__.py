"""Alpaca as a venue, through its official SDK (alpaca-py): US stocks and crypto, market data
and trading, behind the same protocols as the ccxt adapter (see `exchange`)."""
