#!/usr/bin/python3
"""slurm_dl.ckpt against libdlckpt (DL_CKPT_LIB): the files the C++ library writes."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from slurm_dl import ckpt  # noqa: E402


def save_as_rank(root, rank, world, w):
    """One rank's save, in a child process as under dlrun (RANK, WORLD_SIZE)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), DL_CKPT_RUN_ID="test-run")
            rows = len(w) // world
            part = ckpt.Part(w[rank * rows:(rank + 1) * rows], global_shape=w.shape,
                             offset=(rank * rows, 0))
            with ckpt.Saver(root) as saver:
                saver.save(7, {"model/w": part}, rng={"numpy": bytes([rank, 42])})
            code = 0
        except Exception as e:  # the parent sees the exit status; the reason goes to stderr
            print(f"rank {rank}: {e}", file=sys.stderr)
        finally:
            os._exit(code)
    return pid


class CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        for name in ("RANK", "WORLD_SIZE", "DL_CKPT_DIR", "DL_CKPT_RUN_ID"):
            os.environ.pop(name, None)

    def tearDown(self):
        self.tmp.cleanup()

    def test_save_then_read_back_every_dtype(self):
        tensors = {
            "a/f32": np.arange(12, dtype=np.float32).reshape(3, 4),
            "a/f64": np.linspace(0, 1, 5),
            "b/i64": np.array([-1, 2**40], dtype=np.int64),
            "b/u8": np.frombuffer(b"bytes", dtype=np.uint8),
        }
        with ckpt.Saver(self.root) as saver:
            saver.save(3, tensors, meta={"epoch": 2})
        path = ckpt.latest_valid(self.root)
        self.assertIsNotNone(path)
        with ckpt.Checkpoint(path) as c:
            self.assertEqual(c.step, 3)
            self.assertEqual(c.world_size, 1)
            self.assertEqual(set(c.tensors), set(tensors))
            for name, array in tensors.items():
                got = c.read(name)
                self.assertEqual(got.dtype, array.dtype, name)
                np.testing.assert_array_equal(got, array, name)

    def test_latest_valid_of_an_empty_directory_is_none(self):
        self.assertIsNone(ckpt.latest_valid(self.root))

    def test_async_save_is_complete_after_wait(self):
        w = np.ones(1000)
        with ckpt.Saver(self.root) as saver:
            saver.save(1, {"w": w}, async_=True)
            saver.wait()
        with ckpt.Checkpoint(ckpt.latest_valid(self.root)) as c:
            np.testing.assert_array_equal(c.read("w"), w)

    def test_two_ranks_write_one_checkpoint_that_one_reader_reshards(self):
        w = np.arange(40, dtype=np.float64).reshape(8, 5)
        pids = [save_as_rank(self.root, r, 2, w) for r in (0, 1)]
        for pid in pids:
            self.assertEqual(os.waitpid(pid, 0)[1], 0)
        with ckpt.Checkpoint(ckpt.latest_valid(self.root)) as c:
            self.assertEqual(c.world_size, 2)
            np.testing.assert_array_equal(c.read("model/w"), w)
            # A box across both ranks' rows, as a reader of another world size asks for.
            np.testing.assert_array_equal(c.read("model/w", (3, 1), (2, 3)), w[3:5, 1:4])
            self.assertEqual(c.rng("numpy", rank=1), bytes([1, 42]))

    def test_a_corrupted_tensor_is_refused_by_name(self):
        with ckpt.Saver(self.root) as saver:
            saver.save(1, {"w": np.full(4096, 3.0)})
        path = ckpt.latest_valid(self.root)
        shard = next(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".h5"))
        with open(shard, "rb") as f:
            data = bytearray(f.read())
        at = data.find(np.full(8, 3.0).tobytes())
        self.assertGreater(at, 0)
        data[at] ^= 0xFF
        with open(shard, "wb") as f:
            f.write(data)
        with ckpt.Checkpoint(path) as c:
            with self.assertRaisesRegex(ckpt.CheckpointError, "checksum"):
                c.read("w")

    def test_an_unsupported_dtype_names_the_tensor_and_the_choices(self):
        with ckpt.Saver(self.root) as saver:
            with self.assertRaisesRegex(ckpt.CheckpointError, "^c: numpy dtype complex128.*f32"):
                saver.save(1, {"c": np.zeros(2, dtype=np.complex128)})

    def test_an_unknown_tensor_is_an_error(self):
        with ckpt.Saver(self.root) as saver:
            saver.save(1, {"w": np.zeros(2)})
        with ckpt.Checkpoint(ckpt.latest_valid(self.root)) as c:
            with self.assertRaisesRegex(ckpt.CheckpointError, "no tensor 'x'"):
                c.read("x")


if __name__ == "__main__":
    unittest.main()
