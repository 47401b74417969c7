"""Mandarin voice-search queries from templates and slot words taken from jieba's dictionary.

A query is a template (already split into words, AISHELL-style) whose slots ({place}, {person},
{shop}, {thing}) are filled with words from jieba's bundled `dict.txt` (`word frequency POS` per
line). The dictionary is noisy, so slot words are filtered by POS tag, length, frequency and
characters, and every word must have a standard pinyin reading. A fraction of each slot list is held
out: those words appear only in dev and test queries (and in the LM text), never in training audio.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from emasr.corpus.pinyin import HAN_WORD, TextError, word_syllables

TEMPLATES: dict[str, list[str]] = {
    "navigation": [
        "导航 到 {place}", "去 {place} 怎么 走", "从 {place} 到 {place} 要 多久", "{place} 在 哪里",
        "帮 我 找 去 {place} 的 路", "我 要 去 {place}", "到 {place} 的 路线", "{place} 附近 的 {shop}",
        "从 这里 到 {place} 有 多 远", "开车 去 {place} 堵 不 堵",
    ],
    "weather": [
        "{place} 今天 天气 怎么样", "{place} 明天 会 下雨 吗", "明天 {place} 的 天气", "{place} 周末 冷 不 冷",
        "查询 {place} 的 天气 预报", "今天 去 {place} 要 带 伞 吗", "{place} 现在 多少 度",
    ],
    "music": [
        "播放 {person} 的 歌", "我 想 听 {person} 的 歌曲", "来 一 首 {person} 的 歌", "播放 关于 {thing} 的 歌",
        "打开 音乐 播放 {person} 的 专辑", "有 没有 {person} 唱 的 {thing}",
    ],
    "people": [
        "{person} 是 谁", "给 {person} 打 电话", "{person} 多大 了", "{person} 的 电话 号码",
        "{person} 演 过 什么 电影", "{person} 是 哪里 人", "发 消息 给 {person}", "{person} 在 {place} 工作 吗",
    ],
    "shops": [
        "附近 有 没有 {shop}", "{place} 最好 的 {shop}", "{shop} 几点 关门", "帮 我 找 一 家 {shop}",
        "{place} 哪里 有 {shop}", "最近 的 {shop} 怎么 走", "{shop} 的 电话 是 多少",
    ],
    "questions": [
        "{thing} 是 什么", "什么 是 {thing}", "{thing} 有 什么 用", "怎么 买 {thing}", "{thing} 多少 钱",
        "为什么 {thing} 这么 贵", "{place} 有 什么 好玩 的", "{thing} 和 {thing} 有 什么 区别",
    ],
}
# Spoken lead-ins that real voice-search logs are full of; one starts about a third of the queries.
PREFIXES = ["请问", "你好 请问", "帮 我 查 一下", "我 想 知道", "麻烦 问 一下", "小 助手", "喂 你好"]
PREFIX_PROB = 0.3
SLOT = re.compile(r"^\{(\w+)\}$")
SURNAMES = set("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤")
SHOP_SUFFIXES = ("店", "馆", "院", "厅", "站", "银行", "超市", "诊所", "派出所", "公园", "商场", "市场")


@dataclass(frozen=True)
class SlotRule:
    """Which dictionary entries may fill a slot."""
    tags: tuple[str, ...]
    min_len: int
    max_len: int
    min_freq: int
    accept: Callable[[str], bool] = lambda word: True


SLOT_RULES = {
    "place": SlotRule(("ns",), 2, 4, 50),
    "person": SlotRule(("nr",), 3, 3, 30, lambda w: w[0] in SURNAMES),
    "shop": SlotRule(("n", "nt"), 2, 4, 30, lambda w: w.endswith(SHOP_SUFFIXES)),
    "thing": SlotRule(("n",), 2, 3, 1000),
}


def jieba_dict_path() -> str:
    import jieba

    return os.path.join(os.path.dirname(jieba.__file__), "dict.txt")


def read_slot_words(max_per_slot: int, is_speakable: Callable[[list[str]], bool],
                    path: str | None = None) -> dict[str, list[str]]:
    """The most frequent clean words per slot from jieba's dictionary, at most max_per_slot each."""
    path = path or jieba_dict_path()
    candidates: dict[str, list[tuple[int, str]]] = {slot: [] for slot in SLOT_RULES}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) != 3 or not HAN_WORD.match(fields[0]):
                continue
            word, freq, tag = fields[0], int(fields[1]), fields[2]
            for slot, rule in SLOT_RULES.items():
                if (tag in rule.tags and rule.min_len <= len(word) <= rule.max_len
                        and freq >= rule.min_freq and rule.accept(word)):
                    candidates[slot].append((freq, word))
    slots = {}
    for slot, items in candidates.items():
        items.sort(key=lambda fw: (-fw[0], fw[1]))
        words = [w for _, w in items if is_speakable(word_syllables(w))][:max_per_slot]
        if len(words) < 10:
            raise TextError(f"{path}: only {len(words)} usable '{slot}' words; is this jieba's dict?")
        slots[slot] = words
    return slots


@dataclass
class SlotPools:
    """Slot words split into those that may be spoken in training and those held out for dev/test."""
    seen: dict[str, list[str]]
    heldout: dict[str, list[str]]

    @classmethod
    def split(cls, slots: dict[str, list[str]], heldout_fraction: float,
              rng: np.random.Generator) -> "SlotPools":
        seen, heldout = {}, {}
        for slot, words in sorted(slots.items()):
            order = rng.permutation(len(words))
            num_heldout = int(round(heldout_fraction * len(words)))
            heldout[slot] = sorted(words[i] for i in order[:num_heldout])
            seen[slot] = sorted(words[i] for i in order[num_heldout:])
        return cls(seen, heldout)

    def all_words(self) -> set[str]:
        return {w for pool in (self.seen, self.heldout) for words in pool.values() for w in words}


def template_words() -> set[str]:
    texts = [t for templates in TEMPLATES.values() for t in templates] + PREFIXES
    return {w for t in texts for w in t.split() if not SLOT.match(w)}


class QueryGenerator:
    """Draws queries (lists of words). `heldout_prob` is the chance that a slot takes a held-out word."""

    def __init__(self, pools: SlotPools, heldout_prob: float, rng: np.random.Generator):
        self.pools, self.heldout_prob, self.rng = pools, heldout_prob, rng
        self.templates = [t.split() for domain in sorted(TEMPLATES) for t in TEMPLATES[domain]]

    def _slot_word(self, slot: str) -> str:
        use_heldout = self.heldout_prob > 0 and self.rng.random() < self.heldout_prob
        pool = (self.pools.heldout if use_heldout and self.pools.heldout[slot] else self.pools.seen)[slot]
        return pool[self.rng.integers(len(pool))]

    def query(self) -> list[str]:
        template = self.templates[self.rng.integers(len(self.templates))]
        words = []
        if self.rng.random() < PREFIX_PROB:
            words += PREFIXES[self.rng.integers(len(PREFIXES))].split()
        for token in template:
            match = SLOT.match(token)
            words.append(self._slot_word(match.group(1)) if match else token)
        return words

    def unique_queries(self, count: int, exclude: set[str], what: str) -> list[list[str]]:
        """`count` queries whose joined text is not in `exclude` (which grows with them)."""
        out: list[list[str]] = []
        for _ in range(count * 50):
            if len(out) == count:
                return out
            words = self.query()
            key = "".join(words)
            if key not in exclude:
                exclude.add(key)
                out.append(words)
        raise TextError(f"could not draw {count} distinct {what} queries (got {len(out)}); "
                        "raise --slot-words or lower the number of utterances")
