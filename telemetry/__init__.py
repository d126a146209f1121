"""What an operator sees: Prometheus metrics, one JSON log line per request, optional OpenTelemetry traces."""
