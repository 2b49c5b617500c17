"""The streaming helper: closing the generator makes the next callback return False, and
the generator waits for the call to end; errors reach the consumer."""

import threading

import pytest

from petrel._stream import stream


def test_close_stops_the_producer():
    answers = []
    may_go_on = threading.Event()

    def run(callback):
        # A producer that waits for the consumer after each event: deterministic.
        for i in range(1000):
            answer = callback(i)
            answers.append(answer)
            if not answer:
                return "stopped"
            may_go_on.wait()
            may_go_on.clear()
        return "finished"

    events = stream(run)
    assert next(events) == 0
    may_go_on.set()
    assert next(events) == 1
    closer = threading.Timer(0.05, may_go_on.set)  # lets the producer reach its next callback
    closer.start()
    events.close()
    closer.join()
    assert answers[-1] is False and len(answers) <= 3


def test_result_and_errors():
    def run(callback):
        for i in range(3):
            callback(i)
        return "done"

    events = stream(run)
    items = []
    while True:
        try:
            items.append(next(events))
        except StopIteration as stop:
            assert stop.value == "done"
            break
    assert items == [0, 1, 2]

    def failing(callback):
        callback(0)
        raise LookupError("engine failed")

    with pytest.raises(LookupError, match="engine failed"):
        list(stream(failing))
