"""Token counting: the estimate's rules, the counter registry, and the real BPE when installed."""

from __future__ import annotations

import importlib.util

import pytest

from gliding_actors.config import Config
from gliding_actors.errors import ConfigError, InvalidInput
from gliding_actors.l1 import BpeCounter, EstimateCounter, get_counter
from gliding_actors.l1._tokens import AUTO, BPE_COUNTER, ESTIMATE_COUNTER, default_counter

HAS_BPE = importlib.util.find_spec("bpe_openai") is not None

ENGLISH = (
    "The session keeps one short summary per turn; the full thought and content go to L0 "
    "under a fresh IRI, so the context stays small while nothing is forgotten."
)
CHINESE = "内存系统为每个代理保存一条摘要链，在令牌预算内进行两阶段语义淘汰。被淘汰的轮次可以从存储中完整恢复。"
JAPANESE = "セッションの要約チェーンはトークン予算の下で管理され、古くて関連性の低いターンは削除されます。"
KOREAN = "세션 요약 체인은 토큰 예산 안에서 관리되며 오래되고 관련성이 낮은 턴은 제거됩니다."
CODE = "def score(rel: float, age: float, tokens: int) -> float:\n    return 0.6 * rel + 0.4 * (0.5 / (1 + age))\n"


def test_the_estimate_counts_ascii_and_cjk_with_their_own_weights() -> None:
    est = EstimateCounter()
    assert est.name == "estimate-v1"
    assert est.count("") == 0
    assert est.count("a") == 1  # any text costs at least one token
    assert est.count("a" * 36) == 10  # 3.6 ASCII characters per token
    assert est.count("漢" * 20) == 23  # 1.15 tokens per CJK character
    assert est.count("é" * 10) == 8  # 0.8 per other character
    # a CJK character costs about four times an ASCII one: one ratio for all would undercount CJK
    assert est.count("漢" * 100) > 3 * est.count("a" * 100)


def test_the_estimate_is_deterministic_and_additive_up_to_rounding() -> None:
    est = EstimateCounter()
    assert est.count(ENGLISH + CHINESE) == est.count(ENGLISH + CHINESE)
    assert abs(est.count(ENGLISH + CHINESE) - (est.count(ENGLISH) + est.count(CHINESE))) <= 1


def test_counters_by_name() -> None:
    assert get_counter(ESTIMATE_COUNTER).name == "estimate-v1"
    assert get_counter(AUTO).name == (BPE_COUNTER if HAS_BPE else ESTIMATE_COUNTER)
    assert default_counter().name == get_counter(AUTO).name
    with pytest.raises(InvalidInput, match="unknown token counter"):
        get_counter("gpt-2")


def test_a_bpe_counter_needs_an_encoder_with_encode_ordinary() -> None:
    with pytest.raises(InvalidInput, match="encode_ordinary"):
        BpeCounter("broken", object())


class _WordEncoder:
    """A tiny real encoder (one id per whitespace-separated word) to exercise the wrapper."""

    def encode_ordinary(self, text: str) -> list[int]:
        return [len(word) for word in text.split()]


def test_a_bpe_counter_counts_what_its_encoder_returns_and_reports_its_name() -> None:
    counter = BpeCounter("words", _WordEncoder())
    assert counter.name == "words"
    assert counter.count("three little words") == 3
    assert counter.count("") == 0


def test_the_config_refuses_an_unknown_counter_by_its_path() -> None:
    with pytest.raises(ConfigError, match="l1.counter") as info:
        Config.from_dict({"l1": {"counter": "gpt-2"}})
    assert info.value.path == ("l1", "counter")
    assert Config.from_dict({"l1": {"counter": "estimate-v1"}}).l1.counter == "estimate-v1"


@pytest.mark.skipif(HAS_BPE, reason="checks the message a machine without the tokens extra gets")
def test_without_the_tokens_extra_cl100k_says_which_extra_to_install() -> None:
    with pytest.raises(InvalidInput, match=r"gliding-actors\[tokens\]"):
        get_counter(BPE_COUNTER)
    with pytest.raises(ConfigError, match="bpe-openai"):
        Config.from_dict({"l1": {"counter": "cl100k_base"}})


@pytest.mark.skipif(not HAS_BPE, reason="needs the tokens extra (bpe-openai)")
def test_the_real_bpe_counts_known_cl100k_figures() -> None:
    bpe = get_counter(BPE_COUNTER)
    assert bpe.name == "cl100k_base"
    assert bpe.count("Smoke tests keep releases honest.") == 6
    assert bpe.count("<|endoftext|>") > 1  # special-token text is counted as text, not refused


@pytest.mark.skipif(not HAS_BPE, reason="needs the tokens extra (bpe-openai)")
@pytest.mark.parametrize("text", [ENGLISH, CHINESE, JAPANESE, KOREAN, CODE])
def test_the_estimate_stays_within_a_third_of_the_real_bpe(text: str) -> None:
    real = get_counter(BPE_COUNTER).count(text)
    estimate = EstimateCounter().count(text)
    assert abs(estimate - real) <= real / 3, (estimate, real)
