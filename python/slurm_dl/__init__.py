"""slurm_dl: the client API for training programs run by dlrun.

    srun --mpi=pmix dlrun /usr/bin/python3 train.py

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


def max_steps():
    """The step this run ends at (DL_MAX_STEPS: dl-search's budget for the current rung;
    run steps up to max_steps() - 1, checkpoint, return), or None outside a search."""
    text = os.environ.get("DL_MAX_STEPS")
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"slurm_dl.max_steps: DL_MAX_STEPS={text!r}: expected a whole number >= 1")
    return int(text)
