"""The documentation's reference pages, generated from the code when the site is built.

An MkDocs hook (mkdocs.yml: `hooks: [scripts/docs_reference.py]`): `on_files` adds the pages
below to the site in memory, so nothing generated is ever written into docs/ or committed, and
`mkdocs build --strict` fails on a broken link to them like any other page:

- reference/settings.md: every broker setting (roost.config.BROKER_SETTINGS), every topic config
  and every keeper setting (roost.keeper.config.SETTINGS_HELP), with its default and meaning;
- reference/commands.md: every `roost` command's help, as the command itself prints it (click's
  help for the client commands; the servers' argparse help through the same click group);
- reference/metrics.md: every Prometheus series of a broker and of a keeper, its type, labels
  and help, from the collectors themselves;
- reference/kafka-apis.md: the Kafka APIs a broker advertises and their versions.

`on_config` also drops from the navigation the pages listed in `extra.pending_pages` that are not
in docs/ yet (pages other work is adding), so that a strict build does not fail for them and
adding one is a matter of its file arriving. tests/docs/test_reference.py checks that every
setting, command and metric has a description.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click

INT64_MAX = 2**63 - 1
GENERATED = ("reference/settings.md", "reference/commands.md", "reference/metrics.md", "reference/kafka-apis.md")


# --- settings ---------------------------------------------------------------------------------

def _default(value: Any) -> str:
    if value == "" or value is None:
        return "(none)"
    if isinstance(value, bool):
        return str(value).lower()
    if value == INT64_MAX:
        return "2^63-1 (never)"
    if isinstance(value, int) and value >= 1024 and value % 1024 == 0:
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value % size == 0:
                return f"{value} ({value // size} {unit})"
    if isinstance(value, frozenset | set):
        return ",".join(sorted(value))
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def broker_settings() -> list[tuple[str, str, str, str, str]]:
    """(name, type, default, topic config, meaning) of every broker setting."""
    from roost.config import BROKER_SETTINGS
    return [(s.name, s.kind.__name__, _default(s.default), s.topic_name or "", s.help) for s in BROKER_SETTINGS]


def keeper_settings() -> list[tuple[str, str, str]]:
    """(name, default, meaning) of every keeper setting."""
    from roost.keeper.config import SETTINGS_HELP, KeeperConfig
    defaults = KeeperConfig.from_mapping({"dataDir": "DIR"})
    rows = []
    for name, (attribute, meaning) in SETTINGS_HELP.items():
        value = getattr(defaults, attribute) if attribute else None
        if name == "dataDir":
            value = None
        if name == "4lw.commands.whitelist" and value is None:
            value = "*"  # None is the parsed form of "*": every word
        rows.append((name, _default(value), meaning))
    return rows


def settings_page() -> str:
    from roost.config import DYNAMIC_BROKER_SETTINGS
    lines = ["# Settings", "",
             "Generated from the code (`roost.config`'s registry and `roost.keeper.config`) when this site "
             "is built.", "",
             "## Broker settings", "",
             "Kafka's names. Each can be given in the TOML file (`--config`), as a flag "
             "(`--log.retention.ms 60000` or `--log-retention-ms 60000`) or as `--set NAME=VALUE`; flags win "
             "over `--set`, `--set` over the file, the file over the defaults. *Live* settings can also be "
             "changed while the brokers run (AlterConfigs on a broker resource, cluster-wide or per broker); "
             "the others need a restart. A *topic config* overrides the setting for one topic.", "",
             "| setting | type | default | topic config | live | meaning |", "|---|---|---|---|---|---|"]
    for name, kind, default, topic, meaning in broker_settings():
        live = "yes" if name in DYNAMIC_BROKER_SETTINGS else ""
        topic_cell = f"`{topic}`" if topic else ""
        lines.append(f"| `{name}` | {kind} | {_cell(default)} | {topic_cell} | {live} | {_cell(meaning)} |")
    lines += ["", "## Topic configs", "",
              "Set with CreateTopics (`roost topic create -c NAME=VALUE`) or changed live with "
              "(Incremental)AlterConfigs; a topic without one takes the broker setting named beside it.", "",
              "| topic config | default from the broker setting | meaning |", "|---|---|---|"]
    for name, _kind, _default_text, topic, meaning in sorted(broker_settings(), key=lambda row: row[3]):
        if topic:
            lines.append(f"| `{topic}` | `{name}` | {_cell(meaning)} |")
    lines += ["", "## Keeper settings", "",
              "ZooKeeper's names, in the keeper's TOML file (`roost keeper --config`), as `--set NAME=VALUE`, "
              "or in the `[keeper]` table of `roost up`'s file. Dotted names are quoted in TOML "
              "(`\"jute.maxbuffer\" = 1048575`).", "",
              "| setting | default | meaning |", "|---|---|---|"]
    for name, default, meaning in keeper_settings():
        lines.append(f"| `{name}` | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


# --- commands ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommandHelp:
    path: str  # "roost topic create"
    summary: str
    text: str  # the help as the command prints it


def _argparse_help(group: click.Group, name: str) -> str:
    """A server subcommand (argparse behind a click command) prints its own help on --help."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        group.main(args=[name, "--help"], prog_name="roost", standalone_mode=False)
    return out.getvalue()


