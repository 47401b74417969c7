"""Synthetic exp dirs in the formats `emasr report` reads: a network exp dir as emasr.nnet.trainer
and steps/nnet/decode.sh + local/score.sh leave it (conf.yaml, regime.json, metrics.jsonl,
decode_<set>[_ema]/scoring_kaldi/...), and a GMM exp dir with scored decode dirs."""
from __future__ import annotations

import json
import os
import random
import re


from emasr.nnet import config as configs
from emasr.nnet.training import regime as regimes

CHARS = "北京上海天气明天导航音乐播放打开关闭附近餐厅电话"


def reference_texts(num_utts: int, length: int = 10, seed: int = 0) -> dict[str, str]:
    rng = random.Random(seed)
    return {f"S{1 + i % 2:04d}W{i:04d}": "".join(rng.choice(CHARS) for _ in range(length))
            for i in range(num_utts)}


def corrupt(refs: dict[str, str], errors_per_utt: dict[str, int]) -> dict[str, str]:
    """Hypotheses with exactly n substitutions in each utterance (n from errors_per_utt)."""
    out = {}
    for utt, text in refs.items():
        chars = list(text)
        for i in range(errors_per_utt.get(utt, 0)):
            chars[i] = "错" if chars[i] != "错" else "误"
        out[utt] = "".join(chars)
    return out


def words(text: str) -> str:
    """Split a character string into two-character 'words', as a word-level text would have."""
    return " ".join(text[i:i + 2] for i in range(0, len(text), 2))


def write_scored_decode(decode_dir: str, refs: dict[str, str], hyps: dict[str, str],
                        lmwt: int = 10, wip: str = "0.5", form: str = "texts") -> float:
    """Kaldi's scoring layout at one setting; form "texts" (test_filt.txt + penalty_W/L.txt) or
    "per_utt"."""
    return write_scored_settings(decode_dir, refs, {(str(lmwt), wip): hyps}, form)


