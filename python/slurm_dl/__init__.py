"""slurm_dl: the client API for training programs run by dlrun.

    dlrun /usr/bin/python3 train.py       (in the batch script)

    import slurm_dl

    start = load(slurm_dl.resume_path()) if slurm_dl.resume_path() else 0
    for step in range(start, steps):
        train_one_step()
        slurm_dl.report_step(step)
        if slurm_dl.should_checkpoint():
            save(step)
            slurm_dl.checkpoint_done(step)

dlrun asks for a checkpoint when the job is preempted, reaches its deadline, gets a stop
signal, or every --dl-ckpt-every; all ranks agree on the step, so should_checkpoint()
becomes true at the same step everywhere (report the same steps on every rank). When the
checkpoint ends the run, dlrun stops the program after checkpoint_done(), or once the
grace time is over.

Outside dlrun every call is a cheap no-op: should_checkpoint() is False and resume_path()
reads DL_RESUME_FROM. The calls work from threads and from child processes (fork or
spawn, e.g. DataLoader workers); report_step and report_metrics from one process per rank.
The same verbs exist in C++ (dl/client.h).
"""

import math
import os
import re
import sys
import threading
import time

from . import _channel, _journal

if os.environ.get("DL_CLIENT_FILE"):
    _channel.mark_attached(os.environ["DL_CLIENT_FILE"])

__all__ = [
    "should_checkpoint",
    "report_step",
    "report_metrics",
    "resume_path",
    "checkpoint_done",
    "hparams",
    "max_steps",
    "next_max_steps",
]

# How long report_step waits for an agreed step: dlrun answers within a second; this
# only matters when dlrun is gone, and then the program carries on rather than hang.
_WAIT_LIMIT = 60.0
_POLL_INTERVAL = 0.001
_METRIC_NAME = re.compile(r"^[A-Za-z0-9_.\-/:]{1,64}$")

_state_lock = threading.Lock()
_state = {"pid": None, "channel": None}


def _channel_or_none():
    pid = os.getpid()
    if _state["pid"] == pid:
        return _state["channel"]
    with _state_lock:
        if _state["pid"] != pid:
            path = os.environ.get("DL_CLIENT_FILE")
            inherited = _state["channel"]
            if inherited is not None and inherited.path == path:
                _state["channel"] = inherited  # the mapping survives fork
            else:
                _state["channel"] = _channel.Channel(path) if path else None
            _state["pid"] = pid
        return _state["channel"]


def _check_step(verb, step):
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"slurm_dl.{verb}({step!r}): the step must be an int >= 0")


def should_checkpoint():
    """True when this rank should write its checkpoint now, at the step it last reported.

    Stays True until checkpoint_done().
    """
    ch = _channel_or_none()
    if ch is None:
        return False
    return _channel.checkpoint_due(
        ch.get(_channel.STEP),
        ch.get(_channel.TARGET_SEQ),
        ch.get(_channel.TARGET_STEP),
        ch.get(_channel.DONE_SEQ),
    )


def report_step(step):
    """The step the program has just finished.

    While a checkpoint round is being agreed this waits (typically milliseconds) until
    the step is known, so that no rank runs past it.
    """
    _check_step("report_step", step)
    ch = _channel_or_none()
    if ch is None:
        return
    ch.set(_channel.STEP, step)
    request = ch.get(_channel.REQUEST_SEQ)
    if not _channel.must_wait_for_target(request, ch.get(_channel.TARGET_SEQ)):
        return
    ch.set(_channel.FROZEN_SEQ, request)
    limit = time.monotonic() + _WAIT_LIMIT
    while _channel.must_wait_for_target(ch.get(_channel.REQUEST_SEQ), ch.get(_channel.TARGET_SEQ)):
        if time.monotonic() > limit:
            print(
                f"slurm_dl: no checkpoint step from dlrun after {_WAIT_LIMIT:.0f}s; continuing",
                file=sys.stderr,
            )
            return
        time.sleep(_POLL_INTERVAL)


def report_metrics(step, metrics):
    """Metrics for the log, the job's status line and experiment tracking, e.g. {"loss": 0.31}.

    Under dlrun with --dl-experiment, rank 0's calls are each recorded once in the
    experiment's store (`dl-exp metrics EXP`).

    Names are letters, digits and "_.-/:"; values finite numbers (numpy scalars work).
    """
    _check_step("report_metrics", step)
    parts = []
    values = {}
    for name in sorted(metrics):
        if not isinstance(name, str) or not _METRIC_NAME.match(name):
            raise ValueError(
                f"slurm_dl.report_metrics: metric name {name!r}: expected 1 to 64 letters, "
                "digits or _.-/:"
            )
        value = float(metrics[name])
        if not math.isfinite(value):
            raise ValueError(f"slurm_dl.report_metrics: metric {name!r} is not finite")
        parts.append(f"{name}={value:.6g}")
        values[name] = value
    _journal.append(step, values)
    ch = _channel_or_none()
    if ch is None:
        return
    ch.write_metrics(step, " ".join(parts))


