"""Streaming: an engine call that reports each step to a callback, as a Python generator.

The call runs on a thread of its own; its callback (run by the engine's thread with the
GIL taken again) puts each event on an unbounded queue, so the engine never waits for the
consumer. Closing the generator (``close()``, ``break`` out of a for loop, garbage
collection) makes the next callback return False, which stops the engine; the generator
then waits for the call to return, so nothing runs on once it is closed.
"""

import queue
import threading

_DONE = object()


def stream(run):
    """Yields the events ``run(on_token)`` passes to ``on_token``; returns run's result.

    An exception raised by ``run`` is raised by the generator after the last event.
    """
    events = queue.SimpleQueue()
    closed = threading.Event()
    outcome = {}

    def on_token(event):
        if closed.is_set():
            return False
        events.put(event)
        return not closed.is_set()

    def work():
        try:
            outcome["result"] = run(on_token)
        except BaseException as error:  # carried to the consumer's thread
            outcome["error"] = error
        finally:
            events.put(_DONE)

    thread = threading.Thread(target=work, name="petrel-stream")
    thread.start()
    try:
        while True:
            event = events.get()
            if event is _DONE:
                break
            yield event
    finally:
        closed.set()
        thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