def _walk(command: click.Command, path: list[str], parent: click.Context | None) -> Iterator[tuple[list[str], click.Command, click.Context]]:
    context = click.Context(command, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100)
    yield path, command, context
    if isinstance(command, click.Group):
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, [*path, name], context)


def commands() -> list[CommandHelp]:
    """Every `roost` command, found through the click group of `roost.cli.main`."""
    from roost.cli import main as cli_main
    group = cli_main.cli
    helps = []
    for path, command, context in _walk(group, ["roost"], None):
        summary = command.get_short_help_str(limit=110)
        is_passthrough = (len(path) == 2 and not command.add_help_option
                          and any(getattr(p, "nargs", 1) == -1 for p in command.params))
        text = _argparse_help(group, path[1]) if is_passthrough else command.get_help(context)
        helps.append(CommandHelp(" ".join(path), summary, text.rstrip()))
    return helps


def commands_page() -> str:
    lines = ["# Commands", "",
             "Every `roost` command's `--help`, generated from the commands themselves when this site is built.",
             "", "| command | what it does |", "|---|---|"]
    helps = commands()
    for item in helps:
        lines.append(f"| [`{item.path}`](#{_anchor(item.path)}) | {_cell(item.summary)} |")
    for item in helps:
        level = "##" if item.path.count(" ") <= 1 else "###"
        lines += ["", f"{level} `{item.path}` {{#{_anchor(item.path)}}}", "", "```text", item.text, "```"]
    return "\n".join(lines) + "\n"


def _anchor(path: str) -> str:
    return path.replace(" ", "-")


# --- metrics ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MetricHelp:
    server: str  # broker or keeper
    name: str  # as exposed (a counter's _total included)
    kind: str
    labels: tuple[str, ...]
    help: str
    note: str = ""


class _Facts:
    """Any fact a keeper's collector asks for reads 0: only the names, types and help matter."""

    def __getattr__(self, name: str) -> int:
        return 0


class _KeeperStandIn:
    """What KeeperCollector reads of a keeper, as the leader of a 3-member ensemble, so that the
    series only a leader has are listed too."""

    class config:
        servers = {1: None, 2: None, 3: None}
        data_dir = pathlib.Path(tempfile.gettempdir())  # a disk to report free space of

    class replicator:
        @staticmethod
        def follower_counts() -> tuple[int, int]:
            return 0, 0

    @staticmethod
    def facts() -> _Facts:
        return _Facts()

    @staticmethod
    def mode() -> str:
        return "leader"


def _families(registry: Any, server: str) -> list[MetricHelp]:
    found = []
    for family in registry.collect():
        labels = list(getattr(family, "_labelnames", ()) or ())
        for sample in family.samples:
            labels += [label for label in sample.labels if label not in labels]
        note = ""
        if family.type == "counter":
            name = family.name + "_total"
        elif family.type == "summary":
            name = family.name
            note = f"with `{family.name}_count` and `{family.name}_sum`"
        else:
            name = family.name
        if getattr(family, "_labelnames", ()) and any(not s.labels for s in family.samples):
            note = "also without labels: the sum over them"
        found.append(MetricHelp(server, name, family.type, tuple(labels), family.documentation, note))
    return found


def metrics() -> list[MetricHelp]:
    """Every series a broker and a keeper serve, read from their collectors: the broker's from a
    real (not started) standalone broker in a temporary directory, with one topic counted and one
    request timed so that every label shows; the keeper's from a stand-in leader."""
    from roost.broker.broker import Broker
    from roost.config import BrokerConfig
    from roost.metrics.broker_metrics import broker_registry
    from roost.metrics.keeper_metrics import keeper_registry

    with tempfile.TemporaryDirectory(prefix="roost-docs-") as directory:
        broker = Broker(BrokerConfig.build([("docs", {"metrics.port": 0})]), pathlib.Path(directory), "127.0.0.1", 0)
        try:
            assert broker.stats is not None
            broker.stats.topic("t")
            broker.stats.timer("Produce").record(1.0)
            found = _families(broker_registry(broker), "broker")
        finally:
            broker.logs.close()
    return found + _families(keeper_registry(_KeeperStandIn()), "keeper")  # type: ignore[arg-type]


