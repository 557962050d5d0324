"""The pure decisions behind the slow-client bounds of the TLS listeners and the console
(roost.broker.net.tls_handshakes, roost.console.slow_clients): when a connection is cut, how it
is classed, and that a burst of cuts is said in one line. The processes' behaviour is in
test_abusive_tls_clients.py and test_abusive_console_clients.py."""

from __future__ import annotations

from roost.broker.net.tls_handshakes import GRACE_S, OverdueLog, overdue_at
from roost.console.slow_clients import (
    GATHER_S,
    HANDSHAKE,
    IDLE,
    LOG_EVERY_S,
    PARTIAL,
    SILENT,
    CutSummary,
    HeadClock,
    answer_moving,
    cut_at,
    verdict,
)


def test_a_tls_connection_is_looked_at_once_its_handshake_must_be_over() -> None:
    assert overdue_at(100.0, 10.0) == 100.0 + 10.0 + GRACE_S


def test_given_up_handshakes_are_said_once_a_minute_per_listener_with_the_count_since() -> None:
    said = OverdueLog()
    assert said.given_up("SSL", 1.0, 0.0) is not None
    assert all(said.given_up("SSL", 1.0, 1.0 + i) is None for i in range(40))
    assert said.given_up("SASL_SSL", 1.0, 2.0) is not None  # another listener has its own line
    line = said.given_up("SSL", 1.0, 61.0)
    assert line is not None and "41 TLS handshakes" in line and "in the last 61 s" in line


def test_a_head_must_be_whole_within_the_timeout_of_the_opening_whatever_trickles_in() -> None:
    clock = HeadClock(waiting_since=10.0)
    clock.received = 1
    assert verdict(2.0, clock, 11.9) is None
    clock.received = 30  # more bytes earn no time
    assert cut_at(2.0, clock) == 12.0 and verdict(2.0, clock, 12.0) == PARTIAL
    assert verdict(2.0, HeadClock(waiting_since=10.0), 12.0) == SILENT
    assert verdict(0.0, HeadClock(waiting_since=10.0), 1e9) is None  # no bound


def test_a_request_in_hand_is_never_cut_and_the_clock_restarts_at_its_answer() -> None:
    clock = HeadClock(waiting_since=0.0, requests=1)
    assert cut_at(2.0, clock) is None and verdict(2.0, clock, 100.0) is None
    clock.requests, clock.answered, clock.waiting_since = 0, 1, 100.0
    assert verdict(2.0, clock, 101.0) is None
    assert verdict(2.0, clock, 102.0) == IDLE  # kept alive, nothing more asked


def test_an_answer_the_client_is_still_taking_holds_the_connection() -> None:
    clock = HeadClock(waiting_since=0.0, answered=1)
    assert answer_moving(clock, 5000, 3.0) and clock.waiting_since == 3.0
    assert not answer_moving(clock, 5000, 6.0)  # standing still: the client does not read
    assert verdict(2.0, clock, 6.0) == IDLE


def test_a_burst_of_cuts_is_one_line_and_the_next_waits_a_minute() -> None:
    summary = CutSummary()
    assert summary.cut(IDLE, 0.0) is None  # idle kept-alive connections are not counted
    due = summary.cut(PARTIAL, 0.0)
    assert due == GATHER_S
    assert all(summary.cut(kind, 0.5) is None for kind in (PARTIAL, SILENT, HANDSHAKE))
    line = summary.flush(1.5, due)
    assert line is not None and "closed 4 connections" in line and "2 sent part of a request head" in line
    assert "1 sent nothing" in line and "1 did not finish the TLS handshake" in line
    assert summary.cut(SILENT, due + 1) == due + LOG_EVERY_S  # the next line a minute after the last
    assert summary.flush(1.5, due + LOG_EVERY_S) is not None
    assert summary.flush(1.5, due + 2 * LOG_EVERY_S) is None  # nothing counted since
