"""dl-search's claims, checked on the files search.bats writes to its directory."""

import collections
import json
import os
import re

from checks import main


def _load(path):
    with open(path) as f:
        return json.load(f)


def _read(path):
    with open(path) as f:
        return f.read()


def _log(exp, trial, job):
    return _read(os.path.join(os.environ["DL_EXP_ROOT"], exp, "logs", "%s.%s.out" % (trial, job)))


def invariants(exp):
    """Every run of the search: exactly one job per run operation (by its name), every
    trial ended (completed, stopped or failed), every metric step of every trial reported
    once and the steps contiguous from 0 (nothing computed twice, nothing skipped), every
    promoted run resumed from its trial's own checkpoint at the step after the last rung.

    Reads status.json (dl-search status), show.json (dl-exp show), metrics.json (dl-exp
    metrics) and jobs.txt (squeue's name|id|state of the search's jobs)."""
    status = _load("status.json")
    show = _load("show.json")
    metrics = _load("metrics.json")["metrics"]
    jobs = [line.split("|") for line in _read("jobs.txt").split()]
    assert status["finished"] and status["complete"], status
    runs = [o for o in status["operations"] if o["kind"] in ("create", "resume")]
    names = collections.Counter(j[0] for j in jobs)
    assert max(names.values()) == 1, names  # no run submitted twice
    # A run continued in the job of its trial's previous rung has no job of its own.
    own = [o for o in runs if not o["continued"]]
    expected = sorted("dls.%s.%s.%d" % (exp, o["trial"], o["index"]) for o in own)
    assert sorted(names) == expected, (names, runs)
    for o in runs:
        if o["continued"]:
            prev = [p for p in runs if p["trial"] == o["trial"] and p["index"] < o["index"]][-1]
            assert prev["job"] == o["job"] and prev["rung"] == o["rung"] - 1, (prev, o)
    trials = {t["id"]: t for t in status["trials"]}
    # Trials stopped by `dl-search stop EXP TRIAL`: their job cancelled, their steps cut short.
    by_user = {k for k, t in trials.items() if t["reason"] == "stopped by dl-search stop"}
    assert all(j[2] == "COMPLETED" or j[0].split(".")[2] in by_user for j in jobs), jobs
    assert all(t["state"] in ("completed", "stopped", "failed") for t in trials.values()), trials
    states = {t["id"]: t["state"] for t in show["trials"]}
    assert states == {k: t["state"] for k, t in trials.items()}, (states, trials)
    steps = collections.defaultdict(list)
    for m in metrics:
        if m["name"] == status["searcher"]["metric"]:
            steps[m["trial"]].append(m["step"])
    rungs = status["rungs"]
    for tid, t in trials.items():
        if t["state"] == "failed":
            continue
        s = steps[tid]
        assert len(s) == len(set(s)), (tid, sorted(s))  # each step once
        if tid in by_user:
            assert sorted(s) == list(range(len(s))), (tid, sorted(s), t)
            continue
        assert sorted(s) == list(range(rungs[t["rung"]])), (tid, sorted(s), t)
    # Resumes: each promoted run started from a checkpoint of its own trial, at the step
    # after the previous rung's budget.
    ckpts = collections.defaultdict(set)
    for t in show["trials"]:
        for c in t["checkpoints"]:
            ckpts[t["id"]].add(os.path.dirname(c["path"]))
            assert os.path.isdir(c["path"]), c  # kept, stopped trials too
    dirs = [d for v in ckpts.values() for d in v]
    assert len(dirs) == len(set(dirs)), ckpts  # no two trials share a checkpoint directory
    resumes = [o for o in runs
               if o["kind"] == "resume" and o["reason"].startswith(("promoted", "continued"))]
    for o in resumes:
        log = _log(exp, o["trial"], o["job"])
        first = rungs[o["rung"] - 1]
        if o["continued"]:
            # Trained on from memory in the same job, no resume in between.
            assert "continue in job from step %d to budget %d" % (first, o["budget"]) in log, (o, log)
            continue
        assert "start at step %d budget %d" % (first, o["budget"]) in log, (o, log)
        assert "resumed from " in log, log
        path = log.split("resumed from ")[1].split()[0]
        assert os.path.dirname(path) in ckpts[o["trial"]], (path, ckpts[o["trial"]])
    print(len(resumes), "promotions;", len([o for o in runs if o["continued"]]),
          "continued in their job;", len(runs), "runs;", len(trials), "trials")


