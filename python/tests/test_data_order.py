#!/usr/bin/python3
"""slurm_dl._data_order: each sample's seed a pure function of its place in the epoch, the
epoch's order drawn again from the loader's generator, a resumed epoch the tail of the
whole one whichever worker loads it, and what DataLoaders are refused."""

import os
import random
import signal
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - the module needs torch; the suite reports a skip
    torch = None

if torch is not None:
    from slurm_dl import _data_order  # noqa: E402
    from slurm_dl.torch import StateError  # noqa: E402


class Noisy(torch.utils.data.Dataset if torch is not None else object):
    """A sample: its index and a draw from each RNG an augmentation may use."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i, torch.rand(()).item(), float(np.random.rand()), random.random()


def plain(batches):
    return [[t.tolist() for t in batch] for batch in batches]


@unittest.skipIf(torch is None, "torch is not installed")
class SampleSeedTest(unittest.TestCase):
    def test_a_samples_seed_is_stable_and_distinct_for_each_place(self):
        # Pinned: a checkpoint of an earlier version resumes with the same augmentation.
        self.assertEqual(_data_order._sample_seed(12345, 3, 1), 6626301809852931896)
        places = [(e, b, p) for e in (0, 1, -5, 2**62) for b in range(5) for p in range(5)]
        seeds = [_data_order._sample_seed(*place) for place in places]
        self.assertEqual(len(set(seeds)), len(places))
        self.assertTrue(all(0 <= s < 2**63 for s in seeds))

    def test_a_sample_loads_the_same_whatever_was_loaded_before(self):
        data = _data_order._SeededDataset(Noisy(8))
        torch.manual_seed(0)
        rngs = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
        first = data[(7, 2, 1, 5)]
        data[(7, 0, 0, 3)]
        self.assertEqual(data[(7, 2, 1, 5)], first)
        self.assertEqual(first[0], 5)
        self.assertNotEqual(data[(7, 2, 0, 5)][1:], first[1:])  # another place: other draws
        # Loaded in the training process: its own RNG streams have not moved.
        self.assertTrue(torch.equal(torch.get_rng_state(), rngs[0]))
        self.assertTrue((np.random.get_state()[1] == rngs[1]).all())
        self.assertEqual(random.getstate(), rngs[2])


@unittest.skipIf(torch is None, "torch is not installed")
class LoaderTest(unittest.TestCase):
    def loader(self, workers=0, batch_size=3, **kwargs):
        gen = torch.Generator()
        gen.manual_seed(3)
        return torch.utils.data.DataLoader(
            Noisy(10), batch_size, shuffle=True, generator=gen, num_workers=workers, **kwargs
        )

    def epoch(self, loader, start):
        """The epoch seed, the number of batches and the batches from `start` on."""
        derived = _data_order.Loader(loader, "loader")
        seed, n = derived.start_epoch(start)
        return seed, n, plain(derived.derived)

    def test_an_epoch_resumed_at_a_batch_is_the_tail_of_the_whole_one(self):
        loader = self.loader()
        at_start = loader.generator.get_state()
        seed, n, whole = self.epoch(loader, 0)
        self.assertEqual(n, 4)
        self.assertEqual(sorted(i for batch in whole for i in batch[0]), list(range(10)))
        loader.generator.set_state(at_start)
        self.assertEqual(self.epoch(loader, 2), (seed, n, whole[2:]))
        loader.generator.set_state(at_start)
        self.assertEqual(self.epoch(loader, 9), (seed, n, []))
        # The generator moved on: the next epoch has another seed and order.
        other_seed, _, other = self.epoch(loader, 0)
        self.assertNotEqual((other_seed, other), (seed, whole))

    def test_workers_load_what_the_training_process_would(self):
        _, _, here = self.epoch(self.loader(), 1)
        _, _, workers = self.epoch(self.loader(workers=2), 1)
        self.assertEqual(workers, here)

    def test_set_epoch_reaches_the_loaders_sampler(self):
        data = Noisy(10)
        sampler = torch.utils.data.DistributedSampler(data, num_replicas=2, rank=1)
        loader = torch.utils.data.DataLoader(data, batch_size=2, sampler=sampler)
        _data_order.Loader(loader, "loader").set_epoch(4)
        self.assertEqual(sampler.epoch, 4)

    def test_loaders_without_an_order_or_batches_are_refused(self):
        class Stream(torch.utils.data.IterableDataset):
            def __iter__(self):
                return iter(range(3))

        with self.assertRaises(StateError) as e:
            _data_order.Loader(torch.utils.data.DataLoader(Stream()), "train")
        self.assertIn("train: a DataLoader over an IterableDataset", str(e.exception))
        with self.assertRaises(StateError) as e:
            _data_order.Loader(self.loader(batch_size=None), "train")
        self.assertIn("train: batches() needs a DataLoader with a batch size", str(e.exception))

    def test_workers_keep_sigterm_ignored_when_the_training_process_does(self):
        old = signal.getsignal(signal.SIGTERM)
        called = []
        try:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            init = _data_order.Loader(self.loader(worker_init_fn=called.append), "l")
            init = init.derived.worker_init_fn
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as PyTorch's workers set it
            init(3)
            self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_IGN)
            self.assertEqual(called, [3])
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            init = _data_order.Loader(self.loader(), "l").derived.worker_init_fn
            init(0)
            self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)
        finally:
            signal.signal(signal.SIGTERM, old)


if __name__ == "__main__":
    unittest.main()
