"""Read a `/metrics` endpoint the way Prometheus does: over HTTP, parsed by prometheus-client's
own text parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(address: str, timeout: float = 10.0) -> Samples:
    """Every sample at http://ADDRESS/metrics, keyed by (sample name, labels)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"series {key} appears twice"
            samples[key] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels`; 0 when absent (a counter not yet moved)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def labelled(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """Every series of `name`, by its labels."""
    return {labels: v for (n, labels), v in samples.items() if n == name}
