"""Turns at the cores for processes side by side: make demo's 5 branches on a 2-core CPU, one thread each.

Five processes of one thread on two cores ran 575 clips/s together on the Xeon with AMX, two of them 800: five share
two cores' caches and time slices. Two at a time (demo.py --branch-jobs 2) loses that again at the end, where the
fifth branch runs alone on one core. Taking turns keeps all five going: at most one per core computes at once, and
each hands its turn on after every epoch, first come, first served. Each still trains on its own thread, so its
numbers are the ones it has side by side (lab/BENCHMARKS.md).

The turn is handed on in train.main's report, which comes before the epoch's checkpoint: a branch waiting for its next
turn holds its last epoch unsaved, and Ctrl-C then costs it that epoch, trained again on the rerun as a computing
branch's epoch in progress is. A process that dies holding a turn never gives it back; the pool then breaks and ends
them all. Turns are one pool's: a setting of --jobs that runs its own branches side by side holds its turn meanwhile.

    demo.side_by_side(fn, calls, jobs)  # uses turns_for(jobs, os.cpu_count(), context)
"""

TURNS = None  # this process's Turns (demo._job_init sets it), or None: it computes whenever it likes


class Turns:
    """At most n of the processes that share it compute at once: a process takes a ticket and waits until fewer than
    n tickets before its own are still out; give() hands the oldest turn on."""

    def __init__(self, context, n):
        self.n, self.ready = n, context.Condition()
        self.asked, self.given = context.Value("i", 0, lock=False), context.Value("i", 0, lock=False)  # under ready

    def take(self):
        with self.ready:
            ticket, self.asked.value = self.asked.value, self.asked.value + 1
            self.ready.wait_for(lambda: ticket < self.given.value + self.n)

    def give(self):
        with self.ready:
            self.given.value += 1
            self.ready.notify_all()


def turns_for(jobs, cores, context):
    """Turns for `jobs` processes where they outnumber the cores (each has one thread then: demo._job_init), or None."""
    return Turns(context, cores) if jobs > cores else None


def in_turn(fn, *call):
    """fn(*call) in a turn of this process's Turns, if it has one; the turn is given back however fn ends."""
    if TURNS is None:
        return fn(*call)
    TURNS.take()
    try:
        return fn(*call)
    finally:
        TURNS.give()


def each_epoch(report):
    """train.main's `report`, which in a process taking turns also hands its turn on after each epoch's record: the
    next epoch waits for a turn of its own."""
    if TURNS is None:
        return report

    def handing_on(record, *rest):
        report(record, *rest)
        if record is not None:  # None: the bank a run starts from, before its first epoch
            TURNS.give()
            TURNS.take()

    return handing_on
