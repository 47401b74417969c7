"""Recipe copies for tests: a temporary tree whose shared parts (steps/, utils/, local/, conf/,
path.sh, .venv, ...) link to this repository and whose egs/<name> is a copy, so a recipe run
writes nothing into the repository; and a fake AISHELL-1 layout for stage 0's checks."""
from __future__ import annotations

import shutil
import wave
from pathlib import Path

from conftest import REPO

SHARED = [".venv", "pyproject.toml", "path.sh", "cmd.sh", "utils", "steps", "local", "conf", "src"]


def recipe_copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / "repo"
    if not root.exists():
        root.mkdir()
        for entry in SHARED:
            (root / entry).symlink_to(REPO / entry)
        (root / "egs").mkdir()
    # outputs of a run in the repository's recipe dir stay behind
    outputs = shutil.ignore_patterns("data", "exp", "corpus", "mfcc", "fbank", "plots", "RESULTS.md")
    shutil.copytree(REPO / "egs" / name, root / "egs" / name, symlinks=True, ignore=outputs)
    return root / "egs" / name


def reuse_stages(reference: Path, recipe: Path, last_stage: int, exp_dirs: tuple[str, ...]) -> None:
    """Start the recipe copy `recipe` where the run in `reference` stood after `last_stage`: its
    corpus and feature archives linked (they are only read), its data dirs, the exp dirs named and
    the done markers of stages 0..last_stage copied, so the run resumes at the next stage."""
    for shared in ("corpus", "mfcc", "fbank"):
        (recipe / shared).symlink_to(reference / shared)
    shutil.copytree(reference / "data", recipe / "data", symlinks=True)
    (recipe / "exp" / "done").mkdir(parents=True)
    for stage in range(last_stage + 1):
        shutil.copy2(reference / "exp" / "done" / f"stage{stage}", recipe / "exp" / "done")
    for name in exp_dirs:
        shutil.copytree(reference / "exp" / name, recipe / "exp" / name, symlinks=True)


def write_wav(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 1600)


def fake_aishell(root: Path) -> Path:
    """The AISHELL-1 layout with one speaker per set (stage 0 checks the layout, nothing more)."""
    lines = []
    for set_name, spk, text in (("train", "S0002", "北京 天气"), ("dev", "S0724", "上海 天气"),
                                ("test", "S0764", "打开 音乐")):
        for i in range(2):
            utt = f"BAC009{spk}W{i:04d}"
            write_wav(root / "data_aishell" / "wav" / set_name / spk / f"{utt}.wav")
            lines.append(f"{utt} {text}\n")
    transcript = root / "data_aishell" / "transcript" / "aishell_transcript_v0.8.txt"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(sorted(lines)), encoding="utf-8")
    (root / "resource_aishell").mkdir()
    (root / "resource_aishell" / "lexicon.txt").write_text("北京 b ei3 j ing1\n", encoding="utf-8")
    (root / "lm_text").mkdir()
    (root / "lm_text" / "query_log.txt").write_text("北京天气\n", encoding="utf-8")
    return root