def metrics_page() -> str:
    lines = ["# Metrics", "",
             "Every Prometheus series a broker and a keeper serve at `/metrics` (`--metrics-port`), read from "
             "their collectors when this site is built. Names follow Kafka's JMX exporter, kafka_exporter and "
             "ZooKeeper's Prometheus provider; see [metrics and dashboards](../metrics.md)."]
    found = metrics()
    for server in ("broker", "keeper"):
        lines += ["", f"## {server.capitalize()} series", "", "| series | type | labels | meaning |", "|---|---|---|---|"]
        for item in found:
            if item.server == server:
                labels = ", ".join(item.labels) or "(none)"
                meaning = item.help + (f" ({item.note})" if item.note else "")
                lines.append(f"| `{item.name}` | {item.kind} | {labels} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


# --- Kafka APIs -------------------------------------------------------------------------------

def kafka_apis() -> list[tuple[str, int, int, int, str]]:
    """(name, key, lowest, highest, who advertises it) of every API a broker advertises."""
    from roost.broker.net.dispatcher import ADVERTISED_VERSIONS, clip_to_codec
    from roost.wire.kafka import API_NAMES
    try:
        from roost.broker.net.dispatcher import CLUSTER_VERSIONS  # type: ignore[attr-defined]
    except ImportError:
        from roost.broker.broker import CLUSTER_VERSIONS  # type: ignore[attr-defined,no-redef]
    rows = [(API_NAMES[key], int(key), low, high, "every broker") for key, (low, high) in clip_to_codec(ADVERTISED_VERSIONS).items()]
    rows += [(API_NAMES[key], int(key), low, high, "a broker in a cluster")
             for key, (low, high) in clip_to_codec(CLUSTER_VERSIONS).items()]
    return sorted(rows, key=lambda row: row[1])


def first_release_reaching(key: int, version: int) -> str:
    """The first Kafka release whose ApiVersions reaches `version` of API `key`, by kafka-python's
    table of releases ("" without kafka-python)."""
    try:
        with warnings.catch_warnings():  # kafka-python's own DeprecationWarnings at import
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
    except ImportError:
        return ""
    for release in sorted(BROKER_API_VERSIONS):
        found = BROKER_API_VERSIONS[release].get(key)
        if found is not None and found[1] >= version:
            return ".".join(map(str, release))
    return "none"


def kafka_apis_page() -> str:
    lines = ["# Kafka APIs", "",
             "The APIs a broker advertises in ApiVersions and the versions of each, generated from "
             "`roost.broker.net.dispatcher` when this site is built. The cluster's own APIs are advertised only "
             "by a broker in a cluster (`roost up` with its keeper, or `zookeeper.connect`). "
             "`tests/broker/test_api_versions_audit.py` sends every advertised version of every API to a real "
             "broker. \"Kafka release\" is the first release whose ApiVersions reaches the highest version "
             "advertised, by kafka-python's table of releases. As a whole the ranges are those of Kafka 3.9, the "
             "last release with ZooKeeper mode (Fetch 17 is its marker): kafka-python with `api_version=None` "
             "infers 3.9. What each API does: [the broker](../broker.md).", "",
             "| API | key | versions | Kafka release | advertised by |", "|---|---|---|---|---|"]
    for name, key, low, high, who in kafka_apis():
        versions = f"{low}" if low == high else f"{low}-{high}"
        lines.append(f"| `{name}` | {key} | {versions} | {first_release_reaching(key, high)} | {who} |")
    return "\n".join(lines) + "\n"


PAGES = {
    "reference/settings.md": settings_page,
    "reference/commands.md": commands_page,
    "reference/metrics.md": metrics_page,
    "reference/kafka-apis.md": kafka_apis_page,
}


# --- MkDocs hooks -----------------------------------------------------------------------------

def _prune(nav: list[Any], missing: set[str]) -> list[Any]:
    kept = []
    for entry in nav:
        if isinstance(entry, dict):
            (title, value), = entry.items()
            if isinstance(value, list):
                value = _prune(value, missing)
                if value:
                    kept.append({title: value})
            elif value not in missing:
                kept.append(entry)
        elif entry not in missing:
            kept.append(entry)
    return kept


def on_config(config: Any) -> Any:
    docs = pathlib.Path(config["docs_dir"])
    pending = set(config["extra"].get("pending_pages", []))
    missing = {page for page in pending if not (docs / page).exists()}
    config["nav"] = _prune(config["nav"], missing)
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File
    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files


if __name__ == "__main__":  # print the pages, for a look without MkDocs
    for path, render in PAGES.items():
        print(f"===== {path}\n{render()}")
