#!/usr/bin/python3
"""slurm_dl._tensor_io: key paths as dl-ckpt names, each rank's rows of a tensor, and the
parts a Writer gives each rank."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - the module needs torch; the suite reports a skip
    torch = None

if torch is not None:
    from slurm_dl import _tensor_io  # noqa: E402


@unittest.skipIf(torch is None, "torch is not installed")
class TensorIoTest(unittest.TestCase):
    def test_a_key_is_one_name_component_and_keys_stay_distinct(self):
        cases = {
            "fc.weight": "fc.weight",
            3: "3",
            "a/b": "a+2Fb",
            "a+2Fb": "a+2B2Fb",
            "é": "+C3+A9",
            "": "+",
            ".": "+2E",
            "..": "+2E2E",
            "...": "...",
        }
        for key, name in cases.items():
            self.assertEqual(_tensor_io._component(key), name, key)

    def test_the_ranks_rows_split_a_tensor_as_numpy_does(self):
        for n in range(12):
            for world in range(1, 6):
                sizes = [len(s) for s in np.array_split(np.arange(n), world)]
                starts = [sum(sizes[:r]) for r in range(world)]
                self.assertEqual(
                    [_tensor_io._rows(n, r, world) for r in range(world)],
                    [(lo, lo + size) for lo, size in zip(starts, sizes)],
                )

    def test_each_rank_writes_its_rows_and_rank_0_alone_the_rest(self):
        weight = torch.arange(14.0).reshape(7, 2)
        state = {"w": weight, "step": torch.tensor(3.0), "mean": torch.ones(3)}
        parts = []
        for rank in range(2):
            writer = _tensor_io.Writer(rank, 2)
            tree = {k: writer.value(v, ("m", k), rank0_only=k == "mean") for k, v in state.items()}
            parts.append(writer.parts)
        self.assertEqual(tree["w"], {"tensor": "m/w", "dtype": "float32", "shape": [7, 2]})
        self.assertEqual(sorted(parts[0]), ["m/mean", "m/step", "m/w"])
        self.assertEqual(sorted(parts[1]), ["m/w"])
        for rank, (lo, hi) in enumerate([(0, 4), (4, 7)]):
            part = parts[rank]["m/w"]
            np.testing.assert_array_equal(part.array, weight[lo:hi].numpy())
            self.assertEqual((tuple(part.global_shape), tuple(part.offset)), ((7, 2), (lo, 0)))
        self.assertEqual(parts[0]["m/step"].array.shape, (1,))  # dl-ckpt has no 0-d tensors

        dry = _tensor_io.Writer(0, 1, dry=True)
        self.assertIsNone(dry.value(weight, ("m", "w"))["tensor"])
        self.assertEqual(dry.parts, {})


if __name__ == "__main__":
    unittest.main()
