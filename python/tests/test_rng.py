#!/usr/bin/python3
"""slurm_dl._rng: every RNG a training process draws from, captured as bytes and restored,
directly and through a checkpoint."""

import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - the module needs torch; the suite reports a skip
    torch = None

if torch is not None:
    from slurm_dl import _rng, ckpt  # noqa: E402


def draws(gen):
    """A few values from each RNG, Gaussians included (numpy and `random` cache one)."""
    return (
        torch.rand(3).tolist(),
        np.random.rand(3).tolist(),
        float(np.random.randn()),
        random.random(),
        random.gauss(0, 1),
        torch.rand(3, generator=gen).tolist(),
    )


@unittest.skipIf(torch is None, "torch is not installed")
class RngTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(1)
        np.random.seed(1)
        random.seed(1)
        self.gen = torch.Generator()
        self.gen.manual_seed(2)
        self.gens = {"loader": self.gen}
        # Halfway through a Gaussian pair: numpy and `random` hold the second value.
        np.random.randn()
        random.gauss(0, 1)

    def test_restored_rngs_draw_again_what_they_drew(self):
        states = _rng.capture(self.gens)
        self.assertEqual(sorted(states), ["gen.loader", "numpy", "random", "torch"])
        first = draws(self.gen)
        self.assertNotEqual(draws(self.gen), first)
        _rng.restore(states, self.gens)
        self.assertEqual(_rng.capture(self.gens), states)
        self.assertEqual(draws(self.gen), first)

    def test_a_generator_the_states_lack_keeps_its_own(self):
        states = _rng.capture({})
        self.gen.manual_seed(9)
        before = self.gen.get_state()
        torch.rand(1)
        _rng.restore(states, self.gens)
        self.assertTrue(torch.equal(self.gen.get_state(), before))
        self.assertEqual(_rng.capture({}), states)

    def test_every_state_captured_is_read_back_from_a_checkpoint(self):
        states = _rng.capture(self.gens)
        first = draws(self.gen)
        # A generator saved by none: its name is looked for and not found.
        names = _rng.state_names({**self.gens, "other": torch.Generator()})
        self.assertLessEqual(set(states), set(names))
        with tempfile.TemporaryDirectory() as tmp:
            os.environ.pop("DL_CKPT_RUN_ID", None)
            with ckpt.Saver(tmp) as saver:
                saver.save(1, {"x": np.zeros(1, dtype=np.float32)}, rng=states)
            with ckpt.Checkpoint(ckpt.latest_valid(tmp)) as c:
                read = _rng.read(c, 0, names)
        self.assertEqual(read, states)
        _rng.restore(read, self.gens)
        self.assertEqual(draws(self.gen), first)


if __name__ == "__main__":
    unittest.main()
