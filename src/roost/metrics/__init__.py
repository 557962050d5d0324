"""Prometheus metrics of the servers: the broker's series (`broker_metrics`), the keeper's
(`keeper_metrics`), and the `GET /metrics` endpoint that serves them on the servers' own event loop
(`endpoint`). Needs the `metrics` extra (prometheus-client); the servers import it only when
metrics are on."""
