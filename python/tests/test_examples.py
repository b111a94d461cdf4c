#!/usr/bin/python3
"""The shipped examples/train.py, run as a user runs it, on one CPU rank (gloo): a run
checkpointed at the last batch of an epoch resumes and ends, as one checkpointed anywhere
else does."""

import glob
import os
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "examples", "train.py")

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - the examples need torch; the suite reports a skip
    torch = None

# Runs a program with slurm_dl.should_checkpoint() true after one step, as when dlrun asks
# for a checkpoint at a preemption: python3 -c DRIVER STEP PROGRAM ARGS...
DRIVER = """
import runpy, sys
import slurm_dl
at = int(sys.argv[1])
last = [-1]
report = slurm_dl.report_step
def report_step(step):
    last[0] = step
    report(step)
slurm_dl.report_step = report_step
slurm_dl.should_checkpoint = lambda: last[0] == at
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipIf(torch is None, "needs torch")
class TrainExample(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dl-train-example-")
        self.env = dict(
            os.environ,
            PYTHONPATH=os.path.join(HERE, ".."),
            RANK="0",
            LOCAL_RANK="0",
            WORLD_SIZE="1",
            MASTER_ADDR="127.0.0.1",
            DL_CKPT_DIR=self.dir,
            CUDA_VISIBLE_DEVICES="",
            USE_LIBUV="0",  # as dlrun sets it (Debian's torch 2.6 has no libuv)
        )
        self.env.pop("DL_RESUME_FROM", None)

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.dir], check=True)

    def run_train(self, *args, checkpoint_at=-1, resume=None):
        env = dict(self.env, MASTER_PORT=str(free_port()))
        if resume:
            env["DL_RESUME_FROM"] = resume
        # 64 samples in batches of 32: two steps an epoch.
        cmd = [sys.executable, "-c", DRIVER, str(checkpoint_at), TRAIN, "--samples", "64", *args]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def resumed(self, checkpoint_at):
        """The output of a 2-epoch run resumed from a 1-epoch run's checkpoint after step
        `checkpoint_at`."""
        self.run_train("--epochs", "1", checkpoint_at=checkpoint_at)
        saved = sorted(glob.glob(os.path.join(self.dir, "step-*")))
        self.assertEqual(len(saved), 1, saved)
        return self.run_train("--epochs", "2", resume=saved[0])

    def test_a_checkpoint_at_an_epochs_last_batch_resumes_and_ends(self):
        self.assertIn("epoch 1 loss", self.resumed(1))

    def test_a_checkpoint_mid_epoch_resumes_and_ends(self):
        out = self.resumed(0)
        self.assertIn("epoch 0 loss", out)
        self.assertIn("epoch 1 loss", out)

if __name__ == "__main__":
    unittest.main()
