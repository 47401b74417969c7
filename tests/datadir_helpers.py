"""Tiny data dirs for the data-dir tests, written line by line so each test states its input."""
from __future__ import annotations

from pathlib import Path


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def make_data_dir(path: Path, speakers: dict[str, int], feats: bool = False,
                  cmvn: bool = False) -> Path:
    """A valid data dir: speaker S has utterances S-u1..S-uN, each with a wav, a text line."""
    path.mkdir(parents=True, exist_ok=True)
    utts = [(f"{spk}-u{i}", spk) for spk in sorted(speakers) for i in range(1, speakers[spk] + 1)]
    utts.sort()
    write_lines(path / "utt2spk", [f"{u} {s}" for u, s in utts])
    write_lines(path / "spk2utt", [f"{s} " + " ".join(u for u, t in utts if t == s)
                                   for s in sorted(speakers)])
    write_lines(path / "wav.scp", [f"{u} /audio/{u}.wav" for u, _ in utts])
    write_lines(path / "text", [f"{u} 你好 世界 {u}" for u, _ in utts])
    if feats:
        write_lines(path / "feats.scp", [f"{u} /feats/raw.ark:{10 * i}" for i, (u, _) in enumerate(utts)])
    if cmvn:
        write_lines(path / "cmvn.scp", [f"{s} /feats/cmvn.ark:{i}" for i, s in enumerate(sorted(speakers))])
    return path


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under path (relative name -> bytes), to prove a failed command changed nothing."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def temp_files(path: Path) -> list[Path]:
    """Leftovers of atomic writes (emasr.io.atomic names them <target>.tmp.<random>)."""
    return [p for p in path.rglob("*") if ".tmp." in p.name]
