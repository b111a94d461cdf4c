"""A DataLoader's epoch in an order that a resumed run draws again: the order and an epoch
seed come from the RNGs at the start of the epoch, and each sample is loaded with the RNGs
seeded from (epoch seed, batch, position), whichever worker loads it.
"""

import hashlib
import random
import signal
import struct

import numpy as np
import torch

from slurm_dl._errors import StateError


def _sample_seed(epoch_seed, batch, position):
    """The seed of the sample at `position` of `batch` in the epoch seeded `epoch_seed`."""
    digest = hashlib.blake2b(
        struct.pack("<qqq", epoch_seed, batch, position), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class _SeededDataset(torch.utils.data.Dataset):
    """The loader's dataset, each sample loaded with the RNGs seeded from its place in the
    epoch, so that augmentation does not depend on which worker loads it or on what that
    worker loaded before (a resumed epoch skips batches)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, key):
        epoch_seed, batch, position, index = key
        seed = _sample_seed(epoch_seed, batch, position)
        if torch.utils.data.get_worker_info() is None:
            # Loading in the training process: its own RNG stream must not move.
            saved = (torch.get_rng_state(), np.random.get_state(), random.getstate())
            try:
                _seed_all(seed)
                return self.dataset[index]
            finally:
                torch.set_rng_state(saved[0])
                np.random.set_state(saved[1])
                random.setstate(saved[2])
        _seed_all(seed)
        return self.dataset[index]


def _seed_all(seed):
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)


class _EpochBatches(torch.utils.data.Sampler):
    """The epoch's batches of indices from `start` on, tagged with their place."""

    def __init__(self):
        self.seed, self.batches, self.start = 0, [], 0

    def __iter__(self):
        seed, batches = self.seed, self.batches
        for b in range(self.start, len(batches)):
            yield [(seed, b, j, index) for j, index in enumerate(batches[b])]

    def __len__(self):
        return len(self.batches) - self.start


class _WorkerInit:
    """Keeps SIGTERM ignored in DataLoader workers when the training process ignores it.

    dlrun starts the program with SIGTERM ignored (a stop signal means: checkpoint, then
    stop), but PyTorch's workers install their own SIGTERM handler and die of it, and the
    training process then fails on the dead worker before it can save."""

    def __init__(self, ignore_term, user_fn):
        self.ignore_term, self.user_fn = ignore_term, user_fn

    def __call__(self, worker_id):
        if self.ignore_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.user_fn is not None:
            self.user_fn(worker_id)


class Loader:
    """A DataLoader like the user's, over _SeededDataset and _EpochBatches."""

    def __init__(self, loader, key):
        if isinstance(loader.dataset, torch.utils.data.IterableDataset):
            raise StateError(
                f"{key}: a DataLoader over an IterableDataset has no order to reproduce; "
                "use a map-style dataset (or resume by step without batches())"
            )
        if loader.batch_sampler is None:
            raise StateError(
                f"{key}: batches() needs a DataLoader with a batch size (batch_size=None)"
            )
        self.loader = loader
        self.sampler = _EpochBatches()
        kwargs = dict(
            batch_sampler=self.sampler,
            num_workers=loader.num_workers,
            collate_fn=loader.collate_fn,
            pin_memory=loader.pin_memory,
            timeout=loader.timeout,
            worker_init_fn=_WorkerInit(
                signal.getsignal(signal.SIGTERM) == signal.SIG_IGN, loader.worker_init_fn
            ),
            multiprocessing_context=loader.multiprocessing_context,
            generator=loader.generator,
            persistent_workers=loader.persistent_workers,
        )
        if loader.num_workers > 0 and getattr(loader, "prefetch_factor", None) is not None:
            kwargs["prefetch_factor"] = loader.prefetch_factor
        # Arguments newer versions added (pin_memory_device 1.12, in_order 2.6).
        if getattr(loader, "pin_memory_device", ""):
            kwargs["pin_memory_device"] = loader.pin_memory_device
        if getattr(loader, "in_order", True) is not True:
            kwargs["in_order"] = loader.in_order
        self.derived = torch.utils.data.DataLoader(_SeededDataset(loader.dataset), **kwargs)

    def set_epoch(self, epoch):
        for s in (self.loader.sampler, self.loader.batch_sampler):
            if hasattr(s, "set_epoch"):
                s.set_epoch(epoch)

    def start_epoch(self, start):
        """Draws the epoch seed and the order, exactly as at the start of the epoch."""
        gen = self.loader.generator
        seed = int(torch.empty((), dtype=torch.int64).random_(generator=gen).item())
        batches = [list(b) for b in self.loader.batch_sampler]
        self.sampler.seed, self.sampler.batches = seed, batches
        self.sampler.start = min(start, len(batches))
        return seed, len(batches)
