"""When a market trades: `calendar.TradingCalendar` (sessions, lunch breaks, holidays) built by
`registry` from exchange_calendars or the FX week, one per symbol (`per_symbol`), and `fit`,
which reads a file's calendar off its times."""
