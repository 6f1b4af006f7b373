"""What the daemon tells the outside: Prometheus metrics and HTTP endpoints, MQTT events and
signed commands. Nothing here may slow a tick or take the daemon down."""