def resume_path():
    """The newest checkpoint that verifies (DL_RESUME_FROM), or None for a fresh start."""
    return os.environ.get("DL_RESUME_FROM") or None


def checkpoint_done(step):
    """The checkpoint of `step` is durable on this rank (call it after the save returned).

    Also call it for checkpoints the program writes on its own schedule: dlrun shows the
    newest in the job's status line.
    """
    _check_step("checkpoint_done", step)
    ch = _channel_or_none()
    if ch is None:
        return
    ch.set(_channel.DONE_STEP, step)
    target = ch.get(_channel.TARGET_SEQ)
    if target > 0 and step >= ch.get(_channel.TARGET_STEP):
        ch.set(_channel.DONE_SEQ, target)


def hparams():
    """The trial's hyperparameters (a dict) when dl-search runs it (DL_HPARAMS), else {}."""
    import json

    text = os.environ.get("DL_HPARAMS")
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"slurm_dl.hparams: DL_HPARAMS={text!r} is not a JSON object")
    return value


def _decision_dir():
    """(directory, trial, job) of dl-search's decision files, or None without them."""
    d = os.environ.get("DL_SEARCH_DECISIONS")
    trial = os.environ.get("DL_SEARCH_TRIAL")
    job = os.environ.get("SLURM_JOB_ID")
    if not d or not trial or not job:
        return None
    return d, trial, job


# dl-search's decision files, as client/decision_file.h describes them; both are checked
# against tests/unit/client/decision_cases.txt.
def _decision_name(trial, job, rung):
    return f"{trial}.{job}.r{rung}"


def _parse_decision(text):
    """(rung, budget) of a "continue RUNG BUDGET" decision; None for "end" or anything else."""
    words = text.split()
    if len(words) != 3 or words[0] != "continue" or not all(
        w.isascii() and w.isdigit() and len(w) <= 18 for w in words[1:]
    ):
        return None
    return int(words[1]), int(words[2])


def _read_decision(path):
    """A decision file's text, or None while it does not exist."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def _rung_and_budget():
    """(rung, budget) of this run: DL_SEARCH_RUNG and DL_MAX_STEPS, followed along the
    decisions to continue in this job (a requeued job that had continued resumes at the
    rung it had reached, not the one it was submitted for)."""
    text = os.environ.get("DL_MAX_STEPS")
    if not text:
        return None, None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"slurm_dl.max_steps: DL_MAX_STEPS={text!r}: expected a whole number >= 1")
    budget = int(text)
    rung_text = os.environ.get("DL_SEARCH_RUNG", "")
    rung = int(rung_text) if rung_text.isdigit() else None
    where = _decision_dir()
    while where is not None and rung is not None:
        d, trial, job = where
        text = _read_decision(os.path.join(d, _decision_name(trial, job, rung)))
        decision = _parse_decision(text) if text is not None else None
        if decision is None:
            break
        rung, budget = decision
    return rung, budget


def max_steps():
    """The step this run ends at (DL_MAX_STEPS: dl-search's budget for the current rung;
    run steps up to max_steps() - 1, checkpoint, then ask next_max_steps()), or None
    outside a search. In a job that dl-search continued to a later rung, that rung's."""
    return _rung_and_budget()[1]


def next_max_steps():
    """After the rung's last step is reported and its checkpoint done (checkpoint_done),
    asks dl-search whether this job goes on to the next rung (in-job continuation, asha's
    default): the next rung's budget (train on from memory up to it - 1, checkpoint, ask
    again), or None: exit as usual. Waits DL_SEARCH_WAIT seconds at most (a few polls of
    the driver); if no decision comes (the driver is slow or gone), the trial decides
    None itself, atomically, so that the driver then runs the rung as a new job that
    resumes from the checkpoint. None at once outside a search, after the last rung, or
    when the search does not continue in jobs."""
    where = _decision_dir()
    rung, budget = _rung_and_budget()
    if where is None or rung is None:
        return None
    rungs = [int(b) for b in os.environ.get("DL_SEARCH_RUNGS", "").split(",") if b.isdigit()]
    if not rungs or budget >= rungs[-1]:
        return None
    d, trial, job = where
    path = os.path.join(d, _decision_name(trial, job, rung))
    if os.environ.get("RANK", "0") == "0" and not os.path.exists(path + ".wait"):
        tmp = f"{path}.wait.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(f"{budget - 1}\n")
        os.rename(tmp, path + ".wait")
    limit = time.monotonic() + float(os.environ.get("DL_SEARCH_WAIT", "3"))
    text = _read_decision(path)
    while text is None and time.monotonic() < limit:
        time.sleep(0.02)
        text = _read_decision(path)
    if text is None:
        # No decision in time: "end", unless the driver's came first (link is atomic).
        tmp = f"{path}.end.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write("end\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        text = _read_decision(path)
    decision = _parse_decision(text) if text is not None else None
    if decision is None:
        return None
    rung, budget = decision
    os.environ["DL_SEARCH_RUNG"] = str(rung)
    os.environ["DL_MAX_STEPS"] = str(budget)
    return budget
