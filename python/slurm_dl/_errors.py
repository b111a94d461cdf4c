"""StateError, the error of slurm_dl.torch, raised by the modules it is made of."""


class StateError(ValueError):
    """The checkpoint does not fit the state being restored; the message names key paths."""


# Public as slurm_dl.torch.StateError: tracebacks and pickles name it there.
StateError.__module__ = "slurm_dl.torch"
