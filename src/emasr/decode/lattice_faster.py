"""Kaldi's LatticeFasterDecoder with its raw lattice, from the pinned kaldi-hmm-gmm wheel.

kaldi-hmm-gmm 1.1.4 compiles Kaldi's LatticeFasterDecoderTpl (beam, --max-active, --min-active,
lattice pruning) into libkaldi-hmm-gmm-core.so, but its Python binding only offers
decode_utterance_lattice_faster, which returns the best path: the lattice is lost, and without a
lattice the LM weight cannot be swept after decoding. The library does export the decoder's own
methods (Decode, GetRawLattice, FinalRelativeCost: template instantiations, visible as weak
symbols), so this module calls them directly through ctypes on the C++ objects that the bindings
already created:

- the decoder: kaldi_hmm_gmm.LatticeFasterDecoderStdVectorFst, which is
  LatticeFasterDecoderTpl<fst::VectorFst<fst::StdArc>, decoder::StdToken>;
- the likelihoods: kaldi_hmm_gmm.DecodableCtc (a DecodableInterface);
- the output: kaldifst.Lattice (fst::VectorFst<LatticeArc>), the same OpenFst class both wheels are
  built with (the bindings already pass kaldifst's HCLG to this decoder).

The C++ object of a pybind11 instance is its first pointer after the Python object header
(pybind11's "simple layout", used for classes with a single C++ base, as all three are here).
The symbol names are those of the pinned wheel (pyproject pins kaldi-hmm-gmm==1.1.4); a missing
symbol is an import-time error that names it. tests/test_decode.py checks that the words of the
raw lattice's best path equal those of the binding's own decode_utterance_lattice_faster.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from emasr.fst_stack import kaldi_hmm_gmm, kaldifst

_LIBRARY = os.path.join(os.path.dirname(kaldi_hmm_gmm.__file__), "lib", "libkaldi-hmm-gmm-core.so")
# LatticeFasterDecoderTpl<fst::VectorFst<fst::StdArc>, decoder::StdToken>, Itanium-mangled.
_CLASS = ("LatticeFasterDecoderTplIN3fst9VectorFstINS1_6ArcTplINS1_17TropicalWeightTplIfEEEENS1_11"
          "VectorStateIS6_SaIS6_EEEEENS_7decoder8StdTokenEE")
_SYMBOLS = {
    # bool Decode(DecodableInterface *decodable)
    "decode": ("_ZN3khg23" + _CLASS + "6DecodeEPNS_18DecodableInterfaceE",
               ctypes.c_bool, [ctypes.c_void_p, ctypes.c_void_p]),
    # bool GetRawLattice(Lattice *ofst, bool use_final_probs) const
    "raw_lattice": ("_ZNK3khg23" + _CLASS + "13GetRawLatticeEPNS2_INS3_INS1_16LatticeWeightTplIfEEEE"
                    "NS7_ISG_SaISG_EEEEEb", ctypes.c_bool,
                    [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_bool]),
    # BaseFloat FinalRelativeCost() const
    "final_relative_cost": ("_ZNK3khg23" + _CLASS + "17FinalRelativeCostEv", ctypes.c_float,
                            [ctypes.c_void_p]),
}
_PYOBJECT_HEADER = object.__basicsize__  # where a pybind11 instance's value pointer starts


def _load_functions() -> dict[str, ctypes._CFuncPtr]:
    library = ctypes.CDLL(_LIBRARY)
    functions = {}
    for name, (symbol, restype, argtypes) in _SYMBOLS.items():
        try:
            function = getattr(library, symbol)
        except AttributeError:
            raise ImportError(f"{_LIBRARY} does not export {symbol} (LatticeFasterDecoder::{name}); "
                              "expected the kaldi-hmm-gmm version that pyproject.toml pins") from None
        function.restype, function.argtypes = restype, argtypes
        functions[name] = function
    return functions


_FUNCTIONS = _load_functions()


def _cpp_pointer(bound: object) -> int:
    """The address of the C++ object held by a pybind11 instance (simple layout)."""
    address = ctypes.c_void_p.from_address(id(bound) + _PYOBJECT_HEADER).value
    if not address:
        raise RuntimeError(f"{type(bound).__name__} holds no C++ object")
    return address


class LatticeFasterDecoder:
    """One decoder over one HCLG; decode() then raw_lattice() per utterance."""

    def __init__(self, hclg: kaldifst.StdVectorFst, beam: float, max_active: int,
                 min_active: int, lattice_beam: float, prune_interval: int):
        self.config = kaldi_hmm_gmm.LatticeFasterDecoderConfig(
            beam=beam, max_active=max_active, min_active=min_active, lattice_beam=lattice_beam,
            prune_interval=prune_interval)
        self._hclg = hclg  # the decoder keeps a reference to it, not a copy
        self._decoder = kaldi_hmm_gmm.LatticeFasterDecoderStdVectorFst(hclg, self.config)
        self._address = _cpp_pointer(self._decoder)

    def decode(self, tid_loglikes: np.ndarray) -> bool:
        """Decode [T, num_tids] scaled log-likelihoods (column j scores transition id j + 1).
        False when no token survived to the last frame."""
        matrix = np.ascontiguousarray(tid_loglikes, dtype=np.float32)
        decodable = kaldi_hmm_gmm.DecodableCtc(matrix)
        return _FUNCTIONS["decode"](self._address, _cpp_pointer(decodable))

    def raw_lattice(self, use_final_probs: bool = True) -> tuple[bool, kaldifst.Lattice]:
        """The state-level lattice of the last decode(), pruned at the lattice beam: input labels
        are transition ids, output labels words, weights (graph cost, scaled acoustic cost)."""
        lattice = kaldifst.Lattice()
        ok = _FUNCTIONS["raw_lattice"](self._address, _cpp_pointer(lattice), use_final_probs)
        return ok, lattice

    def final_relative_cost(self) -> float:
        """Infinity when no surviving token is in a final state of the graph."""
        return float(_FUNCTIONS["final_relative_cost"](self._address))