def write_scored_settings(decode_dir: str, refs: dict[str, str],
                          hyps_by_setting: dict[tuple[str, str], dict[str, str]],
                          form: str = "texts", utt2spk: dict[str, str] | None = None) -> float:
    """Kaldi's scoring layout for several (LM weight, penalty) settings: cer_L_W each, best_cer
    the lowest (the first of equals), and the speakers as emasr score-lattices records them
    (`utt2spk`); returns the best CER."""
    scoring = os.path.join(decode_dir, "scoring_kaldi")
    os.makedirs(scoring, exist_ok=True)
    if utt2spk:
        with open(os.path.join(scoring, "utt2spk"), "w", encoding="utf-8") as f:
            f.writelines(f"{u} {utt2spk[u]}\n" for u in sorted(refs))
    total = sum(len(t) for t in refs.values())
    lines = {}
    for (lmwt, wip), hyps in hyps_by_setting.items():
        errors = sum(sum(a != b for a, b in zip(refs[u], hyps[u])) for u in refs)
        line = f"%WER {100.0 * errors / total:.2f} [ {errors} / {total}, 0 ins, 0 del, {errors} sub ]"
        with open(os.path.join(decode_dir, f"cer_{lmwt}_{wip}"), "w", encoding="utf-8") as f:
            f.write(line + "\n")
        lines[(lmwt, wip)] = (errors, line)
        if form == "texts":
            os.makedirs(os.path.join(scoring, f"penalty_{wip}"), exist_ok=True)
            with open(os.path.join(scoring, f"penalty_{wip}", f"{lmwt}.txt"), "w",
                      encoding="utf-8") as f:
                f.writelines(f"{u} {words(hyps[u])}\n" for u in sorted(hyps))
    (lmwt, wip), (errors, line) = min(lines.items(), key=lambda item: item[1][0])
    with open(os.path.join(scoring, "best_cer"), "w", encoding="utf-8") as f:
        f.write(f"{line} {decode_dir}/cer_{lmwt}_{wip}\n")
    if form == "texts":
        with open(os.path.join(scoring, "test_filt.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{u} {words(refs[u])}\n" for u in sorted(refs))
    else:
        hyps = hyps_by_setting[(lmwt, wip)]
        os.makedirs(os.path.join(scoring, "cer_details"), exist_ok=True)
        with open(os.path.join(scoring, "cer_details", "per_utt"), "w", encoding="utf-8") as f:
            for u in sorted(refs):
                f.write(f"{u} ref {' '.join(refs[u])}\n{u} hyp {' '.join(hyps[u])}\n")
                f.write(f"{u} #csid 0 0 0 0\n")
    return 100.0 * errors / total


def write_metrics(exp_dir: str, epochs: int, workers: int, ema: bool, acc0: float,
                  seconds_per_epoch: float, blocks_per_epoch: int = 3) -> None:
    records = []
    syncs, frames = 0, 0.0
    for epoch in range(1, epochs + 1):
        for block in range(1, blocks_per_epoch + 1):
            syncs += 1
            frames += 1000.0 * workers
            records.append({"type": "block", "epoch": epoch, "block": block,
                            "loss": 3.0 / (syncs + 1), "frame_acc": 0.1 * epoch, "lr": 0.1,
                            "syncs": syncs, "frames": frames,
                            "bytes_reduced": 4e6 * syncs if workers > 1 else 0,
                            "seconds_compute": 1.0 * syncs, "seconds_comm": 0.1 * syncs,
                            "seconds_train": seconds_per_epoch * (epoch - 1)})
        record = {"type": "epoch", "epoch": epoch, "lr": 0.1, "next_lr": 0.1,
                  "dev_loss": 2.0 / epoch, "dev_acc": acc0 + 0.05 * epoch,
                  "syncs": syncs, "frames": frames,
                  "bytes_reduced": 4e6 * syncs if workers > 1 else 0,
                  "seconds_compute": 1.0 * syncs, "seconds_comm": 0.1 * syncs,
                  "seconds_train": seconds_per_epoch * epoch}
        if ema:
            record.update(dev_loss_ema=1.9 / epoch, dev_acc_ema=acc0 + 0.06 * epoch)
        records.append(record)
    with open(os.path.join(exp_dir, "metrics.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


def make_network_run(root: str, arch: str, strategy: str, seed: int, workers: int, ema: bool,
                     refs: dict[str, dict[str, str]], errors: dict[tuple[str, str], dict[str, int]],
                     lr: float = 0.1, acc0: float = 0.3, seconds_per_epoch: float = 10.0,
                     epochs: int = 3, lr_times_workers: bool = False,
                     hardware: dict | None = None, settings: tuple[str, ...] = ()) -> str:
    """errors: (set, model) -> utt -> substitutions; refs: set -> utt -> text."""
    exp_dir = os.path.join(root, f"{arch}_{strategy}_n{workers}_s{seed}_lr{lr:g}"
                           + "".join("_" + re.sub(r"\W+", "-", s) for s in settings))
    os.makedirs(exp_dir)
    config = configs.resolve(None, [
        f"model.type={arch}", f"train.lr={lr}", f"train.init_seed={seed}",
        f"train.epochs={epochs}", f"sync.strategy={strategy}", "sync.block_size=4",
        f"sync.lr_times_workers={str(lr_times_workers).lower()}",
        *(["average.ema_decay=0.9"] if ema else []), *settings])
    configs.save(config, os.path.join(exp_dir, "conf.yaml"))
    regimes.write(regimes.compute(config, workers, 3000 * workers, {"ema": 0.9} if ema else {},
                                  hardware), exp_dir)
    write_metrics(exp_dir, epochs, workers, ema, acc0, seconds_per_epoch)
    for (set_name, model), per_utt in errors.items():
        name = f"decode_{set_name}" + ("" if model == "final" else f"_{model}")
        write_scored_decode(os.path.join(exp_dir, name), refs[set_name],
                            corrupt(refs[set_name], per_utt))
    return exp_dir


def make_gmm_system(root: str, name: str, refs: dict[str, dict[str, str]], errors_per_utt: int) -> str:
    exp_dir = os.path.join(root, name)
    for set_name, texts in refs.items():
        write_scored_decode(os.path.join(exp_dir, f"decode_{set_name}"), texts,
                            corrupt(texts, {u: errors_per_utt for u in texts}))
    return exp_dir
