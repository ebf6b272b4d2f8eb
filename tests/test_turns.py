"""Turns at the cores (tools/turns.py): never more than n processes compute at once, every process gets its turns,
a turn is given back however the job ends, and a run hands its turn on after each epoch, not before the first."""

import multiprocessing
import time

import pytest

from tools import turns
from tools.turns import Turns, each_epoch, in_turn, turns_for

FORK = "fork" in multiprocessing.get_all_start_methods()


def _epochs(shared, start, holding, most, done, epochs):
    start.wait()  # all five ask at once: two of them must be computing together
    shared.take()
    for _ in range(epochs):
        with holding.get_lock():
            holding.value += 1
            most.value = max(most.value, holding.value)
        time.sleep(0.02)  # an epoch
        with holding.get_lock():
            holding.value -= 1
        shared.give()
        shared.take()
    shared.give()
    with done.get_lock():
        done.value += 1


@pytest.mark.skipif(not FORK, reason="the fork start method")
def test_no_more_than_n_processes_compute_at_once_and_all_of_them_finish():
    context = multiprocessing.get_context("fork")  # no interpreter to start: a second, not 5 imports of torch
    shared = Turns(context, 2)
    holding, most, done = context.Value("i", 0), context.Value("i", 0), context.Value("i", 0)
    start = context.Barrier(5)
    work = (shared, start, holding, most, done, 4)
    procs = [context.Process(target=_epochs, args=work, daemon=True) for _ in range(5)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout=60)
        assert not any(p.is_alive() for p in procs), "a process waits for a turn that never comes"
    finally:
        for p in procs:
            p.kill()
    assert done.value == 5 and all(p.exitcode == 0 for p in procs)
    assert most.value == 2  # five wanted the cores at once, two had them
    assert shared.given.value == shared.asked.value == 5 * 5  # every ticket taken was given back


def test_turns_are_served_in_the_order_they_were_asked_for():
    import threading

    shared, served = Turns(multiprocessing.get_context(), 1), []
    shared.take()  # the cores are busy: the next three wait, in the order they ask

    def wait(name):
        shared.take()
        served.append(name)
        shared.give()

    waiting = []
    for name in "abc":
        waiting.append(threading.Thread(target=wait, args=(name,)))
        waiting[-1].start()
        while shared.asked.value < len(waiting) + 1:  # its ticket is out before the next asks
            time.sleep(0.001)
    shared.give()
    for t in waiting:
        t.join(timeout=10)
    assert served == ["a", "b", "c"]


def test_turns_only_where_the_processes_outnumber_the_cores():
    context = multiprocessing.get_context()
    assert turns_for(5, 2, context).n == 2  # make demo's branches on 2 cores: one thread each, two at a time
    assert turns_for(3, 2, context).n == 2 and turns_for(5, 4, context).n == 4
    assert turns_for(2, 2, context) is None and turns_for(5, 16, context) is None  # a core or more each


class _Record(Turns):
    def __init__(self):
        self.said = []

    def take(self):
        self.said.append("take")

    def give(self):
        self.said.append("give")


def test_a_run_hands_its_turn_on_after_each_epoch_and_gives_it_back_when_it_fails(monkeypatch):
    reported = []
    report = lambda record, *rest: reported.append(record)  # noqa: E731
    assert each_epoch(report) is report and in_turn(max, 1, 2) == 2  # outside a pool: nothing changes
    monkeypatch.setattr(turns, "TURNS", _Record())
    handing_on = each_epoch(report)
    handing_on(None, "bank")  # the bank before the first epoch: the turn is kept
    assert turns.TURNS.said == [] and reported == [None]
    handing_on({"epoch": 1}, "bank")
    assert turns.TURNS.said == ["give", "take"] and reported == [None, {"epoch": 1}]  # reported, then handed on
    turns.TURNS.said.clear()

    def fails():
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        in_turn(fails)
    assert turns.TURNS.said == ["take", "give"]
