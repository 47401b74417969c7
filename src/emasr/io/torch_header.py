"""The plain values of a network file (final.pt, ema.pt: a dict written by torch.save) read
without importing torch: `emasr check-compatible --network` needs only num_pdfs, and importing
torch to get it would cost most of the check's time, once per decode.

torch.save writes a zip whose <name>/data.pkl is a pickle; its tensors point into the zip's other
members through persistent ids. Here every torch object (tensor, storage, dtype) unpickles as an
opaque placeholder and the persistent ids as None, so the dict's ints, strings, lists and dicts
come out as written, and no tensor data is read.
"""
from __future__ import annotations

import pickle
import zipfile


class FileHeaderError(ValueError):
    """Not a file torch.save wrote (truncated, corrupt, or of another kind)."""


class TorchObject:
    """Stands for a torch object the header does not need."""

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __setstate__(self, state) -> None:
        pass


class _HeaderUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module == "torch" or module.startswith("torch."):
            return TorchObject
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return None


def read_plain_values(path: str) -> dict:
    """The top-level dict of the torch.save file `path`, tensors replaced by TorchObject."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
            if len(pickles) != 1:
                raise FileHeaderError(f"{path}: expected one data.pkl in the torch.save zip, "
                                      f"found {len(pickles)}")
            with archive.open(pickles[0]) as f:
                values = _HeaderUnpickler(f).load()
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError, AttributeError,
            ImportError) as err:
        raise FileHeaderError(f"cannot read {path} (truncated or corrupt, or not written by "
                              f"torch.save?): {type(err).__name__}: {err}") from None
    if not isinstance(values, dict):
        raise FileHeaderError(f"{path}: expected a dict, found {type(values).__name__}")
    return values