def table_aligned(path="table.txt"):
    """`dl-search status`'s columns line up with job ids of any length: every trial's
    VALUES column starts where its header does."""
    lines = _read(path).splitlines()
    at = lines[1].index("VALUES")
    rows = [line for line in lines[2:] if line.startswith("t0")]
    assert len(rows) == 8, lines
    assert all(r[at - 1] == " " and r[at:at + 2] == "0:" for r in rows), lines


def plot_marks_rungs(svg_path="plot.svg"):
    """The plot marks each rung's step and who was promoted, stopped or completed there."""
    d = _load("status.json")
    text = " ".join(re.findall(r">([^<>]*)<", _read(svg_path)))
    for k, budget in enumerate(d["rungs"]):
        assert "rung %d: %d steps" % (k, budget) in text, (k, text)
    promoted0 = [t["id"] for t in d["trials"] if t["rung"] > 0]
    stopped0 = [t["id"] for t in d["trials"] if t["rung"] == 0 and t["state"] == "stopped"]
    assert "promoted " + " ".join(promoted0[:6]) in text, (promoted0, text)
    assert "stopped " + " ".join(stopped0[:6]) in text, (stopped0, text)
    assert "completed " + d["best"] in text, text


def page_marks_rungs(rungs_path="rungs.json", dom_path="dom.html"):
    """The web page's rung API agrees with dl-search status; the page drawn by a browser
    (dom.html, where the stack has one) marks the rungs on the ranking metric's curve."""
    d = _load("status.json")
    r = _load(rungs_path)
    assert r["metric"] == "loss" and [x["budget"] for x in r["rungs"]] == d["rungs"], r
    promoted0 = [t["id"] for t in d["trials"] if t["rung"] > 0]
    assert [p["trial"] for p in r["rungs"][0]["promoted"]] == promoted0, (r, promoted0)
    if not os.path.exists(dom_path):
        return
    dom = _read(dom_path)
    page = re.findall(r'<g data-rung="(\d+)" data-promoted="([^"]*)" data-stopped="([^"]*)">', dom)
    assert [int(g[0]) for g in page] == [0, 1, 2], page
    assert page[0][1] == " ".join(promoted0), (page, promoted0)
    assert "rung 0: 2 steps" in dom


def continued_in_one_job(exp, trial="t001"):
    """The trial ran rungs 0 to 2 in one job: one fresh start, no resume from a checkpoint,
    two continuations. Writes the job's id to job.txt."""
    d = _load("status.json")
    runs = [o for o in d["operations"] if o["trial"] == trial and o["kind"] in ("create", "resume")]
    assert [(o["rung"], o["continued"]) for o in runs] == [(0, False), (1, True), (2, True)], runs
    job = runs[0]["job"]
    assert all(o["job"] == job for o in runs), runs
    t = [x for x in d["trials"] if x["id"] == trial][0]
    assert t["state"] == "completed" and sorted(t["rung_values"]) == ["0", "1", "2"], t
    log = _log(exp, trial, job)
    assert log.count("start at step") == 1 and "resumed from" not in log, log
    assert "continue in job from step 2 to budget 4" in log, log
    assert "continue in job from step 4 to budget 8" in log, log
    with open("job.txt", "w") as f:
        f.write(job)


def ranked_promotion():
    """Seed 3 draws lr 0.1 for t001 and 0.001 for t002; the better one is promoted from
    rung 0 in first place and continues in its job."""
    d = _load("status.json")
    lr = {t["id"]: t["hparams"]["lr"] for t in d["trials"]}
    assert lr == {"t001": 0.1, "t002": 0.001}, lr
    good = [t for t, v in lr.items() if v == 0.1][0]
    runs = [o for o in d["operations"] if o["trial"] == good and o["kind"] in ("create", "resume")]
    assert runs[1]["rung"] == 1 and runs[1]["continued"], runs
    assert runs[1]["reason"] == "promoted from rung 0 (place 1 of 2)", runs


if __name__ == "__main__":
    main({f.__name__: f for f in (invariants, table_aligned, plot_marks_rungs, page_marks_rungs,
                                  continued_in_one_job, ranked_promotion)})
