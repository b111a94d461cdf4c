#!/usr/bin/python3
"""The Python client (slurm_dl) against a channel page as dlrun sets it up."""

import ctypes
import mmap
import multiprocessing
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import slurm_dl  # noqa: E402
from slurm_dl import _channel as ch  # noqa: E402


def make_page(path):
    """What dlrun does before it starts the program (launcher/channel_file.cc)."""
    with open(path, "wb") as f:
        f.truncate(ch.SIZE)
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, ch.SIZE)
    os.close(fd)
    ctypes.c_uint32.from_buffer(m, 0).value = ch.MAGIC
    ctypes.c_uint32.from_buffer(m, 4).value = ch.VERSION
    ctypes.c_uint32.from_buffer(m, 8).value = ch.SIZE
    for offset in (ch.STEP, ch.DONE_STEP, ch.METRICS_STEP):
        ctypes.c_int64.from_buffer(m, offset).value = -1
    return m


def field(m, offset):
    return ctypes.c_int64.from_buffer(m, offset)


def child_should_checkpoint(queue):
    queue.put(slurm_dl.should_checkpoint())


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "page")
        self.page = make_page(self.path)
        os.environ["DL_CLIENT_FILE"] = self.path
        slurm_dl._state.update(pid=None, channel=None)  # a fresh process, as far as it knows

    def tearDown(self):
        os.environ.pop("DL_CLIENT_FILE", None)
        os.environ.pop("DL_RESUME_FROM", None)
        slurm_dl._state.update(pid=None, channel=None)
        self.dir.cleanup()

    def test_outside_dlrun_everything_is_a_no_op(self):
        del os.environ["DL_CLIENT_FILE"]
        os.environ["DL_RESUME_FROM"] = "/ckpt/step-000000042"
        slurm_dl.report_step(5)
        slurm_dl.report_metrics(5, {"loss": 1.5})
        slurm_dl.checkpoint_done(5)
        self.assertFalse(slurm_dl.should_checkpoint())
        self.assertEqual(slurm_dl.resume_path(), "/ckpt/step-000000042")
        del os.environ["DL_RESUME_FROM"]
        self.assertIsNone(slurm_dl.resume_path())

    def test_search_hparams_and_budget(self):
        for name in ("DL_HPARAMS", "DL_MAX_STEPS"):
            os.environ.pop(name, None)
        self.assertEqual(slurm_dl.hparams(), {})
        self.assertIsNone(slurm_dl.max_steps())
        os.environ["DL_HPARAMS"] = '{"lr": 0.01, "act": "relu", "layers": 3}'
        os.environ["DL_MAX_STEPS"] = "16"
        try:
            self.assertEqual(slurm_dl.hparams(), {"lr": 0.01, "act": "relu", "layers": 3})
            self.assertEqual(slurm_dl.max_steps(), 16)
            os.environ["DL_MAX_STEPS"] = "x"
            self.assertRaises(ValueError, slurm_dl.max_steps)
            os.environ["DL_HPARAMS"] = "[1]"
            self.assertRaises(ValueError, slurm_dl.hparams)
        finally:
            del os.environ["DL_HPARAMS"], os.environ["DL_MAX_STEPS"]

    def test_report_step_waits_for_the_agreed_step(self):
        slurm_dl.report_step(9)
        self.assertEqual(field(self.page, ch.STEP).value, 9)
        field(self.page, ch.REQUEST_SEQ).value = 1

        def dlrun():
            while field(self.page, ch.FROZEN_SEQ).value != 1:
                pass
            self.seen_step = field(self.page, ch.STEP).value
            field(self.page, ch.TARGET_STEP).value = 10
            field(self.page, ch.TARGET_SEQ).value = 1

        t = threading.Thread(target=dlrun)
        t.start()
        slurm_dl.report_step(10)
        t.join()
        self.assertEqual(self.seen_step, 10, "frozen at the step it reported")
        self.assertTrue(slurm_dl.should_checkpoint())
        self.assertTrue(slurm_dl.should_checkpoint(), "until checkpoint_done")
        slurm_dl.checkpoint_done(10)
        self.assertFalse(slurm_dl.should_checkpoint())
        self.assertEqual(field(self.page, ch.DONE_STEP).value, 10)
        self.assertEqual(field(self.page, ch.DONE_SEQ).value, 1)

    def test_a_rank_behind_the_target_checkpoints_when_it_gets_there(self):
        slurm_dl.report_step(10)
        field(self.page, ch.REQUEST_SEQ).value = 1
        field(self.page, ch.TARGET_STEP).value = 11
        field(self.page, ch.TARGET_SEQ).value = 1
        self.assertFalse(slurm_dl.should_checkpoint())
        slurm_dl.report_step(11)
        self.assertTrue(slurm_dl.should_checkpoint())

    def test_metrics_are_written_under_the_seqlock(self):
        slurm_dl.report_metrics(7, {"loss": 0.25, "acc": 0.9})
        self.assertEqual(field(self.page, ch.METRICS_SEQ).value, 2)
        self.assertEqual(field(self.page, ch.METRICS_STEP).value, 7)
        text = bytes(self.page[ch.METRICS : ch.METRICS + 64]).split(b"\0")[0]
        self.assertEqual(text, b"acc=0.9 loss=0.25", "the same text the C++ client writes")

    def test_bad_arguments_are_rejected(self):
        for bad in (-1, 1.5, True, "3"):
            with self.assertRaisesRegex(ValueError, r"the step must be an int >= 0"):
                slurm_dl.report_step(bad)
        with self.assertRaisesRegex(ValueError, r"metric name 'bad name'"):
            slurm_dl.report_metrics(1, {"bad name": 1.0})
        with self.assertRaisesRegex(ValueError, r"metric 'loss' is not finite"):
            slurm_dl.report_metrics(1, {"loss": float("nan")})

    def test_a_file_that_is_not_a_channel_is_an_error(self):
        other = os.path.join(self.dir.name, "other")
        with open(other, "wb") as f:
            f.truncate(ch.SIZE)
        os.environ["DL_CLIENT_FILE"] = other
        with self.assertRaisesRegex(RuntimeError, r"is not a dlrun channel of version 1"):
            slurm_dl.should_checkpoint()

    def test_multiprocessing_children_see_the_request(self):
        slurm_dl.report_step(4)
        field(self.page, ch.REQUEST_SEQ).value = 1
        field(self.page, ch.TARGET_STEP).value = 4
        field(self.page, ch.TARGET_SEQ).value = 1
        for method in ("fork", "spawn"):
            ctx = multiprocessing.get_context(method)
            queue = ctx.Queue()
            p = ctx.Process(target=child_should_checkpoint, args=(queue,))
            p.start()
            self.assertTrue(queue.get(timeout=30), method)
            p.join()


class DecisionFileTest(unittest.TestCase):
    """dl-search's decision files, read as the C++ side reads them: the shared cases."""

    CASES = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "unit", "client",
        "decision_cases.txt",
    )

    def test_agrees_with_the_shared_cases(self):
        cases = 0
        with open(self.CASES) as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                kind, *fields = line.split("\t")
                with self.subTest(line=line):
                    if kind == "parse":
                        text, want = fields
                        got = slurm_dl._parse_decision(text.replace("\\n", "\n"))
                        self.assertEqual("end" if got is None else "continue %d %d" % got, want)
                    else:
                        self.assertEqual(kind, "name")
                        trial, job, rung, want = fields
                        self.assertEqual(slurm_dl._decision_name(trial, job, int(rung)), want)
                cases += 1
        self.assertGreaterEqual(cases, 10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
