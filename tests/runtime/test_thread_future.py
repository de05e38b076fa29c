"""ThreadFuture: answered once, from any thread; ``get`` returns the answer or raises Timeout, and never misses one.

Its condition is made only by a ``get`` that has to wait, so what matters is
the race between an answer and a ``get`` that is just starting to wait: a
wake-up must not be lost, whichever comes first.
"""

from __future__ import annotations

import threading

import pytest

from gliding_actors.errors import ConflictError, InvalidInput, Timeout
from gliding_actors.runtime._future import ThreadFuture


def test_an_answer_given_before_get_is_returned_at_once() -> None:
    future: ThreadFuture[int] = ThreadFuture(5.0)
    future.set_result(7)
    assert future.get() == 7 and future.get(0) == 7
    failed: ThreadFuture[int] = ThreadFuture(5.0)
    failed.set_exception(ConflictError("no"))
    with pytest.raises(ConflictError):
        failed.get(0)


def test_get_waits_for_an_answer_from_another_thread() -> None:
    future: ThreadFuture[str] = ThreadFuture(5.0)
    answer = threading.Timer(0.05, future.set_result, args=("late",))
    answer.start()
    assert future.get() == "late"
    answer.join()


def test_an_unanswered_future_times_out_and_a_bad_timeout_is_refused() -> None:
    future: ThreadFuture[int] = ThreadFuture(0.05, description="nobody")
    with pytest.raises(Timeout, match="nobody"):
        future.get()  # the default timeout
    with pytest.raises(Timeout):
        future.get(0.01)
    with pytest.raises(InvalidInput):
        future.get(float("nan"))
    future.set_result(1)  # a late answer is still taken, once
    assert future.get(0) == 1
    with pytest.raises(RuntimeError, match="answered twice"):
        future.set_result(2)


class _AnsweredRightAfterTheFirstLook(ThreadFuture[int]):
    """Answered by another thread right after ``get`` first found it unanswered (before it waits)."""

    looks = 0

    def done(self) -> bool:
        answered = super().done()
        self.looks += 1
        if self.looks == 1:
            answerer = threading.Thread(target=self.set_result, args=(5,))
            answerer.start()
            answerer.join()
        return answered


def test_an_answer_landing_between_the_first_look_and_the_wait_is_not_lost() -> None:
    future = _AnsweredRightAfterTheFirstLook(5.0)
    assert future.get(1.0) == 5


def test_no_answer_is_lost_when_it_races_the_first_wait() -> None:
    """Two thousand futures, each answered by another thread just as this one starts to wait on it."""
    futures: list[ThreadFuture[int]] = [ThreadFuture(2.0) for _ in range(2000)]
    asked = threading.Semaphore(0)

    def answer() -> None:
        for i, future in enumerate(futures):
            asked.acquire()  # this thread's get of future i is starting now
            future.set_result(i)

    answerer = threading.Thread(target=answer)
    answerer.start()
    answers = []
    for future in futures:
        asked.release()
        answers.append(future.get())
    answerer.join()
    assert answers == list(range(2000))
