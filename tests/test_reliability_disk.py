"""A write that fails for lack of space leaves the previous complete output (or none) behind,
never a truncated file under the final name, and no temporary litter.

The disk is a 64 KiB tmpfs mounted for the test (CI runs as root). Where mounting is not permitted
the writes run with RLIMIT_FSIZE instead (the write fails with EFBIG rather than ENOSPC: the same
code path in the writers). Each scenario runs in a subprocess so the limit cannot leak into pytest.
"""
import errno
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from emasr.feats.ark import ArkScpWriter
from emasr.io.atomic import atomic_write
from emasr.io.table import read_table, write_table

LIMIT = 64 * 1024
BIG = 4 * LIMIT
OUT_OF_SPACE = (errno.ENOSPC, errno.EFBIG)


@pytest.fixture(scope="module")
def small_disk():
    """(directory, how): a directory on a 64 KiB file system, or one whose writes run under
    RLIMIT_FSIZE when this machine does not let us mount."""
    where = tempfile.mkdtemp(prefix="emasr-small-disk-")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={LIMIT}", "tmpfs", where],
                             capture_output=True).returncode == 0
    yield where, ("tmpfs" if mounted else "rlimit")
    if mounted:
        subprocess.run(["umount", where], check=True)
    os.rmdir(where) if not os.listdir(where) else None


def run_scenario(small_disk, name, subdir):
    """Run scenario `name` in a fresh subprocess against small_disk/subdir."""
    where, how = small_disk
    directory = os.path.join(where, subdir)
    os.makedirs(directory)
    code = ("import resource, signal, sys; sys.path.insert(0, sys.argv[1]); "
            "import test_reliability_disk as t; "
            f"getattr(t, sys.argv[2])(sys.argv[3], sys.argv[4] == 'rlimit')")
    result = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__), name,
                             directory, how], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return directory


def fill_to_failure(write, rlimit):
    """Call write() (which writes about BIG bytes); it must fail for lack of space."""
    if rlimit:
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG instead of a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
    try:
        write()
    except OSError as err:
        assert err.errno in OUT_OF_SPACE, err
        return err
    else:
        raise AssertionError("the write did not fail: the small disk is not small")


def no_temporaries(directory):
    left = [f for f in os.listdir(directory) if ".tmp." in f]
    assert not left, f"temporary files left behind: {left}"


# -- scenarios (run in the subprocess) -------------------------------------------------------
def atomic_write_scenario(directory, rlimit):
    path = os.path.join(directory, "text")
    with atomic_write(path) as f:
        f.write("old complete content\n")

    def write():
        with atomic_write(path) as f:
            for _ in range(BIG // 1024):
                f.write("x" * 1023 + "\n")
    fill_to_failure(write, rlimit)
    assert open(path).read() == "old complete content\n"
    no_temporaries(directory)


def write_table_scenario(directory, rlimit):
    path = os.path.join(directory, "utt2spk")
    write_table(path, {"utt1": "spk1", "utt2": "spk1"})
    big = {f"utt{i:07d}": "speaker" * 4 for i in range(BIG // 30)}
    fill_to_failure(lambda: write_table(path, big), rlimit)
    assert read_table(path) == {"utt1": "spk1", "utt2": "spk1"}
    no_temporaries(directory)


def ark_writer_scenario(directory, rlimit):
    ark, scp = os.path.join(directory, "feats.ark"), os.path.join(directory, "feats.scp")
    small = np.arange(40, dtype=np.float32).reshape(10, 4)
    with ArkScpWriter(ark, scp) as w:
        w.write("utt1", small)
    before = open(ark, "rb").read(), open(scp).read()

    def write():
        with ArkScpWriter(ark, scp) as w:
            for i in range(BIG // (100 * 40 * 4) + 2):
                w.write(f"utt{i:04d}", np.ones((100, 40), dtype=np.float32))
    fill_to_failure(write, rlimit)
    assert (open(ark, "rb").read(), open(scp).read()) == before
    no_temporaries(directory)


def ark_final_flush_scenario(directory, rlimit):
    """Space runs out only when the writer flushes its last buffered bytes, on closing."""
    ark, scp = os.path.join(directory, "feats.ark"), os.path.join(directory, "feats.scp")
    if rlimit:   # the limit applies per file: one ark bigger than it, but within one buffer
        fill, size = (lambda: None), LIMIT // 160 + 4
    else:        # a filler file leaves less than one buffer (8 KiB) free
        fill, size = (lambda: open(os.path.join(directory, "filler"), "wb").write(
            b"x" * (LIMIT - 6 * 1024))), 20
    try:
        fill()
    except OSError:
        pass

    def write():
        with ArkScpWriter(ark, scp) as w:
            w.write("utt1", np.ones((size, 40), dtype=np.float32))
    fill_to_failure(write, rlimit)
    assert not os.path.exists(ark) and not os.path.exists(scp)
    no_temporaries(directory)
    if os.path.exists(os.path.join(directory, "filler")):   # the file system is shared
        os.unlink(os.path.join(directory, "filler"))


def checkpoint_scenario(directory, rlimit):
    import torch   # here, not at the top: the other scenarios' subprocesses start faster

    from emasr.nnet.training import checkpoint
    exp = directory
    done = checkpoint.directory(exp, 1, 0)
    checkpoint.save({"w": torch.zeros(4)}, os.path.join(done, "rank0.pt"))
    checkpoint.save({"position": (1, 0)}, os.path.join(done, checkpoint.STATE))
    # the next checkpoint: the rank file fits, the state does not
    nxt = checkpoint.directory(exp, 2, 0)
    checkpoint.save({"w": torch.ones(4)}, os.path.join(nxt, "rank0.pt"))
    err = fill_to_failure(lambda: checkpoint.save({"big": torch.zeros(BIG // 4)},
                                                  os.path.join(nxt, checkpoint.STATE)), rlimit)
    # torch's own message ("unexpected pos ...") is replaced by one naming the file and the cause
    assert f"could not write checkpoint {nxt}/state.pt" in str(err), err
    assert checkpoint.latest(exp) == done   # the incomplete one is never picked up
    assert checkpoint.load(os.path.join(done, checkpoint.STATE))["position"] == (1, 0)
    no_temporaries(nxt)


# -- tests --------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["atomic_write_scenario", "write_table_scenario",
                                      "ark_writer_scenario", "ark_final_flush_scenario",
                                      "checkpoint_scenario"])
def test_out_of_space_leaves_no_truncated_output(small_disk, scenario):
    run_scenario(small_disk, scenario, scenario)


def test_rlimit_fallback_is_equivalent(small_disk, tmp_path):
    """The fallback path works too (so a machine without mount still tests something real)."""
    directory = tmp_path / "rl"
    directory.mkdir()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_reliability_disk as t; "
            "t.atomic_write_scenario(sys.argv[2], True)")
    result = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__), str(directory)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
